//! By-value arguments beyond 32/64-bit numbers: `bool`, 8- and 16-bit integers, `_Float16`
//! and a struct, each read back by the kernel and compared with what the host sent, eagerly
//! and in a graph.

use hcq::{Arg, ArgBytes, Device, Error, GraphArg, GraphBuilder};

const SRC: &str = r#"
struct Params {
  float scale;
  int offset;
  short s;
  char c;
  double d;
  int arr[3];
};

extern "C" __attribute__((global)) void echo(int* out, bool flag, signed char c,
                                             unsigned char uc, short s, unsigned short us,
                                             _Float16 h, struct Params p, int last) {
  out[0] = flag ? 1 : 0;
  out[1] = c;
  out[2] = uc;
  out[3] = s;
  out[4] = us;
  out[5] = __builtin_bit_cast(unsigned short, h);
  out[6] = __builtin_bit_cast(int, p.scale * 2.0f);
  out[7] = p.offset;
  out[8] = p.s;
  out[9] = p.c;
  out[10] = (int)(p.d * 4.0);
  out[11] = p.arr[0] + p.arr[1] * 10 + p.arr[2] * 100;
  out[12] = last;
}
"#;

/// `struct Params` laid out as the kernel's ABI has it: scale@0, offset@4, s@8, c@10,
/// d@16, arr@24..36, 40 bytes in all (8-byte aligned).
fn params(scale: f32, offset: i32, s: i16, c: i8, d: f64, arr: [i32; 3]) -> ArgBytes {
    let mut b = [0u8; 40];
    b[0..4].copy_from_slice(&scale.to_le_bytes());
    b[4..8].copy_from_slice(&offset.to_le_bytes());
    b[8..10].copy_from_slice(&s.to_le_bytes());
    b[10] = c as u8;
    b[16..24].copy_from_slice(&d.to_le_bytes());
    for (k, v) in arr.iter().enumerate() {
        b[24 + 4 * k..28 + 4 * k].copy_from_slice(&v.to_le_bytes());
    }
    ArgBytes::new(&b).unwrap()
}

/// The values every launch passes before the struct.
const NARROW: (i8, u8, i16, u16, u16) = (-100, 200, -30000, 60000, 0x3e00);

type Params = (f32, i32, i16, i8, f64, [i32; 3]);

fn expected(flag: bool, p: Params, last: i32) -> Vec<i32> {
    let (c, uc, s, us, h) = NARROW;
    vec![
        flag as i32,
        c as i32,
        uc as i32,
        s as i32,
        us as i32,
        h as i32,
        (p.0 * 2.0).to_bits() as i32,
        p.1,
        p.2 as i32,
        p.3 as i32,
        (p.4 * 4.0) as i32,
        p.5[0] + p.5[1] * 10 + p.5[2] * 100,
        last,
    ]
}

#[test]
fn narrow_scalars_halves_and_structs_reach_the_kernel() {
    let dev = Device::open("amd-emu:0").unwrap();
    let prg = dev.program(&dev.compile(SRC).unwrap(), "echo").unwrap();
    let out = dev.alloc(13 * 4).unwrap();
    let p: Params = (1.5, -77, -1234, -5, 2.25, [3, -4, 5]);
    let packed = params(p.0, p.1, p.2, p.3, p.4, p.5);
    let args = |flag: bool, last: i32| {
        [
            Arg::Buffer(&out),
            Arg::Bool(flag),
            Arg::I8(NARROW.0),
            Arg::U8(NARROW.1),
            Arg::I16(NARROW.2),
            Arg::U16(NARROW.3),
            Arg::F16(NARROW.4), // 1.5
            Arg::Bytes(packed),
            Arg::I32(last),
        ]
    };
    for (flag, last) in [(true, 42), (false, -1)] {
        prg.launch(&args(flag, last), [1, 1, 1], [1, 1, 1]).unwrap();
        assert_eq!(out.read::<i32>().unwrap(), expected(flag, p, last));
    }
    // A wrong-sized value is refused, naming the argument.
    let mut wrong = args(true, 0);
    wrong[7] = Arg::Bytes(ArgBytes::new(&[0; 36]).unwrap());
    let e = prg.launch(&wrong, [1, 1, 1], [1, 1, 1]).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(e.to_string().contains("argument 7"), "{e}");
    wrong[7] = Arg::I16(1);
    wrong[1] = Arg::I32(1);
    assert!(prg.launch(&wrong, [1, 1, 1], [1, 1, 1]).is_err());
    assert!(ArgBytes::new(&[0; hcq::ARG_BYTES_MAX + 1]).is_err());

    // The same values fixed in a graph.
    let mut g = GraphBuilder::new();
    let last = g.var("last", -10, 10).unwrap();
    let fixed: Vec<GraphArg<'_>> = args(false, 0)
        .iter()
        .map(|a| match a {
            Arg::Buffer(b) => GraphArg::Buffer(b),
            v => GraphArg::Value(*v),
        })
        .collect();
    let mut graph_args = fixed[..8].to_vec();
    graph_args.push(GraphArg::Var(last));
    g.launch(
        &prg,
        &graph_args,
        [1.into(), 1.into(), 1.into()],
        [1.into(), 1.into(), 1.into()],
    )
    .unwrap();
    let graph = g.build().unwrap();
    for v in [-10, 3, 10] {
        graph.replay(&[], &[v]).unwrap();
        assert_eq!(out.read::<i32>().unwrap(), expected(false, p, v));
    }
    let e = GraphBuilder::new()
        .launch(
            &prg,
            &[GraphArg::Value(Arg::Buffer(&out))],
            [1.into(), 1.into(), 1.into()],
            [1.into(), 1.into(), 1.into()],
        )
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
}
