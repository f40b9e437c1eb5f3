//! rosbag2 recordings (written by `rosbags`, an independent writer) in the landing store:
//! listed by the planner beside MCAP files, ingested into canonical episodes that keep
//! what Reel does not read, with their decode problems in the QC report.

use std::process::Command;
use std::sync::Mutex;

use reel_io::{ByteSource, Store};
use reel_mcap::records::ChannelContent;
use reel_mcap::{EpisodeReader, keys};
use reel_pipeline::{
    BatchSpec, EpisodeStatus, Event, Pipeline, PipelineConfig, RunOptions, list_landing,
};
use reel_synth::SynthConfig;

#[test]
fn rosbag2_folders_are_planned_and_ingested_beside_mcap_files() {
    reel_video::quiet_ffmpeg_logs();
    let dir = tempfile::tempdir().expect("tempdir");
    let landing_dir = dir.path().join("landing");
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../reel-landing/tests/python/write_rosbags.py"
    );
    let python = reel_io::test_support::python().expect("the test venv's Python");
    let status = Command::new(python)
        .arg(script)
        .arg(&landing_dir)
        .status()
        .expect("python");
    assert!(status.success(), "write_rosbags.py failed");
    let synth = SynthConfig {
        seconds: 1.0,
        cameras: 1,
        width: 64,
        height: 48,
        ..SynthConfig::default()
    };
    let written = reel_synth::write_episode(&synth, 0, &landing_dir).expect("synth");
    let landing = Store::open(landing_dir.to_str().expect("utf-8")).expect("landing");

    let planned: Vec<String> = list_landing(&landing, "")
        .expect("lists")
        .into_iter()
        .map(|e| {
            assert!(e.bytes > 0, "{e:?}");
            e.key
        })
        .collect();
    let mcap_key = format!("{}.mcap", written.report.episode_id);
    assert_eq!(
        planned,
        [
            mcap_key.as_str(),
            "mcap/metadata.yaml",
            "mcap_be/metadata.yaml",
            "split/metadata.yaml"
        ]
    );

    let store = Store::open(dir.path().join("store").to_str().expect("utf-8")).expect("store");
    let pipeline =
        Pipeline::new(landing, store.clone(), PipelineConfig::default()).expect("pipeline");
    let batch = BatchSpec {
        key: "b0".into(),
        landing_keys: planned.clone(),
    };
    let events = Mutex::new(Vec::new());
    pipeline
        .run(&batch, &RunOptions::default(), &|e| {
            if let Event::Episode(e) = e {
                events
                    .lock()
                    .expect("lock")
                    .push((e.landing_key.clone(), e.status));
            }
        })
        .expect("runs");
    let events = events.into_inner().expect("lock");
    for key in &planned {
        assert!(
            events.contains(&(key.clone(), EpisodeStatus::Done)),
            "{key}: {events:?}"
        );
    }

    // The split recording is one episode named after its folder, with the topics it
    // could not read kept as recorded and its bad messages in the QC report.
    let source = store.source("canonical/split.mcap");
    let reader = EpisodeReader::open(&source as &dyn ByteSource).expect("canonical");
    assert_eq!(reader.groups()[keys::OTHER_GROUP], ["/chatter"]);
    assert!(reader.groups()["cameras"].contains(&"/camera/bayer".to_owned()));
    // Depth cameras are ingested losslessly, as recorded.
    for topic in ["/camera/depth", "/depth/rvl", "/depth/metres"] {
        assert!(matches!(
            reader.channel_info(topic).expect("depth").content,
            ChannelContent::Depth(_)
        ));
        assert_eq!(
            reader
                .depth(topic, 0..u64::MAX)
                .expect("depth")
                .log_times
                .len(),
            10,
            "{topic}"
        );
    }
    let summary: serde_json::Value =
        serde_json::from_str(&reader.metadata()["episode"]["reel.summary"]).expect("summary");
    let findings = summary["qc"]["findings"].as_array().expect("findings");
    let undecoded: Vec<&str> = findings
        .iter()
        .filter(|f| f["kind"] == "undecoded_messages")
        .map(|f| f["topic"].as_str().expect("topic"))
        .collect();
    assert_eq!(undecoded, ["/camera/rgb", "/joint_states"], "{findings:?}");
    assert_eq!(
        summary["recorded_topics"]["/chatter"],
        "no images or numeric fields"
    );
    let windows = reader
        .signals(&["/tf/base_link"], 0..u64::MAX)
        .expect("the transform stream of one child frame");
    assert!(!windows[0].log_times.is_empty());
}
