//! Kernel arguments: the caller's arguments checked against the kernel's and written into its
//! argument segment, explicit and hidden, in the layout the metadata (or, without one, natural
//! alignment) gives.

use super::metadata::{type_of, ArgInfo, ArgKind};
use super::AmdProgram;
use hcq_core::{Arg, Error, Result};

impl AmdProgram {
    /// Writes `bytes` into the kernel's `hidden_dynamic_lds_size` argument in `segment`, when
    /// it has one (code object v5 kernels read their dynamic LDS size there).
    pub fn write_dynamic_lds_size(&self, bytes: u32, segment: &mut [u8]) {
        let slot = self
            .args
            .iter()
            .find(|a| matches!(&a.kind, ArgKind::Hidden(k) if k == "dynamic_lds_size"));
        if let Some(a) = slot {
            let at = a.offset as usize;
            let len = (a.size as usize).min(4);
            if let Some(dst) = segment.get_mut(at..at + len) {
                dst.copy_from_slice(&bytes.to_le_bytes()[..len]);
            }
        }
    }

    /// Checks the caller's arguments against the kernel's and writes the argument segment
    /// (explicit and hidden) into `out`, which is `kernarg_size` bytes.
    pub fn write_kernargs<B>(
        &self,
        args: &[Arg<B>],
        address_of: impl Fn(&B) -> Result<u64>,
        global: [u32; 3],
        local: [u32; 3],
        out: &mut [u8],
    ) -> Result<()> {
        let threads: u64 = local.iter().map(|&x| x as u64).product();
        if let Some(max) = self.max_workgroup_size {
            if threads > max as u64 {
                return Err(Error::InvalidArgument(format!(
                    "kernel {} was compiled for workgroups of at most {max} work-items \
                     (.max_flat_workgroup_size), launched with {threads} ({local:?})",
                    self.name
                )));
            }
        }
        let segment = out.len();
        let name = &self.name;
        // Load checks the metadata's layout against the segment; this keeps any write that
        // would still fall outside from happening.
        let mut put = |offset: u32, bytes: &[u8]| -> Result<()> {
            let at = offset as usize;
            out.get_mut(at..at + bytes.len())
                .ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "kernel {name}: {} bytes at offset {at} do not fit its {segment}-byte \
                         argument segment",
                        bytes.len()
                    ))
                })?
                .copy_from_slice(bytes);
            Ok(())
        };
        if self.args.is_empty() {
            // No metadata: pack pointers and values in order with natural alignment and check the
            // total against the descriptor.
            let mut offsets = Vec::with_capacity(args.len());
            let mut off = 0u64;
            for a in args {
                let size = a.size() as u64;
                let align = size.clamp(1, 8).next_power_of_two();
                off = off.next_multiple_of(align);
                offsets.push(off as u32);
                off += size;
            }
            if off != self.descriptor.kernarg_size as u64 {
                return Err(Error::InvalidArgument(format!(
                    "kernel {} takes {} bytes of arguments, the {} given take {off}",
                    self.name,
                    self.descriptor.kernarg_size,
                    args.len()
                )));
            }
            for (a, off) in args.iter().zip(offsets) {
                match a {
                    Arg::Buffer(b) => put(off, &address_of(b)?.to_le_bytes())?,
                    s => put(off, &s.scalar_bytes().unwrap_or_default())?,
                }
            }
            return Ok(());
        }
        let explicit: Vec<&ArgInfo> = self.args.iter().filter(|a| a.is_explicit()).collect();
        if explicit.len() != args.len() {
            return Err(Error::InvalidArgument(format!(
                "kernel {} takes {} arguments ({}), got {}",
                self.name,
                explicit.len(),
                explicit
                    .iter()
                    .map(|a| describe(a))
                    .collect::<Vec<_>>()
                    .join(", "),
                args.len()
            )));
        }
        for (i, (info, a)) in explicit.iter().zip(args).enumerate() {
            let label = || match &info.name {
                Some(n) => format!("argument {i} ({n}) of kernel {}", self.name),
                None => format!("argument {i} of kernel {}", self.name),
            };
            match (&info.kind, a) {
                (ArgKind::Buffer, Arg::Buffer(b)) => {
                    put(info.offset, &address_of(b)?.to_le_bytes())?
                }
                (ArgKind::Buffer, other) => {
                    return Err(Error::InvalidArgument(format!(
                        "{} is a buffer, got {}",
                        label(),
                        other.type_name()
                    )))
                }
                (ArgKind::Value, Arg::Buffer(_)) => {
                    return Err(Error::InvalidArgument(format!(
                        "{} is a {}-byte value, got a buffer",
                        label(),
                        info.size
                    )))
                }
                (ArgKind::Value, s) => {
                    if s.size() as u32 != info.size {
                        return Err(Error::InvalidArgument(format!(
                            "{} is {} bytes, got a {}-byte {}",
                            label(),
                            info.size,
                            s.size(),
                            s.type_name()
                        )));
                    }
                    put(info.offset, &s.scalar_bytes().unwrap_or_default())?;
                }
                (ArgKind::Other(kind), _) | (ArgKind::Hidden(kind), _) => {
                    return Err(Error::Unsupported(format!(
                        "{} has kind {kind}, which hcq cannot pass",
                        label()
                    )))
                }
            }
        }
        let dims_used = if global[2] > 1 || local[2] > 1 {
            3u16
        } else if global[1] > 1 || local[1] > 1 {
            2
        } else {
            1
        };
        for info in self.args.iter() {
            let ArgKind::Hidden(kind) = &info.kind else {
                continue;
            };
            let value: u64 = match kind.as_str() {
                "block_count_x" => global[0] as u64,
                "block_count_y" => global[1] as u64,
                "block_count_z" => global[2] as u64,
                "group_size_x" => local[0] as u64,
                "group_size_y" => local[1] as u64,
                "group_size_z" => local[2] as u64,
                "grid_dims" => dims_used as u64,
                // Grids are whole workgroups, so no partial workgroup remains; there are no
                // global offsets; and the buffers and pointers hcq does not provide (printf,
                // hostcall, heap, queue) are null, which newer kinds also get.
                _ => 0,
            };
            let bytes = value.to_le_bytes();
            put(info.offset, &bytes[..(info.size as usize).min(8)])?;
        }
        Ok(())
    }
}

fn describe(a: &ArgInfo) -> String {
    let ty = type_of(a);
    match &a.name {
        Some(n) => format!("{n}: {ty}"),
        None => ty,
    }
}
