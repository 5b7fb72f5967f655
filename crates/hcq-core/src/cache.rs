//! On-disk cache of compiled code objects, keyed by everything that determines the output.

use crate::{Error, Result};
use sha2::{Digest, Sha256};
use std::fs;
use std::path::{Path, PathBuf};

/// What a compiled artifact depends on.
#[derive(Debug, Clone)]
pub struct CompileKey<'a> {
    pub source: &'a str,
    /// Target, e.g. `gfx1100`.
    pub arch: &'a str,
    /// The compiler's own identification (its `--version` output).
    pub compiler: &'a str,
    pub flags: &'a [String],
}

impl CompileKey<'_> {
    /// Hex SHA-256 over all parts, each length-prefixed so that no two keys collide by
    /// concatenation.
    pub fn digest(&self) -> String {
        let mut h = Sha256::new();
        let mut part = |s: &[u8]| {
            h.update((s.len() as u64).to_le_bytes());
            h.update(s);
        };
        part(b"hcq-compile-v1");
        part(self.source.as_bytes());
        part(self.arch.as_bytes());
        part(self.compiler.as_bytes());
        for f in self.flags {
            part(f.as_bytes());
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// A directory of compiled artifacts. Writes are atomic (temp file + rename), so concurrent
/// processes never read a partial entry.
#[derive(Debug, Clone)]
pub struct CompileCache {
    dir: Option<PathBuf>,
}

impl CompileCache {
    /// The cache at `HCQ_CACHE_DIR`, else `$XDG_CACHE_HOME/hcq`, else `~/.cache/hcq`;
    /// `HCQ_CACHE_DIR=off` (or no home) disables caching.
    pub fn from_env() -> Self {
        let dir = match std::env::var_os("HCQ_CACHE_DIR") {
            Some(d) if d == "off" => None,
            Some(d) => Some(PathBuf::from(d)),
            None => std::env::var_os("XDG_CACHE_HOME")
                .map(|x| PathBuf::from(x).join("hcq"))
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/hcq"))),
        };
        CompileCache { dir }
    }

    pub fn at(dir: impl Into<PathBuf>) -> Self {
        CompileCache {
            dir: Some(dir.into()),
        }
    }

    pub fn disabled() -> Self {
        CompileCache { dir: None }
    }

    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    fn path(&self, key: &CompileKey<'_>) -> Option<PathBuf> {
        self.dir
            .as_ref()
            .map(|d| d.join(format!("{}.bin", key.digest())))
    }

    /// The cached artifact, if present.
    pub fn get(&self, key: &CompileKey<'_>) -> Option<Vec<u8>> {
        fs::read(self.path(key)?).ok()
    }

    /// Stores an artifact. A cache that cannot be written is not an error for the caller's
    /// compile, so failures are returned for callers who care and otherwise ignorable.
    pub fn put(&self, key: &CompileKey<'_>, bytes: &[u8]) -> Result<()> {
        let Some(path) = self.path(key) else {
            return Ok(());
        };
        let io = |what: &str, e| Error::Io {
            what: format!("{what} {}", path.display()),
            source: e,
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        fs::create_dir_all(dir).map_err(|e| io("creating cache dir for", e))?;
        let tmp = dir.join(format!(".{}.{}.tmp", key.digest(), std::process::id()));
        fs::write(&tmp, bytes).map_err(|e| io("writing", e))?;
        fs::rename(&tmp, &path).map_err(|e| io("renaming into", e))
    }

    /// Returns the cached artifact or computes, stores and returns it.
    pub fn get_or_compile(
        &self,
        key: &CompileKey<'_>,
        compile: impl FnOnce() -> Result<Vec<u8>>,
    ) -> Result<Vec<u8>> {
        if let Some(hit) = self.get(key) {
            return Ok(hit);
        }
        let out = compile()?;
        let _ = self.put(key, &out);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key<'a>(src: &'a str, arch: &'a str, flags: &'a [String]) -> CompileKey<'a> {
        CompileKey {
            source: src,
            arch,
            compiler: "clang 19",
            flags,
        }
    }

    #[test]
    fn every_part_of_the_key_changes_the_digest() {
        let f0: Vec<String> = vec![];
        let f1 = vec!["-O3".to_string()];
        let base = key("a", "gfx1100", &f0).digest();
        assert_ne!(base, key("b", "gfx1100", &f0).digest());
        assert_ne!(base, key("a", "gfx1101", &f0).digest());
        assert_ne!(base, key("a", "gfx1100", &f1).digest());
        let other_compiler = CompileKey {
            compiler: "clang 20",
            ..key("a", "gfx1100", &f0)
        };
        assert_ne!(base, other_compiler.digest());
        // Concatenation does not collide.
        assert_ne!(key("ab", "c", &f0).digest(), key("a", "bc", &f0).digest());
    }

    #[test]
    fn compiles_once_then_hits() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CompileCache::at(dir.path());
        let flags: Vec<String> = vec![];
        let k = key("kernel", "gfx1100", &flags);
        let mut calls = 0;
        let a = cache.get_or_compile(&k, || {
            calls += 1;
            Ok(vec![1, 2, 3])
        });
        assert_eq!(a.unwrap(), vec![1, 2, 3]);
        let b = cache
            .get_or_compile(&k, || panic!("must hit the cache"))
            .unwrap();
        assert_eq!(b, vec![1, 2, 3]);
        assert_eq!(calls, 1);
    }

    #[test]
    fn a_failed_compile_is_not_cached() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CompileCache::at(dir.path());
        let flags: Vec<String> = vec![];
        let k = key("bad", "gfx1100", &flags);
        let e = cache.get_or_compile(&k, || {
            Err(Error::Compile {
                message: "x".into(),
                log: String::new(),
            })
        });
        assert!(e.is_err());
        assert!(cache.get(&k).is_none());
    }
}
