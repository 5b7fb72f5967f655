//! Dynamic LDS: HIP's `extern __shared__` arrays sized at launch, next to static LDS, with
//! the size a kernel reads through `hidden_dynamic_lds_size`, checked against the host.

use hcq::{Arg, Device, Error, LaunchOptions};

const SRC: &str = r#"
#define KERNEL extern "C" __attribute__((global))
#define SHARED __attribute__((shared))

static __attribute__((device)) inline void sync() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

// Each workgroup reverses its slice through a dynamic LDS array, and adds a value that went
// through a static LDS array first, so both kinds must coexist without overlapping.
KERNEL void reverse_slices(int* out, const int* in, int bias) {
  extern SHARED int tile[];
  SHARED int fixed[4];
  int t = __builtin_amdgcn_workitem_id_x();
  int size = __builtin_amdgcn_workgroup_size_x();
  int base = __builtin_amdgcn_workgroup_id_x() * size;
  if (t < 4) fixed[t] = bias + t;
  tile[t] = in[base + t];
  sync();
  out[base + t] = tile[size - 1 - t] + fixed[t & 3];
}
"#;

#[test]
fn extern_shared_arrays_are_sized_at_launch() {
    let dev = Device::open("amd-emu:0").expect("the emulated GPU opens");
    let prg = dev
        .program(&dev.compile(SRC).expect("compiles"), "reverse_slices")
        .unwrap();
    for local in [32u32, 64, 256] {
        let groups = 5u32;
        let n = (groups * local) as usize;
        let input: Vec<i32> = (0..n as i32).map(|i| i * 3 - 77).collect();
        let (a, out) = (dev.alloc(n * 4).unwrap(), dev.alloc(n * 4).unwrap());
        a.write(&input).unwrap();
        let options = LaunchOptions {
            dynamic_lds_bytes: local * 4,
            ..Default::default()
        };
        prg.launch_with(
            &[Arg::Buffer(&out), Arg::Buffer(&a), Arg::I32(1000)],
            [groups, 1, 1],
            [local, 1, 1],
            &options,
        )
        .unwrap();
        let got: Vec<i32> = out.read().unwrap();
        for (i, g) in got.iter().enumerate() {
            let (group, t) = (i / local as usize, i % local as usize);
            let want =
                input[group * local as usize + local as usize - 1 - t] + 1000 + (t & 3) as i32;
            assert_eq!(*g, want, "local {local}, element {i}");
        }
    }
    // More LDS than a workgroup can have is refused before anything runs.
    let (a, out) = (dev.alloc(256).unwrap(), dev.alloc(256).unwrap());
    let e = prg
        .launch_with(
            &[Arg::Buffer(&out), Arg::Buffer(&a), Arg::I32(0)],
            [1, 1, 1],
            [64, 1, 1],
            &LaunchOptions {
                dynamic_lds_bytes: 64 * 1024,
                ..Default::default()
            },
        )
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(e.to_string().contains("LDS"), "{e}");
}

#[test]
fn graphs_and_jits_size_dynamic_lds_too() {
    use hcq::{DimExpr, GraphArg, GraphBuilder, Jit, JitArg};
    let dev = Device::open("amd-emu:0").expect("the emulated GPU opens");
    let prg = dev
        .program(&dev.compile(SRC).expect("compiles"), "reverse_slices")
        .unwrap();
    let groups = 3u32;
    let max_local = 128u32;
    let n = (groups * max_local) as usize;
    let input: Vec<i32> = (0..n as i32).map(|i| i * 7 + 1).collect();
    let (a, out) = (dev.alloc(n * 4).unwrap(), dev.alloc(n * 4).unwrap());
    a.write(&input).unwrap();
    let expect = |local: usize, bias: i32| -> Vec<i32> {
        (0..groups as usize * local)
            .map(|i| {
                let (group, t) = (i / local, i % local);
                input[group * local + local - 1 - t] + bias + (t & 3) as i32
            })
            .collect()
    };
    // The workgroup size is a variable; the LDS is sized for the largest.
    let lds = LaunchOptions {
        dynamic_lds_bytes: max_local * 4,
        ..Default::default()
    };
    let mut g = GraphBuilder::new();
    let local = g.var("local", 32, max_local as i32).unwrap();
    g.launch_with(
        &prg,
        &[
            GraphArg::Buffer(&out),
            GraphArg::Buffer(&a),
            GraphArg::Value(hcq::Arg::I32(500)),
        ],
        [groups.into(), 1.into(), 1.into()],
        [DimExpr::from(local), 1.into(), 1.into()],
        &lds,
    )
    .unwrap();
    let graph = g.build().unwrap();
    for l in [32usize, 128, 64, 128, 32] {
        graph.replay(&[], &[l as i32]).unwrap();
        let got: Vec<i32> = out.read().unwrap();
        assert_eq!(got[..groups as usize * l], expect(l, 500)[..], "local {l}");
    }
    // A timed launch has no place in a graph.
    let timed = LaunchOptions {
        timed: true,
        ..Default::default()
    };
    let e = GraphBuilder::new()
        .launch_with(
            &prg,
            &[],
            [1.into(), 1.into(), 1.into()],
            [1.into(), 1.into(), 1.into()],
            &timed,
        )
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");

    let mut jit = Jit::new(&[("bias", -10, 10)], |r| {
        r.launch_with(
            &prg,
            &[JitArg::Output(0), JitArg::Input(0), JitArg::Var(0)],
            [groups.into(), 1.into(), 1.into()],
            [64.into(), 1.into(), 1.into()],
            &lds,
        )
    })
    .unwrap();
    for bias in [-10, 3, 7, 10] {
        jit.call(&[&a], &[&out], &[bias]).unwrap();
        let got: Vec<i32> = out.read().unwrap();
        assert_eq!(
            got[..groups as usize * 64],
            expect(64, bias)[..],
            "bias {bias}"
        );
    }
    assert!(jit.is_captured());
}
