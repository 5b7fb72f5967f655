//! `hcq run`: one kernel from the shell, with its arguments given in kernel order.

use hcq::{Arg, Buffer, Device};
use std::path::PathBuf;

/// One `--arg`.
#[derive(Debug, Clone, PartialEq)]
pub enum ArgSpec {
    I32(i32),
    U32(u32),
    I64(i64),
    U64(u64),
    F32(f32),
    F64(f64),
    I8(i8),
    U8(u8),
    I16(i16),
    U16(u16),
    Bool(bool),
    /// A by-value argument given as hex bytes (a struct, a vector type, a half's bits).
    Bytes(hcq::ArgBytes),
    /// A device buffer filled from a file.
    In(PathBuf),
    /// A zeroed device buffer of this many bytes, written to the file afterwards.
    Out(PathBuf, usize),
    /// Filled from the file and written back to it.
    InOut(PathBuf),
}

/// `00ff10..`: bytes in memory order, two hex digits each.
fn hex_bytes(text: &str) -> Result<hcq::ArgBytes, String> {
    if text.is_empty() || !text.len().is_multiple_of(2) {
        return Err("expected an even number of hex digits".into());
    }
    let bytes = (0..text.len())
        .step_by(2)
        .map(|i| {
            text.get(i..i + 2)
                .and_then(|d| u8::from_str_radix(d, 16).ok())
                .ok_or_else(|| format!("{text:?} is not hex"))
        })
        .collect::<Result<Vec<u8>, String>>()?;
    hcq::ArgBytes::new(&bytes).map_err(|e| e.to_string())
}

fn scalar<T: std::str::FromStr>(kind: &str, v: &str) -> Result<T, String> {
    let parsed = if let Some(hex) = v.strip_prefix("0x") {
        u64::from_str_radix(hex, 16)
            .ok()
            .and_then(|x| x.to_string().parse().ok())
    } else {
        v.parse().ok()
    };
    parsed.ok_or_else(|| format!("--arg {kind}:{v}: {v:?} is not a valid {kind}"))
}

impl std::str::FromStr for ArgSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (kind, rest) = s.split_once(':').ok_or_else(|| {
            format!(
                "--arg {s:?}: expected KIND:VALUE (i8 u8 i16 u16 i32 u32 i64 u64 f32 f64 bool \
                 bytes in out inout)"
            )
        })?;
        Ok(match kind {
            "i32" => ArgSpec::I32(scalar(kind, rest)?),
            "u32" => ArgSpec::U32(scalar(kind, rest)?),
            "i64" => ArgSpec::I64(scalar(kind, rest)?),
            "u64" => ArgSpec::U64(scalar(kind, rest)?),
            "f32" => ArgSpec::F32(scalar(kind, rest)?),
            "f64" => ArgSpec::F64(scalar(kind, rest)?),
            "i8" => ArgSpec::I8(scalar(kind, rest)?),
            "u8" => ArgSpec::U8(scalar(kind, rest)?),
            "i16" => ArgSpec::I16(scalar(kind, rest)?),
            "u16" => ArgSpec::U16(scalar(kind, rest)?),
            "bool" => ArgSpec::Bool(match rest {
                "true" | "1" => true,
                "false" | "0" => false,
                _ => return Err(format!("--arg {s:?}: a bool is true, false, 1 or 0")),
            }),
            "bytes" => ArgSpec::Bytes(hex_bytes(rest).map_err(|e| format!("--arg {s:?}: {e}"))?),
            "in" if !rest.is_empty() => ArgSpec::In(rest.into()),
            "inout" if !rest.is_empty() => ArgSpec::InOut(rest.into()),
            "out" => {
                let (path, bytes) = rest
                    .rsplit_once(':')
                    .ok_or_else(|| format!("--arg {s:?}: expected out:PATH:BYTES"))?;
                let bytes = bytes
                    .parse()
                    .map_err(|_| format!("--arg {s:?}: {bytes:?} is not a byte count"))?;
                if path.is_empty() {
                    return Err(format!("--arg {s:?}: empty path"));
                }
                ArgSpec::Out(path.into(), bytes)
            }
            _ => {
                return Err(format!(
                    "--arg {s:?}: unknown kind {kind:?} (i32 u32 i64 u64 f32 f64 in out inout)"
                ))
            }
        })
    }
}

/// `X[,Y[,Z]]`, each at least 1.
pub fn parse_dims(s: &str) -> Result<[u32; 3], String> {
    let parts: Vec<&str> = s.split(',').collect();
    if parts.is_empty() || parts.len() > 3 {
        return Err(format!("{s:?}: expected X[,Y[,Z]]"));
    }
    let mut d = [1u32; 3];
    for (i, p) in parts.iter().enumerate() {
        d[i] = p
            .trim()
            .parse()
            .ok()
            .filter(|&v| v > 0)
            .ok_or_else(|| format!("{s:?}: {p:?} is not a positive integer"))?;
    }
    Ok(d)
}

fn is_code_object(bytes: &[u8]) -> bool {
    bytes.starts_with(b"\x7fELF")
}

pub struct RunOptions {
    pub file: PathBuf,
    pub kernel: String,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub args: Vec<ArgSpec>,
    /// Bytes of dynamic LDS per workgroup.
    pub dynamic_lds: u32,
    pub device: Option<String>,
}

pub fn run(o: RunOptions) -> Result<(), String> {
    let bytes = std::fs::read(&o.file).map_err(|e| format!("reading {}: {e}", o.file.display()))?;
    let dev: Device = crate::open_device(o.device.as_deref()).map_err(|e| e.to_string())?;
    let lib = if is_code_object(&bytes) {
        bytes
    } else if std::str::from_utf8(&bytes).is_err() {
        return Err(format!(
            "{} is neither a code object nor UTF-8 source",
            o.file.display()
        ));
    } else {
        // From the file, so that its includes resolve next to it.
        dev.compile_file(&o.file).map_err(|e| e.to_string())?
    };
    let prg = dev.program(&lib, &o.kernel).map_err(|e| e.to_string())?;
    // Buffers first (they must outlive the argument list), then the arguments.
    let mut buffers: Vec<Option<Buffer>> = Vec::new();
    for a in &o.args {
        let b = match a {
            ArgSpec::In(p) | ArgSpec::InOut(p) => {
                let data = std::fs::read(p).map_err(|e| format!("reading {}: {e}", p.display()))?;
                let b = dev.alloc(data.len().max(1)).map_err(|e| e.to_string())?;
                b.copy_in(0, &data).map_err(|e| e.to_string())?;
                Some(b)
            }
            ArgSpec::Out(_, n) => {
                let b = dev.alloc((*n).max(1)).map_err(|e| e.to_string())?;
                b.copy_in(0, &vec![0u8; *n]).map_err(|e| e.to_string())?;
                Some(b)
            }
            _ => None,
        };
        buffers.push(b);
    }
    let args: Vec<Arg<'_>> = o
        .args
        .iter()
        .zip(&buffers)
        .map(|(a, b)| match (a, b) {
            (_, Some(b)) => Arg::Buffer(b),
            (ArgSpec::I32(v), _) => Arg::I32(*v),
            (ArgSpec::U32(v), _) => Arg::U32(*v),
            (ArgSpec::I64(v), _) => Arg::I64(*v),
            (ArgSpec::U64(v), _) => Arg::U64(*v),
            (ArgSpec::F32(v), _) => Arg::F32(*v),
            (ArgSpec::F64(v), _) => Arg::F64(*v),
            (ArgSpec::I8(v), _) => Arg::I8(*v),
            (ArgSpec::U8(v), _) => Arg::U8(*v),
            (ArgSpec::I16(v), _) => Arg::I16(*v),
            (ArgSpec::U16(v), _) => Arg::U16(*v),
            (ArgSpec::Bool(v), _) => Arg::Bool(*v),
            (ArgSpec::Bytes(v), _) => Arg::Bytes(*v),
            (ArgSpec::In(_) | ArgSpec::Out(..) | ArgSpec::InOut(_), None) => {
                unreachable!("buffers were made above")
            }
        })
        .collect();
    let options = hcq::LaunchOptions {
        dynamic_lds_bytes: o.dynamic_lds,
        timed: true,
    };
    let t = prg
        .launch_with(&args, o.grid, o.block, &options)
        .map_err(|e| e.to_string())?
        .unwrap_or_default();
    for (a, b) in o.args.iter().zip(&buffers) {
        let (path, n) = match (a, b) {
            (ArgSpec::Out(p, n), Some(b)) => (p, (*n).min(b.size())),
            (ArgSpec::InOut(p), Some(b)) => (
                p,
                std::fs::metadata(p)
                    .map(|m| m.len() as usize)
                    .unwrap_or(b.size())
                    .min(b.size()),
            ),
            _ => continue,
        };
        let b = b.as_ref().expect("output arguments have buffers");
        let mut out = vec![0u8; n];
        b.copy_out(0, &mut out).map_err(|e| e.to_string())?;
        std::fs::write(path, &out).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    println!(
        "{} on {}: {:.3} us",
        o.kernel,
        dev.name(),
        t.as_secs_f64() * 1e6
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arg_specs_parse() {
        assert_eq!("i32:-5".parse::<ArgSpec>().unwrap(), ArgSpec::I32(-5));
        assert_eq!("u32:0x10".parse::<ArgSpec>().unwrap(), ArgSpec::U32(16));
        assert_eq!("f32:1.5".parse::<ArgSpec>().unwrap(), ArgSpec::F32(1.5));
        assert_eq!(
            "u64:18446744073709551615".parse::<ArgSpec>().unwrap(),
            ArgSpec::U64(u64::MAX)
        );
        assert_eq!(
            "out:/tmp/x:1024".parse::<ArgSpec>().unwrap(),
            ArgSpec::Out("/tmp/x".into(), 1024)
        );
        assert_eq!(
            "in:a.bin".parse::<ArgSpec>().unwrap(),
            ArgSpec::In("a.bin".into())
        );
        assert_eq!("bool:true".parse::<ArgSpec>().unwrap(), ArgSpec::Bool(true));
        assert_eq!("i8:-128".parse::<ArgSpec>().unwrap(), ArgSpec::I8(-128));
        assert_eq!(
            "u16:0xffff".parse::<ArgSpec>().unwrap(),
            ArgSpec::U16(0xffff)
        );
        assert_eq!(
            "bytes:00ff".parse::<ArgSpec>().unwrap(),
            ArgSpec::Bytes(hcq::ArgBytes::new(&[0, 255]).unwrap())
        );
        for bad in [
            "i32",
            "i32:x",
            "i12:1",
            "u8:256",
            "i8:128",
            "bool:yes",
            "bytes:",
            "bytes:abc",
            "bytes:zz",
            "out:/tmp/x",
            "out:/tmp/x:-1",
            "in:",
            "u32:-1",
            "i32:99999999999",
        ] {
            assert!(bad.parse::<ArgSpec>().is_err(), "{bad}");
        }
    }

    #[test]
    fn dims_parse() {
        assert_eq!(parse_dims("4").unwrap(), [4, 1, 1]);
        assert_eq!(parse_dims("4,2,3").unwrap(), [4, 2, 3]);
        for bad in ["", "0", "1,2,3,4", "a", "1,,2", "-1"] {
            assert!(parse_dims(bad).is_err(), "{bad}");
        }
    }
}
