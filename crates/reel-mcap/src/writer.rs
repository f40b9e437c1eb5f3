//! The canonical writer: an episode in memory → one MCAP laid out by topic group.

use std::collections::BTreeMap;
use std::io::Cursor;

use bytes::Bytes;
use mcap::records::{MessageHeader, Metadata};
use prost::Message;

pub use reel_video::h264::is_idr;

use crate::proto::{
    COMPRESSED_VIDEO, CompressedVideo, FLOAT_ARRAY, FloatArray, RAW_IMAGE, RawImage, Timestamp,
    compressed_video_schema, float_array_schema, raw_image_schema,
};
use crate::records::{
    CameraInfo, CameraWindows, ChannelContent, ChannelInfo, DepthInfo, EpisodeRecord, LayoutRecord,
    SignalInfo, SignalKind, StreamGrid, StreamsRecord, VideoOrigin,
};
use crate::{Error, FORMAT_VERSION, Result};

/// One encoded camera frame.
#[derive(Debug, Clone)]
pub struct VideoFrame {
    /// MCAP log time (ns), kept from the landing log.
    pub log_time: u64,
    /// MCAP publish time (ns), kept from the landing log.
    pub publish_time: u64,
    /// Capture stamp (ns) from the source message header.
    pub stamp_ns: u64,
    /// H.264 access unit, Annex B.
    pub data: Vec<u8>,
}

/// One camera: its frames in time order.
#[derive(Debug, Clone)]
pub struct CameraStream {
    /// Topic name.
    pub topic: String,
    /// Topic group (default `cameras`).
    pub group: String,
    /// Frame of reference.
    pub frame_id: String,
    /// Frame width in pixels.
    pub width: usize,
    /// Frame height in pixels.
    pub height: usize,
    /// The landing encoding it came from (`jpeg`, `rgb8`, `h264`...; empty when unknown).
    pub source_encoding: String,
    /// Encoded from pictures, kept as recorded, or transcoded.
    pub video: VideoOrigin,
    /// Encoded frames, in time order.
    pub frames: Vec<VideoFrame>,
}

/// One depth frame.
#[derive(Debug, Clone)]
pub struct DepthFrame {
    /// MCAP log time (ns), kept from the landing log.
    pub log_time: u64,
    /// MCAP publish time (ns), kept from the landing log.
    pub publish_time: u64,
    /// Capture stamp (ns) from the source message header.
    pub stamp_ns: u64,
    /// `width * height` values, rows top to bottom.
    pub data: Vec<u16>,
}

/// A 16-bit single-channel camera (depth in millimetres, or raw `mono16` counts), stored
/// losslessly as `foxglove.RawImage` in the chunks of its group (default `cameras`).
#[derive(Debug, Clone)]
pub struct DepthStream {
    /// Topic name.
    pub topic: String,
    /// Topic group (default `cameras`).
    pub group: String,
    /// Frame of reference.
    pub frame_id: String,
    /// Frame width in pixels.
    pub width: usize,
    /// Frame height in pixels.
    pub height: usize,
    /// What the values mean.
    pub unit: reel_video::DepthUnit,
    /// The landing encoding it came from (`16UC1`, `32FC1`, `16UC1; compressedDepth rvl`...).
    pub source_encoding: String,
    /// Frames, in time order.
    pub frames: Vec<DepthFrame>,
}

impl DepthStream {
    /// The `foxglove.RawImage` encoding its frames are written with.
    pub fn encoding(&self) -> &'static str {
        match self.unit {
            reel_video::DepthUnit::Millimetres => "16UC1",
            reel_video::DepthUnit::Raw => "mono16",
        }
    }
}

/// One numeric sample.
#[derive(Debug, Clone)]
pub struct Sample {
    /// MCAP log time (ns).
    pub log_time: u64,
    /// MCAP publish time (ns).
    pub publish_time: u64,
    /// Capture stamp (ns) from the source message header.
    pub stamp_ns: u64,
    /// Values, in the order of the stream's `fields`.
    pub values: Vec<f64>,
}

/// A numeric stream (joint states, actions, poses, derived signals).
#[derive(Debug, Clone)]
pub struct SignalStream {
    /// Topic name.
    pub topic: String,
    /// Topic group (default `proprio`).
    pub group: String,
    /// What it measures.
    pub kind: SignalKind,
    /// Names of the values, e.g. `joint_0.position`.
    pub fields: Vec<String>,
    /// Schema of the landing topic it came from.
    pub source_schema: String,
    /// Samples, in time order.
    pub samples: Vec<Sample>,
}

/// One message kept as recorded.
#[derive(Debug, Clone)]
pub struct RecordedMessage {
    /// Log time (ns).
    pub log_time: u64,
    /// Publish time (ns).
    pub publish_time: u64,
    /// The message bytes, in the topic's own encoding.
    pub data: Bytes,
}

/// A topic kept as recorded: its schema and message bytes as the landing log had them,
/// with why Reel did not read it.
#[derive(Debug, Clone)]
pub struct RecordedTopic {
    /// Topic.
    pub topic: String,
    /// Schema name.
    pub schema: String,
    /// Schema encoding (`ros2msg`, `protobuf`, `jsonschema`, or empty).
    pub schema_encoding: String,
    /// Schema bytes.
    pub schema_data: Bytes,
    /// Message encoding (`cdr`, `protobuf`, `json`...).
    pub message_encoding: String,
    /// Why Reel did not read it.
    pub reason: String,
    /// Messages in log-time order.
    pub messages: Vec<RecordedMessage>,
}

/// A topic kept as recorded (its own schema and message bytes), in a group of its own
/// (`other` by default): what Reel does not read is carried, never dropped.
#[derive(Debug, Clone)]
pub struct RecordedStream {
    /// Topic group.
    pub group: String,
    /// The topic, its schema and messages.
    pub recorded: RecordedTopic,
}

/// A whole episode, ready to write.
#[derive(Debug, Clone, Default)]
pub struct CanonicalEpisode {
    /// Time origin of the chunk windows (ns): the earliest log time of the episode.
    pub origin_ns: u64,
    /// Cameras.
    pub cameras: Vec<CameraStream>,
    /// Depth (16-bit single-channel) cameras.
    pub depths: Vec<DepthStream>,
    /// Numeric streams.
    pub signals: Vec<SignalStream>,
    /// Topics kept as recorded.
    pub recorded: Vec<RecordedStream>,
    /// The `episode` metadata record (id, robot, task, success, stamps...).
    pub episode: BTreeMap<String, String>,
}

impl CanonicalEpisode {
    /// Earliest log time over every stream, the origin of chunk windows.
    pub fn earliest_log_time(&self) -> Option<u64> {
        let cams = self
            .cameras
            .iter()
            .filter_map(|c| c.frames.first().map(|f| f.log_time));
        let depths = self
            .depths
            .iter()
            .filter_map(|c| c.frames.first().map(|f| f.log_time));
        let sigs = self
            .signals
            .iter()
            .filter_map(|s| s.samples.first().map(|f| f.log_time));
        let recorded = self
            .recorded
            .iter()
            .filter_map(|r| r.recorded.messages.first().map(|m| m.log_time));
        cams.chain(depths).chain(sigs).chain(recorded).min()
    }
}

/// How messages are cut into chunks. [`Layout::TopicGroups`] is the canonical one; the
/// others exist to compare against (benchmarks) and to show what generic writers do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Each group's messages time-major in its own chunks (camera chunks = one GOP window
    /// of every camera in the group), groups one after another in the file, so any time
    /// window of a group is one contiguous byte range.
    TopicGroups,
    /// What default MCAP writers do: every topic interleaved in time order, a chunk closed
    /// whenever it reaches `chunk_size` uncompressed bytes.
    Interleaved {
        /// Uncompressed chunk size (1 MiB in the mcap crate, rosbag2 and Python writers).
        chunk_size: u64,
    },
    /// One topic per chunk, windows in time order: a sample costs one read per topic.
    TopicPerChunk,
}

impl Layout {
    /// The name written in the `reel.layout` metadata record.
    pub fn name(&self) -> &'static str {
        match self {
            Self::TopicGroups => "topic-groups",
            Self::Interleaved { .. } => "interleaved",
            Self::TopicPerChunk => "topic-per-chunk",
        }
    }
}

/// Writer settings.
#[derive(Debug, Clone)]
pub struct WriteConfig {
    /// Chunk layout.
    pub layout: Layout,
    /// Length of a camera chunk window (ns); must match the GOP window the cameras were
    /// encoded with, so every camera's first frame in a window is a keyframe.
    pub camera_window_ns: u64,
    /// Origin of camera chunk windows (ns), when not the episode's origin: the first
    /// keyframe of a camera kept as recorded, whose keyframes set the windows.
    pub camera_origin_ns: Option<u64>,
    /// Length of a chunk window of the other groups (ns).
    pub signal_window_ns: u64,
    /// zstd level.
    pub zstd_level: u32,
    /// Compress chunks with zstd. Off, chunks are stored as written: H.264 does not
    /// compress anyway, and a reader of numeric chunks skips decompression.
    pub compress: bool,
}

impl Default for WriteConfig {
    fn default() -> Self {
        Self {
            layout: Layout::TopicGroups,
            camera_window_ns: 1_000_000_000,
            camera_origin_ns: None,
            signal_window_ns: 2_000_000_000,
            zstd_level: 3,
            compress: true,
        }
    }
}

struct Pending {
    group: usize,
    window: u64,
    channel: u16,
    log_time: u64,
    publish_time: u64,
    data: Vec<u8>,
}

/// Writes `episode` as one canonical MCAP and returns its bytes.
pub fn write_episode(episode: &CanonicalEpisode, config: &WriteConfig) -> Result<Vec<u8>> {
    if config.camera_window_ns == 0 || config.signal_window_ns == 0 {
        return Err(Error::InvalidEpisode(
            "chunk windows must be positive".into(),
        ));
    }
    let mcap_err = |source| Error::Mcap {
        name: "<canonical writer>".into(),
        source,
    };
    let chunk_size = match config.layout {
        Layout::Interleaved { chunk_size } => Some(chunk_size),
        _ => None,
    };
    let mut writer = mcap::WriteOptions::new()
        .compression(config.compress.then_some(mcap::Compression::Zstd))
        .compression_level(config.zstd_level)
        .chunk_size(chunk_size)
        .profile("")
        .library(format!("reel-mcap {}", env!("CARGO_PKG_VERSION")))
        .create(Cursor::new(Vec::new()))
        .map_err(mcap_err)?;

    let origin = episode.origin_ns;
    let camera_windows = CameraWindows {
        origin_ns: config.camera_origin_ns.unwrap_or(origin),
        window_ns: config.camera_window_ns,
    };
    let mut groups: Vec<String> = Vec::new();
    let mut group_index = |name: &str| match groups.iter().position(|g| g == name) {
        Some(i) => i,
        None => {
            groups.push(name.to_owned());
            groups.len() - 1
        }
    };
    let mut pending: Vec<Pending> = Vec::new();
    let mut grids = BTreeMap::new();
    let mut group_topics: BTreeMap<String, Vec<String>> = BTreeMap::new();

    if !episode.cameras.is_empty() {
        let schema = writer
            .add_schema(COMPRESSED_VIDEO, "protobuf", &compressed_video_schema())
            .map_err(mcap_err)?;
        for camera in &episode.cameras {
            // Said from the frames themselves, whatever encoded them.
            let mut later = camera.frames.iter().filter(|f| !is_idr(&f.data)).peekable();
            let star_gops =
                later.peek().is_some() && later.all(|f| !reel_video::h264::is_reference(&f.data));
            let metadata = ChannelInfo {
                group: camera.group.clone(),
                content: ChannelContent::Camera(CameraInfo {
                    width: camera.width,
                    height: camera.height,
                    codec: "h264".to_owned(),
                    video: camera.video.clone(),
                    source_encoding: Some(camera.source_encoding.clone()).filter(|e| !e.is_empty()),
                    star_gops,
                }),
            }
            .to_metadata();
            let channel = writer
                .add_channel(schema, &camera.topic, "protobuf", &metadata)
                .map_err(mcap_err)?;
            let group = group_index(&camera.group);
            group_topics
                .entry(camera.group.clone())
                .or_default()
                .push(camera.topic.clone());
            grids.insert(
                camera.topic.clone(),
                StreamGrid::of(camera.frames.iter().map(|f| f.log_time)),
            );
            let mut last_window = None;
            for frame in &camera.frames {
                let window = camera_windows.of(frame.log_time);
                if last_window != Some(window) && !is_idr(&frame.data) {
                    return Err(Error::InvalidEpisode(format!(
                        "{}: first frame of camera window {window} (log time {}) is not a keyframe; \
                         encode with keyframes forced at window starts",
                        camera.topic, frame.log_time
                    )));
                }
                last_window = Some(window);
                let message = CompressedVideo {
                    timestamp: Some(Timestamp::from_ns(frame.stamp_ns)),
                    frame_id: camera.frame_id.clone(),
                    data: frame.data.clone().into(),
                    format: "h264".into(),
                };
                pending.push(Pending {
                    group,
                    window,
                    channel,
                    log_time: frame.log_time,
                    publish_time: frame.publish_time,
                    data: message.encode_to_vec(),
                });
            }
        }
    }
    if !episode.depths.is_empty() {
        let schema = writer
            .add_schema(RAW_IMAGE, "protobuf", &raw_image_schema())
            .map_err(mcap_err)?;
        for depth in &episode.depths {
            let metadata = ChannelInfo {
                group: depth.group.clone(),
                content: ChannelContent::Depth(DepthInfo {
                    width: depth.width,
                    height: depth.height,
                    unit: depth.unit,
                    source_encoding: depth.source_encoding.clone(),
                }),
            }
            .to_metadata();
            let channel = writer
                .add_channel(schema, &depth.topic, "protobuf", &metadata)
                .map_err(mcap_err)?;
            let group = group_index(&depth.group);
            group_topics
                .entry(depth.group.clone())
                .or_default()
                .push(depth.topic.clone());
            grids.insert(
                depth.topic.clone(),
                StreamGrid::of(depth.frames.iter().map(|f| f.log_time)),
            );
            for frame in &depth.frames {
                if frame.data.len() != depth.width * depth.height {
                    return Err(Error::InvalidEpisode(format!(
                        "{}: depth frame at {} has {} values for {}x{}",
                        depth.topic,
                        frame.log_time,
                        frame.data.len(),
                        depth.width,
                        depth.height
                    )));
                }
                let message = RawImage {
                    timestamp: Some(Timestamp::from_ns(frame.stamp_ns)),
                    frame_id: depth.frame_id.clone(),
                    width: depth.width as u32,
                    height: depth.height as u32,
                    encoding: depth.encoding().into(),
                    step: (depth.width * 2) as u32,
                    data: frame.data.iter().flat_map(|v| v.to_le_bytes()).collect(),
                };
                pending.push(Pending {
                    group,
                    window: camera_windows.of(frame.log_time),
                    channel,
                    log_time: frame.log_time,
                    publish_time: frame.publish_time,
                    data: message.encode_to_vec(),
                });
            }
        }
    }
    if !episode.signals.is_empty() {
        let schema = writer
            .add_schema(FLOAT_ARRAY, "protobuf", &float_array_schema())
            .map_err(mcap_err)?;
        for signal in &episode.signals {
            let metadata = ChannelInfo {
                group: signal.group.clone(),
                content: ChannelContent::Signal(SignalInfo {
                    kind: signal.kind,
                    fields: signal.fields.clone(),
                    source_schema: signal.source_schema.clone(),
                }),
            }
            .to_metadata();
            let channel = writer
                .add_channel(schema, &signal.topic, "protobuf", &metadata)
                .map_err(mcap_err)?;
            let group = group_index(&signal.group);
            group_topics
                .entry(signal.group.clone())
                .or_default()
                .push(signal.topic.clone());
            grids.insert(
                signal.topic.clone(),
                StreamGrid::of(signal.samples.iter().map(|s| s.log_time)),
            );
            for sample in &signal.samples {
                if sample.values.len() != signal.fields.len() {
                    return Err(Error::InvalidEpisode(format!(
                        "{}: sample at {} has {} values for {} fields",
                        signal.topic,
                        sample.log_time,
                        sample.values.len(),
                        signal.fields.len()
                    )));
                }
                let message = FloatArray {
                    timestamp: Some(Timestamp::from_ns(sample.stamp_ns)),
                    values: sample.values.clone(),
                };
                pending.push(Pending {
                    group,
                    window: sample.log_time.saturating_sub(origin) / config.signal_window_ns,
                    channel,
                    log_time: sample.log_time,
                    publish_time: sample.publish_time,
                    data: message.encode_to_vec(),
                });
            }
        }
    }

    let mut schemas: BTreeMap<(String, String, Vec<u8>), u16> = BTreeMap::new();
    for stream in &episode.recorded {
        let r = &stream.recorded;
        let schema = if r.schema.is_empty() && r.schema_data.is_empty() {
            0 // no schema, as the MCAP specification allows
        } else {
            let key = (
                r.schema.clone(),
                r.schema_encoding.clone(),
                r.schema_data.to_vec(),
            );
            match schemas.get(&key) {
                Some(&id) => id,
                None => {
                    let id = writer
                        .add_schema(&r.schema, &r.schema_encoding, &r.schema_data)
                        .map_err(mcap_err)?;
                    schemas.insert(key, id);
                    id
                }
            }
        };
        let metadata = ChannelInfo {
            group: stream.group.clone(),
            content: ChannelContent::Recorded {
                reason: r.reason.clone(),
            },
        }
        .to_metadata();
        let channel = writer
            .add_channel(schema, &r.topic, &r.message_encoding, &metadata)
            .map_err(mcap_err)?;
        let group = group_index(&stream.group);
        group_topics
            .entry(stream.group.clone())
            .or_default()
            .push(r.topic.clone());
        for message in &r.messages {
            pending.push(Pending {
                group,
                window: message.log_time.saturating_sub(origin) / config.signal_window_ns,
                channel,
                log_time: message.log_time,
                publish_time: message.publish_time,
                data: message.data.to_vec(),
            });
        }
    }

    // Order messages for the layout; a `flush` closes a chunk between buckets.
    let window_start = |p: &Pending| {
        let group = &groups[p.group];
        let is_camera = episode.cameras.iter().any(|c| *group == c.group)
            || episode.depths.iter().any(|d| *group == d.group);
        p.window
            * if is_camera {
                config.camera_window_ns
            } else {
                config.signal_window_ns
            }
    };
    match config.layout {
        Layout::TopicGroups => pending.sort_by_key(|p| (p.group, p.window, p.log_time, p.channel)),
        Layout::Interleaved { .. } => pending.sort_by_key(|p| (p.log_time, p.channel)),
        Layout::TopicPerChunk => {
            let mut keyed: Vec<(u64, u16, u64, Pending)> = pending
                .into_iter()
                .map(|p| (window_start(&p), p.channel, p.log_time, p))
                .collect();
            keyed.sort_by_key(|(start, channel, time, _)| (*start, *channel, *time));
            pending = keyed.into_iter().map(|(.., p)| p).collect();
        }
    }
    let bucket = |p: &Pending| match config.layout {
        Layout::TopicGroups => (p.group as u64, p.window, 0),
        Layout::Interleaved { .. } => (0, 0, 0),
        Layout::TopicPerChunk => (p.window, p.group as u64, p.channel as u64),
    };
    let mut sequence: BTreeMap<u16, u32> = BTreeMap::new();
    let mut current = None;
    for p in &pending {
        let key = bucket(p);
        if current.is_some_and(|c| c != key) {
            writer.flush().map_err(mcap_err)?;
        }
        current = Some(key);
        let seq = sequence.entry(p.channel).or_insert(0);
        *seq += 1;
        writer
            .write_to_known_channel(
                &MessageHeader {
                    channel_id: p.channel,
                    sequence: *seq,
                    log_time: p.log_time,
                    publish_time: p.publish_time,
                },
                &p.data,
            )
            .map_err(mcap_err)?;
    }
    writer.flush().map_err(mcap_err)?;

    // Metadata last, right before the summary, so a reader's tail read picks it up.
    let episode_record = EpisodeRecord {
        format_version: FORMAT_VERSION.to_owned(),
        start_ns: grids.values().map(|g| g.start_ns).min().unwrap_or(0),
        end_ns: grids.values().map(|g| g.end_ns).max().unwrap_or(0),
        fields: episode.episode.clone(),
    };
    let layout = LayoutRecord {
        format_version: FORMAT_VERSION.to_owned(),
        layout: config.layout.name().to_owned(),
        groups: group_topics,
        origin_ns: origin,
        camera_origin_ns: Some(camera_windows.origin_ns),
        camera_window_ns: config.camera_window_ns,
        signal_window_ns: config.signal_window_ns,
    };
    let streams = StreamsRecord { grids };
    for (name, metadata) in [
        (EpisodeRecord::NAME, episode_record.to_metadata()),
        (LayoutRecord::NAME, layout.to_metadata()),
        (StreamsRecord::NAME, streams.to_metadata()),
    ] {
        writer
            .write_metadata(&Metadata {
                name: name.to_owned(),
                metadata,
            })
            .map_err(mcap_err)?;
    }
    writer.finish().map_err(mcap_err)?;
    Ok(writer.into_inner().into_inner())
}
