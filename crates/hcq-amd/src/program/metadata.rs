//! The metadata note of a code object (`NT_AMDGPU_METADATA`, MessagePack): each kernel's
//! arguments, argument-segment size and alignment, and limits, every field checked.

use super::bad;
use hcq_core::Result;
use object::elf;
use object::read::elf::{ElfFile64, SectionHeader};
use object::Endianness;

/// `NT_AMDGPU_METADATA`.
const NT_AMDGPU_METADATA: u32 = 32;

/// What a kernel argument holds, from the metadata's `.value_kind`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgKind {
    /// A pointer the caller passes (`global_buffer`).
    Buffer,
    /// A value the caller passes (`by_value`).
    Value,
    /// Filled by the runtime (`hidden_*`), named by its kind without the prefix.
    Hidden(String),
    /// Anything else the caller would have to pass; rejected at launch.
    Other(String),
}

/// One entry of a kernel's `.args`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgInfo {
    /// The parameter's name in the source, when the metadata keeps it.
    pub name: Option<String>,
    /// Byte offset in the kernel-argument segment.
    pub offset: u32,
    /// Bytes it occupies there.
    pub size: u32,
    /// What the caller passes (or the runtime fills in, for hidden arguments).
    pub kind: ArgKind,
}

impl ArgInfo {
    /// Whether the caller passes it (hidden arguments are the runtime's).
    pub fn is_explicit(&self) -> bool {
        !matches!(self.kind, ArgKind::Hidden(_))
    }
}

/// One kernel as the metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelMeta {
    /// The kernel's name (`.name`: the source name, or the mangled one for C++).
    pub name: String,
    /// Its kernel-descriptor symbol (`.symbol`, the name with `.kd`).
    pub symbol: String,
    /// Its arguments, explicit and hidden, in segment order.
    pub args: Vec<ArgInfo>,
    /// Bytes of the kernel-argument segment (`.kernarg_segment_size`).
    pub kernarg_segment_size: u32,
    /// Its alignment (`.kernarg_segment_align`).
    pub kernarg_segment_align: u32,
    /// Most work-items per workgroup the kernel was compiled for, when the metadata says.
    pub max_flat_workgroup_size: Option<u32>,
    /// VGPRs and SGPRs the kernel uses (`.vgpr_count`, `.sgpr_count`), when the metadata says.
    pub vgpr_count: Option<u32>,
    /// See `vgpr_count`.
    pub sgpr_count: Option<u32>,
}

/// Largest `.kernarg_segment_align` honoured: the argument ring starts on a page, so any
/// alignment up to a page holds after the ring wraps.
pub const MAX_KERNARG_ALIGN: u32 = 4096;

pub(super) fn parse_metadata(elf: &ElfFile64<'_, Endianness>) -> Result<Vec<KernelMeta>> {
    let e = elf.endian();
    let data = elf.data();
    for sh in elf.elf_section_table().iter() {
        if sh.sh_type(e) != elf::SHT_NOTE {
            continue;
        }
        let mut notes = match sh.notes(e, data) {
            Ok(Some(notes)) => notes,
            Ok(None) => continue,
            Err(err) => return Err(bad(format!("note section: {err}"))),
        };
        loop {
            let note = match notes.next() {
                Ok(Some(note)) => note,
                Ok(None) => break,
                Err(err) => return Err(bad(format!("note section: {err}"))),
            };
            if note.name() == b"AMDGPU" && note.n_type(e) == NT_AMDGPU_METADATA {
                return parse_msgpack(note.desc());
            }
        }
    }
    Ok(Vec::new())
}

/// `.value_kind`s the AMDHSA metadata defines for arguments the caller passes, besides
/// `global_buffer` and `by_value`; hcq knows them but cannot pass them.
const OTHER_VALUE_KINDS: &[&str] = &[
    "dynamic_shared_pointer",
    "sampler",
    "image",
    "pipe",
    "queue",
];

/// The kind of a MessagePack value, for error messages.
fn kind_of(v: &rmpv::Value) -> String {
    use rmpv::Value;
    match v {
        Value::Nil => "nil".into(),
        Value::Boolean(b) => format!("the boolean {b}"),
        Value::Integer(i) => format!("the integer {i}"),
        Value::F32(_) | Value::F64(_) => format!("the float {v}"),
        Value::String(s) if s.as_str().is_none() => "a string that is not UTF-8".into(),
        Value::String(_) => format!("the string {v}"),
        Value::Binary(b) => format!("{} bytes of binary", b.len()),
        Value::Array(a) => format!("a list of {}", a.len()),
        Value::Map(m) => format!("a map of {}", m.len()),
        Value::Ext(t, _) => format!("an extension value of type {t}"),
    }
}

/// The value of `key` in the map `v` (`None` if `v` is no map or lacks the key).
fn lookup<'v>(v: &'v rmpv::Value, key: &str) -> Option<&'v rmpv::Value> {
    v.as_map()?
        .iter()
        .find(|(k, _)| k.as_str() == Some(key))
        .map(|(_, v)| v)
}

/// `key` of `v` as a string, if present; `what` names `v` in errors.
fn meta_str(v: &rmpv::Value, key: &str, what: &str) -> Result<Option<String>> {
    match lookup(v, key) {
        None => Ok(None),
        Some(x) => x.as_str().map(|s| Some(s.to_string())).ok_or_else(|| {
            bad(format!(
                "metadata: {key} of {what} is {}, not a string",
                kind_of(x)
            ))
        }),
    }
}

/// `key` of `v` as a 32-bit unsigned integer, if present; `what` names `v` in errors.
fn meta_u32(v: &rmpv::Value, key: &str, what: &str) -> Result<Option<u32>> {
    let Some(x) = lookup(v, key) else {
        return Ok(None);
    };
    let n = x.as_u64().ok_or_else(|| {
        bad(format!(
            "metadata: {key} of {what} is {}, not a non-negative integer",
            kind_of(x)
        ))
    })?;
    u32::try_from(n).map(Some).map_err(|_| {
        bad(format!(
            "metadata: {key} of {what} is {n}, more than 32 bits"
        ))
    })
}

fn parse_msgpack(mut desc: &[u8]) -> Result<Vec<KernelMeta>> {
    let root = rmpv::decode::read_value(&mut desc)
        .map_err(|e| bad(format!("metadata note is not MessagePack: {e}")))?;
    if root.as_map().is_none() {
        return Err(bad(format!("metadata is {}, not a map", kind_of(&root))));
    }
    let kernels =
        lookup(&root, "amdhsa.kernels").ok_or_else(|| bad("metadata lacks amdhsa.kernels"))?;
    let kernels = kernels.as_array().ok_or_else(|| {
        bad(format!(
            "amdhsa.kernels is {}, not a list",
            kind_of(kernels)
        ))
    })?;
    let mut out: Vec<KernelMeta> = Vec::new();
    for (i, k) in kernels.iter().enumerate() {
        let entry = format!("kernel {i} of amdhsa.kernels");
        if k.as_map().is_none() {
            return Err(bad(format!(
                "metadata: {entry} is {}, not a map",
                kind_of(k)
            )));
        }
        let name = meta_str(k, ".name", &entry)?
            .ok_or_else(|| bad(format!("metadata: {entry} has no .name")))?;
        if out.iter().any(|m| m.name == name) {
            return Err(bad(format!("metadata lists kernel {name} twice")));
        }
        let what = format!("kernel {name}");
        let mut args = Vec::new();
        if let Some(list) = lookup(k, ".args") {
            let list = list.as_array().ok_or_else(|| {
                bad(format!(
                    "metadata: .args of {what} is {}, not a list",
                    kind_of(list)
                ))
            })?;
            for (j, a) in list.iter().enumerate() {
                let arg = format!("argument {j} of kernel {name}");
                if a.as_map().is_none() {
                    return Err(bad(format!("metadata: {arg} is {}, not a map", kind_of(a))));
                }
                let kind = meta_str(a, ".value_kind", &arg)?
                    .ok_or_else(|| bad(format!("metadata: {arg} has no .value_kind")))?;
                let kind = match kind.as_str() {
                    "global_buffer" => ArgKind::Buffer,
                    "by_value" => ArgKind::Value,
                    h if h.starts_with("hidden_") => {
                        ArgKind::Hidden(h["hidden_".len()..].to_string())
                    }
                    known if OTHER_VALUE_KINDS.contains(&known) => {
                        ArgKind::Other(known.to_string())
                    }
                    unknown => {
                        return Err(bad(format!(
                            "metadata: {arg} has .value_kind {unknown:?}, which the AMDHSA \
                             metadata does not define"
                        )))
                    }
                };
                let info = ArgInfo {
                    name: meta_str(a, ".name", &arg)?,
                    offset: meta_u32(a, ".offset", &arg)?
                        .ok_or_else(|| bad(format!("metadata: {arg} has no .offset")))?,
                    size: meta_u32(a, ".size", &arg)?
                        .ok_or_else(|| bad(format!("metadata: {arg} has no .size")))?,
                    kind,
                };
                // The runtime writes a buffer's 64-bit address there.
                if info.kind == ArgKind::Buffer && info.size != 8 {
                    return Err(bad(format!(
                        "metadata: {arg} is a global_buffer of {} bytes; pointers are 8",
                        info.size
                    )));
                }
                args.push(info);
            }
        }
        let kernarg_segment_size = meta_u32(k, ".kernarg_segment_size", &what)?;
        if let Some(size) = kernarg_segment_size {
            check_arg_layout(&name, &args, size, ".kernarg_segment_size")?;
        }
        let kernarg_segment_align = meta_u32(k, ".kernarg_segment_align", &what)?.unwrap_or(8);
        if !kernarg_segment_align.is_power_of_two() || kernarg_segment_align > MAX_KERNARG_ALIGN {
            return Err(bad(format!(
                "metadata: .kernarg_segment_align of {what} is {kernarg_segment_align}; it \
                 must be a power of two up to {MAX_KERNARG_ALIGN}"
            )));
        }
        let max_flat_workgroup_size = meta_u32(k, ".max_flat_workgroup_size", &what)?;
        if max_flat_workgroup_size == Some(0) {
            return Err(bad(format!(
                "metadata: .max_flat_workgroup_size of {what} is 0"
            )));
        }
        out.push(KernelMeta {
            symbol: meta_str(k, ".symbol", &what)?.unwrap_or_else(|| format!("{name}.kd")),
            kernarg_segment_size: kernarg_segment_size.unwrap_or(0),
            kernarg_segment_align,
            max_flat_workgroup_size,
            vgpr_count: meta_u32(k, ".vgpr_count", &what)?,
            sgpr_count: meta_u32(k, ".sgpr_count", &what)?,
            name,
            args,
        });
    }
    Ok(out)
}

/// Checks that every argument lies inside a `segment_size`-byte argument segment and that no
/// two overlap; `limit` names where the size came from.
pub fn check_arg_layout(
    kernel: &str,
    args: &[ArgInfo],
    segment_size: u32,
    limit: &str,
) -> Result<()> {
    let label = |a: &ArgInfo| match &a.name {
        Some(n) => format!("argument {n} ({})", type_of(a)),
        None => format!("an argument ({})", type_of(a)),
    };
    let mut spans: Vec<(u64, u64, &ArgInfo)> = Vec::with_capacity(args.len());
    for a in args {
        let end = a.offset as u64 + a.size as u64;
        if end > segment_size as u64 {
            return Err(bad(format!(
                "kernel {kernel}: {} at bytes {}..{end} lies beyond the {segment_size}-byte \
                 argument segment ({limit})",
                label(a),
                a.offset
            )));
        }
        if a.size > 0 {
            spans.push((a.offset as u64, end, a));
        }
    }
    spans.sort_by_key(|&(start, end, _)| (start, end));
    for pair in spans.windows(2) {
        let ((start_a, end_a, a), (start_b, end_b, b)) = (pair[0], pair[1]);
        if start_b < end_a {
            return Err(bad(format!(
                "kernel {kernel}: {} at bytes {start_a}..{end_a} overlaps {} at bytes \
                 {start_b}..{end_b}",
                label(a),
                label(b)
            )));
        }
    }
    Ok(())
}

/// What an argument holds, for messages: `buffer`, `4-byte value`, or its kind.
pub(super) fn type_of(a: &ArgInfo) -> String {
    match &a.kind {
        ArgKind::Buffer => "buffer".to_string(),
        ArgKind::Value => format!("{}-byte value", a.size),
        ArgKind::Hidden(k) => format!("hidden_{k}"),
        ArgKind::Other(k) => k.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hcq_core::Error;
    use rmpv::Value;

    fn arg(name: &str, offset: i64, size: i64, kind: &str) -> Value {
        Value::Map(vec![
            (".name".into(), name.into()),
            (".offset".into(), offset.into()),
            (".size".into(), size.into()),
            (".value_kind".into(), kind.into()),
        ])
    }

    /// Metadata of one kernel `k(int* x, int n)` with its hidden block count, 24 bytes.
    fn kernel() -> Value {
        Value::Map(vec![
            (".name".into(), "k".into()),
            (".symbol".into(), "k.kd".into()),
            (".kernarg_segment_size".into(), 24.into()),
            (".kernarg_segment_align".into(), 8.into()),
            (
                ".args".into(),
                Value::Array(vec![
                    arg("x", 0, 8, "global_buffer"),
                    arg("n", 8, 4, "by_value"),
                    arg("", 16, 4, "hidden_block_count_x"),
                ]),
            ),
        ])
    }

    fn root(kernels: Vec<Value>) -> Value {
        Value::Map(vec![("amdhsa.kernels".into(), Value::Array(kernels))])
    }

    fn encode(v: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        rmpv::encode::write_value(&mut out, v).unwrap();
        out
    }

    fn set(map: &mut Value, key: &str, value: Value) {
        let Value::Map(m) = map else {
            panic!("not a map")
        };
        m.retain(|(k, _)| k.as_str() != Some(key));
        m.push((key.into(), value));
    }

    fn remove(map: &mut Value, key: &str) {
        let Value::Map(m) = map else {
            panic!("not a map")
        };
        m.retain(|(k, _)| k.as_str() != Some(key));
    }

    /// Parses metadata of the kernel after `edit`; the error message when it fails.
    fn parse_edited(edit: impl FnOnce(&mut Value)) -> Result<Vec<KernelMeta>, String> {
        let mut k = kernel();
        edit(&mut k);
        parse_msgpack(&encode(&root(vec![k]))).map_err(|e| {
            assert!(matches!(e, Error::InvalidCodeObject(_)), "{e:?}");
            e.to_string()
        })
    }

    fn edit_arg(k: &mut Value, index: usize, key: &str, value: Value) {
        let Value::Map(m) = k else {
            panic!("not a map")
        };
        let (_, Value::Array(args)) = m
            .iter_mut()
            .find(|(k, _)| k.as_str() == Some(".args"))
            .unwrap()
        else {
            panic!("no args")
        };
        set(&mut args[index], key, value);
    }

    #[test]
    fn well_formed_metadata_parses() {
        let m = parse_edited(|_| {}).unwrap();
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].kernarg_segment_size, 24);
        assert_eq!(m[0].args[2].kind, ArgKind::Hidden("block_count_x".into()));
    }

    #[test]
    fn numbers_of_the_wrong_type_or_range_are_named() {
        let cases: [(&str, Value, &str); 8] = [
            (
                ".offset",
                "8".into(),
                r#".offset of argument 1 of kernel k is the string "8""#,
            ),
            (
                ".offset",
                (-8).into(),
                "is the integer -8, not a non-negative integer",
            ),
            (
                ".offset",
                ((1u64 << 32) + 8).into(),
                "is 4294967304, more than 32 bits",
            ),
            (".size", 2.5.into(), "the float 2.5"),
            (
                ".size",
                Value::Nil,
                ".size of argument 1 of kernel k is nil",
            ),
            (".size", u64::MAX.into(), "more than 32 bits"),
            (
                ".value_kind",
                3.into(),
                ".value_kind of argument 1 of kernel k is the integer 3",
            ),
            (
                ".name",
                Value::Boolean(true),
                ".name of argument 1 of kernel k is the boolean",
            ),
        ];
        for (key, value, needle) in cases {
            let e = parse_edited(|k| edit_arg(k, 1, key, value.clone())).unwrap_err();
            assert!(e.contains(needle), "{key} = {value}: {e}");
        }
        let e = parse_edited(|k| set(k, ".kernarg_segment_size", (-1).into())).unwrap_err();
        assert!(e.contains(".kernarg_segment_size of kernel k"), "{e}");
        // A string whose bytes are not UTF-8: encode a placeholder, then replace its bytes.
        let mut k = kernel();
        edit_arg(&mut k, 0, ".name", "\u{1}\u{2}".into());
        let mut bytes = encode(&root(vec![k]));
        let at = bytes.windows(2).position(|w| w == [1, 2]).unwrap();
        bytes[at..at + 2].copy_from_slice(&[0xff, 0xfe]);
        let e = parse_msgpack(&bytes).unwrap_err().to_string();
        assert!(e.contains("not UTF-8"), "{e}");
    }

    #[test]
    fn missing_keys_and_wrong_shapes_are_named() {
        for key in [".offset", ".size", ".value_kind"] {
            let e = parse_edited(|k| {
                let Value::Map(m) = k else { unreachable!() };
                let (_, Value::Array(args)) = m
                    .iter_mut()
                    .find(|(k, _)| k.as_str() == Some(".args"))
                    .unwrap()
                else {
                    unreachable!()
                };
                remove(&mut args[0], key);
            })
            .unwrap_err();
            assert!(
                e.contains(&format!("argument 0 of kernel k has no {key}")),
                "{e}"
            );
        }
        let e = parse_edited(|k| set(k, ".args", "x".into())).unwrap_err();
        assert!(e.contains(".args of kernel k is the string"), "{e}");
        let e = parse_edited(|k| set(k, ".args", Value::Array(vec![3.into()]))).unwrap_err();
        assert!(
            e.contains("argument 0 of kernel k is the integer 3, not a map"),
            "{e}"
        );
        let e = parse_edited(|k| remove(k, ".name")).unwrap_err();
        assert!(e.contains("kernel 0 of amdhsa.kernels has no .name"), "{e}");
        // A kernel without .args takes none.
        assert!(parse_edited(|k| remove(k, ".args")).unwrap()[0]
            .args
            .is_empty());

        for (root, needle) in [
            (Value::Array(vec![]), "metadata is a list of 0, not a map"),
            (Value::Map(vec![]), "lacks amdhsa.kernels"),
            (
                Value::Map(vec![("amdhsa.kernels".into(), 7.into())]),
                "amdhsa.kernels is the integer 7, not a list",
            ),
            (root(vec![kernel(), kernel()]), "lists kernel k twice"),
        ] {
            let e = parse_msgpack(&encode(&root)).unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        }
    }

    #[test]
    fn value_kinds_outside_the_metadata_format_are_refused() {
        let e =
            parse_edited(|k| edit_arg(k, 1, ".value_kind", "vlobal_buffer".into())).unwrap_err();
        assert!(e.contains(r#".value_kind "vlobal_buffer""#), "{e}");
        let e = parse_edited(|k| edit_arg(k, 1, ".value_kind", "".into())).unwrap_err();
        assert!(e.contains(r#".value_kind """#), "{e}");
        // Defined kinds hcq cannot pass load, and fail at launch.
        let m = parse_edited(|k| edit_arg(k, 1, ".value_kind", "image".into())).unwrap();
        assert_eq!(m[0].args[1].kind, ArgKind::Other("image".into()));
    }

    #[test]
    fn arguments_must_fit_the_segment_without_overlapping() {
        let e = parse_edited(|k| edit_arg(k, 1, ".offset", 22.into())).unwrap_err();
        assert!(
            e.contains("argument n (4-byte value) at bytes 22..26 lies beyond the 24-byte"),
            "{e}"
        );
        let e = parse_edited(|k| edit_arg(k, 1, ".offset", 4.into())).unwrap_err();
        assert!(
            e.contains("argument x (buffer) at bytes 0..8 overlaps argument n (4-byte value) at bytes 4..8"),
            "{e}"
        );
        let e = parse_edited(|k| edit_arg(k, 2, ".offset", 8.into())).unwrap_err();
        assert!(e.contains("overlaps"), "{e}");
        let e = parse_edited(|k| set(k, ".kernarg_segment_size", 12.into())).unwrap_err();
        assert!(
            e.contains("lies beyond the 12-byte argument segment"),
            "{e}"
        );
        let e = parse_edited(|k| edit_arg(k, 0, ".size", 4.into())).unwrap_err();
        assert!(e.contains("global_buffer of 4 bytes"), "{e}");
        // Offsets near 2^32 do not wrap around.
        let e = parse_edited(|k| edit_arg(k, 1, ".offset", u32::MAX.into())).unwrap_err();
        assert!(e.contains("4294967295..4294967299"), "{e}");
    }

    #[test]
    fn alignment_and_workgroup_limits_are_checked() {
        for align in [0u64, 3, 8192, 1 << 31] {
            let e = parse_edited(|k| set(k, ".kernarg_segment_align", align.into())).unwrap_err();
            assert!(e.contains("power of two up to 4096"), "{align}: {e}");
        }
        let e = parse_edited(|k| set(k, ".max_flat_workgroup_size", 0.into())).unwrap_err();
        assert!(
            e.contains(".max_flat_workgroup_size of kernel k is 0"),
            "{e}"
        );
        let m = parse_edited(|k| set(k, ".max_flat_workgroup_size", 256.into())).unwrap();
        assert_eq!(m[0].max_flat_workgroup_size, Some(256));
    }

    #[test]
    fn hostile_encodings_fail_cleanly() {
        // Nesting deeper than the decoder allows, and lengths no data backs.
        let deep = vec![0x91u8; 100_000];
        let mut long_list = vec![0x81, 0xae];
        long_list.extend(b"amdhsa.kernels");
        long_list.extend([0xdd, 0xff, 0xff, 0xff, 0xff]);
        for bytes in [
            deep,
            vec![0xdf, 0xff, 0xff, 0xff, 0xff],
            vec![0xdb, 0xff, 0xff, 0xff, 0xff],
            long_list,
            vec![],
        ] {
            let e = parse_msgpack(&bytes).unwrap_err();
            assert!(matches!(e, Error::InvalidCodeObject(_)), "{e:?}");
        }
    }
}
