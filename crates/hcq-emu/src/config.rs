//! Configuration of an emulated kernel: how many GPUs and which, how much VRAM, the step
//! budget, and which Linux release's KFD it behaves as (and the version it reports).

use crate::chip::GpuArch;

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
    /// Number of GPUs (topology nodes 1..=gpus).
    pub gpus: u32,
    /// Which GPU each is: a gfx1100, which the emulator runs, or a model it only shows
    /// ([`GpuArch`]).
    pub arch: GpuArch,
    /// Per-wave instruction budget; a wave that runs longer faults.
    pub max_steps: u64,
    /// VRAM bytes per GPU; VRAM allocations beyond it fail with `ENOMEM`. A GPU gets less
    /// when the host cannot back this much ([`crate::host_memory::vram_for`]).
    pub vram_bytes: u64,
    /// The kernel whose KFD rules apply.
    pub kernel: KfdRules,
    /// The KFD ioctl version `GET_VERSION` reports instead of the release's own
    /// ([`KfdRules::kfd_version`]), as a kernel of another version (older than any that drives
    /// a gfx1100, a vendor's, a future one) would: for testing what a program makes of it.
    /// The ioctls KFD added after that version ([`KfdVersion::has`]) are then `EINVAL`, as a
    /// kernel without them answers; nothing else changes.
    pub kfd_version: Option<KfdVersion>,
    /// Compute units of each gfx1100: 96 (Radeon RX 7900 XTX) or any multiple of 12 from 12
    /// to 96 (84: RX 7900 XT), in 6 shader engines of 2 arrays. Other models have their
    /// board's ([`GpuArch::compute_units`]).
    pub cus: u32,
    /// A board whose PCI BAR does not span all of VRAM (no Resizable BAR): KFD then refuses
    /// host-visible (`PUBLIC`) VRAM allocations with `EINVAL`.
    pub small_bar: bool,
    /// The engines report their read pointers as an offset within the ring, as a PM4 queue's
    /// `CP_HQD_PQ_RPTR` register holds it, instead of as a running count of units (what
    /// tinygrad's SDMA code expects). Which one a real GPU writes for a user queue is not
    /// documented, so drivers are tested against both.
    pub wrapped_read_pointers: bool,
    /// SDMA user queues each GPU gives out at once (at most and by default its engines ×
    /// queues: 12 on a gfx1100, 2 × 6; [`GpuArch::sdma_queues`]); fewer stand for queues
    /// other processes hold. KFD refuses one more with `ENOMEM`.
    pub sdma_queues: u32,
    /// When the shader cores compile hot blocks of a kernel to host code (`rdna3::jit`);
    /// `None`: as `rdna3::CodeCache::new` decides (`HCQ_EMU_JIT` if it names a mode, else
    /// tiered).
    pub jit: Option<rdna3::JitMode>,
}

/// A KFD ioctl interface version, `major.minor` (`HCQ_EMU_KFD_VERSION`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct KfdVersion {
    /// Changes only with an incompatible interface (every KFD so far is 1).
    pub major: u32,
    /// `KFD_IOCTL_MINOR_VERSION`: bumped as ioctls and behaviours are added.
    pub minor: u32,
}

impl KfdVersion {
    /// Parses `1.13` (`major.minor`, whole numbers).
    pub fn parse(text: &str) -> Option<KfdVersion> {
        let (major, minor) = text.trim().split_once('.')?;
        let number = |t: &str| {
            t.bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| t.parse().ok())
                .flatten()
        };
        Some(KfdVersion {
            major: number(major)?,
            minor: number(minor)?,
        })
    }

    /// Whether a KFD of this version has `ioctl`: `AVAILABLE_MEMORY` came with 1.9 and
    /// `RUNTIME_ENABLE` with 1.13 (the changelog of `kfd_ioctl.h`); every other ioctl the
    /// emulator answers is older than any version it reports.
    pub fn has(self, ioctl: hcq_amd_sys::kfd::KfdIoctl) -> bool {
        use hcq_amd_sys::kfd::KfdIoctl;
        let since = match ioctl {
            KfdIoctl::AvailableMemory => 9,
            KfdIoctl::RuntimeEnable => 13,
            _ => 0,
        };
        self.major != 1 || self.minor >= since
    }
}

impl std::fmt::Display for KfdVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// SDMA user queues of one gfx1100, shared by every process: its topology's
/// `num_sdma_engines` (2) × `num_sdma_queues_per_engine` (6).
pub const SDMA_QUEUES: u32 = 12;

impl GpuArch {
    /// SDMA user queues of one GPU of this model: its topology's `num_sdma_engines` ×
    /// `num_sdma_queues_per_engine`.
    pub fn sdma_queues(self) -> u32 {
        let chip = self.chip();
        chip.sdma_engines * chip.sdma_queues_per_engine
    }
}

/// Default compute units per GPU: a Radeon RX 7900 XTX.
pub const DEFAULT_CUS: u32 = 96;

impl Default for EmuConfig {
    fn default() -> Self {
        EmuConfig {
            gpus: DEFAULT_GPUS,
            arch: GpuArch::default(),
            max_steps: DEFAULT_MAX_STEPS,
            vram_bytes: DEFAULT_VRAM,
            kernel: KfdRules::default(),
            kfd_version: None,
            cus: DEFAULT_CUS,
            small_bar: false,
            wrapped_read_pointers: false,
            sdma_queues: SDMA_QUEUES,
            jit: None,
        }
    }
}

/// Which Linux release's KFD the emulated kernel behaves as: the ioctl version it reports and
/// how strictly `CREATE_QUEUE` checks the buffers it is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KfdRules {
    /// Linux 6.6 (KFD ioctl 1.14, as in Ubuntu 22.04's and Debian 12's kernels): the ring and
    /// the read and write pointers must be mapped to the GPU; the sizes of the EOP buffer,
    /// the control stack and the context save area are taken as given.
    Linux6_6,
    /// Linux 6.12 and later (KFD ioctl 1.16): every queue buffer must be exactly one GPU
    /// mapping of the size KFD computes from the topology (`kfd_queue_acquire_buffers`), the
    /// EOP, control-stack and context-save sizes must equal KFD's figures
    /// ([`hcq_amd_sys::queue_areas`]), and anything else is `EINVAL`.
    #[default]
    Linux6_12,
}

impl KfdRules {
    /// The value `HCQ_EMU_KERNEL` takes for these rules.
    pub fn name(self) -> &'static str {
        match self {
            KfdRules::Linux6_6 => "6.6",
            KfdRules::Linux6_12 => "6.12",
        }
    }

    /// Parses a `HCQ_EMU_KERNEL` value.
    pub fn from_name(name: &str) -> Option<KfdRules> {
        match name.trim() {
            "6.6" => Some(KfdRules::Linux6_6),
            "6.12" => Some(KfdRules::Linux6_12),
            _ => None,
        }
    }

    /// The KFD ioctl version (`major`, `minor`) `GET_VERSION` reports.
    pub fn kfd_version(self) -> (u32, u32) {
        match self {
            KfdRules::Linux6_6 => (1, 14),
            KfdRules::Linux6_12 => (1, 16),
        }
    }

    /// Whether `CREATE_QUEUE` validates queue buffers as Linux 6.12 does.
    pub fn validates_queue_buffers(self) -> bool {
        self == KfdRules::Linux6_12
    }
}

/// A variable's value, unless it is unset or blank.
fn given(value: Option<&str>) -> Option<&str> {
    value.map(str::trim).filter(|v| !v.is_empty())
}

impl EmuConfig {
    /// Reads `HCQ_EMU_GPUS`, `HCQ_EMU_MAX_STEPS`, `HCQ_EMU_VRAM`, `HCQ_EMU_KERNEL`,
    /// `HCQ_EMU_CUS`, `HCQ_EMU_ARCH`, `HCQ_EMU_KFD_VERSION`, `HCQ_EMU_SMALL_BAR`,
    /// `HCQ_EMU_WRAPPED_RPTR`, `HCQ_EMU_SDMA_QUEUES` and `HCQ_EMU_JIT`; a missing or empty
    /// variable leaves
    /// its default, a malformed one is an error naming it.
    pub fn from_env() -> Result<Self, ConfigError> {
        let var = |name: &str| std::env::var(name).ok();
        let config = Self::from_vars(
            var("HCQ_EMU_GPUS").as_deref(),
            var("HCQ_EMU_MAX_STEPS").as_deref(),
            var("HCQ_EMU_VRAM").as_deref(),
            var("HCQ_EMU_KERNEL").as_deref(),
            var("HCQ_EMU_CUS").as_deref(),
        )?;
        config
            .with_arch(var("HCQ_EMU_ARCH").as_deref())?
            .with_kfd_version(var("HCQ_EMU_KFD_VERSION").as_deref())?
            .with_small_bar(var("HCQ_EMU_SMALL_BAR").as_deref())?
            .with_wrapped_read_pointers(var("HCQ_EMU_WRAPPED_RPTR").as_deref())?
            .with_sdma_queues(var("HCQ_EMU_SDMA_QUEUES").as_deref())?
            .with_jit(var("HCQ_EMU_JIT").as_deref())
    }

    /// `self` with `HCQ_EMU_JIT`'s value ([`rdna3::JitMode::parse`]; unset: `None`).
    pub fn with_jit(self, value: Option<&str>) -> Result<Self, ConfigError> {
        let jit = match given(value) {
            None => None,
            Some(v) => Some(
                rdna3::JitMode::parse(v)
                    .ok_or_else(|| ConfigError::new("HCQ_EMU_JIT", v, JIT_ACCEPTED))?,
            ),
        };
        Ok(EmuConfig { jit, ..self })
    }

    /// `self` with `HCQ_EMU_WRAPPED_RPTR`'s value (`1`: read pointers reported as offsets
    /// within the ring, `0` or unset: as running counts).
    pub fn with_wrapped_read_pointers(self, value: Option<&str>) -> Result<Self, ConfigError> {
        let wrapped_read_pointers = match given(value) {
            None | Some("0") => false,
            Some("1") => true,
            Some(v) => {
                return Err(ConfigError::new(
                    "HCQ_EMU_WRAPPED_RPTR",
                    v,
                    WRAPPED_RPTR_ACCEPTED,
                ))
            }
        };
        Ok(EmuConfig {
            wrapped_read_pointers,
            ..self
        })
    }

    /// `self` with `HCQ_EMU_ARCH`'s value (`gfx1100`, the default, or `gfx1030`: see
    /// [`GpuArch`]). A model other than the gfx1100 has its board's compute units, so a
    /// compute-unit count other than the default is refused with it, naming `HCQ_EMU_CUS`.
    pub fn with_arch(self, value: Option<&str>) -> Result<Self, ConfigError> {
        let arch = match given(value) {
            None => GpuArch::default(),
            Some(v) => GpuArch::from_name(v)
                .ok_or_else(|| ConfigError::new("HCQ_EMU_ARCH", v, ARCH_ACCEPTED))?,
        };
        if arch != GpuArch::Gfx1100 && self.cus != DEFAULT_CUS {
            return Err(ConfigError::new(
                "HCQ_EMU_CUS",
                &self.cus.to_string(),
                CUS_OF_GFX1100_ONLY,
            ));
        }
        Ok(EmuConfig { arch, ..self })
    }

    /// `self` with `HCQ_EMU_KFD_VERSION`'s value (`major.minor`, e.g. `1.3`; unset: the
    /// release's own version, [`KfdRules::kfd_version`]).
    pub fn with_kfd_version(self, value: Option<&str>) -> Result<Self, ConfigError> {
        let kfd_version =
            match given(value) {
                None => None,
                Some(v) => Some(KfdVersion::parse(v).ok_or_else(|| {
                    ConfigError::new("HCQ_EMU_KFD_VERSION", v, KFD_VERSION_ACCEPTED)
                })?),
            };
        Ok(EmuConfig {
            kfd_version,
            ..self
        })
    }

    /// The KFD version `GET_VERSION` reports: the configured one, else the release's.
    pub fn kfd_version(&self) -> KfdVersion {
        self.kfd_version.unwrap_or_else(|| {
            let (major, minor) = self.kernel.kfd_version();
            KfdVersion { major, minor }
        })
    }

    /// `self` with `HCQ_EMU_SDMA_QUEUES`'s value (SDMA queues each GPU gives out, from 0 to
    /// all its engines' user queues, 12 on a gfx1100; unset: all of them). Apply after
    /// [`EmuConfig::with_arch`]: the model sets the bound.
    pub fn with_sdma_queues(self, value: Option<&str>) -> Result<Self, ConfigError> {
        let all = self.arch.sdma_queues();
        let sdma_queues =
            match given(value) {
                None => all,
                Some(v) => v.parse::<u32>().ok().filter(|&n| n <= all).ok_or_else(|| {
                    ConfigError::new("HCQ_EMU_SDMA_QUEUES", v, SDMA_QUEUES_ACCEPTED)
                })?,
            };
        Ok(EmuConfig {
            sdma_queues,
            ..self
        })
    }

    /// `self` with `HCQ_EMU_SMALL_BAR`'s value (`1`: a board whose BAR does not span VRAM,
    /// `0` or unset: Resizable BAR on).
    pub fn with_small_bar(self, value: Option<&str>) -> Result<Self, ConfigError> {
        let small_bar = match given(value) {
            None | Some("0") => false,
            Some("1") => true,
            Some(v) => return Err(ConfigError::new("HCQ_EMU_SMALL_BAR", v, SMALL_BAR_ACCEPTED)),
        };
        Ok(EmuConfig { small_bar, ..self })
    }

    /// Builds a configuration from the variables' values (`None` or empty: unset).
    pub fn from_vars(
        gpus: Option<&str>,
        max_steps: Option<&str>,
        vram: Option<&str>,
        kernel: Option<&str>,
        cus: Option<&str>,
    ) -> Result<Self, ConfigError> {
        let d = Self::default();
        let gpus = match given(gpus) {
            None => d.gpus,
            Some(v) => v
                .parse::<u32>()
                .ok()
                .filter(|&n| n <= MAX_GPUS)
                .ok_or_else(|| ConfigError::new("HCQ_EMU_GPUS", v, GPUS_ACCEPTED))?,
        };
        let max_steps = match given(max_steps) {
            None => d.max_steps,
            Some(v) => parse_count(v)
                .filter(|&n| n > 0)
                .ok_or_else(|| ConfigError::new("HCQ_EMU_MAX_STEPS", v, MAX_STEPS_ACCEPTED))?,
        };
        let vram_bytes = match given(vram) {
            None => d.vram_bytes,
            Some(v) => parse_size(v)
                .filter(|&n| n >= MIN_VRAM)
                .ok_or_else(|| ConfigError::new("HCQ_EMU_VRAM", v, VRAM_ACCEPTED))?,
        };
        let kernel = match given(kernel) {
            None => d.kernel,
            Some(v) => KfdRules::from_name(v)
                .ok_or_else(|| ConfigError::new("HCQ_EMU_KERNEL", v, KERNEL_ACCEPTED))?,
        };
        let cus = match given(cus) {
            None => d.cus,
            Some(v) => v
                .parse::<u32>()
                .ok()
                .filter(|n| (12..=96).contains(n) && n % 12 == 0)
                .ok_or_else(|| ConfigError::new("HCQ_EMU_CUS", v, CUS_ACCEPTED))?,
        };
        Ok(EmuConfig {
            gpus,
            arch: GpuArch::default(),
            max_steps,
            vram_bytes,
            kernel,
            kfd_version: None,
            cus,
            small_bar: false,
            wrapped_read_pointers: false,
            sdma_queues: SDMA_QUEUES,
            jit: None,
        })
    }
}

/// Smallest `HCQ_EMU_VRAM` accepted: one page.
pub const MIN_VRAM: u64 = 4096;

const KERNEL_ACCEPTED: &str = "the Linux release whose KFD rules apply: 6.12 (also later \
     releases) or 6.6";
const SDMA_QUEUES_ACCEPTED: &str =
    "SDMA queues per GPU, a whole number from 0 to its engines' user queues (12 on a gfx1100, \
     32 on a gfx1030)";
const ARCH_ACCEPTED: &str = "gfx1100 (a Radeon RX 7900, which the emulator runs) or gfx1030 (a \
     Radeon RX 6900 XT, shown but not run)";
const CUS_OF_GFX1100_ONLY: &str = "no count with HCQ_EMU_ARCH other than gfx1100: a gfx1030 \
     is a Radeon RX 6900 XT with its 80 compute units";
const KFD_VERSION_ACCEPTED: &str = "a KFD ioctl version MAJOR.MINOR, such as 1.16";
const JIT_ACCEPTED: &str = "on (compile a block once it is hot), eager (compile every block \
     the first time it runs) or off (interpret only)";
const SMALL_BAR_ACCEPTED: &str = "1 (the BAR does not span VRAM) or 0";
const WRAPPED_RPTR_ACCEPTED: &str =
    "1 (read pointers are offsets within the ring) or 0 (running counts)";
const CUS_ACCEPTED: &str =
    "compute units per GPU: a multiple of 12 from 12 to 96 (96: RX 7900 XTX, \
     84: RX 7900 XT)";
const GPUS_ACCEPTED: &str = "a whole number of GPUs from 0 to 64";
const MAX_STEPS_ACCEPTED: &str =
    "a positive whole number of instructions (digits, `_` allowed as a separator)";
const VRAM_ACCEPTED: &str = "a whole number of bytes, at least 4096, optionally with a binary \
     suffix K, M, G or T (`64M`, `16G`); fractions are not accepted: write `1536M`, not `1.5G`";

/// A configuration variable whose value is not one the emulator accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The environment variable.
    pub variable: &'static str,
    /// Its value, as given.
    pub value: String,
    /// What the variable accepts.
    pub accepted: &'static str,
}

impl ConfigError {
    fn new(variable: &'static str, value: &str, accepted: &'static str) -> Self {
        ConfigError {
            variable,
            value: value.to_string(),
            accepted,
        }
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}={:?} is not valid: expected {}",
            self.variable, self.value, self.accepted
        )
    }
}

impl std::error::Error for ConfigError {}

/// A whole number with optional `_` separators between digits (`100_000_000`).
fn parse_count(text: &str) -> Option<u64> {
    let t = text.trim();
    if t.starts_with('_') || t.ends_with('_') || !t.bytes().all(|b| b.is_ascii_digit() || b == b'_')
    {
        return None;
    }
    t.replace('_', "").parse().ok()
}

/// Parses a byte count with an optional binary suffix: `1048576`, `64M`, `64MiB`, `1G`, `2t`.
/// Fractions (`1.5G`), signs and anything else are refused: a size is a whole number.
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
    let digits = digits.trim();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
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
    fn sizes_refuse_fractions_signs_and_junk() {
        for bad in [
            "1.5G", "-1", "+4096", "1e9", "0x1000", "4 096", "G", "MiB", "12Q",
        ] {
            assert_eq!(parse_size(bad), None, "{bad}");
        }
        assert_eq!(parse_size(" 8K "), Some(8192));
        assert_eq!(parse_size("3gib"), Some(3 << 30));
    }

    #[test]
    fn counts_take_separators_between_digits_only() {
        assert_eq!(parse_count("100_000"), Some(100_000));
        assert_eq!(parse_count("7"), Some(7));
        for bad in [
            "",
            "_1",
            "1_",
            "-1",
            "+1",
            "1.0",
            "abc",
            "99999999999999999999999",
        ] {
            assert_eq!(parse_count(bad), None, "{bad}");
        }
    }

    #[test]
    fn malformed_values_are_errors_naming_the_variable() {
        let cases = [
            (Some("65"), None, None, "HCQ_EMU_GPUS"),
            (Some("lots"), None, None, "HCQ_EMU_GPUS"),
            (Some("-1"), None, None, "HCQ_EMU_GPUS"),
            (None, Some("-1"), None, "HCQ_EMU_MAX_STEPS"),
            (None, Some("0"), None, "HCQ_EMU_MAX_STEPS"),
            (None, Some("1e6"), None, "HCQ_EMU_MAX_STEPS"),
            (None, None, Some("1.5G"), "HCQ_EMU_VRAM"),
            (None, None, Some("big"), "HCQ_EMU_VRAM"),
            (None, None, Some("4095"), "HCQ_EMU_VRAM"),
            (None, None, Some("99999999999T"), "HCQ_EMU_VRAM"),
        ];
        for (gpus, steps, vram, variable) in cases {
            let e = EmuConfig::from_vars(gpus, steps, vram, None, None).unwrap_err();
            assert_eq!(e.variable, variable);
            let value = gpus.or(steps).or(vram).unwrap();
            assert_eq!(e.value, value);
            let text = e.to_string();
            assert!(text.contains(variable) && text.contains(value), "{text}");
            assert!(text.contains("expected"), "{text}");
        }
        for bad in ["6.1", "6", "linux-6.12", "latest"] {
            let e = EmuConfig::from_vars(None, None, None, Some(bad), None).unwrap_err();
            assert_eq!((e.variable, e.value.as_str()), ("HCQ_EMU_KERNEL", bad));
            assert!(e.to_string().contains("6.12"), "{e}");
        }
    }

    #[test]
    fn empty_values_mean_unset_and_good_values_are_taken() {
        let c = EmuConfig::from_vars(Some(""), Some("  "), Some(""), Some(" "), Some("")).unwrap();
        assert_eq!(c, EmuConfig::default());
        assert_eq!(c.kernel, KfdRules::Linux6_12);
        let c = EmuConfig::from_vars(
            Some("0"),
            Some("1_000"),
            Some("64M"),
            Some("6.6"),
            Some("84"),
        )
        .unwrap();
        assert_eq!(
            c,
            EmuConfig {
                gpus: 0,
                arch: GpuArch::Gfx1100,
                max_steps: 1000,
                vram_bytes: 64 << 20,
                kernel: KfdRules::Linux6_6,
                kfd_version: None,
                cus: 84,
                small_bar: false,
                wrapped_read_pointers: false,
                sdma_queues: SDMA_QUEUES,
                jit: None,
            }
        );
        let d = EmuConfig::default();
        assert_eq!(d.with_jit(None).unwrap().jit, None);
        assert_eq!(
            d.with_jit(Some("off")).unwrap().jit,
            Some(rdna3::JitMode::Off)
        );
        let eager = d.with_jit(Some(" eager ")).unwrap().jit;
        assert_eq!(eager, Some(rdna3::JitMode::Eager));
        let e = d.with_jit(Some("fast")).unwrap_err();
        assert_eq!(e.variable, "HCQ_EMU_JIT");
        assert_eq!(d.with_sdma_queues(Some(" 0 ")).unwrap().sdma_queues, 0);
        assert_eq!(d.with_sdma_queues(Some("12")).unwrap().sdma_queues, 12);
        assert_eq!(d.with_sdma_queues(None).unwrap().sdma_queues, 12);
        for bad in ["13", "-1", "some"] {
            let e = d.with_sdma_queues(Some(bad)).unwrap_err();
            assert_eq!((e.variable, e.value.as_str()), ("HCQ_EMU_SDMA_QUEUES", bad));
        }
        assert!(d.with_small_bar(Some("1")).unwrap().small_bar);
        assert!(!d.with_small_bar(Some(" ")).unwrap().small_bar);
        let e = d.with_small_bar(Some("yes")).unwrap_err();
        assert_eq!(e.variable, "HCQ_EMU_SMALL_BAR");
        assert!(
            d.with_wrapped_read_pointers(Some("1"))
                .unwrap()
                .wrapped_read_pointers
        );
        assert!(
            !d.with_wrapped_read_pointers(None)
                .unwrap()
                .wrapped_read_pointers
        );
        let e = d.with_wrapped_read_pointers(Some("2")).unwrap_err();
        assert_eq!(e.variable, "HCQ_EMU_WRAPPED_RPTR");
        for bad in ["0", "100", "90", "many"] {
            let e = EmuConfig::from_vars(None, None, None, None, Some(bad)).unwrap_err();
            assert_eq!(e.variable, "HCQ_EMU_CUS");
        }
        let c = EmuConfig::from_vars(Some("64"), None, Some("4096"), Some("6.12"), None).unwrap();
        assert_eq!((c.gpus, c.vram_bytes), (64, 4096));
        assert_eq!(c.kernel.kfd_version(), (1, 16));
    }

    #[test]
    fn the_gpu_model_and_the_kfd_version_are_taken_and_checked() {
        let d = EmuConfig::default();
        assert_eq!(d.with_arch(None).unwrap().arch, GpuArch::Gfx1100);
        assert_eq!(d.with_arch(Some(" ")).unwrap().arch, GpuArch::Gfx1100);
        let navi21 = d.with_arch(Some("gfx1030")).unwrap();
        assert_eq!(navi21.arch, GpuArch::Gfx1030);
        // Its four SDMA 5.2 engines' user queues bound the count, and are the default.
        assert_eq!(navi21.with_sdma_queues(None).unwrap().sdma_queues, 32);
        assert_eq!(navi21.with_sdma_queues(Some("32")).unwrap().sdma_queues, 32);
        assert!(d.with_sdma_queues(Some("32")).is_err());
        for bad in ["gfx90a", "gfx11", "GFX1030", "rdna2"] {
            let e = d.with_arch(Some(bad)).unwrap_err();
            assert_eq!((e.variable, e.value.as_str()), ("HCQ_EMU_ARCH", bad));
            assert!(e.to_string().contains("gfx1030"), "{e}");
        }
        // A compute-unit count is a gfx1100's: with another model it is an error naming it.
        let e = EmuConfig::from_vars(None, None, None, None, Some("84"))
            .unwrap()
            .with_arch(Some("gfx1030"))
            .unwrap_err();
        assert_eq!((e.variable, e.value.as_str()), ("HCQ_EMU_CUS", "84"));

        assert_eq!(
            d.kfd_version(),
            KfdVersion {
                major: 1,
                minor: 16
            }
        );
        let old = d.with_kfd_version(Some(" 1.3 ")).unwrap();
        assert_eq!(old.kfd_version(), KfdVersion { major: 1, minor: 3 });
        assert_eq!(old.kfd_version().to_string(), "1.3");
        assert_eq!(d.with_kfd_version(Some("")).unwrap().kfd_version, None);
        for bad in ["1", "1.", ".3", "1.3.0", "1.-3", "v1.3", "1.x", "+1.3"] {
            let e = d.with_kfd_version(Some(bad)).unwrap_err();
            assert_eq!((e.variable, e.value.as_str()), ("HCQ_EMU_KFD_VERSION", bad));
        }
    }

    #[test]
    fn an_older_kfd_lacks_the_ioctls_added_after_it() {
        use hcq_amd_sys::kfd::KfdIoctl;
        let v = |major, minor| KfdVersion { major, minor };
        // kfd_ioctl.h: 1.9 added AVAILABLE_MEMORY, 1.13 the debugger API's RUNTIME_ENABLE.
        assert!(!v(1, 8).has(KfdIoctl::AvailableMemory));
        assert!(v(1, 9).has(KfdIoctl::AvailableMemory));
        assert!(!v(1, 12).has(KfdIoctl::RuntimeEnable));
        assert!(v(1, 13).has(KfdIoctl::RuntimeEnable));
        for k in KfdIoctl::ALL {
            assert!(v(1, 16).has(k), "{k:?}");
            if !matches!(k, KfdIoctl::AvailableMemory | KfdIoctl::RuntimeEnable) {
                assert!(v(1, 1).has(k), "{k:?}");
            }
        }
    }
}
