//! Code objects the tests build outside the suite's compile cache (with `clang` directly, or
//! into a cache of their own), kept for the check `scripts/test.sh` runs after the whole suite:
//! every code object the suite builds must disassemble with `hcq disasm` as with llvm-objdump
//! (`tests/disasm.rs`). They go to the directory `HCQ_TEST_OBJECTS` names; unset, nothing is
//! kept.

use std::path::Path;

/// Copies `path` (a code object, or a directory such as a test's own compile cache) to
/// `HCQ_TEST_OBJECTS/name`.
pub fn keep(name: &str, path: &Path) {
    let Some(dir) = std::env::var_os("HCQ_TEST_OBJECTS") else {
        return;
    };
    let to = Path::new(&dir).join(name);
    copy(path, &to)
        .unwrap_or_else(|e| panic!("keeping {} as {}: {e}", path.display(), to.display()));
}

fn copy(from: &Path, to: &Path) -> std::io::Result<()> {
    if from.is_dir() {
        std::fs::create_dir_all(to)?;
        for entry in std::fs::read_dir(from)? {
            let entry = entry?;
            copy(&entry.path(), &to.join(entry.file_name()))?;
        }
        return Ok(());
    }
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::copy(from, to).map(drop)
}
