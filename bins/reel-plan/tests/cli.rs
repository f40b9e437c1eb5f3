//! `reel-plan` on a landing folder: a balanced plan that `reel_pipeline::Plan` reads back.

use std::process::Command;

use reel_pipeline::Plan;

#[test]
fn plans_a_landing_folder_into_balanced_batches() {
    let dir = tempfile::tempdir().expect("tempdir");
    let landing = dir.path().join("landing");
    // Episodes of different lengths, so sizes differ.
    for (i, seconds) in [0.4, 0.8, 0.5, 1.2, 0.3, 0.9, 0.6].into_iter().enumerate() {
        let config = reel_synth::SynthConfig {
            seconds,
            cameras: 1,
            width: 32,
            height: 24,
            ..reel_synth::SynthConfig::default()
        };
        reel_synth::write_episode(&config, i as u64, &landing).expect("synth");
    }
    let plan_path = dir.path().join("plan.json");
    let out = Command::new(env!("CARGO_BIN_EXE_reel-plan"))
        .arg(&landing)
        .arg("-o")
        .arg(&plan_path)
        .args(["--batches", "3"])
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("imbalance"));
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    assert_eq!(line["episodes"], 7);

    let plan =
        Plan::from_json("plan.json", &std::fs::read(&plan_path).expect("plan")).expect("parses");
    assert_eq!(plan.batches.len(), 3);
    let sizes: Vec<u64> = plan.batches.iter().map(|b| b.bytes).collect();
    let largest_episode = plan
        .batches
        .iter()
        .flat_map(|b| &b.episodes)
        .map(|e| e.bytes)
        .max()
        .expect("episodes");
    let mean = plan.total_bytes as f64 / 3.0;
    // Greedy decreasing: no batch exceeds the mean by more than one episode.
    assert!(
        sizes
            .iter()
            .all(|&s| (s as f64) <= mean + largest_episode as f64),
        "{sizes:?}"
    );
    // Sidecars are not episodes.
    assert!(
        plan.batches
            .iter()
            .flat_map(|b| &b.episodes)
            .all(|e| e.key.ends_with(".mcap"))
    );

    // A byte capacity below the largest episode gives it a batch of its own.
    let out = Command::new(env!("CARGO_BIN_EXE_reel-plan"))
        .arg(&landing)
        .arg("-o")
        .arg(&plan_path)
        .args(["--batch-bytes", &(largest_episode - 1).to_string()])
        .output()
        .expect("runs");
    assert!(out.status.success());
    let plan =
        Plan::from_json("plan.json", &std::fs::read(&plan_path).expect("plan")).expect("parses");
    assert_eq!(plan.batches[0].episodes.len(), 1);
    assert_eq!(plan.batches[0].bytes, largest_episode);
}

#[test]
fn plans_an_rlds_build_s_shards() {
    let dir = tempfile::tempdir().expect("tempdir");
    let build = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/rlds/droid_mini/1.0.0");
    let plan_path = dir.path().join("plan.json");
    let out = Command::new(env!("CARGO_BIN_EXE_reel-plan"))
        .arg("--rlds")
        .arg(build)
        .arg("-o")
        .arg(&plan_path)
        .args(["--batches", "2"])
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan =
        Plan::from_json("plan.json", &std::fs::read(&plan_path).expect("plan")).expect("parses");
    let mut keys: Vec<&str> = plan
        .batches
        .iter()
        .flat_map(|b| &b.episodes)
        .map(|e| e.key.as_str())
        .collect();
    keys.sort_unstable();
    // The shards, not dataset_info.json or features.json.
    assert_eq!(
        keys,
        [
            "droid_mini-train.tfrecord-00000-of-00002",
            "droid_mini-train.tfrecord-00001-of-00002"
        ]
    );
    assert_eq!(plan.batches.len(), 2);
}

#[test]
fn plans_a_zarr_buffer_s_episodes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let buffer = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/zarr/umi_v2.zarr.zip");
    let plan_path = dir.path().join("plan.json");
    let out = Command::new(env!("CARGO_BIN_EXE_reel-plan"))
        .arg("--zarr")
        .arg(buffer)
        .arg("-o")
        .arg(&plan_path)
        .args(["--batches", "2"])
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan =
        Plan::from_json("plan.json", &std::fs::read(&plan_path).expect("plan")).expect("parses");
    let mut episodes: Vec<(&str, u64)> = plan
        .batches
        .iter()
        .flat_map(|b| &b.episodes)
        .map(|e| (e.key.as_str(), e.bytes))
        .collect();
    episodes.sort_unstable();
    // UMI's episodes of 6, 8 and 5 steps; a step is two 48x32 RGB pictures and 21 numbers
    // (3 + 3 + 1 float32, 6 + 6 float64).
    let step = 2 * 48 * 32 * 3 + 7 * 4 + 12 * 8;
    assert_eq!(
        episodes,
        [
            ("umi_v2_000000", 6 * step),
            ("umi_v2_000001", 8 * step),
            ("umi_v2_000002", 5 * step)
        ]
    );
    // Balanced: the 8-step episode alone, the other two together.
    assert_eq!(plan.batches.len(), 2);
    assert!(
        plan.batches
            .iter()
            .any(|b| b.episodes.len() == 1 && b.bytes == 8 * step)
    );
}
