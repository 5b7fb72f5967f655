//! `hcq bench graph` as a user runs it.

use std::process::Command;

#[test]
fn bench_graph_prints_every_figure_as_json() {
    let o = Command::new(env!("CARGO_BIN_EXE_hcq"))
        .args(["bench", "graph", "--json", "--replays", "4"])
        .env_remove("HCQ_DEVICE")
        .output()
        .expect("hcq runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = String::from_utf8_lossy(&o.stdout);
    let figures: Vec<serde_json::Value> = s
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    let mut names = Vec::new();
    for k in [10, 100, 1000] {
        names.push(format!("graph_replay_{k}"));
        names.push(format!("graph_replay_idle_{k}"));
        names.push(format!("graph_replay_swapped_{k}"));
        names.push(format!("graph_patch_per_arg_{k}"));
    }
    names.push("graph_replay_1000_vs_10".into());
    for name in &names {
        let f = figures
            .iter()
            .find(|f| f["name"] == name.as_str())
            .unwrap_or_else(|| panic!("{name} missing:\n{s}"));
        assert_eq!(f["unit"], "ns");
        assert!(f["value"].as_f64().unwrap() >= 0.0, "{s}");
        // Each figure is the median of its repetitions (3 back-to-back bursts, 4 lone replays).
        let at = |k: &str| f[k].as_f64().unwrap_or_else(|| panic!("{k}: {s}"));
        assert_eq!(at("median"), at("value"), "{s}");
        assert!(
            at("min") <= at("median") && at("median") <= at("max"),
            "{s}"
        );
        assert!(f["repetitions"].as_u64().unwrap() >= 3, "{s}");
        assert!(f["baseline"].as_f64().unwrap() > 0.0, "{s}");
    }
    assert_eq!(figures.len(), names.len(), "{s}");
}

#[test]
fn bench_graph_rejects_zero_replays() {
    let o = Command::new(env!("CARGO_BIN_EXE_hcq"))
        .args(["bench", "graph", "--replays", "0"])
        .env_remove("HCQ_DEVICE")
        .output()
        .expect("hcq runs");
    assert!(!o.status.success());
}
