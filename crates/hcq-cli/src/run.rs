//! `hcq run`: one kernel from the shell, with its arguments given in kernel order.

use hcq::{Arg, Buffer, Device};
use std::path::PathBuf;

/// One `--arg`.
#[derive(Debug, Clone, PartialEq)]
pub enum ArgSpec {
    /// A by-value argument: a number, a bool, or bytes (a struct, a vector type), as
    /// `hcq::VALUE_KINDS` names them.
    Value(hcq::ValueArg),
    /// A device buffer filled from a file: exactly this many bytes of it when a size is given,
    /// else the whole file (which must then be a regular file).
    In(PathBuf, Option<usize>),
    /// A zeroed device buffer of this many bytes, written to the file afterwards.
    Out(PathBuf, usize),
    /// Filled from the file and written back to it.
    InOut(PathBuf),
}

/// Every `--arg` kind, as errors list them: the value kinds, then the buffer kinds.
pub fn arg_kinds() -> String {
    let mut kinds = hcq::VALUE_KINDS.join(" ");
    kinds.push_str(" in out inout");
    kinds
}

impl std::str::FromStr for ArgSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (kind, rest) = s.split_once(':').ok_or_else(|| {
            format!(
                "--arg {s:?}: expected KIND:VALUE, KIND one of {}",
                arg_kinds()
            )
        })?;
        Ok(match kind {
            "in" if !rest.is_empty() => match rest.rsplit_once(':') {
                // A path ending in `:DIGITS` is read as a size; `in:PATH:BYTES` spells it out.
                Some((path, bytes))
                    if !path.is_empty()
                        && !bytes.is_empty()
                        && bytes.bytes().all(|b| b.is_ascii_digit()) =>
                {
                    let bytes = bytes
                        .parse()
                        .map_err(|_| format!("--arg {s:?}: {bytes:?} is not a byte count"))?;
                    ArgSpec::In(path.into(), Some(bytes))
                }
                _ => ArgSpec::In(rest.into(), None),
            },
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
            _ if hcq::VALUE_KINDS.contains(&kind) => ArgSpec::Value(
                hcq::ValueArg::parse_value(kind, rest).map_err(|e| format!("--arg {s:?}: {e}"))?,
            ),
            _ => {
                return Err(format!(
                    "--arg {s:?}: unknown kind {kind:?}: one of {}",
                    arg_kinds()
                ))
            }
        })
    }
}

impl ArgSpec {
    /// Bytes of a by-value argument; `None` for the buffer kinds.
    fn value_bytes(&self) -> Option<u32> {
        match self {
            ArgSpec::Value(v) => Some(v.size() as u32),
            ArgSpec::In(..) | ArgSpec::Out(..) | ArgSpec::InOut(_) => None,
        }
    }

    fn describe(&self) -> String {
        match self.value_bytes() {
            Some(n) => format!("a value of {n} bytes"),
            None => "a buffer".into(),
        }
    }
}

fn describe_param(info: &hcq::ArgInfo) -> String {
    let what = match &info.kind {
        hcq::ArgKind::Buffer => "buffer".to_string(),
        hcq::ArgKind::Value { bytes } => format!("{bytes}-byte value"),
        hcq::ArgKind::Other(kind) => kind.clone(),
    };
    match &info.name {
        Some(n) => format!("{n}: {what}"),
        None => what,
    }
}

/// Checks the specs against the kernel's declared arguments (count, buffer or value, size)
/// before anything is allocated or read, so a mistake costs nothing however big the buffers.
pub fn check_specs(kernel: &str, specs: &[ArgSpec], params: &[hcq::ArgInfo]) -> Result<(), String> {
    if specs.len() != params.len() {
        return Err(format!(
            "kernel {kernel} takes {} arguments ({}), got {}",
            params.len(),
            params
                .iter()
                .map(describe_param)
                .collect::<Vec<_>>()
                .join(", "),
            specs.len()
        ));
    }
    for (i, (spec, param)) in specs.iter().zip(params).enumerate() {
        let label = match &param.name {
            Some(n) => format!("argument {i} ({n}) of kernel {kernel}"),
            None => format!("argument {i} of kernel {kernel}"),
        };
        match (&param.kind, spec.value_bytes()) {
            (hcq::ArgKind::Buffer, None) => {}
            (hcq::ArgKind::Value { bytes }, Some(n)) if *bytes == n => {}
            (hcq::ArgKind::Buffer, Some(_)) => {
                return Err(format!(
                    "{label} is a buffer (in:, out: or inout:), got {}",
                    spec.describe()
                ))
            }
            (hcq::ArgKind::Value { bytes }, Some(_)) => {
                return Err(format!("{label} is {bytes} bytes, got {}", spec.describe()))
            }
            (hcq::ArgKind::Value { bytes }, None) => {
                return Err(format!("{label} is a {bytes}-byte value, got a buffer"))
            }
            (hcq::ArgKind::Other(kind), _) => {
                return Err(format!("{label} has kind {kind}, which hcq cannot pass"))
            }
        }
    }
    Ok(())
}

/// How many bytes an input file gives its buffer: `declared` exactly (the file may be longer,
/// or endless like `/dev/zero`), else the whole file, which must then be a regular file that
/// fits in `capacity` bytes of device memory: anything else could be endless.
fn input_length(
    path: &std::path::Path,
    declared: Option<usize>,
    capacity: u64,
) -> Result<usize, String> {
    if let Some(n) = declared {
        return Ok(n);
    }
    let meta = std::fs::metadata(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!(
            "{} is not a regular file (a device, FIFO or socket may never end): give the bytes \
             to read as in:{}:BYTES",
            path.display(),
            path.display()
        ));
    }
    if meta.len() > capacity {
        return Err(format!(
            "{} holds {} bytes, more than the device's {capacity} bytes of memory",
            path.display(),
            meta.len()
        ));
    }
    usize::try_from(meta.len()).map_err(|_| format!("{} is too large", path.display()))
}

/// Reads exactly `len` bytes from the start of `path`.
fn read_input(path: &std::path::Path, len: usize) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let what = |e: std::io::Error| format!("reading {}: {e}", path.display());
    let file = std::fs::File::open(path).map_err(what)?;
    let mut data = Vec::new();
    data.try_reserve_exact(len)
        .map_err(|_| format!("reading {}: no host memory for {len} bytes", path.display()))?;
    file.take(len as u64).read_to_end(&mut data).map_err(what)?;
    if data.len() != len {
        return Err(format!(
            "{} ended after {} bytes, {len} were to be read",
            path.display(),
            data.len()
        ));
    }
    Ok(data)
}

/// Host bytes used at a time to fill or drain a buffer: a buffer as large as the device
/// allows then needs no host copy of its own size (the host may not have one to give).
const CHUNK: usize = 16 << 20;

/// Zeroes the first `n` bytes of `b` (fresh buffers may come from the allocator's cache).
fn zero_fill(b: &Buffer, n: usize) -> Result<(), String> {
    let zeros = vec![0u8; CHUNK.min(n)];
    let mut at = 0;
    while at < n {
        let len = (n - at).min(CHUNK);
        b.copy_in(at, &zeros[..len]).map_err(|e| e.to_string())?;
        at += len;
    }
    Ok(())
}

/// Writes the first `n` bytes of `b` to `path`.
fn write_out(b: &Buffer, n: usize, path: &std::path::Path) -> Result<(), String> {
    use std::io::Write;
    let what = |e: std::io::Error| format!("writing {}: {e}", path.display());
    let mut file = std::fs::File::create(path).map_err(what)?;
    let mut chunk = vec![0u8; CHUNK.min(n)];
    let mut at = 0;
    while at < n {
        let len = (n - at).min(CHUNK);
        b.copy_out(at, &mut chunk[..len])
            .map_err(|e| e.to_string())?;
        file.write_all(&chunk[..len]).map_err(what)?;
        at += len;
    }
    Ok(())
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
    /// How HIP source is compiled.
    pub compile: hcq::CompileOptions,
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
        dev.compile_file_with(&o.file, &o.compile)
            .map_err(|e| e.to_string())?
    };
    let prg = dev.program(&lib, &o.kernel).map_err(|e| e.to_string())?;
    if let Some(params) = prg.arguments() {
        check_specs(&o.kernel, &o.args, &params)?;
    }
    let capacity = dev.info().memory;
    let input_lengths = o
        .args
        .iter()
        .map(|a| match a {
            ArgSpec::In(p, declared) => input_length(p, *declared, capacity).map(Some),
            ArgSpec::InOut(p) => input_length(p, None, capacity).map(Some),
            _ => Ok(None),
        })
        .collect::<Result<Vec<_>, String>>()?;
    // Buffers first (they must outlive the argument list), then the arguments.
    let mut buffers: Vec<Option<Buffer>> = Vec::new();
    for (a, input) in o.args.iter().zip(&input_lengths) {
        let b = match (a, input) {
            (ArgSpec::In(p, _) | ArgSpec::InOut(p), Some(len)) => {
                let data = read_input(p, *len)?;
                let b = dev.alloc(data.len().max(1)).map_err(|e| e.to_string())?;
                b.copy_in(0, &data).map_err(|e| e.to_string())?;
                Some(b)
            }
            (ArgSpec::Out(_, n), _) => {
                let b = dev.alloc((*n).max(1)).map_err(|e| e.to_string())?;
                zero_fill(&b, *n)?;
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
            (ArgSpec::Value(v), _) => v.map_scalar().expect("a value is not a buffer"),
            (ArgSpec::In(..) | ArgSpec::Out(..) | ArgSpec::InOut(_), None) => {
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
        write_out(b, n, path)?;
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
        assert_eq!(
            "i32:-5".parse::<ArgSpec>().unwrap(),
            ArgSpec::Value(hcq::ValueArg::I32(-5))
        );
        assert_eq!(
            "u32:0x10".parse::<ArgSpec>().unwrap(),
            ArgSpec::Value(hcq::ValueArg::U32(16))
        );
        assert_eq!(
            "f32:1.5".parse::<ArgSpec>().unwrap(),
            ArgSpec::Value(hcq::ValueArg::F32(1.5))
        );
        assert_eq!(
            "u64:18446744073709551615".parse::<ArgSpec>().unwrap(),
            ArgSpec::Value(hcq::ValueArg::U64(u64::MAX))
        );
        assert_eq!(
            "out:/tmp/x:1024".parse::<ArgSpec>().unwrap(),
            ArgSpec::Out("/tmp/x".into(), 1024)
        );
        assert_eq!(
            "in:a.bin".parse::<ArgSpec>().unwrap(),
            ArgSpec::In("a.bin".into(), None)
        );
        assert_eq!(
            "in:/dev/zero:4096".parse::<ArgSpec>().unwrap(),
            ArgSpec::In("/dev/zero".into(), Some(4096))
        );
        assert_eq!(
            "in:c:/x.bin".parse::<ArgSpec>().unwrap(),
            ArgSpec::In("c:/x.bin".into(), None)
        );
        assert_eq!(
            "bool:true".parse::<ArgSpec>().unwrap(),
            ArgSpec::Value(hcq::ValueArg::Bool(true))
        );
        assert_eq!(
            "i8:-128".parse::<ArgSpec>().unwrap(),
            ArgSpec::Value(hcq::ValueArg::I8(-128))
        );
        assert_eq!(
            "u16:0xffff".parse::<ArgSpec>().unwrap(),
            ArgSpec::Value(hcq::ValueArg::U16(0xffff))
        );
        assert_eq!(
            "bytes:00ff".parse::<ArgSpec>().unwrap(),
            ArgSpec::Value(hcq::ValueArg::Bytes(hcq::ArgBytes::new(&[0, 255]).unwrap()))
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
            "in:x:99999999999999999999999",
            "u32:-1",
            "i32:99999999999",
        ] {
            assert!(bad.parse::<ArgSpec>().is_err(), "{bad}");
        }
    }

    #[test]
    fn specs_are_checked_against_the_kernel_arguments() {
        let param = |name: Option<&str>, kind| hcq::ArgInfo {
            name: name.map(String::from),
            kind,
        };
        let params = [
            param(Some("y"), hcq::ArgKind::Buffer),
            param(None, hcq::ArgKind::Value { bytes: 4 }),
            param(Some("s"), hcq::ArgKind::Value { bytes: 12 }),
        ];
        let spec = |s: &str| s.parse::<ArgSpec>().unwrap();
        let good = [
            spec("out:o:99999999999999"),
            spec("f32:1"),
            spec("bytes:000000000000000000000000"),
        ];
        assert_eq!(check_specs("k", &good, &params), Ok(()));
        let cases: [(&[ArgSpec], &str); 5] = [
            (&good[..2], "kernel k takes 3 arguments (y: buffer, 4-byte value, s: 12-byte value), got 2"),
            (&[spec("i32:1"), spec("f32:1"), good[2].clone()], "argument 0 (y) of kernel k is a buffer (in:, out: or inout:), got a value of 4 bytes"),
            (&[good[0].clone(), spec("in:x"), good[2].clone()], "argument 1 of kernel k is a 4-byte value, got a buffer"),
            (&[good[0].clone(), spec("i64:1"), good[2].clone()], "argument 1 of kernel k is 4 bytes, got a value of 8 bytes"),
            (&[good[0].clone(), spec("u32:1"), spec("bytes:00")], "argument 2 (s) of kernel k is 12 bytes, got a value of 1 bytes"),
        ];
        for (specs, want) in cases {
            assert_eq!(check_specs("k", specs, &params).unwrap_err(), want);
        }
        let odd = [param(None, hcq::ArgKind::Other("image".into()))];
        let e = check_specs("k", &[spec("in:x")], &odd).unwrap_err();
        assert!(e.contains("kind image"), "{e}");
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
