//! On-disk cache of compiled code objects, keyed by everything that determines the output.
//!
//! An entry holds the object and the list of files the compile read (its `#include`s, as the
//! compiler reported them) with a SHA-256 of each. A lookup re-hashes those files: an entry
//! whose files changed, went missing or cannot be read is a miss, so a changed header can never
//! give back an object built from its old text. Every entry carries a header (magic, format
//! version, payload length, payload checksum); an entry that fails any check is deleted (or, if
//! it cannot be, ignored) and rebuilt, never returned.

use crate::{Error, Result};
use sha2::{Digest, Sha256};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

/// First bytes of every entry.
const ENTRY_MAGIC: &[u8; 8] = b"HCQCACHE";
/// Bumped whenever the entry layout changes; entries of any other version are rebuilt.
pub const ENTRY_FORMAT_VERSION: u32 = 2;
/// Magic, version, payload length, payload SHA-256.
const HEADER_BYTES: usize = 8 + 4 + 8 + 32;
/// No compiled object comes near this; a larger file is not one of our entries.
const MAX_ENTRY_BYTES: u64 = 1 << 30;
/// Files modified this close to (or after) the start of a compile are not trusted to be what
/// the compiler read: they may have changed while it ran, and file systems stamp times
/// coarsely (FAT by 2 s, others by a clock tick). Such a compile is used but not stored.
pub const FRESH_FILE_WINDOW: Duration = Duration::from_secs(2);

type FileHash = [u8; 32];

fn sha256(bytes: &[u8]) -> FileHash {
    Sha256::digest(bytes).into()
}

/// What a compiled artifact depends on, besides the files the compile reads (which its entry
/// lists).
#[derive(Debug, Clone)]
pub struct CompileKey<'a> {
    /// The source text (a file's content when compiling a file).
    pub source: &'a str,
    /// Target, e.g. `gfx1100`.
    pub arch: &'a str,
    /// The compiler's own identification (its `--version` output).
    pub compiler: &'a str,
    /// Every argument given to the compiler, in order (include directories, defines,
    /// optimization level, the bundled headers' digest).
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

/// A compiled object and the files its compile read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompileOutput {
    /// The code object (an ELF for AMD, a metallib for Metal).
    pub object: Vec<u8>,
    /// Every file the compile read (headers, and the source file when it was compiled from a
    /// file), as the compiler named it: absolute, or relative to the directory the compile ran
    /// in.
    pub inputs: Vec<PathBuf>,
}

/// A decoded entry: the files the compile read, each with the SHA-256 of its content then,
/// and the object.
#[derive(Debug, PartialEq, Eq)]
struct Entry {
    inputs: Vec<(String, FileHash)>,
    object: Vec<u8>,
}

fn encode_entry(entry: &Entry) -> Vec<u8> {
    let mut payload = Vec::with_capacity(entry.object.len() + 64 * entry.inputs.len() + 4);
    payload.extend_from_slice(&(entry.inputs.len() as u32).to_le_bytes());
    for (path, hash) in &entry.inputs {
        payload.extend_from_slice(&(path.len() as u32).to_le_bytes());
        payload.extend_from_slice(path.as_bytes());
        payload.extend_from_slice(hash);
    }
    payload.extend_from_slice(&entry.object);
    let mut out = Vec::with_capacity(HEADER_BYTES + payload.len());
    out.extend_from_slice(ENTRY_MAGIC);
    out.extend_from_slice(&ENTRY_FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&sha256(&payload));
    out.extend_from_slice(&payload);
    out
}

/// Reads fixed-size fields off the front of a byte slice.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn take(&mut self, n: usize) -> std::result::Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err(format!(
                "truncated: {n} bytes wanted, {} left",
                self.0.len()
            ));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u32(&mut self) -> std::result::Result<u32, String> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self) -> std::result::Result<u64, String> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
}

/// Checks every part of an entry; the error says what is wrong.
fn decode_entry(bytes: &[u8]) -> std::result::Result<Entry, String> {
    let mut f = Fields(bytes);
    if f.take(ENTRY_MAGIC.len()).ok() != Some(&ENTRY_MAGIC[..]) {
        return Err("not an hcq cache entry (no magic)".into());
    }
    let version = f.u32()?;
    if version != ENTRY_FORMAT_VERSION {
        return Err(format!(
            "entry format {version}, this hcq reads {ENTRY_FORMAT_VERSION}"
        ));
    }
    let payload_len = f.u64()?;
    let checksum = f.take(32)?;
    let payload = f.0;
    if payload.len() as u64 != payload_len {
        return Err(format!(
            "payload is {} bytes, the header says {payload_len}",
            payload.len()
        ));
    }
    if sha256(payload) != checksum {
        return Err("payload checksum mismatch".into());
    }
    let mut p = Fields(payload);
    let count = p.u32()?;
    let mut inputs = Vec::new();
    for _ in 0..count {
        let len = p.u32()? as usize;
        let path = std::str::from_utf8(p.take(len)?)
            .map_err(|_| "an input path is not UTF-8".to_string())?;
        let hash: FileHash = p.take(32)?.try_into().expect("32 bytes");
        inputs.push((path.to_string(), hash));
    }
    Ok(Entry {
        inputs,
        object: p.0.to_vec(),
    })
}

fn resolve(base_dir: &Path, input: &Path) -> PathBuf {
    if input.is_absolute() {
        input.to_path_buf()
    } else {
        base_dir.join(input)
    }
}

/// The content of an input, if it is a regular file: reading a FIFO or a device named by an
/// `#include` could block or never end.
fn read_input(path: &Path) -> Option<Vec<u8>> {
    if !fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return None;
    }
    fs::read(path).ok()
}

/// Whether every input still has the content it had when the entry was stored.
fn inputs_unchanged(entry: &Entry, base_dir: &Path) -> bool {
    entry.inputs.iter().all(|(path, hash)| {
        read_input(&resolve(base_dir, Path::new(path))).is_some_and(|bytes| sha256(&bytes) == *hash)
    })
}

/// Hashes the inputs of a compile that started at `started`; `None` when one cannot be read
/// or may have changed while the compiler ran.
fn hash_inputs(
    inputs: &[PathBuf],
    base_dir: &Path,
    started: SystemTime,
) -> Option<Vec<(String, FileHash)>> {
    let trusted_before = started.checked_sub(FRESH_FILE_WINDOW)?;
    let mut hashed: Vec<(String, FileHash)> = Vec::with_capacity(inputs.len());
    for input in inputs {
        let name = input.to_str()?;
        if hashed.iter().any(|(seen, _)| seen == name) {
            continue;
        }
        let path = resolve(base_dir, input);
        let bytes = read_input(&path)?;
        // Read first, then stat: a change during or after the read shows as a fresh time.
        let modified = fs::metadata(&path).and_then(|m| m.modified()).ok()?;
        if modified >= trusted_before {
            return None;
        }
        hashed.push((name.to_string(), sha256(&bytes)));
    }
    Some(hashed)
}

/// Distinguishes the temporary files of concurrent stores within one process.
static STORE_SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// A directory of compiled artifacts. Writes are atomic (temp file + rename), so concurrent
/// processes never read a partial entry; entries are verified when read.
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

    /// A cache in `dir`, created on first store.
    pub fn at(dir: impl Into<PathBuf>) -> Self {
        CompileCache {
            dir: Some(dir.into()),
        }
    }

    /// No cache: every compile runs, nothing is stored (`HCQ_CACHE_DIR=off`).
    pub fn disabled() -> Self {
        CompileCache { dir: None }
    }

    /// The cache's directory; `None` when the cache is disabled.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The file that holds (or would hold) the entry for `key`.
    pub fn entry_path(&self, key: &CompileKey<'_>) -> Option<PathBuf> {
        self.dir
            .as_ref()
            .map(|d| d.join(format!("{}.bin", key.digest())))
    }

    /// The cached object, if its entry is sound and every file the compile read still has the
    /// content it had then (relative input paths are resolved against `base_dir`, the directory
    /// the compile would run in). A corrupt entry, or one of another format, is deleted; if it
    /// cannot be, it is ignored.
    pub fn get(&self, key: &CompileKey<'_>, base_dir: &Path) -> Option<Vec<u8>> {
        let path = self.entry_path(key)?;
        let file = fs::File::open(&path).ok()?;
        let len = file.metadata().ok()?.len();
        let entry = if len > MAX_ENTRY_BYTES {
            Err(format!("{len} bytes"))
        } else {
            let mut bytes = Vec::with_capacity(len as usize);
            std::io::Read::read_to_end(
                &mut std::io::Read::take(file, MAX_ENTRY_BYTES + 1),
                &mut bytes,
            )
            .ok()?;
            decode_entry(&bytes)
        };
        match entry {
            Ok(entry) => inputs_unchanged(&entry, base_dir).then_some(entry.object),
            Err(_) => {
                // Whatever is wrong with it, a rebuilt entry replaces it; if removal fails
                // (a read-only cache), the store's rename may still succeed, and a lookup
                // never returns it either way.
                let _ = fs::remove_file(&path);
                None
            }
        }
    }

    /// Stores `output`, compiled from a compile that started at `started`, with a hash of each
    /// of its inputs. Returns whether it was stored: a compile whose inputs cannot all be read,
    /// or may have changed while it ran (see [`FRESH_FILE_WINDOW`]), is not.
    pub fn put(
        &self,
        key: &CompileKey<'_>,
        base_dir: &Path,
        started: SystemTime,
        output: &CompileOutput,
    ) -> Result<bool> {
        let Some(path) = self.entry_path(key) else {
            return Ok(false);
        };
        let Some(inputs) = hash_inputs(&output.inputs, base_dir, started) else {
            return Ok(false);
        };
        let bytes = encode_entry(&Entry {
            inputs,
            object: output.object.clone(),
        });
        let io = |what: &str, e| Error::Io {
            what: format!("{what} {}", path.display()),
            source: e,
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        fs::create_dir_all(dir).map_err(|e| io("creating cache dir for", e))?;
        let tmp = dir.join(format!(
            ".{}.{}.{}.tmp",
            key.digest(),
            std::process::id(),
            STORE_SEQUENCE.fetch_add(1, Ordering::Relaxed)
        ));
        let stored = fs::write(&tmp, &bytes)
            .map_err(|e| io("writing", e))
            .and_then(|()| fs::rename(&tmp, &path).map_err(|e| io("renaming into", e)));
        if stored.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        stored.map(|()| true)
    }

    /// Returns the cached artifact or computes, stores and returns it, for a compile that reads
    /// no files (its source is all in the key).
    pub fn get_or_compile(
        &self,
        key: &CompileKey<'_>,
        compile: impl FnOnce() -> Result<Vec<u8>>,
    ) -> Result<Vec<u8>> {
        self.get_or_compile_reading(key, Path::new("."), || {
            compile().map(|object| CompileOutput {
                object,
                inputs: Vec::new(),
            })
        })
    }

    /// Returns the cached object or compiles, stores and returns it, for a compile that reads
    /// files (`#include`s): the entry is used only while they keep their content. Relative
    /// input paths are relative to `base_dir`.
    pub fn get_or_compile_reading(
        &self,
        key: &CompileKey<'_>,
        base_dir: &Path,
        compile: impl FnOnce() -> Result<CompileOutput>,
    ) -> Result<Vec<u8>> {
        if let Some(hit) = self.get(key, base_dir) {
            return Ok(hit);
        }
        let started = SystemTime::now();
        let output = compile()?;
        // A cache that cannot be written must not fail the compile.
        let _ = self.put(key, base_dir, started, &output);
        Ok(output.object)
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

    /// Writes a file dated a minute back, so that a compile reading it may be stored.
    fn write_settled(path: &Path, bytes: &[u8]) {
        fs::write(path, bytes).unwrap();
        fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(SystemTime::now() - Duration::from_secs(60))
            .unwrap();
    }

    fn reading(object: &[u8], inputs: &[&str]) -> CompileOutput {
        CompileOutput {
            object: object.to_vec(),
            inputs: inputs.iter().map(PathBuf::from).collect(),
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
        assert!(cache.get(&k, dir.path()).is_none());
    }

    #[test]
    fn entries_round_trip_and_any_damage_is_detected() {
        let entry = Entry {
            inputs: vec![
                ("local.h".into(), sha256(b"#define VALUE 42")),
                ("/usr/include/a b.h".into(), sha256(b"")),
            ],
            object: b"\x7fELF object".to_vec(),
        };
        let bytes = encode_entry(&entry);
        assert_eq!(decode_entry(&bytes).unwrap(), entry);
        for cut in 0..bytes.len() {
            assert!(decode_entry(&bytes[..cut]).is_err(), "truncated to {cut}");
        }
        for at in 0..bytes.len() {
            for bit in [0x01, 0x80] {
                let mut damaged = bytes.clone();
                damaged[at] ^= bit;
                assert!(decode_entry(&damaged).is_err(), "byte {at} ^ {bit:#x}");
            }
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode_entry(&longer).is_err());
        let mut other_version = bytes.clone();
        other_version[8..12].copy_from_slice(&(ENTRY_FORMAT_VERSION - 1).to_le_bytes());
        assert!(decode_entry(&other_version).unwrap_err().contains("format"));
    }

    #[test]
    fn a_bad_entry_is_discarded_and_rebuilt() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CompileCache::at(dir.path());
        let flags: Vec<String> = vec![];
        let k = key("kernel", "gfx1100", &flags);
        let path = cache.entry_path(&k).unwrap();
        cache.get_or_compile(&k, || Ok(vec![7; 100])).unwrap();
        let good = fs::read(&path).unwrap();
        let mut flipped = good.clone();
        flipped[HEADER_BYTES + 10] ^= 4;
        let mut old_version = good.clone();
        old_version[8..12].copy_from_slice(&1u32.to_le_bytes());
        let bad: [(&str, Vec<u8>); 5] = [
            ("truncated", good[..good.len() - 1].to_vec()),
            ("flipped", flipped),
            ("empty", Vec::new()),
            ("an older format", old_version),
            (
                "a bare object, as hcq stored before entries had headers",
                vec![9; 100],
            ),
        ];
        for (what, bytes) in bad {
            fs::write(&path, &bytes).unwrap();
            assert_eq!(cache.get(&k, dir.path()), None, "{what}");
            assert!(!path.exists(), "{what}: the bad entry was deleted");
            fs::write(&path, &bytes).unwrap();
            let mut calls = 0;
            let got = cache.get_or_compile(&k, || {
                calls += 1;
                Ok(vec![7; 100])
            });
            assert_eq!(got.unwrap(), vec![7; 100], "{what}");
            assert_eq!(calls, 1, "{what}: rebuilt");
            assert_eq!(fs::read(&path).unwrap(), good, "{what}: replaced");
        }
    }

    #[test]
    fn an_entry_that_cannot_be_removed_is_bypassed() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CompileCache::at(dir.path());
        let flags: Vec<String> = vec![];
        let k = key("kernel", "gfx1100", &flags);
        // A directory where the entry should be: unreadable as an entry, not removable as a
        // file, and not replaceable by the store's rename.
        let path = cache.entry_path(&k).unwrap();
        fs::create_dir_all(path.join("x")).unwrap();
        for _ in 0..2 {
            let mut calls = 0;
            let got = cache.get_or_compile(&k, || {
                calls += 1;
                Ok(vec![1, 2])
            });
            assert_eq!(got.unwrap(), vec![1, 2]);
            assert_eq!(calls, 1);
        }
    }

    #[test]
    fn an_entry_is_used_only_while_its_inputs_are_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CompileCache::at(dir.path().join("cache"));
        let (src_a, src_b) = (dir.path().join("a"), dir.path().join("b"));
        fs::create_dir_all(src_a.join("sub")).unwrap();
        fs::create_dir_all(&src_b).unwrap();
        write_settled(&src_a.join("local.h"), b"#define VALUE 42");
        write_settled(&src_a.join("sub/deep.h"), b"int deep;");
        let absolute = src_a.join("sub/deep.h");
        let flags: Vec<String> = vec![];
        let k = key("#include \"local.h\"", "gfx1100", &flags);
        let inputs = ["local.h", absolute.to_str().unwrap()];
        let mut compiles = 0;
        let mut compile = |base: &Path, object: &[u8]| {
            cache
                .get_or_compile_reading(&k, base, || {
                    compiles += 1;
                    Ok(reading(object, &inputs))
                })
                .unwrap()
        };
        assert_eq!(compile(&src_a, b"v42"), b"v42");
        assert_eq!(compile(&src_a, b"other"), b"v42", "a hit");
        // A relative input resolves against the directory the compile runs in.
        // (That compile read a local.h that is not there now, so it was not stored.)
        assert_eq!(compile(&src_b, b"from b"), b"from b", "b has no local.h");
        write_settled(&src_b.join("local.h"), b"#define VALUE 42");
        assert_eq!(
            compile(&src_b, b"other"),
            b"v42",
            "b's local.h is a's: a hit"
        );
        // Changed content (same length, same time) is a miss.
        write_settled(&src_a.join("local.h"), b"#define VALUE 43");
        assert_eq!(compile(&src_a, b"v43"), b"v43");
        assert_eq!(compile(&src_a, b"other"), b"v43");
        write_settled(&absolute, b"int Deep;");
        assert_eq!(compile(&src_a, b"deep changed"), b"deep changed");
        fs::remove_file(&absolute).unwrap();
        assert_eq!(compile(&src_a, b"deep gone"), b"deep gone");
        assert_eq!(compile(&src_a, b"deep still gone"), b"deep still gone");
        assert_eq!(compiles, 6);
    }

    #[test]
    fn concurrent_stores_and_lookups_never_see_a_partial_entry() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CompileCache::at(dir.path());
        let flags: Vec<String> = vec![];
        let k = key("shared", "gfx1100", &flags);
        let object: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let output = CompileOutput {
            object: object.clone(),
            inputs: Vec::new(),
        };
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..20 {
                        let stored = cache.put(&k, dir.path(), SystemTime::now(), &output);
                        assert!(stored.unwrap());
                        if let Some(got) = cache.get(&k, dir.path()) {
                            assert!(got == object, "a lookup returned another object");
                        }
                    }
                });
            }
        });
        assert_eq!(cache.get(&k, dir.path()), Some(object));
        let left: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "only the entry remains: {left:?}");
    }

    #[test]
    fn a_compile_whose_inputs_may_have_changed_while_it_ran_is_not_stored() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CompileCache::at(dir.path().join("cache"));
        let flags: Vec<String> = vec![];
        let k = key("#include \"local.h\"", "gfx1100", &flags);
        let out = reading(b"obj", &["local.h"]);
        // Just written: the compile may have read it before the change.
        fs::write(dir.path().join("local.h"), b"1").unwrap();
        let started = SystemTime::now();
        assert!(!cache.put(&k, dir.path(), started, &out).unwrap());
        assert_eq!(cache.get(&k, dir.path()), None);
        // Missing, or not a regular file: cannot be checked later.
        let missing = reading(b"obj", &["nonexistent.h"]);
        assert!(!cache.put(&k, dir.path(), started, &missing).unwrap());
        let fifo = dir.path().join("fifo.h");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
        let special = reading(b"obj", &["fifo.h", "/dev/zero"]);
        assert!(!cache.put(&k, dir.path(), started, &special).unwrap());
        write_settled(&dir.path().join("local.h"), b"1");
        assert!(cache.put(&k, dir.path(), started, &out).unwrap());
        assert_eq!(cache.get(&k, dir.path()).as_deref(), Some(&b"obj"[..]));
    }
}
