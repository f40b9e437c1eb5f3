//! Reads generated episodes back with the `mcap` crate and checks them
//! against the configuration and the fault sidecar.

use std::collections::BTreeMap;

use reel_synth::{
    ACTION_TOPIC, DropoutMode, FaultKind, FaultLog, FaultRates, Flavor, HAND_TOPICS,
    JOINT_STATES_TOPIC, SynthConfig, SynthEpisode, generate_episode, write_episode,
};

/// A minimal XCDR1 little-endian reader for the messages reel-synth writes.
struct Cdr<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cdr<'a> {
    fn new(buf: &'a [u8]) -> Self {
        assert_eq!(&buf[..2], &[0, 1], "CDR_LE encapsulation");
        Self { buf, pos: 4 }
    }
    fn align(&mut self, n: usize) {
        let off = self.pos - 4;
        self.pos += (n - off % n) % n;
    }
    fn u32(&mut self) -> u32 {
        self.align(4);
        let v = u32::from_le_bytes(
            self.buf[self.pos..self.pos + 4]
                .try_into()
                .expect("bounds checked"),
        );
        self.pos += 4;
        v
    }
    fn f64(&mut self) -> f64 {
        self.align(8);
        let v = f64::from_le_bytes(
            self.buf[self.pos..self.pos + 8]
                .try_into()
                .expect("bounds checked"),
        );
        self.pos += 8;
        v
    }
    fn string(&mut self) -> String {
        let n = self.u32() as usize;
        let s = std::str::from_utf8(&self.buf[self.pos..self.pos + n - 1])
            .expect("CDR strings are UTF-8")
            .to_string();
        self.pos += n;
        s
    }
    fn bytes(&mut self) -> &'a [u8] {
        let n = self.u32() as usize;
        let b = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        b
    }
    fn header(&mut self) -> (u64, String) {
        let sec = self.u32() as u64;
        let nsec = self.u32() as u64;
        (sec * 1_000_000_000 + nsec, self.string())
    }
    fn f64s(&mut self) -> Vec<f64> {
        let n = self.u32() as usize;
        (0..n).map(|_| self.f64()).collect()
    }
}

struct Msg {
    topic: String,
    log_time: u64,
    data: Vec<u8>,
}

fn messages(episode: &SynthEpisode) -> Vec<Msg> {
    mcap::MessageStream::new(&episode.mcap)
        .expect("valid MCAP")
        .map(|m| {
            let m = m.expect("message decodes");
            Msg {
                topic: m.channel.topic.clone(),
                log_time: m.log_time,
                data: m.data.into_owned(),
            }
        })
        .collect()
}

fn jpeg_of(msg: &Msg) -> &[u8] {
    let mut r = Cdr::new(&msg.data);
    let (stamp, _) = r.header();
    assert_eq!(stamp, msg.log_time, "header stamp equals log time");
    assert_eq!(r.string(), "jpeg");
    r.bytes()
}

fn decode_jpeg(data: &[u8]) -> Option<Vec<u8>> {
    let options = zune_jpeg::zune_core::options::DecoderOptions::default()
        .jpeg_set_out_colorspace(zune_jpeg::zune_core::colorspace::ColorSpace::RGB);
    zune_jpeg::JpegDecoder::new_with_options(
        zune_jpeg::zune_core::bytestream::ZCursor::new(data),
        options,
    )
    .decode()
    .ok()
}

fn mean_luma(rgb: &[u8]) -> f64 {
    rgb.chunks_exact(3)
        .map(|p| 0.299 * p[0] as f64 + 0.587 * p[1] as f64 + 0.114 * p[2] as f64)
        .sum::<f64>()
        / (rgb.len() / 3) as f64
}

fn positions(msg: &Msg) -> Vec<f64> {
    let mut r = Cdr::new(&msg.data);
    r.header();
    let n = r.u32();
    for _ in 0..n {
        r.string();
    }
    r.f64s()
}

fn small(seconds: f64) -> SynthConfig {
    SynthConfig {
        seconds,
        width: 96,
        height: 72,
        ..SynthConfig::default()
    }
}

#[test]
fn counts_order_metadata_and_jpegs() {
    let episode = generate_episode(&small(3.0), 7).expect("generates");
    let msgs = messages(&episode);
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for m in &msgs {
        *counts.entry(m.topic.clone()).or_default() += 1;
    }
    assert_eq!(counts, episode.report.counts);
    assert_eq!(counts.len(), 3 + 4, "3 cameras, joints, action, two hands");
    assert!(
        msgs.windows(2).all(|w| w[0].log_time <= w[1].log_time),
        "log time order"
    );
    assert_eq!(
        msgs.first().map(|m| m.log_time),
        Some(episode.report.start_ns)
    );
    assert_eq!(msgs.last().map(|m| m.log_time), Some(episode.report.end_ns));

    let summary = mcap::Summary::read(&episode.mcap)
        .expect("reads")
        .expect("has a summary");
    assert_eq!(summary.metadata_indexes.len(), 1);
    let record =
        mcap::read::metadata(&episode.mcap, &summary.metadata_indexes[0]).expect("metadata reads");
    assert_eq!(record.name, "episode");
    assert_eq!(record.metadata, episode.report.meta.to_map());
    assert_eq!(record.metadata["episode_id"], episode.name);
    // Default writer layout: interleaved chunks, zstd.
    assert!(
        summary
            .chunk_indexes
            .iter()
            .all(|c| c.compression == "zstd")
    );

    for m in msgs.iter().filter(|m| m.topic.starts_with("/camera/")) {
        let rgb = decode_jpeg(jpeg_of(m)).expect("every frame of a clean episode decodes");
        assert_eq!(rgb.len(), 96 * 72 * 3);
    }
    let joints = msgs
        .iter()
        .find(|m| m.topic == JOINT_STATES_TOPIC)
        .expect("joint states");
    let mut r = Cdr::new(&joints.data);
    r.header();
    assert_eq!(r.u32(), 14);
    assert_eq!(r.string(), "left_joint1");
}

#[test]
fn same_seed_is_byte_identical_across_threads() {
    let config = SynthConfig {
        faults: FaultRates::uniform(10.0),
        ..small(2.0)
    };
    let a = generate_episode(&config, 3).expect("generates");
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let config = config.clone();
            std::thread::spawn(move || generate_episode(&config, 3).expect("generates"))
        })
        .collect();
    for h in handles {
        let b = h.join().expect("thread");
        assert!(
            a.mcap == b.mcap,
            "same seed and index must give the same bytes"
        );
        assert_eq!(a.faults, b.faults);
    }
    let other = generate_episode(
        &SynthConfig {
            seed: 1,
            ..config.clone()
        },
        3,
    )
    .expect("generates");
    assert!(other.mcap != a.mcap);
    assert_ne!(other.name, a.name);

    // On disk too, with the sidecar.
    let dir = tempfile::tempdir().expect("tempdir");
    let written = write_episode(&config, 3, dir.path()).expect("writes");
    assert_eq!(std::fs::read(&written.path).expect("reads"), a.mcap);
    let sidecar: FaultLog =
        serde_json::from_slice(&std::fs::read(&written.faults_path).expect("reads")).expect("json");
    assert_eq!(sidecar, a.faults);
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .expect("lists")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "no temporary files left behind");
}

#[test]
fn rates_and_jitter_within_bounds() {
    let config = SynthConfig {
        drop_probability: 0.0,
        ..small(4.0)
    };
    let episode = generate_episode(&config, 1).expect("generates");
    let msgs = messages(&episode);
    let rates: [(&str, f64); 4] = [
        ("/camera/high/image_raw/compressed", config.camera_hz),
        (JOINT_STATES_TOPIC, config.joint_hz),
        (ACTION_TOPIC, config.action_hz),
        (HAND_TOPICS[0], config.hand_hz),
    ];
    for (topic, hz) in rates {
        let times: Vec<u64> = msgs
            .iter()
            .filter(|m| m.topic == topic)
            .map(|m| m.log_time)
            .collect();
        let expected = config.seconds * hz;
        assert!(
            (times.len() as f64 - expected).abs() <= 1.0,
            "{topic}: {} messages, expected {expected}",
            times.len()
        );
        let period = 1e9 / hz;
        let mut saw_jitter = false;
        for w in times.windows(2) {
            let dt = (w[1] - w[0]) as f64;
            let deviation = (dt - period).abs() / period;
            assert!(
                deviation <= 2.0 * config.jitter + 1e-6,
                "{topic}: interval {dt} ns off by {deviation}"
            );
            saw_jitter |= deviation > 0.01;
        }
        assert!(saw_jitter, "{topic}: timestamps show no jitter at all");
    }

    // Dropped messages are counted, and match the shortfall.
    let lossy = SynthConfig {
        drop_probability: 0.05,
        ..small(4.0)
    };
    let episode = generate_episode(&lossy, 1).expect("generates");
    let lost: u64 = episode.faults.dropped_messages.values().sum();
    assert!(lost > 0, "a 5 % loss over thousands of messages drops some");
    let clean: u64 = generate_episode(&config, 1)
        .expect("generates")
        .report
        .counts
        .values()
        .sum();
    assert_eq!(episode.report.counts.values().sum::<u64>() + lost, clean);
}

/// Checks every fault of `episode` against the messages, and that nothing
/// outside the faults looks faulty.
fn check_faults(episode: &SynthEpisode) -> BTreeMap<FaultKind, usize> {
    let msgs = messages(episode);
    let faults = &episode.faults.faults;
    let mut seen: BTreeMap<FaultKind, usize> = BTreeMap::new();
    let inside = |kind: FaultKind, topic: &str, t: u64| {
        faults.iter().any(|f| {
            f.kind == kind
                && (f.topic == topic || f.topic == "*")
                && (f.start_ns..=f.end_ns).contains(&t)
        })
    };

    // Cameras: blackout, frozen, corrupt.
    let camera_topics: Vec<String> = episode
        .report
        .counts
        .keys()
        .filter(|t| t.starts_with("/camera/"))
        .cloned()
        .collect();
    for topic in &camera_topics {
        let frames: Vec<&Msg> = msgs.iter().filter(|m| &m.topic == topic).collect();
        for (i, m) in frames.iter().enumerate() {
            let jpeg = jpeg_of(m);
            let decoded = decode_jpeg(jpeg);
            if inside(FaultKind::CorruptFrame, topic, m.log_time) {
                assert!(
                    decoded.is_none(),
                    "{topic}@{}: corrupt frame decoded",
                    m.log_time
                );
                continue;
            }
            let rgb = decoded
                .unwrap_or_else(|| panic!("{topic}@{}: clean frame does not decode", m.log_time));
            let luma = mean_luma(&rgb);
            if inside(FaultKind::CameraBlackout, topic, m.log_time) {
                assert!(
                    luma < 50.0,
                    "{topic}@{}: blackout frame has luma {luma}",
                    m.log_time
                );
            } else {
                assert!(
                    luma >= 50.0,
                    "{topic}@{}: frame outside any blackout has luma {luma}",
                    m.log_time
                );
            }
            let frozen = inside(FaultKind::FrozenFrames, topic, m.log_time);
            if let Some(next) = frames.get(i + 1) {
                let same = jpeg == jpeg_of(next);
                let next_frozen = inside(FaultKind::FrozenFrames, topic, next.log_time);
                if frozen && next_frozen {
                    assert!(same, "{topic}@{}: frozen span changes", m.log_time);
                } else if !next_frozen {
                    assert!(!same, "{topic}@{}: unannounced repeated frame", m.log_time);
                }
            }
        }
    }
    // A frozen span repeats the frame before it.
    for f in faults.iter().filter(|f| f.kind == FaultKind::FrozenFrames) {
        let frames: Vec<&Msg> = msgs.iter().filter(|m| m.topic == f.topic).collect();
        let first = frames
            .iter()
            .position(|m| m.log_time == f.start_ns)
            .expect("span starts on a message");
        if first > 0 {
            assert_eq!(jpeg_of(frames[first - 1]), jpeg_of(frames[first]));
        }
    }

    // Joints: a jump is one spike on one joint; choppy spans jitter.
    let joints: Vec<&Msg> = msgs
        .iter()
        .filter(|m| m.topic == JOINT_STATES_TOPIC)
        .collect();
    let names = reel_synth::motion::joint_names();
    for w in joints.windows(3) {
        let (a, b, c) = (positions(w[0]), positions(w[1]), positions(w[2]));
        let choppy = w
            .iter()
            .any(|m| inside(FaultKind::ChoppyJoints, JOINT_STATES_TOPIC, m.log_time));
        for j in 0..names.len() {
            let spike = (b[j] - a[j]).abs().min((b[j] - c[j]).abs());
            let jump = faults.iter().find(|f| {
                f.kind == FaultKind::JointJump
                    && f.start_ns == w[1].log_time
                    && f.joint.as_deref() == Some(&names[j])
            });
            if let Some(f) = jump {
                let magnitude = f.magnitude.expect("jumps carry a magnitude");
                assert!(
                    (spike - magnitude).abs() < 0.05,
                    "jump of {magnitude} seen as {spike}"
                );
            } else if !choppy {
                assert!(
                    spike < 0.03,
                    "unannounced spike of {spike} rad on {} at {}",
                    names[j],
                    w[1].log_time
                );
            }
        }
    }
    for f in faults.iter().filter(|f| f.kind == FaultKind::ChoppyJoints) {
        let span: Vec<Vec<f64>> = joints
            .iter()
            .filter(|m| (f.start_ns..=f.end_ns).contains(&m.log_time))
            .map(|m| positions(m))
            .collect();
        let roughest = span
            .windows(2)
            .flat_map(|w| {
                w[0].iter()
                    .zip(&w[1])
                    .map(|(a, b)| (a - b).abs())
                    .collect::<Vec<_>>()
            })
            .fold(0.0f64, f64::max);
        assert!(roughest > 0.03, "choppy span is smooth ({roughest})");
    }

    // Hands: NaN inside NaN dropouts, absent inside missing ones, finite elsewhere.
    for (h, topic) in HAND_TOPICS.iter().enumerate() {
        for m in msgs.iter().filter(|m| m.topic == *topic) {
            let mut r = Cdr::new(&m.data);
            r.header();
            let x = r.f64();
            let dropout = faults.iter().find(|f| {
                f.kind == FaultKind::HandPoseDropout
                    && f.topic == HAND_TOPICS[h]
                    && (f.start_ns..=f.end_ns).contains(&m.log_time)
            });
            match dropout.and_then(|f| f.mode) {
                Some(DropoutMode::Nan) => {
                    assert!(x.is_nan(), "{topic}@{}: NaN dropout has data", m.log_time)
                }
                Some(DropoutMode::Missing) => {
                    panic!("{topic}@{}: message inside a missing span", m.log_time)
                }
                None => assert!(x.is_finite(), "{topic}@{}: unannounced NaN", m.log_time),
            }
        }
    }

    // Recorder stalls: nothing on any topic.
    for f in faults.iter().filter(|f| f.kind == FaultKind::TimestampGap) {
        assert!(
            !msgs
                .iter()
                .any(|m| (f.start_ns..=f.end_ns).contains(&m.log_time)),
            "message inside a gap"
        );
        assert!(f.end_ns - f.start_ns >= 300_000_000);
    }

    for f in faults {
        assert!(f.start_ns <= f.end_ns);
        assert!(
            f.start_ns >= episode.report.start_ns
                && f.end_ns <= episode.report.end_ns + 1_000_000_000
        );
        *seen.entry(f.kind).or_default() += 1;
    }
    seen
}

#[test]
fn faults_appear_exactly_where_the_sidecar_says() {
    let config = SynthConfig {
        faults: FaultRates::uniform(4.0),
        drop_probability: 0.0,
        ..small(20.0)
    };
    let mut seen: BTreeMap<FaultKind, usize> = BTreeMap::new();
    for index in 0..4 {
        let episode = generate_episode(&config, index).expect("generates");
        for (kind, n) in check_faults(&episode) {
            *seen.entry(kind).or_default() += n;
        }
    }
    for kind in FaultKind::ALL {
        assert!(
            seen.get(&kind).copied().unwrap_or(0) > 0,
            "no {kind:?} injected across 4 episodes: {seen:?}"
        );
    }
}

#[test]
fn clean_episodes_have_no_faults() {
    let episode = generate_episode(&small(6.0), 11).expect("generates");
    assert!(episode.faults.faults.is_empty());
    let seen = check_faults(&episode);
    assert!(seen.is_empty());
}

#[test]
fn foxglove_flavour_uses_protobuf_and_json() {
    let config = SynthConfig {
        flavor: Flavor::Foxglove,
        ..small(1.0)
    };
    let episode = generate_episode(&config, 0).expect("generates");
    let summary = mcap::Summary::read(&episode.mcap)
        .expect("reads")
        .expect("summary");
    let mut encodings: Vec<(String, String)> = summary
        .channels
        .values()
        .map(|c| (c.topic.clone(), c.message_encoding.clone()))
        .collect();
    encodings.sort();
    assert!(encodings.contains(&(JOINT_STATES_TOPIC.into(), "json".into())));
    assert!(encodings.contains(&(
        "/camera/high/image_raw/compressed".into(),
        "protobuf".into()
    )));
    let joint = messages(&episode)
        .into_iter()
        .find(|m| m.topic == JOINT_STATES_TOPIC)
        .expect("joint message");
    let value: serde_json::Value = serde_json::from_slice(&joint.data).expect("json");
    assert_eq!(value["position"].as_array().map(|a| a.len()), Some(14));
}

#[test]
fn bad_config_is_a_clear_error() {
    let err = generate_episode(
        &SynthConfig {
            cameras: 9,
            ..SynthConfig::default()
        },
        0,
    )
    .expect_err("rejects");
    assert!(err.to_string().contains("cameras"), "{err}");
    let err = generate_episode(
        &SynthConfig {
            seconds: f64::NAN,
            ..SynthConfig::default()
        },
        0,
    )
    .expect_err("rejects");
    assert!(err.to_string().contains("seconds"), "{err}");
}
