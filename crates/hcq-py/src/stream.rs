//! `hcq.Stream` and `hcq.Event`: more in-order queues on a device, and the points that order
//! and time them.

use crate::device::PyDevice;
use crate::errors::IntoPyResult;
use pyo3::prelude::*;

/// An in-order queue of work on a device, independent of its other streams
/// (`dev.stream()`); `dev.default_stream` is the device's own queue, which calls without a
/// stream use. Pass `stream=s` to a program call or to a buffer's `write`, `read`, `numpy`,
/// `copy_to` and `fill` to queue the work on it. An `hcq.Event` from `s.record_event()`
/// orders another stream after it (`other.wait_event(event)`) and times the GPU.
#[pyclass(frozen, module = "hcq", name = "Stream")]
pub struct PyStream {
    pub(crate) stream: hcq::Stream,
}

#[pymethods]
impl PyStream {
    /// The device the stream belongs to.
    #[getter]
    fn device(&self) -> PyDevice {
        PyDevice {
            device: self.stream.device().clone(),
        }
    }

    /// Whether this is the device's own queue.
    #[getter]
    fn is_default(&self) -> bool {
        self.stream.is_default()
    }

    /// Queues an event: the point after everything queued on this stream so far, with the
    /// GPU's clock there.
    fn record_event(&self, py: Python<'_>) -> PyResult<PyEvent> {
        let event = py.detach(|| self.stream.record_event()).or_raise()?;
        Ok(PyEvent { event })
    }

    /// Makes the work queued on this stream from now on wait, on the GPU, for `event` (of any
    /// stream, of any device); returns at once.
    fn wait_event(&self, py: Python<'_>, event: &Bound<'_, PyEvent>) -> PyResult<()> {
        let event = &event.get().event;
        py.detach(|| self.stream.wait_event(event)).or_raise()
    }

    /// Waits until the work queued on this stream (only) has finished.
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.stream.synchronize()).or_raise()
    }

    fn __repr__(&self) -> String {
        format!("hcq.{:?}", self.stream)
    }
}

/// A point in a stream's work with the GPU's clock there (`stream.record_event()`): the host
/// waits for it (`synchronize`, `done`), another stream waits for it on the GPU, and two
/// events of one GPU give the GPU time between them (`elapsed_since`).
#[pyclass(frozen, module = "hcq", name = "Event")]
pub struct PyEvent {
    pub(crate) event: hcq::Event,
}

#[pymethods]
impl PyEvent {
    /// Whether the work its stream queued before it has finished.
    #[getter]
    fn done(&self) -> bool {
        self.event.is_complete()
    }

    /// The stream it was recorded on.
    #[getter]
    fn stream(&self) -> PyStream {
        PyStream {
            stream: self.event.stream().clone(),
        }
    }

    /// Waits until the work its stream queued before it has finished.
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.event.synchronize()).or_raise()
    }

    /// GPU seconds from `earlier` to this event: both complete, both on one GPU.
    fn elapsed_since(&self, earlier: &Bound<'_, PyEvent>) -> PyResult<f64> {
        self.event
            .elapsed_since(&earlier.get().event)
            .map(|d| d.as_secs_f64())
            .or_raise()
    }

    fn __repr__(&self) -> String {
        format!("hcq.{:?}", self.event)
    }
}

/// The stream a call names, else the device's own queue.
pub(crate) fn stream_or_default(
    stream: Option<&Bound<'_, PyStream>>,
    device: &hcq::Device,
) -> hcq::Stream {
    match stream {
        Some(s) => s.get().stream.clone(),
        None => device.default_stream(),
    }
}
