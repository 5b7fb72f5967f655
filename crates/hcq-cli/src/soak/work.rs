//! The soak's work, each item derived from its index, and the host's checks of its results.

use super::{
    COPY_SPACE, INPUT_ELEMS, JIT_EVERY, LARGE_COPY_EVERY, LARGE_COPY_MAX, LARGE_COPY_MIN, SLOT,
    STAGED_MAX,
};

/// The 64-bit finaliser of splitmix64: a well-mixed hash of an index, so that the parameters
/// of work item `i` can be recomputed by the check without keeping them.
fn hash(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A sequential generator (xorshift64*) for inputs and copy data.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub(super) fn fill(&mut self, bytes: &mut [u8]) {
        let mut chunks = bytes.chunks_exact_mut(8);
        for c in &mut chunks {
            c.copy_from_slice(&self.next().to_le_bytes());
        }
        let rest = chunks.into_remainder();
        let last = self.next().to_le_bytes();
        rest.copy_from_slice(&last[..rest.len()]);
    }
}

/// The integer kernels of `kernels/demo.hip` the soak launches, with their host reference.
/// The discriminant indexes `Kernels::programs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum IntKernel {
    Add = 0,
    Mul = 1,
    Mix = 2,
}

impl IntKernel {
    pub(super) const ALL: [IntKernel; 3] = [IntKernel::Add, IntKernel::Mul, IntKernel::Mix];

    pub(super) fn name(self) -> &'static str {
        match self {
            IntKernel::Add => "add_i32",
            IntKernel::Mul => "mul_i32",
            IntKernel::Mix => "mix_i32",
        }
    }

    /// The kernel's element function, as the GPU computes it (two's complement wrap-around).
    fn apply(self, a: i32, b: i32) -> i32 {
        match self {
            IntKernel::Add => a.wrapping_add(b),
            IntKernel::Mul => a.wrapping_mul(b),
            IntKernel::Mix => (a ^ b.wrapping_shl(3)).wrapping_sub(a >> 2),
        }
    }
}

/// What launch number `index` does: `kernel` over `n` elements of the inputs at `a_at` and
/// `b_at`, in workgroups of `block`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct LaunchPlan {
    pub(super) kernel: IntKernel,
    pub(super) n: usize,
    pub(super) a_at: usize,
    pub(super) b_at: usize,
    pub(super) block: u32,
}

pub(super) fn launch_plan(index: u64) -> LaunchPlan {
    let h = hash(index);
    let n = 1 + (h % SLOT as u64) as usize;
    let span = (INPUT_ELEMS - n + 1) as u64;
    LaunchPlan {
        kernel: IntKernel::ALL[(index % 3) as usize],
        n,
        a_at: ((h >> 8) % span) as usize,
        b_at: ((h >> 32) % span) as usize,
        block: 32 << ((h >> 60) % 3),
    }
}

/// What replay number `index` does: the graph (or the JIT) over `n` elements of the input at
/// `src_at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ReplayPlan {
    pub(super) n: usize,
    pub(super) src_at: usize,
    pub(super) jit: bool,
}

pub(super) fn replay_plan(index: u64) -> ReplayPlan {
    let h = hash(index ^ 0x5EED_6EA9);
    ReplayPlan {
        n: 1 + (h % SLOT as u64) as usize,
        src_at: ((h >> 16) % (INPUT_ELEMS - SLOT + 1) as u64) as usize,
        jit: index.is_multiple_of(JIT_EVERY),
    }
}

/// The sentinel that fills the output slots before batch `batch`; it changes per batch so that
/// a slot a lost launch left alone does not hold the previous batch's (right) result.
pub(super) fn sentinel(batch: u64) -> i32 {
    (0x5EA5_0000u32 ^ (hash(batch) as u32 & 0xFFFF)) as i32
}

/// Checks the output slots `got` (`SLOT` elements each) of the launches numbered from `first`
/// against the host: each slot holds its launch's results on its first `n` elements and the
/// sentinel after them.
pub(super) fn check_launches(
    first: u64,
    got: &[i32],
    a: &[i32],
    b: &[i32],
    sentinel: i32,
) -> Result<(), String> {
    for (slot, values) in got.chunks(SLOT).enumerate() {
        let index = first + slot as u64;
        let plan = launch_plan(index);
        let want = (0..plan.n).map(|i| plan.kernel.apply(a[plan.a_at + i], b[plan.b_at + i]));
        let what = || format!("launch {index} ({} over {})", plan.kernel.name(), plan.n);
        check_slot(&what, values, want, plan.n, sentinel)?;
    }
    Ok(())
}

/// Checks one slot: `want` on its first `n` elements, `sentinel` after them.
fn check_slot(
    what: &dyn Fn() -> String,
    got: &[i32],
    want: impl Iterator<Item = i32>,
    n: usize,
    sentinel: i32,
) -> Result<(), String> {
    if got.len() != SLOT {
        return Err(format!(
            "{}: {} elements read back, expected {SLOT}",
            what(),
            got.len()
        ));
    }
    for (i, (g, w)) in got
        .iter()
        .zip(want.chain(std::iter::repeat(sentinel)))
        .enumerate()
    {
        if *g != w {
            return Err(if i < n {
                format!("{}: element {i} is {g}, expected {w}", what())
            } else {
                format!(
                    "{}: element {i}, past its {n} elements, was overwritten with {g} (expected \
                     the sentinel {w})",
                    what()
                )
            });
        }
    }
    Ok(())
}

/// Checks the two output slots of the replays numbered from `first`: `out` holds
/// `mix_i32(src, gb)` and `out2` holds that plus `gc` on the first `n` elements; both keep the
/// sentinel after them (the graph copies the whole slot from `out` to `out2`).
pub(super) fn check_replays(
    first: u64,
    out: &[i32],
    out2: &[i32],
    src: &[i32],
    gb: &[i32],
    gc: &[i32],
    sentinel: i32,
) -> Result<(), String> {
    if out.len() != out2.len() {
        return Err(format!(
            "replays from {first}: {} and {} elements read back",
            out.len(),
            out2.len()
        ));
    }
    for (slot, (o, o2)) in out.chunks(SLOT).zip(out2.chunks(SLOT)).enumerate() {
        let index = first + slot as u64;
        let plan = replay_plan(index);
        let via = if plan.jit { "JIT call" } else { "replay" };
        let mixed = |i: usize| IntKernel::Mix.apply(src[plan.src_at + i], gb[i]);
        let what = || format!("{via} {index} (over {}), first kernel", plan.n);
        check_slot(&what, o, (0..plan.n).map(mixed), plan.n, sentinel)?;
        let what = || format!("{via} {index} (over {}), copy and second kernel", plan.n);
        let summed = (0..plan.n).map(|i| IntKernel::Add.apply(mixed(i), gc[i]));
        check_slot(&what, o2, summed, plan.n, sentinel)?;
    }
    Ok(())
}

/// One round of copies: `size` bytes from the host into buffer X at `x_at`, then from X to
/// buffer Y at `y_at` on the device, then back to the host from Y.
#[derive(Debug, Clone, Copy)]
pub(super) struct CopyRound {
    pub(super) size: usize,
    pub(super) x_at: usize,
    pub(super) y_at: usize,
}

pub(super) fn copy_round(index: u64, rng: &mut Rng) -> CopyRound {
    let size = if index.is_multiple_of(LARGE_COPY_EVERY) {
        LARGE_COPY_MIN + rng.below(LARGE_COPY_MAX - LARGE_COPY_MIN + 1)
    } else {
        // Sizes spread evenly over the powers of two up to 1 MiB, at any byte offset.
        let bits = rng.below(21);
        1 + rng.below(STAGED_MAX >> (20 - bits))
    };
    CopyRound {
        size,
        x_at: rng.below(COPY_SPACE - size + 1),
        y_at: rng.below(COPY_SPACE - size + 1),
    }
}

/// Checks the bytes read back from Y at `at` against the host's copy of what Y must hold.
pub(super) fn check_copy(
    index: u64,
    round: &CopyRound,
    at: usize,
    got: &[u8],
    want: &[u8],
) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!(
            "copy round {index}: {} bytes read back, expected {}",
            got.len(),
            want.len()
        ));
    }
    match got.iter().zip(want).position(|(g, w)| g != w) {
        None => Ok(()),
        Some(i) => {
            let byte = at + i;
            let place = if (round.y_at..round.y_at + round.size).contains(&byte) {
                format!("byte {} of the {}-byte copy", byte - round.y_at, round.size)
            } else {
                format!(
                    "byte {byte} of the buffer, outside the {}-byte copy at {}",
                    round.size, round.y_at
                )
            };
            Err(format!(
                "copy round {index} (host to device at {}, device to device at {}, back to the \
                 host): {place} is {:#04x}, expected {:#04x}",
                round.x_at, round.y_at, got[i], want[i]
            ))
        }
    }
}
