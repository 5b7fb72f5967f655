//! Buffer views: part of an allocation as a buffer of its own, for kernel arguments, copies
//! and graphs; nothing outside the view is touched.

use hcq::{Arg, Device, Error, GraphBuilder};

const SRC: &str = r#"
extern "C" __attribute__((global)) void add_one(int* out, const int* in, int n) {
  int i = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() +
          __builtin_amdgcn_workitem_id_x();
  if (i < n) out[i] = in[i] + 1;
}
"#;

fn ints(b: &hcq::Buffer) -> Vec<i32> {
    b.read().unwrap()
}

#[test]
fn views_bound_kernels_and_copies_to_their_range() {
    let dev = Device::open("amd-emu:0").unwrap();
    let prg = dev.program(&dev.compile(SRC).unwrap(), "add_one").unwrap();
    let n = 1024usize;
    let whole = dev.alloc(n * 4).unwrap();
    let host: Vec<i32> = (0..n as i32).map(|i| i * 10).collect();
    whole.write(&host).unwrap();
    // Views: [100, 300) read, [600, 800) written, both in ints.
    let src = whole.view(100 * 4, 200 * 4).unwrap();
    let dst = whole.view(600 * 4, 200 * 4).unwrap();
    assert_eq!((src.size(), src.offset(), dst.offset()), (800, 400, 2400));
    assert_eq!(ints(&src), host[100..300]);
    prg.launch(
        &[Arg::Buffer(&dst), Arg::Buffer(&src), Arg::I32(200)],
        [4, 1, 1],
        [64, 1, 1],
    )
    .unwrap();
    let mut want = host.clone();
    for i in 0..200 {
        want[600 + i] = host[100 + i] + 1;
    }
    assert_eq!(ints(&whole), want);

    // A view of a view, and copies through views.
    let inner = dst.view(8, 16).unwrap();
    assert_eq!(inner.offset(), 2408);
    inner.write(&[-1i32, -2, -3, -4]).unwrap();
    want[602..606].copy_from_slice(&[-1, -2, -3, -4]);
    assert_eq!(ints(&whole), want);
    let other = dev.alloc(64).unwrap();
    other.write(&[7i32; 16]).unwrap();
    other.copy_to(4, &src, 12, 8).unwrap();
    want[103..105].copy_from_slice(&[7, 7]);
    assert_eq!(ints(&whole), want);
    src.copy_to(0, &other, 0, 16).unwrap();
    assert_eq!(ints(&other)[..4], want[100..104]);

    // Ranges past a view's end are refused, whatever room the allocation has.
    for e in [
        whole.view(n * 4 - 4, 8).unwrap_err(),
        src.view(800, 1).unwrap_err(),
        src.copy_in(796, &[0; 8]).unwrap_err(),
        src.copy_out(0, &mut [0; 804]).unwrap_err(),
        src.copy_to(0, &inner, 0, 20).unwrap_err(),
        src.view(usize::MAX, 2).unwrap_err(),
    ] {
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    }
    assert_eq!(ints(&whole), want);
}

#[test]
fn graphs_order_views_by_their_ranges() {
    let dev = Device::open("amd-emu:0").unwrap();
    let n = 256usize;
    let arena = dev.alloc(4 * n * 4).unwrap();
    let host: Vec<i32> = (0..4 * n as i32).collect();
    arena.write(&host).unwrap();
    let part = |k: usize| arena.view(k * n * 4, n * 4).unwrap();
    // Copy part 0 -> part 1, then part 1 -> part 2: the second reads what the first wrote.
    let mut g = GraphBuilder::new();
    let x = g.input(&part(0));
    g.copy(x, &part(1), n * 4).unwrap();
    g.copy(&part(1), &part(2), n * 4).unwrap();
    let graph = g.build().unwrap();
    graph.replay(&[&part(3)], &[]).unwrap();
    let got = ints(&arena);
    assert_eq!(got[n..2 * n], host[3 * n..4 * n]);
    assert_eq!(got[2 * n..3 * n], host[3 * n..4 * n]);
    // An input overlapping a fixed view of the graph is refused; the graph stays usable.
    let overlapping = arena.view(n * 4 + 4, n * 4).unwrap();
    let e = graph.replay(&[&overlapping], &[]).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    graph.replay(&[&part(0)], &[]).unwrap();
    assert_eq!(ints(&arena)[2 * n..3 * n], host[..n]);
}

/// `device_address` is what a kernel receives for the buffer: a kernel stores the pointer it
/// was given, and views are their allocation's address plus their offset.
#[test]
fn device_address_is_the_pointer_a_kernel_receives() {
    const WHERE: &str = r#"
extern "C" __attribute__((global)) void where_is(unsigned long long* out, const char* a,
                                                 const char* b) {
  if (__builtin_amdgcn_workitem_id_x() == 0) {
    out[0] = (unsigned long long)a;
    out[1] = (unsigned long long)b;
  }
}
"#;
    let dev = Device::open("amd-emu:0").unwrap();
    assert_eq!(dev.index(), 0);
    let prg = dev
        .program(&dev.compile(WHERE).unwrap(), "where_is")
        .unwrap();
    let whole = dev.alloc(4096).unwrap();
    let view = whole.view(1000, 24).unwrap();
    let out = dev.alloc(16).unwrap();
    prg.launch(
        &[Arg::Buffer(&out), Arg::Buffer(&whole), Arg::Buffer(&view)],
        [1, 1, 1],
        [32, 1, 1],
    )
    .unwrap();
    let seen: Vec<u64> = out.read().unwrap();
    let base = whole.device_address().unwrap();
    assert_eq!(seen, [base, base + 1000]);
    assert_eq!(view.device_address().unwrap(), base + 1000);
    assert_eq!(
        view.view(8, 8).unwrap().device_address().unwrap(),
        base + 1008
    );
}
