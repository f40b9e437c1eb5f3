//! Reel's canonical episode container.
//!
//! One MCAP per episode. Topics are assigned to groups by read pattern (`cameras`,
//! `proprio`), and each group is written time-major into its own chunks, groups one after
//! another, so a training sample costs one ranged read per group however many topics it
//! touches. Cameras are H.264 (`foxglove.CompressedVideo`, one access unit per message) with
//! chunks aligned to GOP windows; numeric streams are `reel.FloatArray` protobuf messages
//! with their field names in the channel metadata. See `docs/FORMAT.md`.
//!
//! * [`write_episode`] writes a [`CanonicalEpisode`] from memory in any [`Layout`]; the
//!   `reel-landing` crate reads landing logs (ROS 2, Foxglove, rosbag2) and packs them into
//!   one.
//! * [`EpisodeReader`] reads an episode over any [`reel_io::ByteSource`]: summary in at most
//!   two ranged reads, then [`EpisodeReader::read_window`], [`EpisodeReader::signals`] and
//!   [`EpisodeReader::frames`].
//! * [`records`] types the format's metadata (each channel's, and the `episode`,
//!   `reel.layout` and `reel.streams` records), written and parsed there alone;
//!   [`EpisodeReader::channel_info`] and its siblings return them parsed.
//! * [`inspect`] describes the layout of any MCAP; [`doctor`] checks one against the MCAP
//!   specification and the canonical rules and names every problem; [`cat_messages`]
//!   gives its messages as JSON.
//!
//! ```
//! use reel_io::{ByteSource, CountingSource, MemorySource};
//! use reel_mcap::{CanonicalEpisode, EpisodeReader, Sample, SignalKind, SignalStream, WriteConfig};
//!
//! let samples = (0..500u64)
//!     .map(|i| Sample { log_time: i * 10_000_000, publish_time: i * 10_000_000, stamp_ns: i * 10_000_000, values: vec![i as f64, -(i as f64)] })
//!     .collect();
//! let episode = CanonicalEpisode {
//!     signals: vec![SignalStream {
//!         topic: "/joint_states".into(),
//!         group: "proprio".into(),
//!         kind: SignalKind::State,
//!         fields: vec!["j0.position".into(), "j0.velocity".into()],
//!         source_schema: "sensor_msgs/msg/JointState".into(),
//!         samples,
//!     }],
//!     ..Default::default()
//! };
//! let bytes = reel_mcap::write_episode(&episode, &WriteConfig::default())?;
//!
//! let source = CountingSource::new(MemorySource::new("episode.mcap", bytes));
//! let reader = EpisodeReader::open(&source)?;
//! assert!(source.stats().reads <= 2);
//! source.reset();
//! // 1.5 s .. 2.5 s spans two 2 s chunks, fetched with one ranged read.
//! let window = reader.signals(&["/joint_states"], 1_500_000_000..2_500_000_000)?;
//! assert_eq!(source.stats().reads, 1);
//! assert_eq!(window[0].log_times.len(), 100);
//! assert_eq!(window[0].values[..2], [150.0, -150.0]);
//! # Ok::<(), reel_mcap::Error>(())
//! ```

mod chunk;
mod doctor;
mod inspect;
mod message_json;
pub mod proto;
mod reader;
pub mod records;
mod sniff;
mod writer;

pub use chunk::for_each_record;
pub use doctor::{DoctorOptions, DoctorReport, Problem, doctor};
pub use inspect::{ChannelSummary, ChunkSummary, GopStats, GroupSummary, LayoutReport, inspect};
pub use message_json::{MessageJson, cat_messages, decode_message};
pub use reader::{DecodedGop, DepthWindow, EpisodeReader, PlannedGop, RawMessage, SignalWindow};
pub use records::{CameraWindows, SignalKind, StreamGrid, VideoOrigin};
pub use sniff::not_mcap;
pub use writer::{
    CameraStream, CanonicalEpisode, DepthFrame, DepthStream, Layout, RecordedMessage,
    RecordedStream, RecordedTopic, Sample, SignalStream, VideoFrame, WriteConfig, is_idr,
    write_episode,
};

/// Version of the canonical format written by this crate (`reel.format_version`). Version
/// 2 added topics kept as recorded (`reel.kind=recorded`, the `other` group); version 3
/// added depth cameras (`reel.kind=depth`, `foxglove.RawImage`), cameras kept as recorded
/// or transcoded (`reel.video`, `reel.source_encoding`), odd frame sizes and
/// `camera_origin_ns` in `reel.layout`.
pub const FORMAT_VERSION: &str = "3";

/// Every canonical format version this crate reads: each adds to the one before.
pub const READABLE_FORMAT_VERSIONS: [&str; 3] = ["1", "2", "3"];

/// Names used in channel metadata and metadata records.
pub mod keys {
    /// Channel metadata: the topic group.
    pub const GROUP: &str = "reel.group";
    /// Channel metadata: `camera`, `depth`, `state`, `action`, `pose`, `signal` or `recorded`.
    pub const KIND: &str = "reel.kind";
    /// [`KIND`] of a topic kept as recorded (its own schema and encoding).
    pub const RECORDED_KIND: &str = "recorded";
    /// Channel metadata of a recorded topic: why Reel did not read it.
    pub const RECORDED_REASON: &str = "reel.reason";
    /// Default group of topics kept as recorded.
    pub const OTHER_GROUP: &str = "other";
    /// Channel metadata: comma-separated value names of a `reel.FloatArray` channel.
    pub const FIELDS: &str = "reel.fields";
    /// Channel metadata: schema of the landing topic.
    pub const SOURCE_SCHEMA: &str = "reel.source_schema";
    /// [`KIND`] of a 16-bit single-channel camera (`foxglove.RawImage`).
    pub const DEPTH_KIND: &str = "depth";
    /// Channel metadata of a depth camera: `mm` or `raw` (see `reel_video::DepthUnit`).
    pub const UNIT: &str = "reel.unit";
    /// Channel metadata of a camera or depth camera: the landing encoding it came from.
    pub const SOURCE_ENCODING: &str = "reel.source_encoding";
    /// Channel metadata of a camera: `encoded` (from pictures), `kept` (recorded H.264
    /// stored as recorded) or `transcoded` (recorded video encoded again).
    pub const VIDEO: &str = "reel.video";
    /// Channel metadata of a transcoded camera: why the recorded video was not kept.
    pub const VIDEO_REASON: &str = "reel.video_reason";
    /// Channel metadata: frame width.
    pub const WIDTH: &str = "reel.width";
    /// Channel metadata: frame height.
    pub const HEIGHT: &str = "reel.height";
    /// Channel metadata: video codec.
    pub const CODEC: &str = "reel.codec";
    /// Channel metadata of a camera whose every frame after a keyframe predicts from that
    /// keyframe alone and is not a reference picture: [`STAR`] (absent otherwise).
    pub const GOP_STRUCTURE: &str = "reel.gop_structure";
    /// [`GOP_STRUCTURE`] of star GOPs: any frame decodes from its keyframe and itself.
    pub const STAR: &str = "star";
    /// Metadata record: format version, layout, groups and chunk windows.
    pub const LAYOUT_RECORD: &str = "reel.layout";
    /// Metadata record: the time grid of each stream (JSON per topic).
    pub const STREAMS_RECORD: &str = "reel.streams";

    /// The value names of a `reel.FloatArray` channel ([`FIELDS`]), in order; empty
    /// names are left out, so a channel without the key, or with `""`, has none.
    pub fn fields<'a>(channel: &'a mcap::Channel<'_>) -> Vec<&'a str> {
        field_names(&channel.metadata)
    }

    /// [`fields`] of a channel's metadata map.
    pub fn field_names(metadata: &std::collections::BTreeMap<String, String>) -> Vec<&str> {
        metadata.get(FIELDS).map_or_else(Vec::new, |f| {
            f.split(',').filter(|name| !name.is_empty()).collect()
        })
    }
}

/// Errors of the container. Every variant names the file it concerns.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Reading or writing bytes failed.
    #[error(transparent)]
    Io(#[from] reel_io::Error),
    /// The MCAP library rejected the file (bad CRC, bad record...).
    #[error("{name}: {source}")]
    Mcap {
        /// File.
        name: String,
        /// What mcap found.
        #[source]
        source: mcap::McapError,
    },
    /// The file ends before its footer: truncated or not an MCAP file.
    #[error("{name}: truncated or not an MCAP file ({len} bytes, no footer and end magic)")]
    Truncated {
        /// File.
        name: String,
        /// Its length.
        len: u64,
    },
    /// Structurally inconsistent file.
    #[error("{name}: corrupt: {reason}")]
    Corrupt {
        /// File.
        name: String,
        /// What is inconsistent.
        reason: String,
    },
    /// A topic that is not in the file.
    #[error("{name}: no topic `{topic}`")]
    UnknownTopic {
        /// File.
        name: String,
        /// Topic asked for.
        topic: String,
    },
    /// A group that is not in the file.
    #[error("{name}: no topic group `{group}`")]
    UnknownGroup {
        /// File.
        name: String,
        /// Group asked for.
        group: String,
    },
    /// A message that does not decode.
    #[error("{name}: topic `{topic}` at log time {log_time}: {reason}")]
    BadMessage {
        /// File.
        name: String,
        /// Topic.
        topic: String,
        /// Log time of the message.
        log_time: u64,
        /// What is wrong.
        reason: String,
    },
    /// A landing image that does not decode.
    #[error("{name}: topic `{topic}` at log time {log_time}: corrupt image: {source}")]
    CorruptFrame {
        /// File.
        name: String,
        /// Topic.
        topic: String,
        /// Log time of the frame.
        log_time: u64,
        /// Decoder error.
        #[source]
        source: reel_video::Error,
    },
    /// Encoding or decoding video failed.
    #[error("{name}: topic `{topic}`: {source}")]
    Video {
        /// File.
        name: String,
        /// Topic.
        topic: String,
        /// Codec error.
        #[source]
        source: reel_video::Error,
    },
    /// No decodable frame for a requested time.
    #[error("{name}: topic `{topic}`: no decodable frame at or before {time}")]
    NoFrame {
        /// File.
        name: String,
        /// Topic.
        topic: String,
        /// Requested time (ns).
        time: u64,
    },
    /// An invalid pack configuration.
    #[error("{name}: {reason}")]
    Config {
        /// Config file.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// An episode that cannot be written as given.
    #[error("invalid episode: {0}")]
    InvalidEpisode(String),
    /// A recording with nothing Reel reads: no messages, or none of a kind it stores.
    #[error("{name}: no camera frames, depth frames or numeric samples Reel can read")]
    NothingToRead {
        /// File or object URI.
        name: String,
    },
}

/// A file that does not parse or decode is bad input; store and codec failures keep the
/// kind of their cause; a pack configuration that does not fit is the environment's (the
/// caller's settings), not the file's.
impl reel_io::Kinded for Error {
    fn kind(&self) -> reel_io::ErrorKind {
        use reel_io::ErrorKind;
        match self {
            Self::Io(e) => e.kind(),
            Self::Video { source, .. } => source.kind(),
            Self::Config { .. } => ErrorKind::Environment,
            Self::Mcap { .. }
            | Self::Truncated { .. }
            | Self::Corrupt { .. }
            | Self::UnknownTopic { .. }
            | Self::UnknownGroup { .. }
            | Self::BadMessage { .. }
            | Self::CorruptFrame { .. }
            | Self::NoFrame { .. }
            | Self::InvalidEpisode(_)
            | Self::NothingToRead { .. } => ErrorKind::BadInput,
        }
    }
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
