//! Differential test of the RDNA3 interpreter with random kernels: a seeded generator writes
//! straight-line and lightly branchy HIP kernels over u32/i32/u64/i64/f32/f64 values, clang-19
//! compiles all of one test's kernels as one source, the emulated GPU runs each kernel on 128
//! lanes, and the host evaluates the same program with the C semantics; every output value of
//! every lane must match bit for bit (any NaN matches any NaN, and +0 matches -0).
//!
//! The generator steers around the clang-19 miscompiles it has met (see `program.rs` and
//! `same_value`), but a mismatch on a new seed can still be the compiler's: check the
//! kernel's disassembly before blaming the interpreter.
//!
//! `HCQ_FUZZ_SEED=<n>` replaces the fixed seeds (to explore locally), `HCQ_FUZZ_KERNELS=<n>`
//! changes the number of kernels per test, `HCQ_FUZZ_DUMP=<dir>` writes each test's source
//! there (to disassemble a failing kernel with clang and llvm-objdump).

#[path = "random_kernels/program.rs"]
mod program;
#[path = "random_kernels/reference.rs"]
mod reference;

use hcq::{Arg, Device};
use program::{
    generate, Kernel, Rng, Ty, LANES, LOCAL_SIZE, MAX_OUTPUTS, PRELUDE, UNIFORMS, WORDS_PER_LANE,
};
use reference::{evaluate, Lane};
use std::fmt::Write;
use std::sync::OnceLock;

/// The emulated GPU, opened once for the whole process (see the kernel suite's `device()`).
fn device() -> Device {
    static DEVICE: OnceLock<Device> = OnceLock::new();
    DEVICE
        .get_or_init(|| Device::open("amd-emu:0").expect("the emulated GPU opens"))
        .clone()
}

fn env_number(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok().filter(|t| !t.is_empty())?;
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    Some(parsed.unwrap_or_else(|_| panic!("{name}={text} is not a number")))
}

/// Mismatches shown in full before the rest are only counted.
const MISMATCHES_SHOWN: usize = 12;

/// Inputs shared by every kernel of a test: `WORDS_PER_LANE` words per lane.
fn lane_words(rng: &mut Rng) -> Vec<u64> {
    let mut words = vec![0u64; LANES * WORDS_PER_LANE];
    for lane in 0..LANES {
        for w in 0..WORDS_PER_LANE {
            let i = lane * WORDS_PER_LANE + w;
            // Neighbouring lanes with equal values make comparisons come out equal sometimes.
            if lane > 0 && rng.percent(12) {
                words[i] = words[i - WORDS_PER_LANE];
                continue;
            }
            words[i] = match w {
                0..=3 => rng.int_word(),
                // The kernels read the low half; the high half is noise they must ignore.
                4 | 5 => u64::from(rng.f32_value().to_bits()) | (rng.next_u64() << 32),
                _ => rng.f64_value().to_bits(),
            };
        }
    }
    words
}

fn uniform_words(rng: &mut Rng) -> [u64; UNIFORMS] {
    [
        rng.int_word(),
        rng.int_word(),
        u64::from(rng.f32_value().to_bits()),
        rng.f64_value().to_bits(),
    ]
}

fn describe(ty: Ty, bits: u64) -> String {
    match ty {
        Ty::F32 => format!("{:#010x} ({:e})", bits as u32, f32::from_bits(bits as u32)),
        Ty::F64 => format!("{bits:#018x} ({:e})", f64::from_bits(bits)),
        Ty::I32 => format!("{bits:#x} ({})", bits as u32 as i32),
        Ty::I64 => format!("{bits:#x} ({})", bits as i64),
        _ => format!("{bits:#x} ({bits})"),
    }
}

/// Bit equality, except that any NaN matches any NaN and +0 matches -0. clang-19 does not
/// keep the sign of zeros: it folds `0.0 - x` into `-x` where x may be +0 (seen as
/// `y = 0.0f - x; y + y` compiled to `-x + -x`, and in a loop whose first step subtracts
/// from a folded `x - x`). The generated kernels keep zero signs from reaching nonzero
/// results (division by zero and copysign see +0 instead), so only the zero itself differs.
fn same_value(ty: Ty, want: u64, got: u64) -> bool {
    match ty {
        Ty::F32 => {
            let (want, got) = (f32::from_bits(want as u32), f32::from_bits(got as u32));
            want.to_bits() == got.to_bits() || (want.is_nan() && got.is_nan()) || want == got
        }
        Ty::F64 => {
            let (want, got) = (f64::from_bits(want), f64::from_bits(got));
            want.to_bits() == got.to_bits() || (want.is_nan() && got.is_nan()) || want == got
        }
        _ => want == got,
    }
}

/// Generates `count` kernels from `seed` (cycling through `focuses`), runs them and checks
/// every output of every lane.
fn run_random_kernels(test: &str, base_seed: u64, focuses: &[Option<Ty>], default_count: u64) {
    let seed = env_number("HCQ_FUZZ_SEED").map_or(base_seed, |s| s ^ base_seed);
    let count = env_number("HCQ_FUZZ_KERNELS").unwrap_or(default_count) as usize;
    let mut rng = Rng::new(seed);
    let words = lane_words(&mut rng);
    let mut kernels: Vec<(Kernel, [u64; UNIFORMS])> = Vec::new();
    for k in 0..count {
        let focus = focuses[k % focuses.len()];
        let statements = rng.range(8, 30) as usize;
        let kernel = generate(&mut rng, format!("{test}_{k}"), focus, statements);
        kernels.push((kernel, uniform_words(&mut rng)));
    }
    let mut source = PRELUDE.to_string();
    for (kernel, _) in &kernels {
        source += &kernel.source();
    }
    if let Some(dir) = std::env::var_os("HCQ_FUZZ_DUMP") {
        let path = std::path::Path::new(&dir).join(format!("{test}-{seed:x}.hip"));
        std::fs::write(&path, &source)
            .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    }

    let dev = device();
    let code = dev
        .compile(&source)
        .unwrap_or_else(|e| panic!("{test} (seed {seed:#x}): clang rejects the source: {e}"));
    let input = dev.alloc(words.len() * 8).expect("alloc");
    input.write(&words).expect("copy in");
    let output = dev.alloc(LANES * MAX_OUTPUTS * 8).expect("alloc");
    let sentinel = vec![0xdead_beef_dead_beef_u64; LANES * MAX_OUTPUTS];

    let mut report = String::new();
    let mut mismatches = 0usize;
    let mut failed_kernels = 0usize;
    for (kernel, uniforms) in &kernels {
        let program = dev
            .program(&code, &kernel.name)
            .unwrap_or_else(|e| panic!("loading {}: {e}", kernel.name));
        output.write(&sentinel).expect("copy in");
        let run = program.launch_timed(
            &[
                Arg::Buffer(&input),
                Arg::Buffer(&output),
                Arg::U64(uniforms[0]),
                Arg::U64(uniforms[1]),
                Arg::U64(uniforms[2]),
                Arg::U64(uniforms[3]),
                // The kernels' opaque zero (see `launder_divisor` in the generator).
                Arg::U64(0),
            ],
            [(LANES as u32).div_ceil(LOCAL_SIZE), 1, 1],
            [LOCAL_SIZE, 1, 1],
        );
        if let Err(e) = run {
            failed_kernels += 1;
            mismatches += 1;
            if mismatches <= MISMATCHES_SHOWN {
                let _ = writeln!(
                    report,
                    "\n{} failed on the device: {e}\n{}",
                    kernel.name,
                    kernel.source()
                );
            }
            continue;
        }
        let got: Vec<u64> = output.read().expect("read back");
        let mut kernel_failed = false;
        for lane in 0..LANES {
            let lane_words = &words[lane * WORDS_PER_LANE..(lane + 1) * WORDS_PER_LANE];
            let values = evaluate(
                kernel,
                &Lane {
                    words: lane_words,
                    uniforms,
                    global_id: lane as u32,
                    local_id: lane as u32 % LOCAL_SIZE,
                    group_id: lane as u32 / LOCAL_SIZE,
                },
            );
            for (slot, &id) in kernel.outputs.iter().enumerate() {
                let ty = kernel.types[id];
                let want = values[id]
                    .unwrap_or_else(|| panic!("generator bug: output v{id} has no value"))
                    .output_bits();
                let have = got[lane * MAX_OUTPUTS + slot];
                if same_value(ty, want, have) {
                    continue;
                }
                mismatches += 1;
                if mismatches <= MISMATCHES_SHOWN {
                    if !kernel_failed {
                        let _ = writeln!(report, "\n{}", kernel.source());
                    }
                    let _ = writeln!(
                        report,
                        "{} lane {lane}: v{id} ({}) expected {} got {}\n  lane words {:x?}\n  \
                         uniforms {:x?}",
                        kernel.name,
                        ty.c_name(),
                        describe(ty, want),
                        describe(ty, have),
                        lane_words,
                        uniforms
                    );
                }
                kernel_failed = true;
            }
        }
        failed_kernels += usize::from(kernel_failed);
    }
    assert!(
        mismatches == 0,
        "{test} (seed {seed:#x}): {mismatches} mismatches in {failed_kernels} of {} kernels \
         (first {MISMATCHES_SHOWN} shown)\n{report}",
        kernels.len()
    );
}

#[test]
fn random_integer_kernels() {
    run_random_kernels(
        "int",
        0x1f3a_5c77,
        &[
            Some(Ty::U32),
            Some(Ty::I32),
            Some(Ty::U64),
            Some(Ty::I64),
            None,
        ],
        100,
    );
}

#[test]
fn random_float_kernels() {
    run_random_kernels(
        "float",
        0x2e4b_6d88,
        &[Some(Ty::F32), Some(Ty::F64), None],
        80,
    );
}
