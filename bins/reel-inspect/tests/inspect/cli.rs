//! `reel-inspect` on a canonical episode and on a landing log.

use std::process::Command;

use reel_landing::{PackConfig, pack_episode};
use reel_pipeline::test_support::SynthCorpus;
use reel_synth::{SynthConfig, generate_episode};

use crate::json_lines;

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
    let reports = json_lines(run);

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

/// `lineage` of a manifest: the manifest, then each episode with its digest and landing
/// recording, and the warehouse table versions the curation read; an episode replaced
/// since is CHANGED and the command exits 1.
#[test]
fn lineage_follows_a_manifest_to_its_episodes_and_names_what_changed() {
    let dir = tempfile::tempdir().unwrap();
    let config = SynthConfig {
        seconds: 2.0,
        cameras: 1,
        width: 32,
        height: 24,
        ..SynthConfig::default()
    };
    let rule = reel_manifest::SamplingRule::at_hz(10.0, 0.0, 0.0);
    let manifest = dir.path().join("train.arrow");
    let meta =
        reel_manifest::ManifestMeta::new("SELECT * FROM episodes", "episodes@3 ingestions@3", rule);
    let corpus = SynthCorpus::ingest(&config, 2, dir.path()).unwrap();
    corpus.write_manifest(&manifest, &meta).unwrap();
    let keys = corpus.keys();
    let lineage = |json: bool| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_reel-inspect"));
        command.arg("lineage").arg(&manifest);
        if json {
            command.arg("--json");
        }
        command.output().unwrap()
    };
    let run = lineage(true);
    let records = json_lines(run);
    assert_eq!(records.len(), 3, "{records:?}");
    assert_eq!(records[0]["kind"], "manifest");
    assert_eq!(records[0]["query"], "SELECT * FROM episodes");
    assert_eq!(records[0]["warehouse_snapshot"], "episodes@3 ingestions@3");
    for episode in &records[1..] {
        assert_eq!(episode["kind"], "episode");
        assert_eq!(episode["status"], "same");
        assert_eq!(episode["digest"], episode["recorded_digest"]);
        assert!(
            episode["landing_digest"]
                .as_str()
                .unwrap()
                .starts_with("xxh3_64:")
        );
    }
    // Episode 1's bytes under episode 0's name.
    std::fs::copy(dir.path().join(&keys[1]), dir.path().join(&keys[0])).unwrap();
    let run = lineage(false);
    assert_eq!(run.status.code(), Some(1));
    let text = String::from_utf8(run.stdout).unwrap();
    assert!(
        text.contains("table versions episodes@3 ingestions@3"),
        "{text}"
    );
    let changed: Vec<&str> = text.lines().filter(|l| l.contains("CHANGED")).collect();
    assert_eq!(changed.len(), 1, "{text}");
    assert!(changed[0].contains(&keys[0]), "{text}");
}
