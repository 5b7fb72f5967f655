//! Launch dimensions of a graph: constants, or integer expressions of the graph's variables
//! evaluated at each replay. Every backend's graph takes these ([`DimExpr`], [`Var`],
//! [`VarSpec`]), so a launch shape is written one way whatever lowers it.

use crate::{Error, Result};

/// A symbolic integer variable of a graph, by its position among the graph's variables (the
/// slot of its value in a replay's `vars`). A graph builder hands these out; a graph checks
/// that it declares every variable its dimensions use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Var(usize);

impl Var {
    /// Variable number `index` (in declaration order).
    pub const fn new(index: usize) -> Var {
        Var(index)
    }

    /// Its position among the graph's variables.
    pub const fn index(self) -> usize {
        self.0
    }
}

/// A declared variable and the values a replay may give it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VarSpec {
    /// The name it was declared with (for errors).
    pub name: String,
    /// Smallest value a replay may give it (inclusive).
    pub min: i32,
    /// Largest value a replay may give it (inclusive).
    pub max: i32,
}

/// A launch dimension: a constant or an integer expression of variables. Built with `+`, `*`,
/// `/` (rounding down) and [`DimExpr::ceil_div`] from numbers and [`Var`]s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DimExpr {
    /// A fixed number.
    Const(i64),
    /// A variable's value at replay.
    Var(Var),
    /// The sum of two expressions; overflow is an error when evaluated.
    Add(Box<DimExpr>, Box<DimExpr>),
    /// Their product; overflow is an error when evaluated.
    Mul(Box<DimExpr>, Box<DimExpr>),
    /// Division rounded down; by zero is an error when evaluated.
    Div(Box<DimExpr>, Box<DimExpr>),
    /// Division rounded up (the `(n + l - 1) / l` of a grid size); the divisor must evaluate
    /// to a positive number.
    CeilDiv(Box<DimExpr>, Box<DimExpr>),
}

/// Launch dimensions as expressions, one per axis.
pub type DimExprs = [DimExpr; 3];

impl From<u32> for DimExpr {
    fn from(v: u32) -> Self {
        DimExpr::Const(v.into())
    }
}

impl From<Var> for DimExpr {
    fn from(v: Var) -> Self {
        DimExpr::Var(v)
    }
}

impl<T: Into<DimExpr>> std::ops::Add<T> for DimExpr {
    type Output = DimExpr;
    fn add(self, o: T) -> DimExpr {
        DimExpr::Add(Box::new(self), Box::new(o.into()))
    }
}

impl<T: Into<DimExpr>> std::ops::Mul<T> for DimExpr {
    type Output = DimExpr;
    fn mul(self, o: T) -> DimExpr {
        DimExpr::Mul(Box::new(self), Box::new(o.into()))
    }
}

/// Division rounded down.
impl<T: Into<DimExpr>> std::ops::Div<T> for DimExpr {
    type Output = DimExpr;
    fn div(self, o: T) -> DimExpr {
        DimExpr::Div(Box::new(self), Box::new(o.into()))
    }
}

impl DimExpr {
    /// Division rounded up.
    pub fn ceil_div(self, o: impl Into<DimExpr>) -> DimExpr {
        DimExpr::CeilDiv(Box::new(self), Box::new(o.into()))
    }

    /// Whether the expression depends on a variable.
    pub fn is_symbolic(&self) -> bool {
        self.max_var().is_some()
    }

    /// The highest-numbered variable the expression uses.
    pub fn max_var(&self) -> Option<Var> {
        match self {
            DimExpr::Const(_) => None,
            DimExpr::Var(v) => Some(*v),
            DimExpr::Add(a, b)
            | DimExpr::Mul(a, b)
            | DimExpr::Div(a, b)
            | DimExpr::CeilDiv(a, b) => a.max_var().max(b.max_var()),
        }
    }

    /// An [`Error::InvalidArgument`] if the expression uses a variable beyond the first
    /// `declared`.
    pub fn check_vars(&self, declared: usize) -> Result<()> {
        match self.max_var() {
            Some(v) if v.0 >= declared => Err(Error::InvalidArgument(format!(
                "launch dimension uses variable {}, the graph has {declared}",
                v.0
            ))),
            _ => Ok(()),
        }
    }

    /// The value with `vars` (one per variable, by index), checked for overflow and division
    /// by zero.
    pub fn eval(&self, vars: &[i32]) -> Result<i64> {
        let bad = |what: &str| Error::InvalidArgument(format!("launch dimension {self:?} {what}"));
        Ok(match self {
            DimExpr::Const(c) => *c,
            DimExpr::Var(v) => *vars.get(v.0).ok_or_else(|| {
                Error::InvalidArgument(format!("launch dimension uses unknown variable {}", v.0))
            })? as i64,
            DimExpr::Add(a, b) => a
                .eval(vars)?
                .checked_add(b.eval(vars)?)
                .ok_or_else(|| bad("overflows"))?,
            DimExpr::Mul(a, b) => a
                .eval(vars)?
                .checked_mul(b.eval(vars)?)
                .ok_or_else(|| bad("overflows"))?,
            DimExpr::Div(a, b) => {
                let (x, y) = (a.eval(vars)?, b.eval(vars)?);
                if y == 0 {
                    return Err(bad("divides by zero"));
                }
                x.checked_div_euclid(y).ok_or_else(|| bad("overflows"))?
            }
            DimExpr::CeilDiv(a, b) => {
                let (x, y) = (a.eval(vars)?, b.eval(vars)?);
                if y == 0 {
                    return Err(bad("divides by zero"));
                }
                if y < 0 {
                    return Err(bad("rounds up a division by a negative number"));
                }
                x.checked_add(y - 1)
                    .ok_or_else(|| bad("overflows"))?
                    .div_euclid(y)
            }
        })
    }
}

/// The three dimensions' values with `vars`: each must come to 1 to `u32::MAX`.
pub fn eval_dims(exprs: &DimExprs, vars: &[i32]) -> Result<[u32; 3]> {
    let mut out = [0u32; 3];
    for (o, e) in out.iter_mut().zip(exprs) {
        let v = e.eval(vars)?;
        *o = u32::try_from(v).ok().filter(|&v| v > 0).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "launch dimension {e:?} evaluates to {v} (must be 1 to {})",
                u32::MAX
            ))
        })?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expressions_evaluate_as_integer_arithmetic() {
        let (n, k) = (Var::new(0), Var::new(1));
        let grid = DimExpr::from(n).ceil_div(64u32);
        assert_eq!(grid.eval(&[1000, 0]).unwrap(), 16);
        assert_eq!(grid.eval(&[1024, 0]).unwrap(), 16);
        assert_eq!(grid.eval(&[-1, 0]).unwrap(), 0); // ceil(-1/64)
        assert_eq!(grid.eval(&[-64, 0]).unwrap(), -1);
        let e = (DimExpr::from(n) + k) * 3u32 / 2u32;
        assert_eq!(e.eval(&[5, 2]).unwrap(), 10);
        assert_eq!(e.eval(&[-5, 2]).unwrap(), -5); // floor(-9 / 2)
        assert!(e.is_symbolic() && !DimExpr::from(7u32).is_symbolic());
        assert_eq!(e.max_var(), Some(k));
    }

    #[test]
    fn bad_values_are_errors() {
        let n = DimExpr::from(Var::new(0));
        let message = |e: DimExpr, vars: &[i32]| e.eval(vars).unwrap_err().to_string();
        assert!(message(n.clone() / 0u32, &[1]).contains("divides by zero"));
        assert!(message(DimExpr::from(1u32).ceil_div(n.clone()), &[0]).contains("by zero"));
        assert!(message(DimExpr::from(1u32).ceil_div(n.clone()), &[-2]).contains("negative"));
        let huge = n.clone() * u32::MAX * u32::MAX * u32::MAX;
        assert!(message(huge, &[i32::MAX]).contains("overflows"));
        assert!(message(DimExpr::Var(Var::new(3)), &[1]).contains("unknown variable 3"));
        assert!(n.check_vars(1).is_ok());
        assert!(DimExpr::Var(Var::new(1)).check_vars(1).is_err());
        let zero = [DimExpr::from(0u32), 1u32.into(), 1u32.into()];
        assert!(eval_dims(&zero, &[]).is_err());
        let big = [DimExpr::Const(1 << 32), 1u32.into(), 1u32.into()];
        assert!(eval_dims(&big, &[]).is_err());
        let fine = [n.ceil_div(2u32), 3u32.into(), 1u32.into()];
        assert_eq!(eval_dims(&fine, &[5]).unwrap(), [3, 3, 1]);
    }
}
