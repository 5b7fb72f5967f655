//! A GPU memory fault on one stream ends the whole device, as KFD evicts every queue the
//! process has on the GPU: the stream reports the fault, and the device's own queue and its
//! other streams refuse work at once with `DeviceLost` instead of timing out. Its own process,
//! because a lost device stays lost.

use hcq::{Arg, Device, Error};

const SRC: &str = r#"
extern "C" __attribute__((global)) void store_to(unsigned long address, int value) {
  *(volatile int*)address = value;
}
"#;

#[test]
fn a_memory_fault_on_a_stream_ends_every_queue_of_the_device() {
    let dev = Device::open("amd-emu:0").unwrap();
    let prg = dev.program(&dev.compile(SRC).unwrap(), "store_to").unwrap();
    let (faulting, other) = (dev.stream().unwrap(), dev.stream().unwrap());
    let buf = dev.alloc(64).unwrap();
    buf.write(&[5i32; 16]).unwrap();
    faulting
        .launch(
            &prg,
            &[Arg::U64(0x30_0000), Arg::I32(7)],
            [1, 1, 1],
            [1, 1, 1],
        )
        .unwrap();
    match faulting.synchronize().unwrap_err() {
        Error::DeviceFault { message, .. } => assert!(message.contains("0x300000"), "{message}"),
        other => panic!("expected a device fault, got {other}"),
    }
    let lost = |what: &str, r: hcq::Result<()>| match r {
        Err(Error::DeviceLost { message, .. }) => {
            assert!(message.contains("0x300000"), "{what}: {message}")
        }
        other => panic!("{what}: expected DeviceLost, got {other:?}"),
    };
    // Never run: every launch below is refused before it is queued.
    let args = [Arg::U64(0x40_0000), Arg::I32(1)];
    lost(
        "another stream's launch",
        other.launch(&prg, &args, [1, 1, 1], [1, 1, 1]),
    );
    lost("another stream's event", other.record_event().map(|_| ()));
    lost(
        "the device's launch",
        prg.launch(&args, [1, 1, 1], [1, 1, 1]),
    );
    lost("the device's copy", buf.copy_in(0, &[1, 2, 3, 4]));
    lost("a new stream's launch", {
        let s = dev.stream().unwrap();
        s.launch(&prg, &args, [1, 1, 1], [1, 1, 1])
    });
}
