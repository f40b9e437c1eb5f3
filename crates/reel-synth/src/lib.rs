//! Realistic synthetic robot landing episodes, written the way robots'
//! recorders write them.
//!
//! An episode is one MCAP file holding several cameras (one JPEG per frame),
//! optional depth cameras (`16UC1` millimetres), joint states, commanded actions and
//! both hands' poses, each at its own
//! rate with clock jitter and occasional dropped messages, in the default
//! writer layout (one open 1 MiB chunk, zstd, every topic interleaved). Two
//! flavours: ROS 2 (`cdr` + `ros2msg`, as rosbag2 writes) and Foxglove
//! (protobuf `foxglove.CompressedImage`/`PoseInFrame`, JSON joint states).
//!
//! Faults (camera blackout, frozen and corrupt frames, joint jumps and choppy
//! joints, hand-pose dropouts, recorder stalls) are off by default; when
//! injected, a ground-truth [`FaultLog`] says exactly where.
//!
//! Everything is a pure function of `(config, seed, index)`: the same inputs
//! give byte-identical files, whatever the thread count.
//!
//! ```
//! use reel_synth::{SynthConfig, generate_episode};
//!
//! let config = SynthConfig { seconds: 1.0, width: 64, height: 48, ..SynthConfig::default() };
//! let episode = generate_episode(&config, 0)?;
//! assert_eq!(episode.report.counts["/joint_states"] > 150, true);
//! assert!(episode.mcap.starts_with(b"\x89MCAP0\r\n"));
//! # Ok::<(), reel_synth::SynthError>(())
//! ```

pub mod depth;
pub mod faults;
pub mod foxglove;
pub mod motion;
pub mod ros2;
pub mod scene;

use std::collections::BTreeMap;
use std::io::{Cursor, Seek, Write};
use std::path::{Path, PathBuf};

use rand::{Rng, SeedableRng, seq::IndexedRandom};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

pub use faults::{DropoutMode, Fault, FaultKind, FaultLog, FaultRates};
use faults::{PlannedFault, plan_faults};
use motion::{ArmMotion, JOINTS, joint_names};
use scene::{CameraMotion, SceneRenderer};

/// Errors from generating or writing an episode.
#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    #[error("invalid synthesis config: {0}")]
    Config(String),
    #[error("MCAP writer failed: {0}")]
    Mcap(#[from] mcap::McapError),
    #[error("JPEG encoding failed: {0}")]
    Jpeg(#[from] jpeg_encoder::EncodingError),
    #[error("cannot write {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot serialize the fault log: {0}")]
    Json(#[from] serde_json::Error),
}

/// How the episode is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Flavor {
    /// rosbag2: `cdr` messages with `ros2msg` schemas.
    #[default]
    Ros2,
    /// Foxglove SDK: protobuf images and poses, JSON joint states.
    Foxglove,
}

/// Camera names, in the order cameras are added.
pub const CAMERA_NAMES: [&str; 6] = ["high", "left_wrist", "right_wrist", "low", "front", "side"];

/// The image topic of a camera.
pub fn camera_topic(name: &str) -> String {
    format!("/camera/{name}/image_raw/compressed")
}

/// The depth topic of a camera (`16UC1` millimetres).
pub fn depth_topic(name: &str) -> String {
    format!("/camera/{name}/depth/image_raw")
}

/// Joint-state topic.
pub const JOINT_STATES_TOPIC: &str = "/joint_states";
/// Commanded joint positions.
pub const ACTION_TOPIC: &str = "/action";
/// Hand pose topics, left then right.
pub const HAND_TOPICS: [&str; 2] = ["/hand/left/pose", "/hand/right/pose"];

/// What to generate. `Default` is 3 cameras at 320×240, 10 s, no faults.
#[derive(Debug, Clone, PartialEq)]
pub struct SynthConfig {
    pub seed: u64,
    pub seconds: f64,
    pub cameras: usize,
    /// Depth cameras (`16UC1`, at the camera rate and size), paired with the first
    /// `depth_cameras` cameras.
    pub depth_cameras: usize,
    pub width: u32,
    pub height: u32,
    pub camera_hz: f64,
    pub joint_hz: f64,
    pub action_hz: f64,
    pub hand_hz: f64,
    /// Clock jitter: each timestamp moves by up to this fraction of its period.
    pub jitter: f64,
    /// Probability that any one message is lost in transport.
    pub drop_probability: f64,
    pub jpeg_quality: u8,
    pub faults: FaultRates,
    pub flavor: Flavor,
}

impl Default for SynthConfig {
    fn default() -> Self {
        Self {
            seed: 0,
            seconds: 10.0,
            cameras: 3,
            depth_cameras: 0,
            width: 320,
            height: 240,
            camera_hz: 30.0,
            joint_hz: 200.0,
            action_hz: 50.0,
            hand_hz: 30.0,
            jitter: 0.1,
            drop_probability: 0.002,
            jpeg_quality: 90,
            faults: FaultRates::none(),
            flavor: Flavor::Ros2,
        }
    }
}

impl SynthConfig {
    fn validate(&self) -> Result<(), SynthError> {
        let bad = |m: &str| Err(SynthError::Config(m.to_string()));
        if !(self.seconds.is_finite() && self.seconds > 0.0 && self.seconds <= 24.0 * 3600.0) {
            return bad("seconds must be in (0, 86400]");
        }
        if !(1..=CAMERA_NAMES.len()).contains(&self.cameras) {
            return bad("cameras must be between 1 and 6");
        }
        if self.depth_cameras > self.cameras {
            return bad("depth cameras pair with cameras: at most as many as cameras");
        }
        if self.width < 16 || self.height < 16 || self.width > 4096 || self.height > 4096 {
            return bad("width and height must be between 16 and 4096");
        }
        for hz in [self.camera_hz, self.joint_hz, self.action_hz, self.hand_hz] {
            if !(hz.is_finite() && hz > 0.0 && hz <= 10_000.0) {
                return bad("rates must be in (0, 10000] Hz");
            }
        }
        if !(0.0..0.5).contains(&self.jitter) {
            return bad("jitter must be in [0, 0.5) of a period");
        }
        if !(0.0..0.5).contains(&self.drop_probability) {
            return bad("drop probability must be in [0, 0.5)");
        }
        if !(1..=100).contains(&self.jpeg_quality) {
            return bad("JPEG quality must be in 1..=100");
        }
        Ok(())
    }
}

/// The `episode` metadata record, as a recorder would stamp it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeMeta {
    pub episode_id: String,
    pub robot_id: String,
    pub task: String,
    pub operator: String,
    pub success: bool,
    pub robot_software_version: String,
    /// RFC 3339, UTC.
    pub recorded_at: String,
    /// Log time of the episode's origin, ns since the Unix epoch.
    pub start_ns: u64,
}

impl EpisodeMeta {
    /// The record's key/value map.
    pub fn to_map(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("episode_id".into(), self.episode_id.clone()),
            ("robot_id".into(), self.robot_id.clone()),
            ("task".into(), self.task.clone()),
            ("operator".into(), self.operator.clone()),
            ("success".into(), self.success.to_string()),
            (
                "robot_software_version".into(),
                self.robot_software_version.clone(),
            ),
            ("recorded_at".into(), self.recorded_at.clone()),
        ])
    }
}

/// What was generated: one JSON line per episode from the CLI.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeReport {
    pub episode_id: String,
    pub bytes: u64,
    pub duration_s: f64,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Messages per topic.
    pub counts: BTreeMap<String, u64>,
    /// Injected faults per kind (the sidecar has the details).
    pub faults: BTreeMap<FaultKind, u64>,
    pub meta: EpisodeMeta,
}

/// One episode held in memory.
#[derive(Debug, Clone)]
pub struct SynthEpisode {
    /// File stem (`<episode_id>`).
    pub name: String,
    pub mcap: Vec<u8>,
    pub faults: FaultLog,
    pub report: EpisodeReport,
}

/// An episode written to disk.
#[derive(Debug, Clone, Serialize)]
pub struct WrittenEpisode {
    pub path: PathBuf,
    pub faults_path: PathBuf,
    #[serde(flatten)]
    pub report: EpisodeReport,
}

/// Generates episode `index` in memory.
pub fn generate_episode(config: &SynthConfig, index: u64) -> Result<SynthEpisode, SynthError> {
    let mut cursor = Cursor::new(Vec::new());
    let (faults, report) = generate_episode_to(config, index, &mut cursor)?;
    Ok(SynthEpisode {
        name: report.episode_id.clone(),
        mcap: cursor.into_inner(),
        faults,
        report,
    })
}

/// Writes episode `index` into `dir` as `<episode_id>.mcap` with its
/// `<episode_id>.faults.json` sidecar. Both are written under temporary
/// names and renamed, so a crash never leaves a half-written episode.
pub fn write_episode(
    config: &SynthConfig,
    index: u64,
    dir: &Path,
) -> Result<WrittenEpisode, SynthError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| SynthError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let meta = episode_meta(config, index);
    let path = dir.join(format!("{}.mcap", meta.episode_id));
    let faults_path = dir.join(format!("{}.faults.json", meta.episode_id));
    let tmp = dir.join(format!(".{}.mcap.tmp", meta.episode_id));
    let file = std::fs::File::create(&tmp).map_err(io(&tmp))?;
    let mut writer = std::io::BufWriter::with_capacity(1 << 20, file);
    let (faults, report) = generate_episode_to(config, index, &mut writer)?;
    let file = writer.into_inner().map_err(|e| SynthError::Io {
        path: tmp.clone(),
        source: e.into_error(),
    })?;
    file.sync_all().map_err(io(&tmp))?;
    let tmp_faults = dir.join(format!(".{}.faults.json.tmp", meta.episode_id));
    std::fs::write(&tmp_faults, serde_json::to_vec_pretty(&faults)?).map_err(io(&tmp_faults))?;
    std::fs::rename(&tmp_faults, &faults_path).map_err(io(&faults_path))?;
    std::fs::rename(&tmp, &path).map_err(io(&path))?;
    Ok(WrittenEpisode {
        path,
        faults_path,
        report,
    })
}

/// A seed for one purpose within one episode, independent of the others so
/// that changing one stream never perturbs another.
fn sub_seed(config: &SynthConfig, index: u64, purpose: u64) -> u64 {
    let mut z = (config.seed
        ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ purpose.wrapping_mul(0xd1b5_4a32_d192_ed03))
    .wrapping_add(0x2545_f491_4f6c_dd1d);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

const ROBOTS: [&str; 6] = [
    "aloha-01",
    "aloha-02",
    "aloha-03",
    "franka-01",
    "franka-02",
    "ur5e-01",
];
const TASKS: [&str; 6] = [
    "pick_cube",
    "fold_towel",
    "open_drawer",
    "stack_cups",
    "wipe_table",
    "insert_peg",
];
const OPERATORS: [&str; 5] = ["op-ada", "op-ben", "op-chen", "op-dia", "op-eli"];
const SOFTWARE: [&str; 4] = ["2.3.0", "2.3.1", "2.4.0", "3.0.0-rc1"];

/// The episode's identity and stamps, derived from the seed alone.
pub fn episode_meta(config: &SynthConfig, index: u64) -> EpisodeMeta {
    let mut rng = ChaCha8Rng::seed_from_u64(sub_seed(config, index, 1));
    // Recorded some time in 2026, to the millisecond.
    let start_ms = 1_767_225_600_000u64 + rng.random_range(0..365 * 24 * 3600 * 1000u64);
    let start_ns = start_ms * 1_000_000;
    let recorded_at = time::OffsetDateTime::from_unix_timestamp_nanos(start_ns as i128)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default();
    EpisodeMeta {
        episode_id: format!("ep-{:016x}", sub_seed(config, index, 0)),
        robot_id: pick(&mut rng, &ROBOTS),
        task: pick(&mut rng, &TASKS),
        operator: pick(&mut rng, &OPERATORS),
        success: rng.random_bool(0.8),
        robot_software_version: pick(&mut rng, &SOFTWARE),
        recorded_at,
        start_ns,
    }
}

fn pick(rng: &mut ChaCha8Rng, items: &[&str]) -> String {
    items.choose(rng).map(|s| s.to_string()).unwrap_or_default()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    Camera(usize),
    Joints,
    Action,
    Hand(usize),
    Depth(usize),
}

/// One message to be written: when, and on which stream.
#[derive(Debug, Clone, Copy)]
struct Tick {
    t: f64,
    log_time: u64,
    stream: usize,
}

/// A fault bound to the messages it touched.
#[derive(Debug)]
struct ActiveFault {
    plan: PlannedFault,
    touched: Option<(u64, u64)>,
    /// The frame a frozen camera keeps repeating.
    frozen_jpeg: Option<Vec<u8>>,
}

impl ActiveFault {
    fn touch(&mut self, log_time: u64) {
        self.touched = Some(match self.touched {
            None => (log_time, log_time),
            Some((a, b)) => (a.min(log_time), b.max(log_time)),
        });
    }
}

struct Channels {
    ids: Vec<u16>,
    topics: Vec<String>,
}

/// Generates episode `index` into any seekable writer.
pub fn generate_episode_to<W: Write + Seek>(
    config: &SynthConfig,
    index: u64,
    out: W,
) -> Result<(FaultLog, EpisodeReport), SynthError> {
    config.validate()?;
    let meta = episode_meta(config, index);
    let motion = ArmMotion::new(
        &mut ChaCha8Rng::seed_from_u64(sub_seed(config, index, 2)),
        config.seconds,
    );
    let mut faults: Vec<ActiveFault> = plan_faults(
        &mut ChaCha8Rng::seed_from_u64(sub_seed(config, index, 3)),
        &config.faults,
        config.seconds,
        config.cameras,
        JOINTS,
    )
    .into_iter()
    .map(|plan| ActiveFault {
        plan,
        touched: None,
        frozen_jpeg: None,
    })
    .collect();

    let streams: Vec<Stream> = (0..config.cameras)
        .map(Stream::Camera)
        .chain([
            Stream::Joints,
            Stream::Action,
            Stream::Hand(0),
            Stream::Hand(1),
        ])
        // Added last, so an episode without depth is the same bytes as before depth existed.
        .chain((0..config.depth_cameras).map(Stream::Depth))
        .collect();
    let mut dropped: BTreeMap<String, u64> = BTreeMap::new();
    let mut ticks = Vec::new();
    for (s, stream) in streams.iter().enumerate() {
        let hz = match stream {
            Stream::Camera(_) | Stream::Depth(_) => config.camera_hz,
            Stream::Joints => config.joint_hz,
            Stream::Action => config.action_hz,
            Stream::Hand(_) => config.hand_hz,
        };
        let period = 1.0 / hz;
        let mut rng = ChaCha8Rng::seed_from_u64(sub_seed(config, index, 100 + s as u64));
        // Each sensor starts at its own phase within its first period.
        let offset = rng.random_range(config.jitter.max(0.05)..0.9) * period;
        let mut i = 0u64;
        loop {
            let jitter = if config.jitter > 0.0 {
                rng.random_range(-config.jitter..config.jitter)
            } else {
                0.0
            };
            let t = offset + (i as f64 + jitter) * period;
            if t >= config.seconds {
                break;
            }
            i += 1;
            let stalled = faults
                .iter()
                .any(|f| f.plan.kind == FaultKind::TimestampGap && f.plan.covers(t));
            let hand_missing = faults.iter().any(|f| {
                f.plan.kind == FaultKind::HandPoseDropout
                    && f.plan.mode == DropoutMode::Missing
                    && *stream == Stream::Hand(f.plan.hand)
                    && f.plan.covers(t)
            });
            if stalled || hand_missing {
                continue;
            }
            if rng.random_bool(config.drop_probability) {
                *dropped.entry(topic_of(*stream)).or_default() += 1;
                continue;
            }
            ticks.push(Tick {
                t,
                log_time: meta.start_ns + (t * 1e9).round() as u64,
                stream: s,
            });
        }
    }
    ticks.sort_by_key(|tick| (tick.log_time, tick.stream));

    let mut writer = mcap::WriteOptions::new()
        .compression_threads(0)
        .library(concat!("reel-synth ", env!("CARGO_PKG_VERSION")))
        .create(out)?;
    let channels = add_channels(&mut writer, config.flavor, &streams)?;
    let names = joint_names();
    let renderers: Vec<SceneRenderer> = (0..config.cameras)
        .map(|c| {
            let motion = if CAMERA_NAMES[c].contains("wrist") {
                CameraMotion::WRIST
            } else {
                CameraMotion::FIXED
            };
            SceneRenderer::with_motion(
                sub_seed(config, index, 200 + c as u64),
                config.width,
                config.height,
                motion,
            )
        })
        .collect();
    let mut noise: Vec<ChaCha8Rng> = (0..streams.len())
        .map(|s| ChaCha8Rng::seed_from_u64(sub_seed(config, index, 300 + s as u64)))
        .collect();
    let mut last_jpeg: Vec<Option<Vec<u8>>> = vec![None; config.cameras];
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    let mut sequences = vec![0u32; streams.len()];

    for tick in &ticks {
        let stream = streams[tick.stream];
        let rng = &mut noise[tick.stream];
        let payload = match stream {
            Stream::Camera(c) => {
                let jpeg =
                    camera_frame(config, &renderers[c], c, tick, &mut faults, &last_jpeg[c])?;
                last_jpeg[c] = Some(jpeg.clone());
                let frame_id = format!("camera_{}", CAMERA_NAMES[c]);
                match config.flavor {
                    Flavor::Ros2 => ros2::compressed_image(tick.log_time, &frame_id, "jpeg", &jpeg),
                    Flavor::Foxglove => prost::Message::encode_to_vec(&foxglove::CompressedImage {
                        timestamp: Some(foxglove::Timestamp::from_ns(tick.log_time)),
                        frame_id,
                        data: jpeg,
                        format: "jpeg".into(),
                    }),
                }
            }
            Stream::Depth(c) => {
                let mm = depth::depth_frame(
                    config.width,
                    config.height,
                    tick.t,
                    sub_seed(config, index, 400 + c as u64),
                );
                let data: Vec<u8> = mm.iter().flat_map(|v| v.to_le_bytes()).collect();
                let frame_id = format!("camera_{}_depth", CAMERA_NAMES[c]);
                let (width, height, step) = (config.width, config.height, config.width * 2);
                match config.flavor {
                    Flavor::Ros2 => ros2::image(
                        tick.log_time,
                        &frame_id,
                        (width, height, step),
                        "16UC1",
                        &data,
                    ),
                    Flavor::Foxglove => prost::Message::encode_to_vec(&foxglove::RawImage {
                        timestamp: Some(foxglove::Timestamp::from_ns(tick.log_time)),
                        frame_id,
                        width,
                        height,
                        encoding: "16UC1".into(),
                        step,
                        data,
                    }),
                }
            }
            Stream::Joints => {
                let (position, velocity, effort) = joint_sample(&motion, tick, rng, &mut faults);
                joint_payload(
                    config.flavor,
                    tick.log_time,
                    &names,
                    &position,
                    &velocity,
                    &effort,
                )
            }
            Stream::Action => {
                // Commands lead the measured state by the controller's horizon.
                let command = motion.positions(tick.t + 0.1);
                let position: Vec<f64> = command
                    .iter()
                    .map(|q| q + rng.random_range(-2e-4..2e-4))
                    .collect();
                joint_payload(config.flavor, tick.log_time, &names, &position, &[], &[])
            }
            Stream::Hand(h) => {
                let (mut position, mut orientation) = motion.hand_pose(h, tick.t);
                for p in &mut position {
                    *p += rng.random_range(-5e-4..5e-4);
                }
                for f in faults.iter_mut() {
                    if f.plan.kind == FaultKind::HandPoseDropout
                        && f.plan.hand == h
                        && f.plan.covers(tick.t)
                    {
                        position = [f64::NAN; 3];
                        orientation = [f64::NAN; 4];
                        f.touch(tick.log_time);
                    }
                }
                let frame_id = "world";
                match config.flavor {
                    Flavor::Ros2 => {
                        ros2::pose_stamped(tick.log_time, frame_id, position, orientation)
                    }
                    Flavor::Foxglove => prost::Message::encode_to_vec(&foxglove::PoseInFrame {
                        timestamp: Some(foxglove::Timestamp::from_ns(tick.log_time)),
                        frame_id: frame_id.into(),
                        pose: Some(foxglove::Pose {
                            position: Some(foxglove::Vector3 {
                                x: position[0],
                                y: position[1],
                                z: position[2],
                            }),
                            orientation: Some(foxglove::Quaternion {
                                x: orientation[0],
                                y: orientation[1],
                                z: orientation[2],
                                w: orientation[3],
                            }),
                        }),
                    }),
                }
            }
        };
        let sequence = &mut sequences[tick.stream];
        writer.write_to_known_channel(
            &mcap::records::MessageHeader {
                channel_id: channels.ids[tick.stream],
                sequence: *sequence,
                log_time: tick.log_time,
                publish_time: tick.log_time,
            },
            &payload,
        )?;
        *sequence += 1;
        *counts
            .entry(channels.topics[tick.stream].clone())
            .or_default() += 1;
    }

    writer.write_metadata(&mcap::records::Metadata {
        name: "episode".into(),
        metadata: meta.to_map(),
    })?;
    writer.finish()?;
    let bytes = writer
        .into_inner()
        .stream_position()
        .map_err(|source| SynthError::Io {
            path: PathBuf::from(format!("<{}>", meta.episode_id)),
            source,
        })?;

    let fault_log = FaultLog {
        episode_id: meta.episode_id.clone(),
        faults: faults
            .iter()
            .filter_map(|f| bind_fault(f, &meta, &streams, &names))
            .collect(),
        dropped_messages: dropped,
    };
    let report = EpisodeReport {
        episode_id: meta.episode_id.clone(),
        bytes,
        duration_s: config.seconds,
        start_ns: ticks.first().map_or(meta.start_ns, |t| t.log_time),
        end_ns: ticks.last().map_or(meta.start_ns, |t| t.log_time),
        counts,
        faults: fault_log
            .faults
            .iter()
            .fold(BTreeMap::new(), |mut by_kind, f| {
                *by_kind.entry(f.kind).or_default() += 1;
                by_kind
            }),
        meta,
    };
    Ok((fault_log, report))
}

fn topic_of(stream: Stream) -> String {
    match stream {
        Stream::Camera(c) => camera_topic(CAMERA_NAMES[c]),
        Stream::Joints => JOINT_STATES_TOPIC.into(),
        Stream::Action => ACTION_TOPIC.into(),
        Stream::Hand(h) => HAND_TOPICS[h].into(),
        Stream::Depth(c) => depth_topic(CAMERA_NAMES[c]),
    }
}

fn add_depth_schema<W: Write + Seek>(
    writer: &mut mcap::Writer<W>,
    flavor: Flavor,
) -> Result<(u16, &'static str), SynthError> {
    Ok(match flavor {
        Flavor::Ros2 => (
            writer.add_schema(
                "sensor_msgs/msg/Image",
                ros2::SCHEMA_ENCODING,
                ros2::image_schema().as_bytes(),
            )?,
            ros2::MESSAGE_ENCODING,
        ),
        Flavor::Foxglove => (
            writer.add_schema(
                "foxglove.RawImage",
                "protobuf",
                &foxglove::raw_image_schema(),
            )?,
            "protobuf",
        ),
    })
}

fn add_channels<W: Write + Seek>(
    writer: &mut mcap::Writer<W>,
    flavor: Flavor,
    streams: &[Stream],
) -> Result<Channels, SynthError> {
    let no_metadata = BTreeMap::new();
    let (image, joints, pose, msg_image, msg_joints, msg_pose) = match flavor {
        Flavor::Ros2 => {
            let enc = ros2::SCHEMA_ENCODING;
            (
                writer.add_schema(
                    "sensor_msgs/msg/CompressedImage",
                    enc,
                    ros2::compressed_image_schema().as_bytes(),
                )?,
                writer.add_schema(
                    "sensor_msgs/msg/JointState",
                    enc,
                    ros2::joint_state_schema().as_bytes(),
                )?,
                writer.add_schema(
                    "geometry_msgs/msg/PoseStamped",
                    enc,
                    ros2::pose_stamped_schema().as_bytes(),
                )?,
                ros2::MESSAGE_ENCODING,
                ros2::MESSAGE_ENCODING,
                ros2::MESSAGE_ENCODING,
            )
        }
        Flavor::Foxglove => (
            writer.add_schema(
                "foxglove.CompressedImage",
                "protobuf",
                &foxglove::compressed_image_schema(),
            )?,
            writer.add_schema(
                "reel.JointState",
                "jsonschema",
                foxglove::JOINT_STATE_JSON_SCHEMA.as_bytes(),
            )?,
            writer.add_schema(
                "foxglove.PoseInFrame",
                "protobuf",
                &foxglove::pose_in_frame_schema(),
            )?,
            "protobuf",
            "json",
            "protobuf",
        ),
    };
    // The depth schema is added with the first depth stream, so files without depth keep
    // the schemas they always had.
    let mut depth = None;
    let mut ids = Vec::new();
    let mut topics = Vec::new();
    for stream in streams {
        let topic = topic_of(*stream);
        let (schema, encoding) = match stream {
            Stream::Camera(_) => (image, msg_image),
            Stream::Joints | Stream::Action => (joints, msg_joints),
            Stream::Hand(_) => (pose, msg_pose),
            Stream::Depth(_) => match depth {
                Some(known) => known,
                None => *depth.insert(add_depth_schema(writer, flavor)?),
            },
        };
        ids.push(writer.add_channel(schema, &topic, encoding, &no_metadata)?);
        topics.push(topic);
    }
    Ok(Channels { ids, topics })
}

fn joint_payload(
    flavor: Flavor,
    stamp: u64,
    names: &[String],
    p: &[f64],
    v: &[f64],
    e: &[f64],
) -> Vec<u8> {
    match flavor {
        Flavor::Ros2 => ros2::joint_state(stamp, names, p, v, e),
        Flavor::Foxglove => foxglove::joint_state_json(stamp, names, p, v, e),
    }
}

fn joint_sample(
    motion: &ArmMotion,
    tick: &Tick,
    rng: &mut ChaCha8Rng,
    faults: &mut [ActiveFault],
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let mut sample_time = tick.t;
    let mut extra_noise = 0.0;
    for f in faults.iter_mut() {
        if f.plan.kind == FaultKind::ChoppyJoints && f.plan.covers(tick.t) {
            // Stair-steps at 10 Hz plus jitter: what a failing bus looks like.
            sample_time = (tick.t * 10.0).floor() / 10.0;
            extra_noise = 0.03;
            f.touch(tick.log_time);
        }
    }
    let q = motion.positions(sample_time);
    let dq = motion.velocities(sample_time);
    let mut position: Vec<f64> = q
        .iter()
        .map(|x| x + rng.random_range(-3e-4..3e-4))
        .collect();
    if extra_noise > 0.0 {
        for p in &mut position {
            *p += rng.random_range(-extra_noise..extra_noise);
        }
    }
    for f in faults.iter_mut() {
        if f.plan.kind == FaultKind::JointJump && f.touched.is_none() && tick.t >= f.plan.start {
            position[f.plan.joint] += f.plan.magnitude;
            f.touch(tick.log_time);
        }
    }
    let velocity: Vec<f64> = dq
        .iter()
        .map(|x| x + rng.random_range(-2e-3..2e-3))
        .collect();
    let effort: Vec<f64> = q
        .iter()
        .zip(&dq)
        .map(|(q, v)| 2.0 * q.cos() + 0.3 * v + rng.random_range(-0.02..0.02))
        .collect();
    (position, velocity, effort)
}

fn camera_frame(
    config: &SynthConfig,
    renderer: &SceneRenderer,
    camera: usize,
    tick: &Tick,
    faults: &mut [ActiveFault],
    previous: &Option<Vec<u8>>,
) -> Result<Vec<u8>, SynthError> {
    for f in faults.iter_mut().filter(|f| f.plan.camera == camera) {
        match f.plan.kind {
            FaultKind::FrozenFrames if f.plan.covers(tick.t) => {
                if f.frozen_jpeg.is_none() {
                    f.frozen_jpeg = match previous {
                        Some(jpeg) => Some(jpeg.clone()),
                        None => Some(encode_jpeg(config, &renderer.render(tick.t))?),
                    };
                }
                f.touch(tick.log_time);
                return Ok(f.frozen_jpeg.clone().unwrap_or_default());
            }
            FaultKind::CameraBlackout if f.plan.covers(tick.t) => {
                let dark: Vec<u8> = renderer
                    .render(tick.t)
                    .iter()
                    .map(|&v| (v as f32 * 0.04 + 2.0) as u8)
                    .collect();
                f.touch(tick.log_time);
                return encode_jpeg(config, &dark);
            }
            FaultKind::CorruptFrame if f.touched.is_none() && tick.t >= f.plan.start => {
                let mut jpeg = encode_jpeg(config, &renderer.render(tick.t))?;
                corrupt_jpeg(&mut jpeg, tick.log_time);
                f.touch(tick.log_time);
                return Ok(jpeg);
            }
            _ => {}
        }
    }
    encode_jpeg(config, &renderer.render(tick.t))
}

fn encode_jpeg(config: &SynthConfig, rgb: &[u8]) -> Result<Vec<u8>, SynthError> {
    let mut out = Vec::with_capacity(rgb.len() / 8);
    let encoder = jpeg_encoder::Encoder::new(&mut out, config.jpeg_quality);
    encoder.encode(
        rgb,
        config.width as u16,
        config.height as u16,
        jpeg_encoder::ColorType::Rgb,
    )?;
    Ok(out)
}

/// Keeps the start-of-image marker, overwrites the headers and the first
/// part of the scan with noise and cuts the rest: no decoder can recover it.
fn corrupt_jpeg(jpeg: &mut Vec<u8>, salt: u64) {
    let keep = (jpeg.len() * 3 / 5).max(64).min(jpeg.len());
    jpeg.truncate(keep);
    let mut state = salt | 1;
    for byte in jpeg.iter_mut().skip(2) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        // Never write 0xFF: no accidental markers.
        *byte = (state % 255) as u8;
    }
}

fn bind_fault(
    f: &ActiveFault,
    meta: &EpisodeMeta,
    streams: &[Stream],
    names: &[String],
) -> Option<Fault> {
    let plan_ns = |t: f64| meta.start_ns + (t * 1e9).round() as u64;
    let (topic, span) = match f.plan.kind {
        FaultKind::TimestampGap => (
            "*".to_string(),
            Some((plan_ns(f.plan.start), plan_ns(f.plan.end))),
        ),
        FaultKind::HandPoseDropout if f.plan.mode == DropoutMode::Missing => (
            HAND_TOPICS[f.plan.hand].to_string(),
            Some((plan_ns(f.plan.start), plan_ns(f.plan.end))),
        ),
        FaultKind::HandPoseDropout => (HAND_TOPICS[f.plan.hand].to_string(), f.touched),
        FaultKind::JointJump | FaultKind::ChoppyJoints => {
            (JOINT_STATES_TOPIC.to_string(), f.touched)
        }
        FaultKind::CameraBlackout | FaultKind::FrozenFrames | FaultKind::CorruptFrame => {
            if !streams.contains(&Stream::Camera(f.plan.camera)) {
                return None;
            }
            (camera_topic(CAMERA_NAMES[f.plan.camera]), f.touched)
        }
    };
    // A fault that touched no message (all of them dropped) did not happen.
    let (start_ns, end_ns) = span?;
    Some(Fault {
        kind: f.plan.kind,
        topic,
        start_ns,
        end_ns,
        joint: (f.plan.kind == FaultKind::JointJump).then(|| names[f.plan.joint].clone()),
        magnitude: (f.plan.kind == FaultKind::JointJump).then_some(f.plan.magnitude),
        mode: (f.plan.kind == FaultKind::HandPoseDropout).then_some(f.plan.mode),
    })
}
