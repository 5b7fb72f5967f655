//! The fuzz smoke that `cargo test` runs (included by path from each crate's `fuzz_smoke`
//! test): every input kept in `fuzz/regressions/<target>/` (each one failed once), then seeded
//! random and mutated inputs. libFuzzer itself runs from `scripts/fuzz.sh`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// SplitMix64: small, fast and the same sequence everywhere.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// `fuzz/regressions/<target>/`.
pub fn regression_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/regressions")
        .join(target)
}

/// Every kept input of `target`, by file name.
pub fn regressions(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = regression_dir(target);
    let mut inputs: Vec<(String, Vec<u8>)> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .map(|e| e.expect("listing regression inputs").path())
            .filter(|p| p.is_file())
            .map(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                (name, std::fs::read(&p).expect("reading a regression input"))
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    inputs.sort();
    inputs
}

/// `seed` changed by one of a few random edits: bit flips, byte sets to boundary values,
/// copies of 4-byte values from elsewhere, insertions, deletions, truncations, appends.
pub fn mutate(seed: &[u8], rng: &mut Rng, max_len: usize) -> Vec<u8> {
    let mut b = seed.to_vec();
    for _ in 0..1 + rng.below(8) {
        let len = b.len();
        match rng.below(8) {
            0 if len > 0 => {
                let i = rng.below(len);
                b[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                b[i] = [0, 1, 0x7f, 0x80, 0xff][rng.below(5)];
            }
            2 if len >= 8 => {
                let (from, to) = (rng.below(len - 3), rng.below(len - 3));
                let word: [u8; 4] = b[from..from + 4].try_into().unwrap();
                b[to..to + 4].copy_from_slice(&word);
            }
            3 if len >= 4 => {
                let at = rng.below(len - 3);
                let v = [0u32, 1, u32::MAX, 0x8000_0000, rng.next() as u32][rng.below(5)];
                b[at..at + 4].copy_from_slice(&v.to_le_bytes());
            }
            4 => {
                let at = rng.below(len + 1);
                let n = 1 + rng.below(16);
                let fill: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                b.splice(at..at, fill);
            }
            5 if len > 0 => {
                let at = rng.below(len);
                let n = 1 + rng.below(16.min(len - at));
                b.drain(at..at + n);
            }
            6 => b.truncate(rng.below(len + 1)),
            _ => b.extend((0..1 + rng.below(32)).map(|_| rng.next() as u8)),
        }
    }
    b.truncate(max_len);
    b
}

/// Replays `target`'s kept inputs through `run`, then runs it on `random` random inputs and
/// `mutated` mutations of `seeds` (and of the kept inputs), stopping early once `budget` has
/// passed. Returns the number of inputs run.
pub fn smoke(
    target: &str,
    run: impl Fn(&[u8]),
    seeds: &[Vec<u8>],
    random: usize,
    mutated: usize,
    max_len: usize,
    budget: Duration,
) -> usize {
    let start = Instant::now();
    // HCQ_FUZZ_WRITE_SEEDS=1 refreshes the committed seed corpus that scripts/fuzz.sh hands
    // to libFuzzer from these seeds.
    if std::env::var_os("HCQ_FUZZ_WRITE_SEEDS").is_some() {
        let dir = regression_dir(target).join("../../seeds").join(target);
        std::fs::create_dir_all(&dir).expect("creating the seed directory");
        for (i, seed) in seeds.iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{i}")), seed).expect("writing a seed");
        }
    }
    let kept = regressions(target);
    for (name, input) in &kept {
        eprintln!("{target}: replaying {name}");
        run(input);
    }
    for seed in seeds {
        run(seed);
    }
    let mut count = kept.len() + seeds.len();
    let mut rng = Rng(target
        .bytes()
        .fold(0x5eed, |h, b| h.wrapping_mul(31) ^ u64::from(b)));
    let mut pool: Vec<Vec<u8>> = seeds.to_vec();
    pool.extend(kept.into_iter().map(|(_, input)| input));
    for i in 0..random + mutated {
        if start.elapsed() > budget {
            break;
        }
        let input = if i < random || pool.is_empty() {
            let len = rng.below(max_len + 1);
            (0..len).map(|_| rng.next() as u8).collect()
        } else {
            let seed = pool[rng.below(pool.len())].clone();
            mutate(&seed, &mut rng, max_len)
        };
        run(&input);
        count += 1;
    }
    eprintln!("{target}: {count} inputs in {:?}", start.elapsed());
    count
}
