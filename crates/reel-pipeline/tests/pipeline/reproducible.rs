//! Ingest is a function of its inputs: the same landing episode and settings give the same
//! canonical bytes, run after run, in one process or several.

use reel_io::Store;
use reel_pipeline::{BatchSpec, Pipeline, PipelineConfig, RunOptions};
use reel_synth::SynthConfig;

/// Ingests `key` from `landing` into a fresh store under `dir` and returns the canonical
/// episode's bytes.
fn ingest(landing: &Store, key: &str, dir: &std::path::Path) -> Vec<u8> {
    let store = Store::open(dir.to_str().expect("utf-8")).expect("store");
    let pipeline =
        Pipeline::new(landing.clone(), store.clone(), PipelineConfig::default()).expect("pipeline");
    pipeline
        .run(&BatchSpec::single(key), &RunOptions::default(), &|_| {})
        .expect("runs");
    let canonical = store.list("canonical/").expect("list");
    assert_eq!(canonical.len(), 1, "{canonical:?}");
    store.read(&canonical[0]).expect("read").to_vec()
}

/// Three ingests of one recording in one process: the later ones start with a heap full of
/// the earlier ones' freed buffers, which once changed the H.264 bytes (x264's AVX-512
/// code reads memory it did not write; the encoder now keeps x264 off AVX-512).
#[test]
fn ingesting_twice_gives_the_same_bytes() {
    reel_video::quiet_ffmpeg_logs();
    let dir = tempfile::tempdir().expect("tempdir");
    let landing_dir = dir.path().join("landing");
    let synth = SynthConfig {
        seconds: 8.0,
        ..SynthConfig::default()
    };
    let written = reel_synth::write_episode(&synth, 7, &landing_dir).expect("synth");
    let landing = Store::open(landing_dir.to_str().expect("utf-8")).expect("landing");
    let key = format!("{}.mcap", written.report.episode_id);
    let first = ingest(&landing, &key, &dir.path().join("a"));
    for run in ["b", "c"] {
        let again = ingest(&landing, &key, &dir.path().join(run));
        assert!(
            first == again,
            "run {run}: {} bytes against {}, first difference at byte {:?}",
            again.len(),
            first.len(),
            first.iter().zip(&again).position(|(x, y)| x != y)
        );
    }
}
