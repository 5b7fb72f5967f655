//! `hcq bench`: each benchmark prints its figure and a baseline measured in the same run.

use clap::Subcommand;
use std::time::{Duration, Instant};

#[derive(Subcommand, Clone, Copy)]
pub enum Which {
    /// Host nanoseconds to enqueue one launch of an empty kernel, against copying the same
    /// command words into a ring with memcpy.
    Launch {
        /// Total launches.
        #[arg(long, default_value_t = 100_000)]
        launches: usize,
    },
}

/// One reported figure.
pub struct Figure {
    pub name: String,
    pub value: f64,
    pub unit: &'static str,
    pub baseline: f64,
    pub ratio: f64,
}

impl Figure {
    fn print(&self, json: bool) {
        if json {
            println!(
                "{{\"name\":\"{}\",\"value\":{:.3},\"unit\":\"{}\",\"baseline\":{:.3},\"ratio\":{:.3}}}",
                self.name, self.value, self.unit, self.baseline, self.ratio
            );
        } else {
            println!(
                "{:<24} {:>10.1} {}   baseline {:>8.1} {}   ratio {:.2}x",
                self.name, self.value, self.unit, self.baseline, self.unit, self.ratio
            );
        }
    }
}

pub fn run(which: Which, json: bool, device: Option<&str>) -> Result<(), String> {
    let figures = match which {
        Which::Launch { launches } => launch(device, launches)?,
    };
    for f in figures {
        f.print(json);
    }
    Ok(())
}

fn launch(device: Option<&str>, launches: usize) -> Result<Vec<Figure>, String> {
    let e = |e: hcq::Error| e.to_string();
    let dev = crate::open_device(device).map_err(e)?;
    let lib =
        crate::prebuilt::object_for("demo.hip", crate::prebuilt::DEMO_SOURCE, &dev.info().arch)
            .map(<[u8]>::to_vec)
            .map_or_else(|| dev.compile(crate::prebuilt::DEMO_SOURCE).map_err(e), Ok)?;
    let empty = dev.program(&lib, "empty").map_err(e)?;
    // Warm up, and learn how many dwords one launch writes.
    empty.launch(&[], [1, 1, 1], [1, 1, 1]).map_err(e)?;
    dev.synchronize().map_err(e)?;
    let words_per_launch = dev.last_submission_dwords();
    let ring_dwords = dev.ring_capacity_dwords();
    // Bursts that fit the ring with room to spare, so enqueue never waits for the GPU.
    let burst = ((ring_dwords / 2) / words_per_launch.max(1)).max(1) as usize;
    let mut enqueue = Duration::ZERO;
    let mut done = 0;
    while done < launches {
        let n = burst.min(launches - done);
        let start = Instant::now();
        for _ in 0..n {
            empty.launch(&[], [1, 1, 1], [1, 1, 1]).map_err(e)?;
        }
        enqueue += start.elapsed();
        dev.synchronize().map_err(e)?;
        done += n;
    }
    let per_launch = enqueue.as_nanos() as f64 / launches as f64;

    // Baseline: the same number of words copied into a ring of the same size.
    let packet: Vec<u32> = (0..words_per_launch as u32).collect();
    let mut ring = vec![0u32; ring_dwords as usize];
    let mut at = 0usize;
    let start = Instant::now();
    for _ in 0..launches {
        if at + packet.len() > ring.len() {
            at = 0;
        }
        ring[at..at + packet.len()].copy_from_slice(std::hint::black_box(&packet));
        at += packet.len();
    }
    std::hint::black_box(&ring);
    let memcpy = start.elapsed().as_nanos() as f64 / launches as f64;
    Ok(vec![Figure {
        name: "launch_enqueue".into(),
        value: per_launch,
        unit: "ns",
        baseline: memcpy,
        ratio: per_launch / memcpy.max(1e-9),
    }])
}
