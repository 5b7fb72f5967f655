//! `Buffer::fill`, `Device::alloc_zeros` and the typed reads and writes at an offset, checked
//! byte by byte against the host, neighbours of the filled range included: 8-, 16- and 32-bit
//! patterns, views at unaligned offsets, fills of several copy-engine packets, and ordering
//! with kernels and copies.

use hcq::{Arg, Device, Error};

fn bytes(buf: &hcq::Buffer) -> Vec<u8> {
    buf.read::<u8>().unwrap()
}

fn expect_fill(before: &[u8], from: usize, len: usize, pattern: &[u8]) -> Vec<u8> {
    let mut want = before.to_vec();
    for k in 0..len {
        want[from + k] = pattern[k % pattern.len()];
    }
    want
}

fn noise(n: usize, seed: u32) -> Vec<u8> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            (x >> 16) as u8
        })
        .collect()
}

#[test]
fn fills_set_every_value_of_a_view_and_nothing_else() {
    let dev = Device::open("amd-emu:0").expect("the emulated GPU opens");
    let size = 4096 + 64;
    let base = dev.alloc(size).unwrap();
    let cases: [(usize, usize, &[u8]); 8] = [
        (0, size, &[0xab]),
        (1, 1, &[0x11]),
        (3, 17, &[0x5a]),
        (2, 2 * 37, &0xbeefu16.to_le_bytes()),
        (6, 2, &0x1234u16.to_le_bytes()),
        (4, 4 * 100, &0xdead_beefu32.to_le_bytes()),
        (12, 4096, &1.5f32.to_le_bytes()),
        (1, 4 * 7, &0x0102_0304u32.to_le_bytes()),
    ];
    for (i, &(offset, len, pattern)) in cases.iter().enumerate() {
        let before = noise(size, i as u32);
        base.write(&before).unwrap();
        let view = base.view(offset, len).unwrap();
        match pattern.len() {
            1 => view.fill(pattern[0]).unwrap(),
            2 => view
                .fill(u16::from_le_bytes([pattern[0], pattern[1]]))
                .unwrap(),
            _ => view
                .fill(u32::from_le_bytes(pattern.try_into().unwrap()))
                .unwrap(),
        }
        let got = bytes(&base);
        let want = expect_fill(&before, offset, len, pattern);
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "case {i} ({offset}+{len}): byte {k}");
        }
    }
    // A fill of several constant-fill packets (at most 4 MiB each), typed as f32.
    let n = (9 << 20) / 4 + 3;
    let big = dev.alloc(n * 4).unwrap();
    big.fill(-2.25f32).unwrap();
    let got = big.read::<f32>().unwrap();
    assert!(got.iter().all(|&v| v == -2.25), "9 MiB of -2.25");

    // What does not fit the pattern is refused, naming the sizes.
    let odd = base.view(1, 7).unwrap();
    match odd.fill(7u16) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("7-byte"), "{m}"),
        other => panic!("{other:?}"),
    }
    match base.fill(7u64) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("1, 2 or 4"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn alloc_zeros_gives_zeros_even_in_reused_memory() {
    let dev = Device::open("amd-emu:0").expect("the emulated GPU opens");
    // A dropped buffer's memory goes to the cache and comes back to the next allocation of
    // its size: dirty it first.
    for round in 0..3 {
        let dirty = dev.alloc(1000 * 4).unwrap();
        dirty.write(&vec![0x7fff_ffffi32 - round; 1000]).unwrap();
        drop(dirty);
        let z = dev.alloc_zeros::<i32>(1000).unwrap();
        assert_eq!(z.size(), 4000);
        assert!(
            z.read::<i32>().unwrap().iter().all(|&v| v == 0),
            "round {round}"
        );
    }
}

#[test]
fn typed_reads_and_writes_at_an_offset() {
    let dev = Device::open("amd-emu:0").expect("the emulated GPU opens");
    let buf = dev.alloc_zeros::<u16>(100).unwrap();
    let values: Vec<u16> = (0..37).map(|i| i * 1000 + 7).collect();
    buf.write_at(6, &values).unwrap();
    let mut want = vec![0u16; 100];
    want[3..40].copy_from_slice(&values);
    assert_eq!(buf.read::<u16>().unwrap(), want);
    assert_eq!(buf.read_range::<u16>(6, 37).unwrap(), values);
    // At an odd byte offset the values straddle elements.
    let at5 = buf.read_range::<u8>(5, 3).unwrap();
    let all = buf.read::<u8>().unwrap();
    assert_eq!(at5, all[5..8]);
    let mut first = [0u16; 10];
    buf.read_into(&mut first).unwrap();
    assert_eq!(first[..], want[..10]);
    assert!(matches!(
        buf.read_range::<u16>(190, 6),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        buf.read_range::<u64>(0, usize::MAX / 4),
        Err(Error::InvalidArgument(_))
    ));
    assert!(buf.write_at(199, &[1u16]).is_err());
}

#[test]
fn a_fill_is_ordered_between_kernels() {
    const SRC: &str = r#"
extern "C" __attribute__((global)) void add_one(int* x, int n) {
  int i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  if (i < n) x[i] += 1;
}
"#;
    let dev = Device::open("amd-emu:0").expect("the emulated GPU opens");
    let add = dev
        .program(
            &dev.compile(SRC).expect("compiles with clang-19"),
            "add_one",
        )
        .unwrap();
    let n = 1000usize;
    let buf = dev.alloc(n * 4).unwrap();
    buf.write(&vec![5i32; n]).unwrap();
    let run = || {
        add.launch(
            &[Arg::Buffer(&buf), Arg::I32(n as i32)],
            [16, 1, 1],
            [64, 1, 1],
        )
        .unwrap()
    };
    run();
    buf.view(400, 400).unwrap().fill(100i32).unwrap();
    run();
    let got = buf.read::<i32>().unwrap();
    for (i, &v) in got.iter().enumerate() {
        let want = if (100..200).contains(&i) { 101 } else { 7 };
        assert_eq!(v, want, "element {i}");
    }
}
