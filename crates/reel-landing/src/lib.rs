//! Reel's landing logs: what robots record, read and packed into canonical episodes.
//!
//! A landing log is an MCAP as ROS 2 or Foxglove writes it (`cdr` with `ros2msg` schemas,
//! protobuf with its descriptors, JSON), or a rosbag2 bag (sqlite3 `.db3` files and their
//! `metadata.yaml`). Every topic is decoded from the schema the log carries and recognised
//! by its message type: cameras (JPEG, PNG, raw pixels, depth in any of its encodings,
//! recorded H.264/H.265 video) and numeric streams (joint states, transforms, commands).
//! What nothing reads is kept as recorded, never dropped.
//!
//! * [`read_landing`], [`read_split_mcap`], [`read_rosbag2`] and [`LandingFiles`] parse a
//!   recording into a [`LandingEpisode`]; [`write_landing`] writes one from memory (the
//!   importers land datasets through it).
//! * [`TopicConfig`] holds the topic rules (skip, group, role, values) and
//!   [`TopicConfig::apply`] is the one place they take effect, for `reel-pack` and ingest.
//! * [`prepare_as_recorded`] (and over it [`pack`], [`pack_episode`], [`prepare_landing`])
//!   turns a landing episode into a [`reel_mcap::CanonicalEpisode`] with every topic at its
//!   recorded times: cameras encoded to H.264 ([`EncodeConfig`]) or kept as recorded
//!   ([`keep_recorded_video`]), depth stored losslessly ([`convert_depth`]). Ingest's
//!   as-recorded profile calls it too. The container itself is `reel-mcap`'s, which knows
//!   nothing of landing logs.
//!
//! ```
//! use std::collections::BTreeMap;
//!
//! use reel_io::MemorySource;
//! use reel_landing::{LandingLog, PackConfig, pack_episode, read_landing, write_landing};
//! use reel_mcap::{EpisodeReader, Sample, SignalKind, SignalStream};
//!
//! let samples = (0..100u64)
//!     .map(|i| Sample { log_time: i * 10_000_000, publish_time: i * 10_000_000, stamp_ns: i * 10_000_000, values: vec![i as f64] })
//!     .collect();
//! let log = LandingLog {
//!     signals: vec![SignalStream {
//!         topic: "/joint_states".into(),
//!         group: String::new(),
//!         kind: SignalKind::State,
//!         fields: vec!["j0.position".into()],
//!         source_schema: String::new(),
//!         samples,
//!     }],
//!     metadata: BTreeMap::from([("episode".into(), BTreeMap::from([("task".into(), "fold".into())]))]),
//!     ..LandingLog::default()
//! };
//! let landing = write_landing("ep-1.mcap", &log)?;
//!
//! // Read back from the schemas the log carries...
//! let episode = read_landing("ep-1.mcap", &landing, &|_| false)?;
//! assert_eq!(episode.signals[0].fields, ["j0.position"]);
//! assert_eq!(episode.metadata["episode"]["task"], "fold");
//!
//! // ...and packed into a canonical episode, read by topic group.
//! let (canonical, report) = pack_episode("ep-1.mcap", &landing, &PackConfig::default())?;
//! assert_eq!(report.samples, 100);
//! let reader = EpisodeReader::open(MemorySource::new("ep-1.canonical.mcap", canonical))?;
//! let window = reader.signals(&["/joint_states"], 0..500_000_000)?;
//! assert_eq!(window[0].log_times.len(), 50);
//! # Ok::<(), reel_mcap::Error>(())
//! ```
//!
//! Errors are [`reel_mcap::Error`]: a landing log that does not parse is bad input the
//! same way a canonical episode that does not is.

mod as_recorded;
mod assemble;
mod camera_encoder;
mod depth;
mod encoding;
mod episode;
mod frames;
mod interpret;
mod json;
mod pack;
mod protobuf;
mod read;
mod recorded_video;
mod ros2msg;
mod rosbag2;
mod topics;
mod value;
mod write;

pub use as_recorded::{PackReport, prepare_as_recorded};
pub use camera_encoder::{CameraEncoder, FrameTimes};
pub use depth::{ConvertedDepth, convert_depth};
pub use encoding::{EncodeConfig, EncodeStructure};
pub use episode::{
    FrameClass, ImageEncoding, LandingCamera, LandingEpisode, LandingFrame, LandingSignal,
    StreamProblem,
};
pub use frames::{CameraFrames, DecodedFrame};
pub use pack::{PackConfig, pack, pack_episode, prepare_episode, prepare_landing};
pub use read::{
    LandingFiles, is_rosbag2, read_landing, read_landing_object, read_split_mcap, recording_key,
    recording_stem,
};
pub use recorded_video::{
    check_recorded_video, is_recorded_video, keep_recorded_video, plan_recorded_videos,
};
pub use rosbag2::{Rosbag2Metadata, read_rosbag2};
pub use topics::{RuledEpisode, TopicConfig, TopicGroups, TopicRule};
pub use write::{LandingImage, LandingImages, LandingLog, LandingVideo, write_landing};
