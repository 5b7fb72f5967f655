//! HIP source to an AMD code object with a stock clang (no ROCm), through the compile cache.

use hcq_core::{CompileCache, CompileKey, Error, Result};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The clang this runtime uses: `HCQ_CLANG`, else `clang-19`, else `clang`.
pub fn clang_path() -> PathBuf {
    if let Some(p) = std::env::var_os("HCQ_CLANG") {
        return PathBuf::from(p);
    }
    for c in ["clang-19", "clang"] {
        if Command::new(c)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
        {
            return PathBuf::from(c);
        }
    }
    PathBuf::from("clang-19")
}

/// Compiles HIP device code for one AMD target.
#[derive(Debug)]
pub struct HipCompiler {
    pub arch: String,
    /// Found at the first compile: opening a device must not start a process.
    clang: OnceLock<PathBuf>,
    identity: OnceLock<std::result::Result<String, String>>,
    cache: CompileCache,
}

/// Flags every compile uses; part of the cache key.
pub fn base_flags(arch: &str) -> Vec<String> {
    [
        "-x",
        "hip",
        "--cuda-device-only",
        "--no-gpu-bundle-output",
        "-nogpulib",
        "-nogpuinc",
        "-O3",
        "-fno-exceptions",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([format!("--offload-arch={arch}")])
    .collect()
}

impl HipCompiler {
    fn clang(&self) -> &PathBuf {
        self.clang.get_or_init(clang_path)
    }

    pub fn new(arch: &str, cache: CompileCache) -> Self {
        HipCompiler {
            arch: arch.to_string(),
            clang: OnceLock::new(),
            identity: OnceLock::new(),
            cache,
        }
    }

    /// The compiler's `--version` text, which keys the cache.
    pub fn identity(&self) -> Result<String> {
        self.identity
            .get_or_init(|| {
                let out = Command::new(self.clang())
                    .arg("--version")
                    .output()
                    .map_err(|e| {
                        format!(
                            "cannot run {}: {e} (install clang-19 and lld-19, or set HCQ_CLANG)",
                            self.clang().display()
                        )
                    })?;
                if !out.status.success() {
                    return Err(format!("{} --version failed", self.clang().display()));
                }
                Ok(String::from_utf8_lossy(&out.stdout).into_owned())
            })
            .clone()
            .map_err(|message| Error::Compile {
                message,
                log: String::new(),
            })
    }

    /// Compiles `source` (or returns the cached object).
    pub fn compile(&self, source: &str) -> Result<Vec<u8>> {
        let identity = self.identity()?;
        let flags = base_flags(&self.arch);
        let key = CompileKey {
            source,
            arch: &self.arch,
            compiler: &identity,
            flags: &flags,
        };
        self.cache
            .get_or_compile(&key, || self.compile_uncached(source, &flags))
    }

    fn compile_uncached(&self, source: &str, flags: &[String]) -> Result<Vec<u8>> {
        let dir = std::env::temp_dir().join(format!(
            "hcq-compile-{}-{:x}",
            std::process::id(),
            rand_suffix()
        ));
        std::fs::create_dir_all(&dir).map_err(|source| Error::Io {
            what: format!("creating {}", dir.display()),
            source,
        })?;
        let out_path = dir.join("kernel.hsaco");
        let result = (|| {
            let mut child = Command::new(self.clang())
                .args(flags)
                .arg("-o")
                .arg(&out_path)
                .arg("-")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| Error::Compile {
                    message: format!("cannot run {}: {e}", self.clang().display()),
                    log: String::new(),
                })?;
            if let Some(mut stdin) = child.stdin.take() {
                let _ = stdin.write_all(source.as_bytes());
            }
            let out = child.wait_with_output().map_err(|source| Error::Io {
                what: "waiting for clang".into(),
                source,
            })?;
            let log = String::from_utf8_lossy(&out.stderr).into_owned();
            if !out.status.success() {
                return Err(Error::Compile {
                    message: format!("clang failed for {}", self.arch),
                    log,
                });
            }
            std::fs::read(&out_path).map_err(|source| Error::Io {
                what: format!("reading {}", out_path.display()),
                source,
            })
        })();
        let _ = std::fs::remove_dir_all(&dir);
        result
    }
}

fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0),
    );
    h.finish()
}
