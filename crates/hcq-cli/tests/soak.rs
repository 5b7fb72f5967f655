//! `hcq soak`, scaled down to seconds: it passes on the emulated GPU and prints its figures.

use std::process::{Command, Output};

fn soak(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hcq"))
        .arg("soak")
        .args(args)
        .env_remove("HCQ_DEVICE")
        .output()
        .expect("hcq runs")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The numbers on the line of `out` that starts with `label`.
fn numbers(out: &str, label: &str) -> Vec<f64> {
    let line = out
        .lines()
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no line starting with {label:?}:\n{out}"));
    line[label.len()..]
        .split_whitespace()
        .filter_map(|w| w.trim_end_matches('%').parse().ok())
        .collect()
}

#[test]
fn a_scaled_soak_verifies_everything_and_reports_resources() {
    let o = soak(&["--launches", "1000", "--replays", "500", "--copies", "300"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("soak on amd-emu:0"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("warm-up:") && l.contains("baseline is measured after it")),
        "{out}"
    );
    for (phase, count) in [("launches", 1000.0), ("replays", 500.0), ("copies", 300.0)] {
        let figures = numbers(&out, phase);
        assert_eq!(figures.first(), Some(&count), "{phase}: {out}");
        assert!(
            out.lines()
                .any(|l| l.starts_with(phase) && l.contains(" verified in ") && l.contains("/s)")),
            "{phase}: {out}"
        );
    }
    assert!(out.contains("through hcq::Jit"), "{out}");
    for resource in ["rss KiB", "fds", "mappings"] {
        let figures = numbers(&out, resource);
        let [start, end, growth] = figures[..] else {
            panic!("{resource}: {figures:?}\n{out}");
        };
        assert!(start > 0.0 && end > 0.0, "{resource}: {out}");
        assert!(growth <= 5.0, "{resource}: {out}");
        let computed = (end - start) * 100.0 / start;
        assert!((computed - growth).abs() < 0.06, "{resource}: {out}");
    }
    assert!(out.contains("soak passed"), "{out}");
}

#[test]
fn soak_json_has_one_object_per_phase_and_resource() {
    let o = soak(&[
        "--launches",
        "300",
        "--replays",
        "0",
        "--copies",
        "30",
        "--json",
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    let objects: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}\n{out}")))
        .collect();
    let by_name = |name: &str| {
        objects
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no {name}: {out}"))
    };
    assert_eq!(by_name("launches")["value"], 300);
    assert!(by_name("launches")["rate"].as_f64().unwrap() > 0.0);
    assert_eq!(by_name("copies")["value"], 30);
    assert!(objects.iter().all(|v| v["name"] != "replays"), "{out}");
    for resource in ["rss", "fds", "mappings"] {
        let v = by_name(resource);
        let (start, end) = (v["start"].as_u64().unwrap(), v["end"].as_u64().unwrap());
        assert!(start > 0 && end > 0, "{v}");
        assert!(v["growth_percent"].as_f64().unwrap() <= 5.0, "{v}");
    }
    assert_eq!(objects.len(), 5, "{out}");
}
