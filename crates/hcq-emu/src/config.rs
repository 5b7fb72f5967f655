//! Configuration of an emulated kernel: how many GPUs, how much VRAM, the step budget.

/// Default number of emulated GPUs.
pub const DEFAULT_GPUS: u32 = 1;
/// Largest number of emulated GPUs accepted.
pub const MAX_GPUS: u32 = 64;
/// Default per-wave instruction budget of a dispatch.
pub const DEFAULT_MAX_STEPS: u64 = 100_000_000;
/// Default VRAM per GPU: 16 GiB (reserved lazily, so this costs nothing until used).
pub const DEFAULT_VRAM: u64 = 16 << 30;

/// What [`crate::EmuKernel::new`] builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmuConfig {
    /// Number of gfx1100 GPUs (topology nodes 1..=gpus).
    pub gpus: u32,
    /// Per-wave instruction budget; a wave that runs longer faults.
    pub max_steps: u64,
    /// VRAM bytes per GPU; VRAM allocations beyond it fail with `ENOMEM`.
    pub vram_bytes: u64,
}

impl Default for EmuConfig {
    fn default() -> Self {
        EmuConfig {
            gpus: DEFAULT_GPUS,
            max_steps: DEFAULT_MAX_STEPS,
            vram_bytes: DEFAULT_VRAM,
        }
    }
}

impl EmuConfig {
    /// Reads `HCQ_EMU_GPUS`, `HCQ_EMU_MAX_STEPS` and `HCQ_EMU_VRAM`; a missing or malformed
    /// variable leaves its default.
    pub fn from_env() -> Self {
        let var = |name: &str| std::env::var(name).ok();
        Self::from_vars(
            var("HCQ_EMU_GPUS").as_deref(),
            var("HCQ_EMU_MAX_STEPS").as_deref(),
            var("HCQ_EMU_VRAM").as_deref(),
        )
    }

    /// Builds a configuration from the variables' values (`None`: unset).
    pub fn from_vars(gpus: Option<&str>, max_steps: Option<&str>, vram: Option<&str>) -> Self {
        let d = Self::default();
        EmuConfig {
            gpus: gpus
                .and_then(|s| s.trim().parse::<u32>().ok())
                .filter(|&n| n <= MAX_GPUS)
                .unwrap_or(d.gpus),
            max_steps: max_steps
                .and_then(|s| s.trim().replace('_', "").parse::<u64>().ok())
                .filter(|&n| n > 0)
                .unwrap_or(d.max_steps),
            vram_bytes: vram
                .and_then(parse_size)
                .filter(|&n| n >= 4096)
                .unwrap_or(d.vram_bytes),
        }
    }
}

/// Parses a byte count with an optional binary suffix: `1048576`, `64M`, `64MiB`, `1G`, `2t`.
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let t = t.strip_suffix(['B', 'b']).unwrap_or(t);
    let t = t.strip_suffix(['i', 'I']).unwrap_or(t);
    let (digits, shift) = match t.chars().last()? {
        'k' | 'K' => (&t[..t.len() - 1], 10),
        'm' | 'M' => (&t[..t.len() - 1], 20),
        'g' | 'G' => (&t[..t.len() - 1], 30),
        't' | 'T' => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    let n: u64 = digits.trim().parse().ok()?;
    n.checked_mul(1u64 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_suffixes() {
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("64M"), Some(64 << 20));
        assert_eq!(parse_size("64MiB"), Some(64 << 20));
        assert_eq!(parse_size("1G"), Some(1 << 30));
        assert_eq!(parse_size("2k"), Some(2048));
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_size("99999999999T"), None);
    }

    #[test]
    fn bad_values_fall_back_to_defaults() {
        let c = EmuConfig::from_vars(Some("lots"), Some("-3"), Some("big"));
        assert_eq!(c, EmuConfig::default());
        let c = EmuConfig::from_vars(Some("2"), Some("1000"), Some("64M"));
        assert_eq!(
            c,
            EmuConfig {
                gpus: 2,
                max_steps: 1000,
                vram_bytes: 64 << 20
            }
        );
    }
}
