//! Every KFD struct the driver uses has the size and field offsets of the system's
//! `linux/kfd_ioctl.h`, and every request number the header's value: a C program compiled
//! against the header prints them, and they are compared with the Rust declarations.

use hcq_amd_sys::kfd::*;
use std::collections::HashMap;
use std::mem::{offset_of, size_of};
use std::process::Command;

const HEADER: &str = "/usr/include/linux/kfd_ioctl.h";

macro_rules! layout {
    ($rust:ty, $c:literal, [$($rf:ident : $cf:literal),* $(,)?]) => {
        (
            $c,
            size_of::<$rust>(),
            vec![$(($cf, offset_of!($rust, $rf))),*],
        )
    };
}

/// A C struct name, the Rust size, and (C field, Rust offset) pairs.
type Layout = (&'static str, usize, Vec<(&'static str, usize)>);

fn rust_layouts() -> Vec<Layout> {
    vec![
        layout!(GetVersionArgs, "kfd_ioctl_get_version_args", [major_version: "major_version", minor_version: "minor_version"]),
        layout!(CreateQueueArgs, "kfd_ioctl_create_queue_args", [
            ring_base_address: "ring_base_address", write_pointer_address: "write_pointer_address",
            read_pointer_address: "read_pointer_address", doorbell_offset: "doorbell_offset", ring_size: "ring_size",
            gpu_id: "gpu_id", queue_type: "queue_type", queue_percentage: "queue_percentage",
            queue_priority: "queue_priority", queue_id: "queue_id", eop_buffer_address: "eop_buffer_address",
            eop_buffer_size: "eop_buffer_size", ctx_save_restore_address: "ctx_save_restore_address",
            ctx_save_restore_size: "ctx_save_restore_size", ctl_stack_size: "ctl_stack_size",
        ]),
        layout!(DestroyQueueArgs, "kfd_ioctl_destroy_queue_args", [queue_id: "queue_id"]),
        layout!(GetClockCountersArgs, "kfd_ioctl_get_clock_counters_args", [
            gpu_clock_counter: "gpu_clock_counter", cpu_clock_counter: "cpu_clock_counter",
            system_clock_counter: "system_clock_counter", system_clock_freq: "system_clock_freq", gpu_id: "gpu_id",
        ]),
        layout!(CreateEventArgs, "kfd_ioctl_create_event_args", [
            event_page_offset: "event_page_offset", event_trigger_data: "event_trigger_data", event_type: "event_type",
            auto_reset: "auto_reset", node_id: "node_id", event_id: "event_id", event_slot_index: "event_slot_index",
        ]),
        layout!(DestroyEventArgs, "kfd_ioctl_destroy_event_args", [event_id: "event_id"]),
        layout!(EventIdArgs, "kfd_ioctl_set_event_args", [event_id: "event_id"]),
        layout!(EventIdArgs, "kfd_ioctl_reset_event_args", [event_id: "event_id"]),
        layout!(MemoryExceptionData, "kfd_hsa_memory_exception_data", [failure: "failure", va: "va", gpu_id: "gpu_id", error_type: "ErrorType"]),
        layout!(HwExceptionData, "kfd_hsa_hw_exception_data", [reset_type: "reset_type", reset_cause: "reset_cause", memory_lost: "memory_lost", gpu_id: "gpu_id"]),
        layout!(EventData, "kfd_event_data", [kfd_event_data_ext: "kfd_event_data_ext", event_id: "event_id"]),
        layout!(WaitEventsArgs, "kfd_ioctl_wait_events_args", [events_ptr: "events_ptr", num_events: "num_events", wait_for_all: "wait_for_all", timeout: "timeout", wait_result: "wait_result"]),
        layout!(AcquireVmArgs, "kfd_ioctl_acquire_vm_args", [drm_fd: "drm_fd", gpu_id: "gpu_id"]),
        layout!(AllocMemoryOfGpuArgs, "kfd_ioctl_alloc_memory_of_gpu_args", [va_addr: "va_addr", size: "size", handle: "handle", mmap_offset: "mmap_offset", gpu_id: "gpu_id", flags: "flags"]),
        layout!(FreeMemoryOfGpuArgs, "kfd_ioctl_free_memory_of_gpu_args", [handle: "handle"]),
        layout!(MapMemoryArgs, "kfd_ioctl_map_memory_to_gpu_args", [handle: "handle", device_ids_array_ptr: "device_ids_array_ptr", n_devices: "n_devices", n_success: "n_success"]),
        layout!(MapMemoryArgs, "kfd_ioctl_unmap_memory_from_gpu_args", [handle: "handle", device_ids_array_ptr: "device_ids_array_ptr", n_devices: "n_devices", n_success: "n_success"]),
        layout!(GetAvailableMemoryArgs, "kfd_ioctl_get_available_memory_args", [available: "available", gpu_id: "gpu_id"]),
    ]
}

const REQUESTS: &[(&str, u64)] = &[
    ("AMDKFD_IOC_GET_VERSION", IOC_GET_VERSION.request()),
    ("AMDKFD_IOC_CREATE_QUEUE", IOC_CREATE_QUEUE.request()),
    ("AMDKFD_IOC_DESTROY_QUEUE", IOC_DESTROY_QUEUE.request()),
    (
        "AMDKFD_IOC_GET_CLOCK_COUNTERS",
        IOC_GET_CLOCK_COUNTERS.request(),
    ),
    ("AMDKFD_IOC_CREATE_EVENT", IOC_CREATE_EVENT.request()),
    ("AMDKFD_IOC_DESTROY_EVENT", IOC_DESTROY_EVENT.request()),
    ("AMDKFD_IOC_SET_EVENT", IOC_SET_EVENT.request()),
    ("AMDKFD_IOC_RESET_EVENT", IOC_RESET_EVENT.request()),
    ("AMDKFD_IOC_WAIT_EVENTS", IOC_WAIT_EVENTS.request()),
    ("AMDKFD_IOC_ACQUIRE_VM", IOC_ACQUIRE_VM.request()),
    (
        "AMDKFD_IOC_ALLOC_MEMORY_OF_GPU",
        IOC_ALLOC_MEMORY_OF_GPU.request(),
    ),
    (
        "AMDKFD_IOC_FREE_MEMORY_OF_GPU",
        IOC_FREE_MEMORY_OF_GPU.request(),
    ),
    (
        "AMDKFD_IOC_MAP_MEMORY_TO_GPU",
        IOC_MAP_MEMORY_TO_GPU.request(),
    ),
    (
        "AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU",
        IOC_UNMAP_MEMORY_FROM_GPU.request(),
    ),
    (
        "AMDKFD_IOC_AVAILABLE_MEMORY",
        IOC_AVAILABLE_MEMORY.request(),
    ),
];

const FLAGS: &[(&str, u32)] = &[
    ("KFD_IOC_ALLOC_MEM_FLAGS_VRAM", ALLOC_MEM_FLAGS_VRAM),
    ("KFD_IOC_ALLOC_MEM_FLAGS_GTT", ALLOC_MEM_FLAGS_GTT),
    ("KFD_IOC_ALLOC_MEM_FLAGS_USERPTR", ALLOC_MEM_FLAGS_USERPTR),
    ("KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE", ALLOC_MEM_FLAGS_WRITABLE),
    (
        "KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE",
        ALLOC_MEM_FLAGS_EXECUTABLE,
    ),
    ("KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC", ALLOC_MEM_FLAGS_PUBLIC),
    (
        "KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE",
        ALLOC_MEM_FLAGS_NO_SUBSTITUTE,
    ),
    ("KFD_IOC_ALLOC_MEM_FLAGS_COHERENT", ALLOC_MEM_FLAGS_COHERENT),
    ("KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED", ALLOC_MEM_FLAGS_UNCACHED),
    ("KFD_IOC_QUEUE_TYPE_COMPUTE", QUEUE_TYPE_COMPUTE),
    ("KFD_IOC_QUEUE_TYPE_SDMA", QUEUE_TYPE_SDMA),
    ("KFD_IOC_EVENT_SIGNAL", EVENT_SIGNAL),
    ("KFD_IOC_EVENT_HW_EXCEPTION", EVENT_HW_EXCEPTION),
    ("KFD_IOC_EVENT_MEMORY", EVENT_MEMORY),
    ("KFD_IOC_WAIT_RESULT_COMPLETE", WAIT_RESULT_COMPLETE),
    ("KFD_IOC_WAIT_RESULT_TIMEOUT", WAIT_RESULT_TIMEOUT),
];

#[test]
fn kfd_structs_and_requests_match_the_system_header() {
    if !std::path::Path::new(HEADER).exists() {
        panic!("{HEADER} is missing: install linux-libc-dev");
    }
    let mut c = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include <linux/kfd_ioctl.h>\nint main(void) {\n",
    );
    for (name, _, fields) in rust_layouts() {
        c += &format!("  printf(\"size {name} %zu\\n\", sizeof(struct {name}));\n");
        for (f, _) in fields {
            c +=
                &format!("  printf(\"offset {name}.{f} %zu\\n\", offsetof(struct {name}, {f}));\n");
        }
    }
    for (name, _) in REQUESTS {
        c += &format!("  printf(\"value {name} %llu\\n\", (unsigned long long){name});\n");
    }
    for (name, _) in FLAGS {
        c += &format!(
            "  printf(\"value {name} %llu\\n\", (unsigned long long)(unsigned int)({name}));\n"
        );
    }
    c += "  return 0;\n}\n";
    let dir = std::env::temp_dir().join(format!("hcq-kfd-abi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (src, exe) = (dir.join("abi.c"), dir.join("abi"));
    std::fs::write(&src, c).unwrap();
    // kfd_ioctl.h includes <drm/drm.h> only for the kernel's integer types; where libdrm's
    // headers are not installed, a stand-in that provides just those suffices.
    let stub = dir.join("include/drm");
    std::fs::create_dir_all(&stub).unwrap();
    std::fs::write(
        stub.join("drm.h"),
        "#include <linux/types.h>\n#include <linux/ioctl.h>\n",
    )
    .unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .arg("-idirafter")
        .arg(dir.join("include"))
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .status()
        .expect("a C compiler (cc)");
    assert!(status.success(), "compiling the layout probe failed");
    let out = Command::new(&exe).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8(out.stdout).unwrap();
    let c_values: HashMap<String, u64> = text
        .lines()
        .map(|l| {
            let mut it = l.split_whitespace();
            let (_, k, v) = (it.next().unwrap(), it.next().unwrap(), it.next().unwrap());
            (k.to_string(), v.parse().unwrap())
        })
        .collect();
    let mut checked = 0;
    for (name, size, fields) in rust_layouts() {
        assert_eq!(c_values[name] as usize, size, "sizeof(struct {name})");
        for (f, off) in fields {
            assert_eq!(
                c_values[&format!("{name}.{f}")] as usize,
                off,
                "offsetof({name}, {f})"
            );
            checked += 1;
        }
    }
    for (name, v) in REQUESTS {
        assert_eq!(c_values[*name], *v, "{name}");
    }
    for (name, v) in FLAGS {
        assert_eq!(c_values[*name], *v as u64, "{name}");
    }
    assert!(checked > 50);
}
