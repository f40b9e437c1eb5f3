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
//!
//! Files: `config` (what to generate), `error` (what can go wrong), `topics` (camera names
//! and topics), `meta` (the episode's identity), `seed` (independent seeds per purpose),
//! `stream` (the streams and their scheduled messages), `channels` (schemas and channels per
//! flavour), `payload` (each message's content, faults applied), `active_fault` (faults
//! bound to the messages they touched), `generate` (one episode into any writer) and
//! `output` (into memory or onto disk); `faults`, `motion`, `scene`, `depth`, `ros2` and
//! `foxglove` make the parts.

mod active_fault;
mod channels;
mod config;
pub mod depth;
mod error;
pub mod faults;
pub mod foxglove;
mod generate;
mod meta;
pub mod motion;
mod output;
mod payload;
pub mod ros2;
pub mod scene;
mod seed;
mod stream;
mod topics;

pub use config::{Flavor, SynthConfig};
pub use error::SynthError;
pub use faults::{DropoutMode, Fault, FaultKind, FaultLog, FaultRates};
pub use generate::{EpisodeReport, generate_episode_to};
pub use meta::{EpisodeMeta, episode_meta};
pub use output::{SynthEpisode, WrittenEpisode, generate_episode, write_episode};
pub use topics::{
    ACTION_TOPIC, CAMERA_NAMES, HAND_TOPICS, JOINT_STATES_TOPIC, camera_topic, depth_topic,
};
