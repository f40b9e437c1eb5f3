//! `reel-inspect` on a canonical episode and on a landing log.

#![allow(clippy::unwrap_used)] // Tests fail loudly by design.

use std::process::Command;

use reel_mcap::{PackConfig, pack_episode};
use reel_synth::{SynthConfig, generate_episode};

#[test]
fn reports_groups_chunks_and_gops() {
    let config = SynthConfig {
        seconds: 2.5,
        cameras: 2,
        width: 64,
        height: 48,
        ..SynthConfig::default()
    };
    let landing = generate_episode(&config, 0).unwrap();
    let (canonical, _) =
        pack_episode("landing.mcap", &landing.mcap, &PackConfig::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (landing_path, canonical_path) = (
        dir.path().join("landing.mcap"),
        dir.path().join("canonical.mcap"),
    );
    std::fs::write(&landing_path, &landing.mcap).unwrap();
    std::fs::write(&canonical_path, &canonical).unwrap();

    let run = Command::new(env!("CARGO_BIN_EXE_reel-inspect"))
        .arg("--json")
        .arg(&canonical_path)
        .arg(&landing_path)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let reports: Vec<serde_json::Value> = String::from_utf8(run.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();

    let canonical = &reports[0];
    assert_eq!(canonical["layout"], "topic-groups");
    let groups: Vec<&str> = canonical["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["group"].as_str().unwrap())
        .collect();
    assert_eq!(groups, ["cameras", "proprio"]);
    assert_eq!(
        canonical["groups"][0]["chunks"], 3,
        "2.5 s of 1 s GOP windows"
    );
    for gop in canonical["gops"].as_array().unwrap() {
        assert_eq!(gop["chunks_starting_at_keyframe"], gop["chunks"]);
    }

    // The landing log: JPEG cameras, every chunk mixes topics.
    let landing = &reports[1];
    assert!(landing["layout"].is_null());
    assert_eq!(landing["groups"][0]["group"], "(none)");
    assert!(landing["gops"].as_array().unwrap().is_empty());

    let table = Command::new(env!("CARGO_BIN_EXE_reel-inspect"))
        .arg(&canonical_path)
        .output()
        .unwrap();
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(
        text.contains("cameras") && text.contains("mean GOP"),
        "{text}"
    );
}
