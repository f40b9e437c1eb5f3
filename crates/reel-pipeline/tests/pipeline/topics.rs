//! Topic rules in the pipeline config take effect in ingest: a skipped topic is left out,
//! a role changes how a numeric topic is resampled, a group moves a topic's chunks.

use reel_io::MemorySource;
use reel_landing::TopicRule;
use reel_mcap::{EpisodeReader, keys};
use reel_pipeline::{PipelineConfig, ProcessedEpisode, process_episode};
use reel_synth::{ACTION_TOPIC, HAND_TOPICS, JOINT_STATES_TOPIC, SynthConfig, generate_episode};

fn ingest(config: &PipelineConfig) -> ProcessedEpisode {
    reel_video::quiet_ffmpeg_logs();
    let synth = SynthConfig {
        seconds: 2.0,
        cameras: 1,
        width: 64,
        height: 48,
        ..SynthConfig::default()
    };
    let landing = generate_episode(&synth, 4).expect("synth");
    process_episode("landing.mcap", &landing.name, &landing.mcap, config).expect("ingests")
}

fn rule(pattern: &str) -> TopicRule {
    TopicRule {
        pattern: pattern.into(),
        group: None,
        skip: false,
        role: None,
        fields: None,
    }
}

fn reader(episode: &ProcessedEpisode) -> EpisodeReader<MemorySource> {
    EpisodeReader::open(MemorySource::new("canonical.mcap", episode.bytes.clone())).expect("opens")
}

#[test]
fn a_skipped_topic_is_left_out_of_the_canonical_episode() {
    let mut config = PipelineConfig::default();
    config.topics.rules.push(TopicRule {
        skip: true,
        ..rule("/hand/*")
    });
    let processed = ingest(&config);
    let reader = reader(&processed);
    for hand in HAND_TOPICS {
        assert!(reader.channel(hand).is_err(), "{hand} is skipped");
        assert!(
            processed.summary.skipped_topics.contains_key(hand),
            "{:?}",
            processed.summary.skipped_topics
        );
    }
    assert!(reader.channel(JOINT_STATES_TOPIC).is_ok());
    assert_eq!(processed.summary.hand_steps, 0);
    assert_ne!(
        processed.summary.provenance.config_digest,
        PipelineConfig::default().digest().expect("digest"),
        "topic rules shape the output, so they are in the digest"
    );
}

#[test]
fn a_role_changes_how_a_numeric_topic_is_resampled() {
    let plain = reader(&ingest(&PipelineConfig::default()));
    let all = 0..u64::MAX;
    let before = plain.signals(&[ACTION_TOPIC], all.clone()).expect("reads");
    let first_field = before[0].fields[0].clone();
    let mut config = PipelineConfig::default();
    config.topics.rules.push(TopicRule {
        role: Some("state".into()),
        group: Some("commands".into()),
        fields: Some(vec![first_field.clone()]),
        ..rule(ACTION_TOPIC)
    });
    let ruled = reader(&ingest(&config));
    let channel = ruled.channel(ACTION_TOPIC).expect("action channel");
    assert_eq!(channel.metadata[keys::KIND], "state");
    assert_eq!(ruled.groups()["commands"], [ACTION_TOPIC.to_owned()]);
    let after = ruled.signals(&[ACTION_TOPIC], all).expect("reads");
    assert_eq!(after[0].fields, [first_field]);
    // As state, the topic goes on the 200 Hz state grid instead of the 50 Hz action one.
    let (steps_before, steps_after) = (before[0].log_times.len(), after[0].log_times.len());
    assert!(
        (4 * steps_before).abs_diff(steps_after) <= 4,
        "{steps_before} action steps, {steps_after} state steps"
    );
}
