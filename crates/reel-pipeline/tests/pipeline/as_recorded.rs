//! The as-recorded profile: ingest writes every stream at its recorded times, the very
//! streams `reel-pack` writes, and stamps them with its summary.

use reel_io::MemorySource;
use reel_landing::{PackConfig, pack_episode, read_landing};
use reel_mcap::EpisodeReader;
use reel_pipeline::{Grid, PipelineConfig, VELOCITY_TOPIC, process_episode};
use reel_synth::{JOINT_STATES_TOPIC, SynthConfig, camera_topic, generate_episode};

#[test]
fn as_recorded_ingest_keeps_recorded_times_and_writes_what_reel_pack_writes() {
    reel_video::quiet_ffmpeg_logs();
    let synth = SynthConfig {
        seconds: 1.5,
        cameras: 1,
        width: 64,
        height: 48,
        ..SynthConfig::default()
    };
    let landing = generate_episode(&synth, 2).expect("synth");
    let config = PipelineConfig::as_recorded(&PackConfig::default());
    assert_eq!(config.resample.grid, Grid::AsRecorded);
    assert_ne!(
        config.digest().expect("digest"),
        PipelineConfig::default().digest().expect("digest")
    );
    let processed =
        process_episode("landing.mcap", &landing.name, &landing.mcap, &config).expect("ingests");
    let ingested =
        EpisodeReader::open(MemorySource::new("ingested.mcap", processed.bytes)).expect("opens");

    // Joint states at the times the robot logged them, every one of them.
    let recorded = read_landing("landing.mcap", &landing.mcap, &|_| false).expect("reads");
    let joints = (recorded.signals.iter())
        .find(|s| s.topic == JOINT_STATES_TOPIC)
        .expect("joint states");
    let logged: Vec<u64> = joints.samples.iter().map(|s| s.log_time).collect();
    let written = ingested
        .signals(&[JOINT_STATES_TOPIC], 0..u64::MAX)
        .expect("reads");
    assert_eq!(written[0].log_times, logged);
    assert!(ingested.channel(VELOCITY_TOPIC).is_err(), "nothing derived");
    let summary = &processed.summary;
    assert_eq!(summary.state_steps as usize, logged.len());
    assert!(summary.qc.summary().pass(), "{:?}", summary.qc.findings);

    // The same messages as reel-pack's, topic by topic; only the episode record differs.
    let (packed, _) =
        pack_episode("landing.mcap", &landing.mcap, &PackConfig::default()).expect("packs");
    let packed = EpisodeReader::open(MemorySource::new("packed.mcap", packed)).expect("opens");
    for topic in [JOINT_STATES_TOPIC.to_owned(), camera_topic("high")] {
        let ours = ingested.read_topics(&[&topic], 0..u64::MAX).expect("reads");
        let theirs = packed.read_topics(&[&topic], 0..u64::MAX).expect("reads");
        assert_eq!(ours.len(), theirs.len(), "{topic}");
        for (a, b) in ours.iter().zip(&theirs) {
            assert_eq!(
                (a.log_time, a.publish_time, &a.data),
                (b.log_time, b.publish_time, &b.data),
                "{topic}"
            );
        }
    }
    assert!(ingested.metadata()["episode"].contains_key("reel.summary"));
}
