//! `hcq.Jit` (made by the `hcq.jit` decorator): `hcq::Jit` from Python. The decorated function
//! records its work through a `JitRecorder`; the first call runs it eagerly, the second runs it
//! while capturing a graph, and later calls replay the graph with that call's buffers and
//! variable values, without running the function.

use crate::buffer::PyBuffer;
use crate::errors::{invalid_argument, to_py_err, IntoPyResult};
use crate::graph::{launch_shape, PyDim};
use crate::program::PyProgram;
use hcq::{DimExpr, JitArg, JitRecorder};
use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Tells JITs apart: a slot or variable of one JIT's recorder must not be used in another's.
static NEXT_JIT_ID: AtomicU64 = AtomicU64::new(1 << 40);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

type Body = Box<dyn FnMut(&mut JitRecorder<'_>) -> hcq::Result<()> + Send>;

/// A function captured into a graph on its second call and replayed after. Call it as
/// `f(inputs, outputs=(), vars=())`: lists of `hcq.Buffer` and of ints. Every call names its
/// buffers, so results never alias across calls, and each replay binds that call's buffers and
/// variable values.
#[pyclass(frozen, module = "hcq", name = "Jit")]
pub struct PyJit {
    jit: Mutex<hcq::Jit<Body>>,
    /// The thread inside a call, to refuse a call from the JIT's own function.
    caller: Mutex<Option<std::thread::ThreadId>>,
    /// The Python exception the function raised during the current call, if any: `hcq::Jit`
    /// sees only that the body failed, and the caller gets this exception back.
    raised: Arc<Mutex<Option<PyErr>>>,
    name: String,
}

#[pymethods]
impl PyJit {
    /// `function(recorder)` records its launches and copies through the recorder; `vars` are
    /// the integer variables as `(name, min, max)`.
    #[new]
    #[pyo3(signature = (function, vars = Vec::new()))]
    fn new(function: Bound<'_, PyAny>, vars: Vec<(String, i32, i32)>) -> PyResult<PyJit> {
        if !function.is_callable() {
            return Err(PyTypeError::new_err("hcq.jit needs a function"));
        }
        let name = function
            .getattr("__name__")
            .and_then(|n| n.extract::<String>())
            .unwrap_or_else(|_| "function".to_string());
        let id = NEXT_JIT_ID.fetch_add(1, Ordering::Relaxed);
        let raised: Arc<Mutex<Option<PyErr>>> = Arc::new(Mutex::new(None));
        let function: Py<PyAny> = function.unbind();
        let slot = raised.clone();
        let var_count = vars.len();
        let body: Body = Box::new(move |recorder: &mut JitRecorder<'_>| {
            Python::attach(|py| {
                let handle = Bound::new(
                    py,
                    PyJitRecorder {
                        jit: id,
                        var_count,
                        recorder: Mutex::new(Some(RecorderPtr(
                            (recorder as *mut JitRecorder<'_>).cast(),
                        ))),
                    },
                )
                .map_err(|e| {
                    *lock(&slot) = Some(e);
                    hcq::Error::InvalidArgument("the JIT's recorder".into())
                })?;
                let result = function.call1(py, (handle.clone(),));
                // The recorder points into this call's frame: unusable from now on.
                *lock(&handle.get().recorder) = None;
                result.map(drop).map_err(|e| {
                    *lock(&slot) = Some(e);
                    hcq::Error::InvalidArgument("the JIT's function raised".into())
                })
            })
        });
        let vars: Vec<(&str, i32, i32)> =
            vars.iter().map(|(n, a, b)| (n.as_str(), *a, *b)).collect();
        Ok(PyJit {
            jit: Mutex::new(hcq::Jit::new(&vars, body).or_raise()?),
            caller: Mutex::new(None),
            raised,
            name,
        })
    }

    /// Runs the function's work on `inputs` into `outputs` with the variable values `vars`:
    /// eagerly on the first call, eagerly while capturing on the second, as one graph replay
    /// after. An exception the function raises comes back unchanged.
    #[pyo3(signature = (inputs, outputs = Vec::new(), vars = Vec::new()))]
    fn __call__(
        &self,
        py: Python<'_>,
        inputs: Vec<Bound<'_, PyBuffer>>,
        outputs: Vec<Bound<'_, PyBuffer>>,
        vars: Vec<i32>,
    ) -> PyResult<()> {
        let inputs: Vec<&hcq::Buffer> = inputs.iter().map(|b| &b.get().buffer).collect();
        let outputs: Vec<&hcq::Buffer> = outputs.iter().map(|b| &b.get().buffer).collect();
        let me = std::thread::current().id();
        // One call at a time per JIT. Another thread's call is waited for with the GIL
        // released (that call runs Python, which needs it); a call from the JIT's own function
        // would wait for itself.
        let mut jit = loop {
            match self.jit.try_lock() {
                Ok(guard) => break guard,
                Err(std::sync::TryLockError::Poisoned(p)) => break p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => {
                    if *lock(&self.caller) == Some(me) {
                        return Err(PyRuntimeError::new_err(format!(
                            "the JIT {} was called from inside its own function",
                            self.name
                        )));
                    }
                    py.detach(|| drop(lock(&self.jit)));
                }
            }
        };
        *lock(&self.caller) = Some(me);
        let jit: &mut hcq::Jit<Body> = &mut jit;
        let result = if jit.is_captured() {
            // A replay runs no Python: other threads go on meanwhile.
            py.detach(|| jit.call(&inputs, &outputs, &vars))
        } else {
            jit.call(&inputs, &outputs, &vars)
        };
        *lock(&self.caller) = None;
        let raised = lock(&self.raised).take();
        match (result, raised) {
            (Ok(()), _) => Ok(()),
            (Err(_), Some(exception)) => Err(exception),
            (Err(e), None) => Err(to_py_err(e)),
        }
    }

    /// Whether calls replay a captured graph.
    #[getter]
    fn is_captured(&self) -> bool {
        lock(&self.jit).is_captured()
    }

    /// Why every call runs the function eagerly, if they do (the work could not be captured).
    #[getter]
    fn fallback_reason(&self) -> Option<String> {
        lock(&self.jit).fallback_reason().map(str::to_string)
    }

    fn __repr__(&self) -> String {
        format!(
            "hcq.Jit({}, captured={})",
            self.name,
            lock(&self.jit).is_captured()
        )
    }
}

/// A `JitRecorder` of the call in progress, valid only until the function returns.
struct RecorderPtr(*mut JitRecorder<'static>);

// SAFETY: the pointer is only dereferenced under the `Mutex` that holds it, while the call that
// made it is still inside the function (`PyJit::new`'s body clears it before returning), so the
// recorder and everything it borrows are alive; the `Mutex` keeps two threads from using it at
// once. `JitRecorder` itself holds only shared references to `Sync` data and a builder.
unsafe impl Send for RecorderPtr {}

/// What a JIT's function records through: `launch`, `copy`, and the call's buffers and
/// variables as placeholders (`input(n)`, `output(n)`, `var(n)`).
#[pyclass(frozen, module = "hcq", name = "JitRecorder")]
pub struct PyJitRecorder {
    jit: u64,
    var_count: usize,
    recorder: Mutex<Option<RecorderPtr>>,
}

/// A placeholder for buffer `index` of the current call's inputs or outputs.
#[pyclass(frozen, module = "hcq", name = "JitBuffer")]
pub struct PyJitBuffer {
    jit: u64,
    output: bool,
    index: usize,
}

#[pymethods]
impl PyJitBuffer {
    fn __repr__(&self) -> String {
        let kind = if self.output { "output" } else { "input" };
        format!("hcq.JitBuffer({kind} {})", self.index)
    }
}

#[pymethods]
impl PyJitRecorder {
    /// Input buffer `n` of each call.
    fn input(&self, n: usize) -> PyJitBuffer {
        PyJitBuffer {
            jit: self.jit,
            output: false,
            index: n,
        }
    }

    /// Output buffer `n` of each call.
    fn output(&self, n: usize) -> PyJitBuffer {
        PyJitBuffer {
            jit: self.jit,
            output: true,
            index: n,
        }
    }

    /// Variable `n`: an `hcq.Dim` for launch dimensions (`r.var(0).ceil_div(64)`), and an
    /// `int32` when passed as a kernel argument. Its value is never visible here, so nothing
    /// computed from it can be baked into the capture.
    fn var(&self, n: usize) -> PyResult<PyDim> {
        if n >= self.var_count {
            return Err(invalid_argument(format!(
                "variable {n} of a JIT with {} variables",
                self.var_count
            )));
        }
        self.with(|r| {
            let expr = r.var(n);
            let var = match expr {
                DimExpr::Var(v) => Some(v),
                _ => None,
            };
            Ok(PyDim::new(self.jit, expr, var))
        })
    }

    /// Launches `program` now and, while capturing, records it: arguments as for calling the
    /// program, plus `input(n)`, `output(n)` and `var(n)`; `grid` and `block` may use
    /// variables.
    #[pyo3(signature = (program, *args, grid, block = None, lds = 0))]
    fn launch(
        &self,
        program: &Bound<'_, PyProgram>,
        args: &Bound<'_, PyTuple>,
        grid: &Bound<'_, PyAny>,
        block: Option<&Bound<'_, PyAny>>,
        lds: u32,
    ) -> PyResult<()> {
        let program = program.get();
        let (grid, block, options) = launch_shape(program, args, grid, block, lds, self.jit)?;
        let objects: Vec<Bound<'_, PyAny>> = args.iter().collect();
        let mut jit_args = Vec::with_capacity(objects.len());
        for (index, obj) in objects.iter().enumerate() {
            jit_args.push(self.jit_arg(program, index, obj)?);
        }
        self.with(|r| {
            r.launch_with(program.program(), &jit_args, grid, block, &options)
                .or_raise()
        })
    }

    /// Copies the first `nbytes` of `src` into `dst` (buffers, or `input(n)` / `output(n)`)
    /// now and, while capturing, records it.
    fn copy(&self, src: &Bound<'_, PyAny>, dst: &Bound<'_, PyAny>, nbytes: usize) -> PyResult<()> {
        let src = self.buffer_arg(src)?;
        let dst = self.buffer_arg(dst)?;
        self.with(|r| r.copy(src, dst, nbytes).or_raise())
    }
}

impl PyJitRecorder {
    /// Runs `f` on the recorder of the call in progress.
    fn with<T>(&self, f: impl FnOnce(&mut JitRecorder<'_>) -> PyResult<T>) -> PyResult<T> {
        let guard = lock(&self.recorder);
        let Some(ptr) = guard.as_ref() else {
            return Err(PyRuntimeError::new_err(
                "this JitRecorder belongs to a call that has returned: record only inside the \
                 JIT's function",
            ));
        };
        // SAFETY: the pointer is set only while its call is inside the function (see
        // `RecorderPtr`), and the guard held here is the only way to it.
        f(unsafe { &mut *ptr.0 })
    }

    fn slot(&self, obj: &Bound<'_, PyAny>) -> PyResult<Option<JitArg<'static>>> {
        let Ok(slot) = obj.cast::<PyJitBuffer>() else {
            return Ok(None);
        };
        let slot = slot.get();
        if slot.jit != self.jit {
            return Err(invalid_argument("a buffer placeholder of another JIT"));
        }
        Ok(Some(if slot.output {
            JitArg::Output(slot.index)
        } else {
            JitArg::Input(slot.index)
        }))
    }

    fn buffer_arg<'a>(&self, obj: &'a Bound<'_, PyAny>) -> PyResult<JitArg<'a>> {
        if let Ok(buffer) = obj.cast::<PyBuffer>() {
            return Ok(JitArg::Buffer(&buffer.get().buffer));
        }
        self.slot(obj)?.ok_or_else(|| {
            PyTypeError::new_err(format!(
                "a JIT copy goes between hcq.Buffers and the call's buffers (input(n), \
                 output(n)), not {}",
                obj.get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            ))
        })
    }

    fn jit_arg<'a>(
        &self,
        program: &PyProgram,
        index: usize,
        obj: &'a Bound<'_, PyAny>,
    ) -> PyResult<JitArg<'a>> {
        if let Ok(buffer) = obj.cast::<PyBuffer>() {
            program.check_buffer_allowed(index)?;
            return Ok(JitArg::Buffer(&buffer.get().buffer));
        }
        if let Some(slot) = self.slot(obj)? {
            program.check_buffer_allowed(index)?;
            return Ok(slot);
        }
        if let Ok(dim) = obj.cast::<PyDim>() {
            let dim = dim.get();
            return match dim.var_of(self.jit) {
                Some(var) => Ok(JitArg::Var(var.index())),
                None => Err(invalid_argument(format!(
                    "argument {index} of {}: only a variable of this JIT itself can be a kernel \
                     argument",
                    program.program().name()
                ))),
            };
        }
        Ok(JitArg::Value(program.convert_value(index, obj)?))
    }
}
