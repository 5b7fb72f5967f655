//! Typed ioctl requests: a request number bound to the struct it carries.
//!
//! Linux encodes an ioctl request as 32 bits (`_IOC` of `asm-generic/ioctl.h`, the encoding
//! of x86-64 and arm64): the direction in bits 30..32, the argument's size in bits 16..30,
//! the driver's type byte in bits 8..16 and the request's number in bits 0..8. The kernel
//! copies as many bytes as the request says; a request paired with another struct makes it
//! read or write past the caller's argument. [`Ioctl<T>`] keeps the number and the struct
//! together: each constant is declared with the value the uapi header's macro expands to,
//! and a const assertion refuses to compile one whose encoded size is not `size_of::<T>()`.
//! The driver issues requests only through such constants, with a `&mut T`, and the
//! emulated kernel finds its handler through the same constants, so the struct a handler
//! reads is the one the request names.
//!
//! ```compile_fail
//! use hcq_amd_sys::ioctl::Ioctl;
//! // 0x8008_4b01 (`AMDKFD_IOC_GET_VERSION`) encodes 8 bytes: a 4-byte struct is refused.
//! const BAD: Ioctl<u32> = Ioctl::declare(0x8008_4b01, "AMDKFD_IOC_GET_VERSION");
//! ```
//!
//! ```compile_fail
//! use hcq_amd_sys::kfd::{GetClockCountersArgs, IOC_GET_VERSION};
//! use hcq_amd_sys::ioctl::Ioctl;
//! fn issue<T>(_request: Ioctl<T>, _arg: &mut T) {}
//! // GET_VERSION's struct is `GetVersionArgs`: another struct does not type-check.
//! issue(IOC_GET_VERSION, &mut GetClockCountersArgs::default());
//! ```

use core::marker::PhantomData;

/// Direction bit (`_IOC_WRITE`, the kernel's `IOC_IN`): the caller passes data to the kernel,
/// which reads the argument.
pub const DIR_WRITE: u64 = 1;
/// Direction bit (`_IOC_READ`, the kernel's `IOC_OUT`): the kernel writes the argument back.
pub const DIR_READ: u64 = 2;

/// Largest argument size a request can encode (14 bits).
pub const MAX_SIZE: usize = 0x3fff;

/// The number of a request (its low byte, `_IOC_NR`).
pub const fn request_nr(request: u64) -> u64 {
    request & 0xff
}

/// The type byte of a request (`_IOC_TYPE`): `'K'` for KFD, `'d'` for DRM.
pub const fn request_type(request: u64) -> u8 {
    ((request >> 8) & 0xff) as u8
}

/// The argument size a request encodes (`_IOC_SIZE`).
pub const fn request_size(request: u64) -> usize {
    ((request >> 16) & MAX_SIZE as u64) as usize
}

/// The direction bits of a request (`_IOC_DIR`): [`DIR_WRITE`], [`DIR_READ`], both or none.
pub const fn request_dir(request: u64) -> u64 {
    (request >> 30) & 3
}

/// `request` with its size field replaced by `size` (at most [`MAX_SIZE`]): the request a
/// program built against an older or newer header (a shorter or longer struct) would make.
pub const fn with_size(request: u64, size: usize) -> u64 {
    (request & !((MAX_SIZE as u64) << 16)) | (((size & MAX_SIZE) as u64) << 16)
}

/// An ioctl request whose argument is a `T`.
///
/// Constructed only by [`Ioctl::declare`], in a constant, where the size the request encodes
/// is checked against `size_of::<T>()` when the crate compiles.
pub struct Ioctl<T> {
    request: u64,
    name: &'static str,
    /// The argument's type; `fn(T) -> T` keeps `Ioctl<T>` `Send`, `Sync` and `Copy` whatever
    /// `T` is, since no `T` is held.
    arg: PhantomData<fn(T) -> T>,
}

impl<T> Ioctl<T> {
    /// The request `request` (the value the header's `_IOR`/`_IOW`/`_IOWR` macro expands to)
    /// named `name`, with argument `T`.
    ///
    /// # Panics
    /// When the size encoded in `request` is not `size_of::<T>()`, when `request` has bits
    /// above the 32 Linux decodes, or when it moves no data. Used in a constant, as intended,
    /// the panic is a compile error.
    pub const fn declare(request: u64, name: &'static str) -> Self {
        assert!(
            request_size(request) == core::mem::size_of::<T>(),
            "the size encoded in the request is not the size of its argument struct"
        );
        assert!(request >> 32 == 0, "a request has 32 bits");
        assert!(
            request_dir(request) != 0,
            "a request with an argument moves data"
        );
        Ioctl {
            request,
            name,
            arg: PhantomData,
        }
    }

    /// The request number as passed to `ioctl(2)`.
    pub const fn request(&self) -> u64 {
        self.request
    }

    /// The header's name of the request (`AMDKFD_IOC_GET_VERSION`).
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// The request's number (its low byte).
    pub const fn nr(&self) -> u64 {
        request_nr(self.request)
    }

    /// The size of the argument, `size_of::<T>()`.
    pub const fn size(&self) -> usize {
        core::mem::size_of::<T>()
    }

    /// Whether the kernel reads the argument ([`DIR_WRITE`]).
    pub const fn kernel_reads(&self) -> bool {
        request_dir(self.request) & DIR_WRITE != 0
    }

    /// Whether the kernel writes the argument back ([`DIR_READ`]).
    pub const fn kernel_writes(&self) -> bool {
        request_dir(self.request) & DIR_READ != 0
    }
}

impl<T> Clone for Ioctl<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Ioctl<T> {}

impl<T> core::fmt::Debug for Ioctl<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} ({:#x})", self.name, self.request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C)]
    struct Sixteen([u64; 2]);

    const READ_WRITE: Ioctl<Sixteen> = Ioctl::declare(0xc010_4b25, "TEST_IOWR");

    #[test]
    fn fields_decode_as_linux_encodes_them() {
        assert_eq!(READ_WRITE.nr(), 0x25);
        assert_eq!(request_type(READ_WRITE.request()), b'K');
        assert_eq!(READ_WRITE.size(), 16);
        assert_eq!(request_size(READ_WRITE.request()), 16);
        assert!(READ_WRITE.kernel_reads() && READ_WRITE.kernel_writes());
        assert_eq!(request_size(with_size(READ_WRITE.request(), 40)), 40);
        assert_eq!(request_nr(with_size(READ_WRITE.request(), 40)), 0x25);
    }

    #[test]
    #[should_panic(expected = "not the size of its argument struct")]
    fn a_request_for_another_size_is_refused() {
        // At run time, so that the test can observe it; in a constant it fails to compile.
        let _ = Ioctl::<u32>::declare(0xc010_4b25, "TEST_IOWR");
    }
}
