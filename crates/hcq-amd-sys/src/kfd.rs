//! The KFD ioctl ABI (`linux/kfd_ioctl.h`, version 1.11): request numbers, argument structs and
//! flags. Only what the driver uses is declared; every struct is `#[repr(C)]` with the header's
//! field order, and `tests` check sizes and offsets against the header's.
//!
//! `missing_docs` is allowed in this module: the names, types and order of the structs, fields
//! and constants mirroring `linux/kfd_ioctl.h` are the kernel's uapi header's, which documents
//! them (each struct's doc names its C struct). Items of hcq's own (the request helpers,
//! [`NORMAL_QUEUE_PRIORITY`], the doorbell mmap offset) carry their docs here.

#![allow(missing_docs)]

pub use crate::ioctl::{request_dir, request_nr, request_size};
use crate::ioctl::{request_type, Ioctl};

/// The type byte of every KFD request (`AMDKFD_IOCTL_BASE`).
pub const KFD_IOCTL_BASE: u8 = b'K';
/// Direction bit: the caller passes data to the kernel.
pub const IOC_DIR_WRITE: u64 = crate::ioctl::DIR_WRITE;
/// Direction bit: the kernel returns data to the caller.
pub const IOC_DIR_READ: u64 = crate::ioctl::DIR_READ;
/// Whether `request` is a well-formed KFD request: type byte `'K'`, nothing above the 32
/// bits Linux decodes, and a direction that moves an argument.
pub const fn is_kfd_request(request: u64) -> bool {
    request >> 32 == 0 && request_type(request) == KFD_IOCTL_BASE && request_dir(request) != 0
}

pub const KFD_IOCTL_MAJOR_VERSION: u32 = 1;

pub const QUEUE_TYPE_COMPUTE: u32 = 0;
pub const QUEUE_TYPE_SDMA: u32 = 1;
pub const QUEUE_TYPE_COMPUTE_AQL: u32 = 2;
pub const MAX_QUEUE_PERCENTAGE: u32 = 100;
pub const MAX_QUEUE_PRIORITY: u32 = 15;
/// The priority a normal ROCm queue gets. KFD maps 0..=15 onto the command processor's pipe
/// and queue priorities; a compute queue above normal competes harder with every other
/// process's queues, the desktop's included (tinygrad moved from 15 to this in PR #13658).
pub const NORMAL_QUEUE_PRIORITY: u32 = 7;

pub const EVENT_SIGNAL: u32 = 0;
pub const EVENT_HW_EXCEPTION: u32 = 3;
pub const EVENT_MEMORY: u32 = 8;
pub const WAIT_RESULT_COMPLETE: u32 = 0;
pub const WAIT_RESULT_TIMEOUT: u32 = 1;
pub const WAIT_RESULT_FAIL: u32 = 2;
pub const SIGNAL_EVENT_LIMIT: u32 = 4096;

pub const ALLOC_MEM_FLAGS_VRAM: u32 = 1 << 0;
pub const ALLOC_MEM_FLAGS_GTT: u32 = 1 << 1;
pub const ALLOC_MEM_FLAGS_USERPTR: u32 = 1 << 2;
pub const ALLOC_MEM_FLAGS_DOORBELL: u32 = 1 << 3;
pub const ALLOC_MEM_FLAGS_WRITABLE: u32 = 1 << 31;
pub const ALLOC_MEM_FLAGS_EXECUTABLE: u32 = 1 << 30;
pub const ALLOC_MEM_FLAGS_PUBLIC: u32 = 1 << 29;
pub const ALLOC_MEM_FLAGS_NO_SUBSTITUTE: u32 = 1 << 28;
pub const ALLOC_MEM_FLAGS_AQL_QUEUE_MEM: u32 = 1 << 27;
pub const ALLOC_MEM_FLAGS_COHERENT: u32 = 1 << 26;
pub const ALLOC_MEM_FLAGS_UNCACHED: u32 = 1 << 25;

/// The kernel encodes the queue type in the doorbell mmap offset (`KFD_MMAP_TYPE_DOORBELL`);
/// `create_queue` returns an offset that already carries it.
pub const MMAP_TYPE_SHIFT: u64 = 62;
/// The doorbell type in bits 62..64 of an mmap offset (`KFD_MMAP_TYPE_DOORBELL` of the
/// kernel's internal `kfd_priv.h`, not of the uapi header).
pub const MMAP_TYPE_DOORBELL: u64 = 3 << MMAP_TYPE_SHIFT;

/// `struct kfd_ioctl_get_version_args` (`AMDKFD_IOC_GET_VERSION`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct GetVersionArgs {
    pub major_version: u32,
    pub minor_version: u32,
}

/// `struct kfd_ioctl_create_queue_args` (`AMDKFD_IOC_CREATE_QUEUE`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct CreateQueueArgs {
    pub ring_base_address: u64,
    pub write_pointer_address: u64,
    pub read_pointer_address: u64,
    pub doorbell_offset: u64,
    pub ring_size: u32,
    pub gpu_id: u32,
    pub queue_type: u32,
    pub queue_percentage: u32,
    pub queue_priority: u32,
    pub queue_id: u32,
    pub eop_buffer_address: u64,
    pub eop_buffer_size: u64,
    pub ctx_save_restore_address: u64,
    pub ctx_save_restore_size: u32,
    pub ctl_stack_size: u32,
}

/// `struct kfd_ioctl_destroy_queue_args` (`AMDKFD_IOC_DESTROY_QUEUE`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct DestroyQueueArgs {
    pub queue_id: u32,
    pub pad: u32,
}

/// `struct kfd_ioctl_get_clock_counters_args` (`AMDKFD_IOC_GET_CLOCK_COUNTERS`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct GetClockCountersArgs {
    pub gpu_clock_counter: u64,
    pub cpu_clock_counter: u64,
    pub system_clock_counter: u64,
    pub system_clock_freq: u64,
    pub gpu_id: u32,
    pub pad: u32,
}

/// `struct kfd_ioctl_create_event_args` (`AMDKFD_IOC_CREATE_EVENT`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct CreateEventArgs {
    pub event_page_offset: u64,
    pub event_trigger_data: u32,
    pub event_type: u32,
    pub auto_reset: u32,
    pub node_id: u32,
    pub event_id: u32,
    pub event_slot_index: u32,
}

/// `struct kfd_ioctl_destroy_event_args` (`AMDKFD_IOC_DESTROY_EVENT`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct DestroyEventArgs {
    pub event_id: u32,
    pub pad: u32,
}

/// `RUNTIME_ENABLE` (KFD 1.13): a runtime announces itself to the debugger interface, or
/// (`mode_mask` 0) withdraws.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct RuntimeEnableArgs {
    pub r_debug: u64,
    pub mode_mask: u32,
    pub capabilities_mask: u32,
}

/// `RuntimeEnableArgs::mode_mask`: enable (else disable).
pub const RUNTIME_ENABLE_MODE_ENABLE: u32 = 1;
/// `RuntimeEnableArgs::mode_mask`: let the trap handler save its temporaries.
pub const RUNTIME_ENABLE_MODE_TTMP_SAVE: u32 = 2;

/// `set_event` and `reset_event` share this layout.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct EventIdArgs {
    pub event_id: u32,
    pub pad: u32,
}

/// `struct kfd_memory_exception_failure`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct MemoryExceptionFailure {
    pub not_present: u32,
    pub read_only: u32,
    pub no_execute: u32,
    pub imprecise: u32,
}

/// `struct kfd_hsa_memory_exception_data`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct MemoryExceptionData {
    pub failure: MemoryExceptionFailure,
    pub va: u64,
    pub gpu_id: u32,
    pub error_type: u32,
}

/// `struct kfd_hsa_hw_exception_data`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct HwExceptionData {
    pub reset_type: u32,
    pub reset_cause: u32,
    pub memory_lost: u32,
    pub gpu_id: u32,
}

/// A signal event's age (KFD 1.14): each signal adds one; 0 means "not tracked".
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct SignalEventData {
    pub last_event_age: u64,
}

/// The anonymous union at the head of `struct kfd_event_data`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union EventDataUnion {
    pub memory_exception_data: MemoryExceptionData,
    pub hw_exception_data: HwExceptionData,
    /// To and from KFD, for signal events: the age the caller saw last.
    pub signal_event_data: SignalEventData,
}

impl Default for EventDataUnion {
    fn default() -> Self {
        EventDataUnion {
            memory_exception_data: MemoryExceptionData::default(),
        }
    }
}

/// `struct kfd_event_data`: one element of `WAIT_EVENTS`' array.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct EventData {
    pub data: EventDataUnion,
    pub kfd_event_data_ext: u64,
    pub event_id: u32,
    pub pad: u32,
}

/// `struct kfd_ioctl_wait_events_args` (`AMDKFD_IOC_WAIT_EVENTS`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct WaitEventsArgs {
    pub events_ptr: u64,
    pub num_events: u32,
    pub wait_for_all: u32,
    pub timeout: u32,
    pub wait_result: u32,
}

/// `struct kfd_ioctl_acquire_vm_args` (`AMDKFD_IOC_ACQUIRE_VM`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct AcquireVmArgs {
    pub drm_fd: u32,
    pub gpu_id: u32,
}

/// `struct kfd_ioctl_alloc_memory_of_gpu_args` (`AMDKFD_IOC_ALLOC_MEMORY_OF_GPU`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct AllocMemoryOfGpuArgs {
    pub va_addr: u64,
    pub size: u64,
    pub handle: u64,
    pub mmap_offset: u64,
    pub gpu_id: u32,
    pub flags: u32,
}

/// `struct kfd_ioctl_free_memory_of_gpu_args` (`AMDKFD_IOC_FREE_MEMORY_OF_GPU`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct FreeMemoryOfGpuArgs {
    pub handle: u64,
}

/// `map_memory_to_gpu` and `unmap_memory_from_gpu` share this layout.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct MapMemoryArgs {
    pub handle: u64,
    pub device_ids_array_ptr: u64,
    pub n_devices: u32,
    pub n_success: u32,
}

/// `struct kfd_ioctl_get_available_memory_args` (`AMDKFD_IOC_AVAILABLE_MEMORY`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct GetAvailableMemoryArgs {
    pub available: u64,
    pub gpu_id: u32,
    pub pad: u32,
}

// Each request as the header's `AMDKFD_IOR`/`AMDKFD_IOW`/`AMDKFD_IOWR` macro expands it on
// x86-64 (`tests/kfd_abi_layout.rs` compares them with the system header); `Ioctl::declare`
// refuses to compile one whose encoded size is not its struct's.
pub const IOC_GET_VERSION: Ioctl<GetVersionArgs> =
    Ioctl::declare(0x8008_4b01, "AMDKFD_IOC_GET_VERSION");
pub const IOC_CREATE_QUEUE: Ioctl<CreateQueueArgs> =
    Ioctl::declare(0xc058_4b02, "AMDKFD_IOC_CREATE_QUEUE");
pub const IOC_DESTROY_QUEUE: Ioctl<DestroyQueueArgs> =
    Ioctl::declare(0xc008_4b03, "AMDKFD_IOC_DESTROY_QUEUE");
pub const IOC_GET_CLOCK_COUNTERS: Ioctl<GetClockCountersArgs> =
    Ioctl::declare(0xc028_4b05, "AMDKFD_IOC_GET_CLOCK_COUNTERS");
pub const IOC_CREATE_EVENT: Ioctl<CreateEventArgs> =
    Ioctl::declare(0xc020_4b08, "AMDKFD_IOC_CREATE_EVENT");
pub const IOC_DESTROY_EVENT: Ioctl<DestroyEventArgs> =
    Ioctl::declare(0x4008_4b09, "AMDKFD_IOC_DESTROY_EVENT");
pub const IOC_SET_EVENT: Ioctl<EventIdArgs> = Ioctl::declare(0x4008_4b0a, "AMDKFD_IOC_SET_EVENT");
pub const IOC_RESET_EVENT: Ioctl<EventIdArgs> =
    Ioctl::declare(0x4008_4b0b, "AMDKFD_IOC_RESET_EVENT");
pub const IOC_WAIT_EVENTS: Ioctl<WaitEventsArgs> =
    Ioctl::declare(0xc018_4b0c, "AMDKFD_IOC_WAIT_EVENTS");
pub const IOC_ACQUIRE_VM: Ioctl<AcquireVmArgs> =
    Ioctl::declare(0x4008_4b15, "AMDKFD_IOC_ACQUIRE_VM");
pub const IOC_ALLOC_MEMORY_OF_GPU: Ioctl<AllocMemoryOfGpuArgs> =
    Ioctl::declare(0xc028_4b16, "AMDKFD_IOC_ALLOC_MEMORY_OF_GPU");
pub const IOC_FREE_MEMORY_OF_GPU: Ioctl<FreeMemoryOfGpuArgs> =
    Ioctl::declare(0x4008_4b17, "AMDKFD_IOC_FREE_MEMORY_OF_GPU");
pub const IOC_MAP_MEMORY_TO_GPU: Ioctl<MapMemoryArgs> =
    Ioctl::declare(0xc018_4b18, "AMDKFD_IOC_MAP_MEMORY_TO_GPU");
pub const IOC_UNMAP_MEMORY_FROM_GPU: Ioctl<MapMemoryArgs> =
    Ioctl::declare(0xc018_4b19, "AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU");
pub const IOC_AVAILABLE_MEMORY: Ioctl<GetAvailableMemoryArgs> =
    Ioctl::declare(0xc010_4b23, "AMDKFD_IOC_AVAILABLE_MEMORY");
pub const IOC_RUNTIME_ENABLE: Ioctl<RuntimeEnableArgs> =
    Ioctl::declare(0xc010_4b25, "AMDKFD_IOC_RUNTIME_ENABLE");

/// Every KFD request hcq declares, for decoding a raw request number (the emulated kernel's
/// dispatcher, `hcq exec`'s view of a foreign program's calls, the fuzzers). Each names one of
/// the typed constants above ([`KfdIoctl::request`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KfdIoctl {
    /// [`IOC_GET_VERSION`].
    GetVersion,
    /// [`IOC_CREATE_QUEUE`].
    CreateQueue,
    /// [`IOC_DESTROY_QUEUE`].
    DestroyQueue,
    /// [`IOC_GET_CLOCK_COUNTERS`].
    GetClockCounters,
    /// [`IOC_CREATE_EVENT`].
    CreateEvent,
    /// [`IOC_DESTROY_EVENT`].
    DestroyEvent,
    /// [`IOC_SET_EVENT`].
    SetEvent,
    /// [`IOC_RESET_EVENT`].
    ResetEvent,
    /// [`IOC_WAIT_EVENTS`].
    WaitEvents,
    /// [`IOC_ACQUIRE_VM`].
    AcquireVm,
    /// [`IOC_ALLOC_MEMORY_OF_GPU`].
    AllocMemoryOfGpu,
    /// [`IOC_FREE_MEMORY_OF_GPU`].
    FreeMemoryOfGpu,
    /// [`IOC_MAP_MEMORY_TO_GPU`].
    MapMemoryToGpu,
    /// [`IOC_UNMAP_MEMORY_FROM_GPU`].
    UnmapMemoryFromGpu,
    /// [`IOC_AVAILABLE_MEMORY`].
    AvailableMemory,
    /// [`IOC_RUNTIME_ENABLE`].
    RuntimeEnable,
}

impl KfdIoctl {
    /// Every declared request.
    pub const ALL: [KfdIoctl; 16] = [
        KfdIoctl::GetVersion,
        KfdIoctl::CreateQueue,
        KfdIoctl::DestroyQueue,
        KfdIoctl::GetClockCounters,
        KfdIoctl::CreateEvent,
        KfdIoctl::DestroyEvent,
        KfdIoctl::SetEvent,
        KfdIoctl::ResetEvent,
        KfdIoctl::WaitEvents,
        KfdIoctl::AcquireVm,
        KfdIoctl::AllocMemoryOfGpu,
        KfdIoctl::FreeMemoryOfGpu,
        KfdIoctl::MapMemoryToGpu,
        KfdIoctl::UnmapMemoryFromGpu,
        KfdIoctl::AvailableMemory,
        KfdIoctl::RuntimeEnable,
    ];

    /// The request as its typed constant encodes it, and the header's name of it.
    pub const fn request_and_name(self) -> (u64, &'static str) {
        const fn of<T>(ioctl: Ioctl<T>) -> (u64, &'static str) {
            (ioctl.request(), ioctl.name())
        }
        match self {
            KfdIoctl::GetVersion => of(IOC_GET_VERSION),
            KfdIoctl::CreateQueue => of(IOC_CREATE_QUEUE),
            KfdIoctl::DestroyQueue => of(IOC_DESTROY_QUEUE),
            KfdIoctl::GetClockCounters => of(IOC_GET_CLOCK_COUNTERS),
            KfdIoctl::CreateEvent => of(IOC_CREATE_EVENT),
            KfdIoctl::DestroyEvent => of(IOC_DESTROY_EVENT),
            KfdIoctl::SetEvent => of(IOC_SET_EVENT),
            KfdIoctl::ResetEvent => of(IOC_RESET_EVENT),
            KfdIoctl::WaitEvents => of(IOC_WAIT_EVENTS),
            KfdIoctl::AcquireVm => of(IOC_ACQUIRE_VM),
            KfdIoctl::AllocMemoryOfGpu => of(IOC_ALLOC_MEMORY_OF_GPU),
            KfdIoctl::FreeMemoryOfGpu => of(IOC_FREE_MEMORY_OF_GPU),
            KfdIoctl::MapMemoryToGpu => of(IOC_MAP_MEMORY_TO_GPU),
            KfdIoctl::UnmapMemoryFromGpu => of(IOC_UNMAP_MEMORY_FROM_GPU),
            KfdIoctl::AvailableMemory => of(IOC_AVAILABLE_MEMORY),
            KfdIoctl::RuntimeEnable => of(IOC_RUNTIME_ENABLE),
        }
    }

    /// The request as its typed constant encodes it.
    pub const fn request(self) -> u64 {
        self.request_and_name().0
    }

    /// The header's name of the request.
    pub const fn name(self) -> &'static str {
        self.request_and_name().1
    }

    /// The declared request with `request`'s number, found as `kfd_ioctl` finds it: by
    /// number alone (the caller's type byte, direction and size select nothing; the size is
    /// reconciled with the struct's by whoever moves the argument). `None` for a number hcq
    /// does not declare.
    pub fn decode(request: u64) -> Option<KfdIoctl> {
        KfdIoctl::ALL
            .into_iter()
            .find(|k| request_nr(k.request()) == request_nr(request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{offset_of, size_of};

    #[test]
    fn struct_sizes_match_the_header() {
        assert_eq!(size_of::<GetVersionArgs>(), 8);
        assert_eq!(size_of::<CreateQueueArgs>(), 88);
        assert_eq!(offset_of!(CreateQueueArgs, ring_size), 32);
        assert_eq!(offset_of!(CreateQueueArgs, queue_id), 52);
        assert_eq!(offset_of!(CreateQueueArgs, eop_buffer_address), 56);
        assert_eq!(offset_of!(CreateQueueArgs, ctl_stack_size), 84);
        assert_eq!(size_of::<CreateEventArgs>(), 32);
        assert_eq!(offset_of!(CreateEventArgs, event_slot_index), 28);
        assert_eq!(size_of::<EventData>(), 48);
        assert_eq!(size_of::<RuntimeEnableArgs>(), 16);
        assert_eq!(IOC_RUNTIME_ENABLE.request(), 0xc010_4b25);
        assert_eq!(offset_of!(EventData, kfd_event_data_ext), 32);
        assert_eq!(offset_of!(EventData, event_id), 40);
        assert_eq!(size_of::<WaitEventsArgs>(), 24);
        assert_eq!(size_of::<AllocMemoryOfGpuArgs>(), 40);
        assert_eq!(offset_of!(AllocMemoryOfGpuArgs, flags), 36);
        assert_eq!(size_of::<MapMemoryArgs>(), 24);
        assert_eq!(size_of::<GetClockCountersArgs>(), 40);
    }

    #[test]
    fn request_numbers_match_the_header() {
        // Values of the header's macros as the C preprocessor expands them on x86-64.
        assert_eq!(IOC_GET_VERSION.request(), 0x8008_4b01);
        assert_eq!(IOC_CREATE_QUEUE.request(), 0xc058_4b02);
        assert_eq!(IOC_WAIT_EVENTS.request(), 0xc018_4b0c);
        assert_eq!(IOC_ACQUIRE_VM.request(), 0x4008_4b15);
        assert_eq!(IOC_ALLOC_MEMORY_OF_GPU.request(), 0xc028_4b16);
        assert_eq!(IOC_FREE_MEMORY_OF_GPU.request(), 0x4008_4b17);
        assert_eq!(IOC_MAP_MEMORY_TO_GPU.request(), 0xc018_4b18);
        assert_eq!(request_nr(IOC_MAP_MEMORY_TO_GPU.request()), 0x18);
        assert_eq!(request_size(IOC_CREATE_QUEUE.request()), 88);
    }

    /// The size each declared request encodes is its struct's (the const assertion in
    /// `Ioctl::declare` makes this hold at compile time; this checks the list is whole), every
    /// request is a KFD request, and each number decodes to exactly its own request.
    #[test]
    fn every_declared_request_encodes_its_struct_and_decodes_to_itself() {
        fn size<T>(ioctl: Ioctl<T>) -> (u64, usize) {
            (ioctl.request(), core::mem::size_of::<T>())
        }
        let sizes = [
            size(IOC_GET_VERSION),
            size(IOC_CREATE_QUEUE),
            size(IOC_DESTROY_QUEUE),
            size(IOC_GET_CLOCK_COUNTERS),
            size(IOC_CREATE_EVENT),
            size(IOC_DESTROY_EVENT),
            size(IOC_SET_EVENT),
            size(IOC_RESET_EVENT),
            size(IOC_WAIT_EVENTS),
            size(IOC_ACQUIRE_VM),
            size(IOC_ALLOC_MEMORY_OF_GPU),
            size(IOC_FREE_MEMORY_OF_GPU),
            size(IOC_MAP_MEMORY_TO_GPU),
            size(IOC_UNMAP_MEMORY_FROM_GPU),
            size(IOC_AVAILABLE_MEMORY),
            size(IOC_RUNTIME_ENABLE),
        ];
        assert_eq!(sizes.len(), KfdIoctl::ALL.len());
        for ((request, struct_size), k) in sizes.into_iter().zip(KfdIoctl::ALL) {
            assert_eq!(k.request(), request, "{k:?}");
            assert_eq!(request_size(request), struct_size, "{}", k.name());
            assert!(is_kfd_request(request), "{}", k.name());
            assert_eq!(KfdIoctl::decode(request), Some(k));
            // Found by number whatever size, direction and type byte the caller encodes.
            let other = crate::ioctl::with_size(request, struct_size + 8) & !(0xff << 8);
            assert_eq!(KfdIoctl::decode(other | (3 << 30)), Some(k));
        }
        assert_eq!(KfdIoctl::decode(0x8008_4b7e), None);
    }
}
