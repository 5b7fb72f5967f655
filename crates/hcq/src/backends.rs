//! The backends of this build, and the enums through which the facade reaches them.
//!
//! A backend is a device type implementing [`hcq_core::Backend`]. The facade's handles hold
//! one of the `Any*` enums below, with one variant per backend, and reach the backend with
//! [`on_backend!`]: a `match` whose arms run the same generic code for each backend, so a
//! launch costs a jump, not a virtual call. [`with_backends!`] holds the list the enums, the
//! [`Member`] impls, the `match`es and the registry's sources are generated from: adding a
//! backend is one line there, with the module of `registry/` that opens its devices.

/// Calls `$callback!` with every backend of this build, as
/// `[#[cfg] Variant: DeviceType => registry_module; ...]` followed by `$args`: **the one list a
/// new backend is added to**. The device type implements [`hcq_core::Backend`]; the module
/// of `crate::registry` opens and lists its devices (`KINDS`, `open`, `list`,
/// `default_name`); the first backend's default device is the default.
macro_rules! with_backends {
    ($callback:ident ! ( $($args:tt)* )) => {
        $callback! {
            [
                #[cfg(target_os = "linux")] Amd: hcq_amd::AmdDevice => amd;
                #[cfg(target_os = "macos")] Metal: hcq_metal::SystemMetalDevice => metal;
            ]
            $($args)*
        }
    };
}

/// Evaluates `$body` with `$d` bound to the `&D` inside `$device` (an `&AnyDevice`), whichever
/// backend `D` it is. Call the backend as `Backend::method(d, ...)`: a backend's inherent
/// methods of the same name would otherwise win.
macro_rules! on_backend {
    ($device:expr, $d:ident => $body:expr) => {
        with_backends!(on_backend_arms!($device, $d, $body))
    };
}

macro_rules! on_backend_arms {
    ([ $( #[$cfg:meta] $variant:ident : $device_type:ty => $source:ident; )* ] $device:expr, $d:ident, $body:expr) => {
        match $device {
            $( #[$cfg] $crate::backends::AnyDevice::$variant(device) => {
                let $d: &$device_type = device;
                $body
            } )*
        }
    };
}

macro_rules! declare_backends {
    ([ $( #[$cfg:meta] $variant:ident : $device_type:ty => $source:ident; )* ]) => {
        /// A device of any backend, or a stream of one (another queue of the same device).
        #[derive(Clone)]
        pub(crate) enum AnyDevice {
            $( #[$cfg] $variant(std::sync::Arc<$device_type>), )*
        }

        /// An allocation of any backend.
        pub(crate) enum AnyBuffer {
            $( #[$cfg] $variant(<$device_type as hcq_core::Backend>::Buffer), )*
        }

        /// A loaded kernel of any backend.
        pub(crate) enum AnyProgram {
            $( #[$cfg] $variant(<$device_type as hcq_core::Backend>::Program), )*
        }

        /// An event of any backend.
        pub(crate) enum AnyEvent {
            $( #[$cfg] $variant(<$device_type as hcq_core::Backend>::Event), )*
        }

        /// A lowered graph of any backend.
        pub(crate) enum AnyGraph {
            $( #[$cfg] $variant(<$device_type as hcq_core::Backend>::Graph), )*
        }

        impl AnyDevice {
            /// Whether both are the same queue of the same device.
            pub(crate) fn same(&self, other: &AnyDevice) -> bool {
                #[allow(unreachable_patterns)]
                match (self, other) {
                    $( #[$cfg] (AnyDevice::$variant(a), AnyDevice::$variant(b)) => {
                        std::sync::Arc::ptr_eq(a, b)
                    } )*
                    _ => false,
                }
            }
        }

        $(
            #[$cfg]
            impl Member for $device_type {
                fn device(any: &AnyDevice) -> Option<&std::sync::Arc<Self>> {
                    #[allow(unreachable_patterns)]
                    match any {
                        AnyDevice::$variant(x) => Some(x),
                        _ => None,
                    }
                }
                fn buffer(any: &AnyBuffer) -> Option<&Self::Buffer> {
                    #[allow(unreachable_patterns)]
                    match any {
                        AnyBuffer::$variant(x) => Some(x),
                        _ => None,
                    }
                }
                fn program(any: &AnyProgram) -> Option<&Self::Program> {
                    #[allow(unreachable_patterns)]
                    match any {
                        AnyProgram::$variant(x) => Some(x),
                        _ => None,
                    }
                }
                fn event(any: &AnyEvent) -> Option<&Self::Event> {
                    #[allow(unreachable_patterns)]
                    match any {
                        AnyEvent::$variant(x) => Some(x),
                        _ => None,
                    }
                }
                fn graph(any: &AnyGraph) -> Option<&Self::Graph> {
                    #[allow(unreachable_patterns)]
                    match any {
                        AnyGraph::$variant(x) => Some(x),
                        _ => None,
                    }
                }
                fn wrap_device(device: std::sync::Arc<Self>) -> AnyDevice {
                    AnyDevice::$variant(device)
                }
                fn wrap_buffer(buffer: Self::Buffer) -> AnyBuffer {
                    AnyBuffer::$variant(buffer)
                }
                fn wrap_program(program: Self::Program) -> AnyProgram {
                    AnyProgram::$variant(program)
                }
                fn wrap_event(event: Self::Event) -> AnyEvent {
                    AnyEvent::$variant(event)
                }
                fn wrap_graph(graph: Self::Graph) -> AnyGraph {
                    AnyGraph::$variant(graph)
                }
            }
        )*
    };
}

with_backends!(declare_backends!());

use crate::{Buffer, Error, Result};
use hcq_core::{Backend, BufferAt};

/// A backend of this build: its device type, with the way into and out of the `Any*` enums.
/// A `None` means a handle of another backend, which the facade's device checks rule out
/// before it asks.
pub(crate) trait Member: Backend {
    fn device(any: &AnyDevice) -> Option<&std::sync::Arc<Self>>;
    fn buffer(any: &AnyBuffer) -> Option<&Self::Buffer>;
    fn program(any: &AnyProgram) -> Option<&Self::Program>;
    fn event(any: &AnyEvent) -> Option<&Self::Event>;
    fn graph(any: &AnyGraph) -> Option<&Self::Graph>;
    fn wrap_device(device: std::sync::Arc<Self>) -> AnyDevice;
    fn wrap_buffer(buffer: Self::Buffer) -> AnyBuffer;
    fn wrap_program(program: Self::Program) -> AnyProgram;
    fn wrap_event(event: Self::Event) -> AnyEvent;
    fn wrap_graph(graph: Self::Graph) -> AnyGraph;
}

/// A handle of one backend given to another (unreachable through the public API, which
/// checks devices first): an error, not a panic.
pub(crate) fn foreign(what: &str, on: &str) -> Error {
    Error::InvalidArgument(format!(
        "{what} belongs to another kind of device than {on}"
    ))
}

/// The `len` bytes at `offset` of `buffer`, checked to lie inside it, in the terms of the
/// backend of `queue` (which only names it).
pub(crate) fn part<'b, D: Member>(
    queue: &D,
    buffer: &'b Buffer,
    offset: usize,
    len: usize,
    what: &str,
) -> Result<BufferAt<'b, D::Buffer>> {
    let start = buffer.within(offset, len, what)?;
    let allocation =
        D::buffer(&buffer.shared.inner).ok_or_else(|| foreign("the buffer", queue.name()))?;
    Ok(BufferAt {
        buffer: allocation,
        offset: start,
        size: len,
    })
}

/// All of `buffer` (a view's own range) in the terms of the backend of `queue`.
pub(crate) fn whole<'b, D: Member>(
    queue: &D,
    buffer: &'b Buffer,
) -> Result<BufferAt<'b, D::Buffer>> {
    part(queue, buffer, 0, buffer.size(), "use")
}
