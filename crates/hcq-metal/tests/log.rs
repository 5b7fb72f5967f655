//! The Metal device's debug log, in a test process of its own: `tracing` caches per call site
//! whether anyone listens, and a test in the same process hitting a call site first, with no
//! subscriber, raced this test's scoped subscriber (a kernel line went missing once in CI).

use hcq_core::{Arg, CompileCache};
use hcq_metal::fake::FakeMetal;
use hcq_metal::{MetalBuffer, MetalDevice};

const SRC: &str = "#include <metal_stdlib>\nkernel void add(device float* a, constant int& n, uint i [[thread_position_in_grid]]) { a[i] += n; }\n";

fn arg_of<'b>(b: &'b &MetalBuffer<FakeMetal>) -> hcq_core::Result<&'b MetalBuffer<FakeMetal>> {
    Ok(*b)
}

/// What `RUST_LOG=hcq=debug` prints for a Metal device, as for AMD: the device opened, each
/// allocation, each compile with whether the cache had it, and a line per kernel with its
/// name, grid, block and GPU time once it has run.
#[test]
fn the_log_says_what_the_device_did() {
    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        let dev =
            MetalDevice::open_with_cache(FakeMetal::new(), 0, CompileCache::disabled()).unwrap();
        let lib = dev.compile(SRC).unwrap();
        let prg = dev.load_program(&lib, "add").unwrap();
        let b = dev.alloc(64).unwrap();
        dev.launch(
            &prg,
            &[Arg::Buffer(&b), Arg::I32(2)],
            arg_of,
            [4, 1, 1],
            [16, 1, 1],
            false,
        )
        .unwrap();
        dev.synchronize().unwrap();
    });
    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let line = |needle: &str| {
        log.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no log line with {needle:?} in:\n{log}"))
            .to_string()
    };
    assert!(
        line("metal:0: opened (Fake Metal GPU 0").contains("hcq::device"),
        "{log}"
    );
    assert!(
        line("metal:0: buffer of 64 bytes").contains("hcq::memory"),
        "{log}"
    );
    assert!(
        line("metal: source text (compiled)").contains("hcq::compile"),
        "{log}"
    );
    let kernel = line("metal:0 compute add grid 4x1x1 block 16x1x1");
    let us = hcq_metal::fake::FAKE_GPU_SECONDS * 1e6;
    assert!(kernel.ends_with(&format!(": {us:.2} us")), "{kernel}");
    assert!(kernel.contains("hcq::kernel"), "{kernel}");
}
