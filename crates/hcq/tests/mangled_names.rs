//! Kernels found by the names HIP source gives them although C++ mangled their symbols
//! (`scale`, not `_Z5scalePfPKffi`), and an error listing the candidates when a name is
//! ambiguous; results checked against the host.

use hcq::{Arg, Device, Error};

const SRC: &str = r#"
#define KERNEL __attribute__((global))
#define ID (__builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x())
KERNEL void add_one(int* x, int n) { if (ID < n) x[ID] += 1; }
KERNEL void scale(float* x, float k, int n) { if (ID < n) x[ID] *= k; }
namespace ns {
KERNEL void scale(int* x, int k, int n) { if (ID < n) x[ID] *= k; }
}
KERNEL void twice(int* x, int n) { if (ID < n) x[ID] *= 2; }
KERNEL void twice(float* x, int n) { if (ID < n) x[ID] *= 2.0f; }
"#;

#[test]
fn kernels_are_found_by_their_source_names() {
    let dev = Device::open("amd-emu:0").expect("the emulated GPU opens");
    let lib = dev.compile(SRC).expect("compiles with clang-19");
    let n = 300usize;
    let ints: Vec<i32> = (0..n as i32).map(|i| i - 100).collect();
    let buf = dev.alloc(n * 4).unwrap();
    let grid = [(n as u32).div_ceil(64), 1, 1];

    // A plain name and a qualified one, each unique.
    let add_one = dev
        .program(&lib, "add_one")
        .expect("add_one by its source name");
    assert_eq!(add_one.name(), "add_one");
    let scale = dev
        .program(&lib, "ns::scale")
        .expect("ns::scale by its qualified name");
    buf.write(&ints).unwrap();
    add_one
        .launch(&[Arg::Buffer(&buf), Arg::I32(n as i32)], grid, [64, 1, 1])
        .unwrap();
    scale
        .launch(
            &[Arg::Buffer(&buf), Arg::I32(-3), Arg::I32(n as i32)],
            grid,
            [64, 1, 1],
        )
        .unwrap();
    let want: Vec<i32> = ints.iter().map(|x| (x + 1) * -3).collect();
    assert_eq!(buf.read::<i32>().unwrap(), want);

    // The mangled symbol still works, and picks one overload.
    let twice_f = dev.program(&lib, "_Z5twicePfi").expect("by its symbol");
    let floats: Vec<f32> = (0..n).map(|i| i as f32 * 0.25).collect();
    buf.write(&floats).unwrap();
    twice_f
        .launch(&[Arg::Buffer(&buf), Arg::I32(n as i32)], grid, [64, 1, 1])
        .unwrap();
    let want: Vec<f32> = floats.iter().map(|x| x * 2.0).collect();
    assert_eq!(buf.read::<f32>().unwrap(), want);

    // Ambiguous names list their candidates; unknown ones list the kernels.
    for (name, candidates) in [
        ("twice", ["_Z5twicePii", "_Z5twicePfi"]),
        ("scale", ["_Z5scalePffi", "_ZN2ns5scaleEPiii"]),
    ] {
        match dev.program(&lib, name) {
            Err(Error::InvalidCodeObject(m)) => {
                assert!(m.contains("ambiguous"), "{m}");
                for c in candidates {
                    assert!(m.contains(c), "{name}: {m}");
                }
            }
            Err(e) => panic!("{name}: {e}"),
            Ok(_) => panic!("{name} is ambiguous"),
        }
    }
    match dev.program(&lib, "triple") {
        Err(Error::InvalidCodeObject(m)) => {
            assert!(
                m.contains("no kernel named \"triple\"") && m.contains("_Z7add_onePii"),
                "{m}"
            )
        }
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("there is no triple"),
    }
}
