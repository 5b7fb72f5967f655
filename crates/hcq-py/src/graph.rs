//! `hcq.GraphBuilder` and `hcq.Graph`: launches and copies recorded once, replayed with one
//! submission, with swappable input buffers and integer variables.

use crate::buffer::PyBuffer;
use crate::device::PyDevice;
use crate::errors::{invalid_argument, IntoPyResult};
use crate::program::{dims, PyProgram};
use hcq::{DimExpr, DimExprs, GraphArg, GraphBuf, LaunchOptions};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PySequence, PyTuple};
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicU64, Ordering};

/// Tells builders apart: hcq's variables and inputs are indices, which another builder's
/// handles could silently match.
static NEXT_BUILDER_ID: AtomicU64 = AtomicU64::new(1);

/// A launch dimension of a graph: a variable (`g.var(...)`), or integer arithmetic of
/// variables and ints (`+`, `*`, `//`, `.ceil_div(...)`). A variable passed as a kernel
/// argument is an `int32` bound at each replay.
#[pyclass(frozen, module = "hcq", name = "Dim")]
#[derive(Clone)]
pub struct PyDim {
    builder: u64,
    expr: DimExpr,
    /// Set when the dimension is exactly one variable (it can then be a kernel argument).
    var: Option<hcq::Var>,
}

impl PyDim {
    /// A dimension of the builder or JIT `builder`; `var` when it is exactly that variable.
    pub(crate) fn new(builder: u64, expr: DimExpr, var: Option<hcq::Var>) -> PyDim {
        PyDim { builder, expr, var }
    }

    /// The variable this dimension is, when it is exactly a variable of `builder`.
    pub(crate) fn var_of(&self, builder: u64) -> Option<hcq::Var> {
        self.var.filter(|_| self.builder == builder)
    }

    fn combine(
        &self,
        other: &Bound<'_, PyAny>,
        op: fn(DimExpr, DimExpr) -> DimExpr,
        swapped: bool,
    ) -> PyResult<PyDim> {
        let other = dim_expr(other, Some(self.builder))?;
        let (a, b) = if swapped {
            (other, self.expr.clone())
        } else {
            (self.expr.clone(), other)
        };
        Ok(PyDim {
            builder: self.builder,
            expr: op(a, b),
            var: None,
        })
    }
}

#[pymethods]
impl PyDim {
    fn __add__(&self, other: &Bound<'_, PyAny>) -> PyResult<PyDim> {
        self.combine(other, |a, b| a + b, false)
    }
    fn __radd__(&self, other: &Bound<'_, PyAny>) -> PyResult<PyDim> {
        self.combine(other, |a, b| a + b, true)
    }
    fn __mul__(&self, other: &Bound<'_, PyAny>) -> PyResult<PyDim> {
        self.combine(other, |a, b| a * b, false)
    }
    fn __rmul__(&self, other: &Bound<'_, PyAny>) -> PyResult<PyDim> {
        self.combine(other, |a, b| a * b, true)
    }
    fn __floordiv__(&self, other: &Bound<'_, PyAny>) -> PyResult<PyDim> {
        self.combine(other, |a, b| a / b, false)
    }
    fn __rfloordiv__(&self, other: &Bound<'_, PyAny>) -> PyResult<PyDim> {
        self.combine(other, |a, b| a / b, true)
    }
    /// Rounded-up division: `n.ceil_div(64)` workgroups of 64 cover `n` items.
    fn ceil_div(&self, other: &Bound<'_, PyAny>) -> PyResult<PyDim> {
        self.combine(other, DimExpr::ceil_div, false)
    }
    /// The value with `vars` (one int per variable of the builder, in order).
    fn eval(&self, vars: Vec<i32>) -> PyResult<i64> {
        self.expr.eval(&vars).or_raise()
    }
    fn __repr__(&self) -> String {
        format!("hcq.Dim({:?})", self.expr)
    }
}

/// A graph input: a buffer each replay binds (`g.input(example)`).
#[pyclass(frozen, module = "hcq", name = "Input")]
pub struct PyInput {
    builder: u64,
    input: hcq::Input,
    nbytes: usize,
}

#[pymethods]
impl PyInput {
    /// Its position in `Graph.replay`'s inputs.
    #[getter]
    fn index(&self) -> usize {
        self.input.index()
    }
    /// The size every buffer bound to it must have.
    #[getter]
    fn nbytes(&self) -> usize {
        self.nbytes
    }
    fn __repr__(&self) -> String {
        format!(
            "hcq.Input(index={}, nbytes={})",
            self.input.index(),
            self.nbytes
        )
    }
}

/// A dimension from an int or a `Dim` of `builder` (any builder when None).
fn dim_expr(obj: &Bound<'_, PyAny>, builder: Option<u64>) -> PyResult<DimExpr> {
    if let Ok(dim) = obj.cast::<PyDim>() {
        let dim = dim.get();
        if builder.is_some_and(|b| b != dim.builder) {
            return Err(invalid_argument("a variable of another graph builder"));
        }
        return Ok(dim.expr.clone());
    }
    let value: i64 = obj.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "a graph dimension is an int or an hcq.Dim, not {}",
            obj.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    })?;
    Ok(DimExpr::Const(value))
}

/// What a recorded launch (a graph builder's or a JIT's) shares besides its arguments: the
/// argument count checked against the kernel, `grid` and `block` (ints or `hcq.Dim`s of
/// `builder`; `block` 1 when absent), and the options (never timed).
pub(crate) fn launch_shape(
    program: &PyProgram,
    args: &Bound<'_, PyTuple>,
    grid: &Bound<'_, PyAny>,
    block: Option<&Bound<'_, PyAny>>,
    lds: u32,
    builder: u64,
) -> PyResult<(DimExprs, DimExprs, LaunchOptions)> {
    program.check_count(args.len())?;
    let grid = dim_exprs(grid, "grid", builder)?;
    let block = match block {
        Some(block) => dim_exprs(block, "block", builder)?,
        None => [1u32.into(), 1u32.into(), 1u32.into()],
    };
    let options = LaunchOptions {
        dynamic_lds_bytes: lds,
        timed: false,
    };
    Ok((grid, block, options))
}

/// Launch dimensions from an int, an `hcq.Dim` of `builder` (a graph builder's or a JIT's), or
/// a tuple of one to three of them.
pub(crate) fn dim_exprs(obj: &Bound<'_, PyAny>, what: &str, builder: u64) -> PyResult<DimExprs> {
    if obj.cast::<PyDim>().is_ok() || obj.extract::<i64>().is_ok() {
        return Ok([dim_expr(obj, Some(builder))?, 1u32.into(), 1u32.into()]);
    }
    // Plain ints everywhere: the same parsing and messages as eager launches.
    if let Ok(plain) = dims(obj, what) {
        return Ok(plain.map(DimExpr::from));
    }
    let items = obj.cast::<PySequence>().map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} must be an int, an hcq.Dim or a tuple of one to three of them"
        ))
    })?;
    let count = items.len()?;
    if count == 0 || count > 3 {
        return Err(invalid_argument(format!(
            "{what} has {count} dimensions (one to three)"
        )));
    }
    let mut out: DimExprs = [1u32.into(), 1u32.into(), 1u32.into()];
    for (slot, item) in out.iter_mut().zip(items.try_iter()?) {
        *slot = dim_expr(&item?, Some(builder))?;
    }
    Ok(out)
}

/// Records launches and copies into an `hcq.Graph`:
///
/// ```python
/// g = hcq.GraphBuilder()
/// n = g.var("n", 1, 4096)
/// x = g.input(example)                  # a buffer bound at each replay
/// g.launch(saxpy, out, x, y, 2.0, n, grid=n.ceil_div(64), block=64)
/// graph = g.build()
/// graph.replay([x_buf], [1000])
/// ```
#[pyclass(module = "hcq", name = "GraphBuilder")]
pub struct PyGraphBuilder {
    id: u64,
    builder: hcq::GraphBuilder,
}

#[pymethods]
impl PyGraphBuilder {
    #[new]
    fn new() -> Self {
        PyGraphBuilder {
            id: NEXT_BUILDER_ID.fetch_add(1, Ordering::Relaxed),
            builder: hcq::GraphBuilder::new(),
        }
    }

    /// Declares an integer variable with inclusive bounds; each replay gives its value.
    fn var(&mut self, name: &str, min: i32, max: i32) -> PyResult<PyDim> {
        let var = self.builder.var(name, min, max).or_raise()?;
        Ok(PyDim {
            builder: self.id,
            expr: var.into(),
            var: Some(var),
        })
    }

    /// Declares an input shaped like `example` (its size and device); the graph is built
    /// with `example` bound.
    fn input(&mut self, example: &Bound<'_, PyBuffer>) -> PyInput {
        let example = &example.get().buffer;
        PyInput {
            builder: self.id,
            input: self.builder.input(example),
            nbytes: example.size(),
        }
    }

    /// Records a launch: arguments as for calling the program, plus graph inputs and
    /// variables; `grid` and `block` may use variables.
    #[pyo3(signature = (program, *args, grid, block = None, lds = 0))]
    fn launch(
        &mut self,
        program: &Bound<'_, PyProgram>,
        args: &Bound<'_, PyTuple>,
        grid: &Bound<'_, PyAny>,
        block: Option<&Bound<'_, PyAny>>,
        lds: u32,
    ) -> PyResult<()> {
        let program = program.get();
        let (grid, block, options) = launch_shape(program, args, grid, block, lds, self.id)?;
        let objects: Vec<Bound<'_, PyAny>> = args.iter().collect();
        let mut graph_args = Vec::with_capacity(objects.len());
        for (index, obj) in objects.iter().enumerate() {
            graph_args.push(self.graph_arg(program, index, obj)?);
        }
        self.builder
            .launch_with(program.program(), &graph_args, grid, block, &options)
            .or_raise()
    }

    /// Records a copy of the first `nbytes` of `src` into `dst` (buffers or inputs of this
    /// builder), on the GPU.
    fn copy(
        &mut self,
        src: &Bound<'_, PyAny>,
        dst: &Bound<'_, PyAny>,
        nbytes: usize,
    ) -> PyResult<()> {
        let src = self.graph_buf(src)?;
        let dst = self.graph_buf(dst)?;
        self.builder.copy(src, dst, nbytes).or_raise()
    }

    /// Number of recorded launches and copies.
    fn __len__(&self) -> usize {
        self.builder.len()
    }

    /// Builds the command stream once; the graph replays it.
    fn build(&self, py: Python<'_>) -> PyResult<PyGraph> {
        let graph = py.detach(|| self.builder.build()).or_raise()?;
        Ok(PyGraph {
            graph: ManuallyDrop::new(graph),
        })
    }
}

impl PyGraphBuilder {
    fn graph_arg<'a>(
        &self,
        program: &PyProgram,
        index: usize,
        obj: &'a Bound<'_, PyAny>,
    ) -> PyResult<GraphArg<'a>> {
        if let Ok(buffer) = obj.cast::<PyBuffer>() {
            program.check_buffer_allowed(index)?;
            return Ok(GraphArg::Buffer(&buffer.get().buffer));
        }
        if let Ok(input) = obj.cast::<PyInput>() {
            program.check_buffer_allowed(index)?;
            return Ok(GraphArg::Input(self.own_input(input.get())?));
        }
        if let Ok(dim) = obj.cast::<PyDim>() {
            let dim = dim.get();
            if dim.builder != self.id {
                return Err(invalid_argument("a variable of another graph builder"));
            }
            return match dim.var {
                Some(var) => Ok(GraphArg::Var(var)),
                None => Err(invalid_argument(format!(
                    "argument {index} of {}: only a variable itself can be a kernel argument, \
                     not the expression {:?}",
                    program.program().name(),
                    dim.expr
                ))),
            };
        }
        Ok(GraphArg::Value(program.convert_value(index, obj)?))
    }

    fn own_input(&self, input: &PyInput) -> PyResult<hcq::Input> {
        if input.builder != self.id {
            return Err(invalid_argument("an input of another graph builder"));
        }
        Ok(input.input)
    }

    fn graph_buf<'a>(&self, obj: &'a Bound<'_, PyAny>) -> PyResult<GraphBuf<'a>> {
        if let Ok(buffer) = obj.cast::<PyBuffer>() {
            return Ok(GraphBuf::Buffer(&buffer.get().buffer));
        }
        if let Ok(input) = obj.cast::<PyInput>() {
            return Ok(GraphBuf::Input(self.own_input(input.get())?));
        }
        Err(PyTypeError::new_err(format!(
            "a graph copy goes between hcq.Buffers and hcq.Inputs, not {}",
            obj.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        )))
    }
}

/// A built graph (`GraphBuilder.build()`); replay it with `replay(inputs, vars)`.
#[pyclass(frozen, module = "hcq", name = "Graph")]
pub struct PyGraph {
    /// Dropped in `Drop` with the GIL released (dropping a graph waits for its replays).
    graph: ManuallyDrop<hcq::Graph>,
}

impl Drop for PyGraph {
    fn drop(&mut self) {
        // SAFETY: `drop` runs once and nothing reads `self.graph` after it: this is its only
        // drop.
        let graph = unsafe { ManuallyDrop::take(&mut self.graph) };
        crate::drop_without_gil(graph);
    }
}

#[pymethods]
impl PyGraph {
    /// Replays the graph with `inputs` (one buffer per input, in order) and `vars` (one int
    /// per variable, in order). Returns once the work is queued; on an error nothing ran.
    /// `stream` replays it on an `hcq.Stream` of its device (single-GPU graphs whose copies
    /// run on the compute queue).
    #[pyo3(signature = (inputs = Vec::new(), vars = Vec::new(), *, stream = None))]
    fn replay(
        &self,
        py: Python<'_>,
        inputs: Vec<Bound<'_, PyBuffer>>,
        vars: Vec<i32>,
        stream: Option<Bound<'_, crate::stream::PyStream>>,
    ) -> PyResult<()> {
        let buffers: Vec<&hcq::Buffer> = inputs.iter().map(|b| &b.get().buffer).collect();
        let stream = stream.map(|s| s.get().stream.clone());
        py.detach(|| match &stream {
            Some(s) => self.graph.replay_on(s, &buffers, &vars),
            None => self.graph.replay(&buffers, &vars),
        })
        .or_raise()
    }

    /// The device that leads replays.
    #[getter]
    fn device(&self) -> PyDevice {
        PyDevice {
            device: self.graph.device().clone(),
        }
    }

    /// `(name, min, max)` of each variable, in order.
    #[getter]
    fn vars(&self) -> Vec<(String, i32, i32)> {
        self.graph
            .vars()
            .iter()
            .map(|v| (v.name.clone(), v.min, v.max))
            .collect()
    }

    /// Number of kernel launches in the graph.
    #[getter]
    fn launch_count(&self) -> usize {
        self.graph.launch_count()
    }

    fn __repr__(&self) -> String {
        format!(
            "hcq.Graph(launches={}, vars={}, device='{}')",
            self.graph.launch_count(),
            self.graph.vars().len(),
            self.graph.device().name()
        )
    }
}
