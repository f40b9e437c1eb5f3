//! Reading landing logs as robots record them: MCAP (ROS 2 `cdr` + `ros2msg`, Foxglove
//! protobuf and JSON) and rosbag2 sqlite3, decoded from the schemas the log carries.
//!
//! Each topic is decoded by its schema ([`ros2msg`], [`protobuf`], [`json`]) into one
//! [`value::Value`] tree, then recognised by its message type ([`interpret`]) as a camera
//! or as numeric streams. One message that fails costs that message (counted in
//! [`LandingEpisode::problems`]); a topic that nothing reads, or that fails wholly, is
//! kept as recorded in [`LandingEpisode::other`], never dropped.

mod assemble;
mod interpret;
mod json;
mod protobuf;
mod ros2msg;
mod rosbag2;
mod value;
mod write;

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::records::SignalKind;
use crate::writer::Sample;
use crate::{Error, Result};
use assemble::{Assembler, ChannelInfo};
pub use rosbag2::{Rosbag2Metadata, read_rosbag2};
pub use write::{LandingImage, LandingImages, LandingLog, LandingVideo, write_landing};

/// How a landing frame is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageEncoding {
    /// JPEG bytes.
    Jpeg,
    /// PNG bytes.
    Png,
    /// Uncompressed pixels (`sensor_msgs/msg/Image`, `foxglove.RawImage`).
    Raw {
        /// The pixel layout.
        layout: reel_video::PixelLayout,
        /// Width in pixels.
        width: usize,
        /// Height in pixels.
        height: usize,
        /// Bytes per row.
        step: usize,
    },
    /// Uncompressed single-channel 16- or 32-bit pixels (`16UC1`, `mono16`, `32FC1`).
    RawDepth {
        /// How the values are stored.
        layout: reel_video::DepthLayout,
        /// Width in pixels.
        width: usize,
        /// Height in pixels.
        height: usize,
        /// Bytes per row.
        step: usize,
        /// Whether the values are big-endian (`sensor_msgs/Image.is_bigendian`).
        big_endian: bool,
    },
    /// `compressedDepth` (`compressed_depth_image_transport`): PNG or RVL after a header.
    CompressedDepth {
        /// The source image's layout (`16UC1` or `32FC1` inverse depth).
        layout: reel_video::DepthLayout,
        /// PNG or RVL.
        codec: reel_video::DepthCodec,
    },
    /// One access unit of recorded video (`foxglove.CompressedVideo`): it decodes only in
    /// sequence with the stream's other units ([`crate::CameraFrames`]).
    Video {
        /// H.264 or H.265.
        codec: reel_video::VideoCodec,
    },
}

/// What a camera's frames are: the encodings of one topic must all be of one class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameClass {
    /// Colour or grey pictures, each decoding on its own.
    Picture,
    /// 16-bit single-channel images.
    Depth,
    /// Recorded video.
    Video,
}

impl FrameClass {
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Self::Picture => "colour image",
            Self::Depth => "depth image",
            Self::Video => "video frame",
        }
    }
}

impl ImageEncoding {
    /// Whether frames of this encoding are 16-bit single-channel (depth, `mono16`), stored
    /// losslessly rather than as H.264.
    pub fn is_depth(&self) -> bool {
        self.class() == FrameClass::Depth
    }

    /// The class of frames of this encoding.
    pub fn class(&self) -> FrameClass {
        match self {
            Self::RawDepth { .. } | Self::CompressedDepth { .. } => FrameClass::Depth,
            Self::Video { .. } => FrameClass::Video,
            Self::Jpeg | Self::Png | Self::Raw { .. } => FrameClass::Picture,
        }
    }

    /// The encoding's name as landing logs write it (`jpeg`, `rgb8`, `32FC1`,
    /// `16UC1; compressedDepth rvl`...).
    pub fn name(&self) -> String {
        use reel_video::{DepthCodec, DepthLayout};
        let depth = |layout| match layout {
            DepthLayout::Millimetres16 => "16UC1",
            DepthLayout::Mono16 => "mono16",
            DepthLayout::Metres32 => "32FC1",
        };
        match self {
            Self::Jpeg => "jpeg".into(),
            Self::Png => "png".into(),
            Self::Raw { layout, .. } => format!("{layout:?}").to_ascii_lowercase(),
            Self::RawDepth { layout, .. } => depth(*layout).into(),
            Self::CompressedDepth { layout, codec } => format!(
                "{}; compressedDepth {}",
                depth(*layout),
                match codec {
                    DepthCodec::Png => "png",
                    DepthCodec::Rvl => "rvl",
                }
            ),
            Self::Video { codec } => codec.name().into(),
        }
    }

    /// Decodes a landing frame of this encoding to RGB.
    pub fn to_rgb(
        &self,
        decoder: &mut reel_video::ImageDecoder,
        data: &[u8],
    ) -> reel_video::Result<reel_video::RgbImage> {
        match *self {
            Self::Jpeg => decoder.decode(reel_video::ImageFormat::Jpeg, data),
            Self::Png => decoder.decode(reel_video::ImageFormat::Png, data),
            Self::Raw {
                layout,
                width,
                height,
                step,
            } => reel_video::raw_to_rgb(layout, width, height, step, data),
            Self::RawDepth { .. } | Self::CompressedDepth { .. } => Err(
                reel_video::Error::InvalidInput("a depth frame in a colour camera".into()),
            ),
            Self::Video { .. } => Err(reel_video::Error::InvalidInput(
                "a recorded video frame decodes only in sequence with its stream".into(),
            )),
        }
    }

    /// Decodes a landing frame of this encoding to 16-bit values (depth in millimetres,
    /// `mono16` counts), losslessly but for `32FC1`'s rounding to millimetres.
    pub fn to_depth(
        &self,
        decoder: &mut reel_video::ImageDecoder,
        data: &[u8],
    ) -> reel_video::Result<reel_video::DepthImage> {
        match *self {
            Self::RawDepth {
                layout,
                width,
                height,
                step,
                big_endian,
            } => reel_video::raw_to_depth(layout, width, height, step, big_endian, data),
            Self::CompressedDepth { layout, codec } => {
                reel_video::decode_compressed_depth(layout, codec, data, decoder)
            }
            Self::Jpeg | Self::Png | Self::Raw { .. } | Self::Video { .. } => Err(
                reel_video::Error::InvalidInput("a colour frame in a depth camera".into()),
            ),
        }
    }
}

/// One landing camera frame, still compressed as recorded.
#[derive(Debug, Clone)]
pub struct LandingFrame {
    /// MCAP log time (ns).
    pub log_time: u64,
    /// MCAP publish time (ns).
    pub publish_time: u64,
    /// Header stamp (ns).
    pub stamp_ns: u64,
    /// Storage of `data`.
    pub encoding: ImageEncoding,
    /// The image bytes.
    pub data: Bytes,
}

/// A landing camera topic.
#[derive(Debug, Clone)]
pub struct LandingCamera {
    /// Topic.
    pub topic: String,
    /// Landing schema name.
    pub schema: String,
    /// Frame of reference of the first message.
    pub frame_id: String,
    /// Frames in log-time order.
    pub frames: Vec<LandingFrame>,
}

/// A landing numeric stream, already decoded to value arrays: a topic, or one child frame
/// of a transform topic (`/tf/<child_frame>`).
#[derive(Debug, Clone)]
pub struct LandingSignal {
    /// Topic (with `/<child_frame>` for transform streams).
    pub topic: String,
    /// Landing schema name.
    pub schema: String,
    /// Inferred kind.
    pub kind: SignalKind,
    /// Value names.
    pub fields: Vec<String>,
    /// Samples in log-time order.
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

/// A landing topic kept as recorded (schema and bytes), for the canonical `other` group.
#[derive(Debug, Clone)]
pub struct LandingRecorded {
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

/// A topic that lost messages to decoding, or that Reel could not read at all.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StreamProblem {
    /// Topic.
    pub topic: String,
    /// Schema name.
    pub schema: String,
    /// Messages that did not decode.
    pub bad_messages: u64,
    /// Messages of the topic.
    pub messages: u64,
    /// What was wrong with the first bad message (or with the schema).
    pub reason: String,
    /// Log time of the first bad message.
    pub first_log_time: u64,
}

/// A landing episode, parsed.
#[derive(Debug, Clone, Default)]
pub struct LandingEpisode {
    /// Colour camera topics.
    pub cameras: Vec<LandingCamera>,
    /// Depth and other 16-bit single-channel camera topics.
    pub depths: Vec<LandingCamera>,
    /// Numeric streams.
    pub signals: Vec<LandingSignal>,
    /// Topics kept as recorded: nothing reads them, or none of their messages decoded.
    pub other: Vec<LandingRecorded>,
    /// Topics that lost messages, or whose every message failed (then also in `other`).
    pub problems: Vec<StreamProblem>,
    /// Metadata records by name.
    pub metadata: BTreeMap<String, BTreeMap<String, String>>,
    /// Topics left out by configuration, with their schema.
    pub skipped: BTreeMap<String, String>,
    /// Chunks that repeated an earlier chunk byte for byte, read once (a QC finding).
    pub duplicate_chunks: u64,
}

/// Parses a landing MCAP held in memory. `skip(topic)` leaves topics out (listed in
/// [`LandingEpisode::skipped`]); every other topic is read or kept as recorded.
pub fn read_landing(
    name: &str,
    bytes: &[u8],
    skip: &dyn Fn(&str) -> bool,
) -> Result<LandingEpisode> {
    let mut assembler = Assembler::new(skip);
    push_mcap(&mut assembler, name, bytes)?;
    Ok(assembler.finish())
}

/// Several MCAP files of one recording (a rosbag2 bag split by size or duration) as one
/// episode: topics match across files by name.
pub fn read_split_mcap(
    files: &[(String, Bytes)],
    skip: &dyn Fn(&str) -> bool,
) -> Result<LandingEpisode> {
    let mut assembler = Assembler::new(skip);
    for (name, bytes) in files {
        push_mcap(&mut assembler, name, bytes)?;
    }
    Ok(assembler.finish())
}

/// Feeds one MCAP's messages to `assembler`, channels keyed by topic so split files of
/// one recording join up; its metadata records and the chunks that repeated an earlier
/// one are added to the assembler's.
///
/// One linear pass over the records, trusting nothing in the summary: metadata comes from
/// the Metadata records themselves (a file whose summary is missing, damaged or without a
/// metadata index keeps its robot and task), every chunk's CRC is checked, and a chunk
/// that repeats an earlier one byte for byte (a writer or copy fault) is read once, so its
/// messages are not doubled.
fn push_mcap(assembler: &mut Assembler<'_>, name: &str, bytes: &[u8]) -> Result<()> {
    let mut channels = mcap::read::ChannelAccumulator::default();
    let duplicate_chunks = crate::chunk::for_each_record(name, bytes, |record| {
        if let mcap::records::Record::Metadata(record) = record {
            assembler.metadata.insert(record.name, record.metadata);
            return Ok(());
        }
        push_record(assembler, &mut channels, record).map_err(|source| Error::Mcap {
            name: name.to_owned(),
            source,
        })
    })?;
    assembler.duplicate_chunks += duplicate_chunks;
    Ok(())
}

/// One record of the data section: schemas and channels are linked (with mcap's checks),
/// messages go to the assembler, the rest is not needed here.
fn push_record(
    assembler: &mut Assembler<'_>,
    channels: &mut mcap::read::ChannelAccumulator<'static>,
    record: mcap::records::Record<'_>,
) -> std::result::Result<(), mcap::McapError> {
    use mcap::records::Record;
    match record {
        Record::Schema { header, data } => channels.add_schema_from_slice(header, &data),
        Record::Channel(channel) => channels.add_channel(channel),
        Record::Message { header, data } => {
            let channel =
                channels
                    .get(header.channel_id)
                    .ok_or(mcap::McapError::UnknownChannel(
                        header.sequence,
                        header.channel_id,
                    ))?;
            assembler.push_topic(
                &channel.topic,
                || {
                    let (schema, schema_encoding, schema_data) = channel
                        .schema
                        .as_ref()
                        .map(|s| {
                            (
                                s.name.clone(),
                                s.encoding.clone(),
                                Bytes::copy_from_slice(&s.data),
                            )
                        })
                        .unwrap_or_default();
                    ChannelInfo {
                        topic: channel.topic.clone(),
                        schema,
                        schema_encoding,
                        schema_data,
                        message_encoding: channel.message_encoding.clone(),
                        metadata: channel.metadata.clone(),
                    }
                },
                header.log_time,
                header.publish_time,
                &data,
            );
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Whether `key` names a rosbag2 recording: its `metadata.yaml` (the folder holds the
/// `.db3` files it lists).
pub fn is_rosbag2(key: &str) -> bool {
    key == "metadata.yaml" || key.ends_with("/metadata.yaml")
}

/// The name a landing recording goes by: an MCAP's key without `.mcap`, a rosbag2
/// recording's folder however the bag is named (`robot-a/ep-7.mcap` → `robot-a/ep-7`;
/// `bags/run-3/metadata.yaml`, `bags/run-3/run-3_0.db3` and `bags/run-3/` → `bags/run-3`).
pub fn recording_stem(key: &str) -> &str {
    let folder_of = |file: &str| {
        let folder = key.strip_suffix(file).unwrap_or(key).trim_end_matches('/');
        if folder.is_empty() { key } else { folder }
    };
    if is_rosbag2(key) {
        folder_of("metadata.yaml")
    } else if key.ends_with(".db3") {
        folder_of(key.rsplit('/').next().unwrap_or(key))
    } else if key.ends_with('/') {
        folder_of("")
    } else {
        key.strip_suffix(".mcap").unwrap_or(key)
    }
}

/// The key of the recording `key` names in `store`, however ROS 2 names a bag: its folder
/// (with or without a trailing `/`), its `metadata.yaml` or any of its `.db3` files all
/// name the folder's `metadata.yaml`, so the split files of one recording are one episode.
/// Any other key names itself (an MCAP file).
pub fn recording_key(store: &reel_io::Store, key: &str) -> Result<String> {
    if is_rosbag2(key) || key.ends_with(".mcap") {
        return Ok(key.to_owned());
    }
    let names_bag = key.is_empty() || key.ends_with('/') || key.ends_with(".db3");
    let folder = if key.ends_with(".db3") {
        key.rfind('/').map_or("", |i| &key[..=i]).to_owned()
    } else if names_bag {
        key.to_owned()
    } else {
        format!("{key}/")
    };
    let metadata = format!("{folder}metadata.yaml");
    match store.len_of(&metadata) {
        Ok(_) => Ok(metadata),
        Err(reel_io::Error::NotFound { .. }) if names_bag => Err(Error::Corrupt {
            name: store.object_uri(key),
            reason: format!(
                "a rosbag2 bag is read through its metadata.yaml, and {} has none",
                store.object_uri(&folder)
            ),
        }),
        Err(e) if names_bag => Err(e.into()),
        // Not a bag's folder: the object itself (read next, which reports what is wrong).
        Err(_) => Ok(key.to_owned()),
    }
}

/// A landing recording's bytes, fetched: one MCAP, or the `.db3` files of a rosbag2
/// recording in `metadata.yaml` order. Fetching is separate from parsing, so a caller can
/// fingerprint or measure what it read.
#[derive(Debug, Clone)]
pub enum LandingFiles {
    /// One MCAP file.
    Mcap {
        /// Its name (URI), used in errors.
        name: String,
        /// Its bytes.
        bytes: Bytes,
    },
    /// A rosbag2 recording.
    Rosbag2 {
        /// `sqlite3` (`.db3` files) or `mcap`.
        storage: String,
        /// `(name, bytes)` of each file, in `metadata.yaml` order.
        files: Vec<(String, Bytes)>,
    },
}

impl LandingFiles {
    /// Fetches the recording at `key` of `store`: an MCAP, or a rosbag2 bag named by its
    /// folder, its `metadata.yaml` or one of its `.db3` files ([`recording_key`]).
    pub fn fetch(store: &reel_io::Store, key: &str) -> Result<Self> {
        let key = &recording_key(store, key)?;
        if !is_rosbag2(key) {
            let name = store.object_uri(key);
            let bytes = store.read(key)?;
            if let Some(reason) = crate::sniff::not_mcap(&bytes) {
                return Err(Error::Corrupt {
                    name,
                    reason: reason.into(),
                });
            }
            return Ok(Self::Mcap { name, bytes });
        }
        let name = store.object_uri(key);
        let text = store.read(key)?;
        let text = std::str::from_utf8(&text).map_err(|_| Error::Corrupt {
            name: name.clone(),
            reason: "metadata.yaml is not UTF-8".into(),
        })?;
        let metadata = Rosbag2Metadata::parse(&name, text)?;
        if !matches!(metadata.storage.as_str(), "sqlite3" | "mcap")
            || !metadata.compression.is_empty()
        {
            return Err(Error::Corrupt {
                name,
                reason: format!(
                    "rosbag2 storage `{}`{} is not read; record with sqlite3 or mcap storage, uncompressed (MCAP compresses its own chunks)",
                    metadata.storage,
                    if metadata.compression.is_empty() {
                        String::new()
                    } else {
                        format!(" compressed with {}", metadata.compression)
                    }
                ),
            });
        }
        let folder = key.strip_suffix("metadata.yaml").unwrap_or("");
        let files = metadata
            .files
            .iter()
            .map(|file| {
                let file_key = format!("{folder}{file}");
                Ok((store.object_uri(&file_key), store.read(&file_key)?))
            })
            .collect::<Result<_>>()?;
        Ok(Self::Rosbag2 {
            storage: metadata.storage,
            files,
        })
    }

    /// The bytes of every file, in order.
    pub fn parts(&self) -> Vec<&[u8]> {
        match self {
            Self::Mcap { bytes, .. } => vec![bytes],
            Self::Rosbag2 { files, .. } => files.iter().map(|(_, b)| &b[..]).collect(),
        }
    }

    /// Total bytes.
    pub fn len(&self) -> u64 {
        self.parts().iter().map(|p| p.len() as u64).sum()
    }

    /// Whether the recording has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Parses the recording; `skip(topic)` leaves topics out.
    pub fn read(&self, skip: &dyn Fn(&str) -> bool) -> Result<LandingEpisode> {
        match self {
            Self::Mcap { name, bytes } => read_landing(name, bytes, skip),
            Self::Rosbag2 { storage, files } if storage == "mcap" => read_split_mcap(files, skip),
            Self::Rosbag2 { files, .. } => read_rosbag2(files, skip),
        }
    }
}

/// Fetches and parses the landing recording at `key` in `store` ([`LandingFiles`]);
/// returns the episode and the recording's bytes.
pub fn read_landing_object(
    store: &reel_io::Store,
    key: &str,
    skip: &dyn Fn(&str) -> bool,
) -> Result<(LandingEpisode, u64)> {
    let files = LandingFiles::fetch(store, key)?;
    Ok((files.read(skip)?, files.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recordings_are_named_after_their_file_or_bag_folder() {
        assert_eq!(recording_stem("robot-a/ep-7.mcap"), "robot-a/ep-7");
        assert_eq!(recording_stem("bags/run-3/metadata.yaml"), "bags/run-3");
        assert_eq!(recording_stem("metadata.yaml"), "metadata.yaml");
        assert_eq!(recording_stem("bags/run-3/run-3_1.db3"), "bags/run-3");
        assert_eq!(recording_stem("bags/run-3/"), "bags/run-3");
        assert!(is_rosbag2("run-3/metadata.yaml") && !is_rosbag2("run-3/metadata.yaml.bak"));
    }

    #[test]
    fn rosbag2_metadata_names_its_files_and_storage() {
        let text = "rosbag2_bagfile_information:\n  version: 9\n  storage_identifier: sqlite3\n  \
                    relative_file_paths:\n  - run_0.db3\n  - run_1.db3\n  message_count: 12\n  \
                    compression_format: ''\n";
        let meta = Rosbag2Metadata::parse("m.yaml", text).expect("parses");
        assert_eq!(meta.files, ["run_0.db3", "run_1.db3"]);
        assert_eq!((meta.storage.as_str(), meta.message_count), ("sqlite3", 12));
        let err = Rosbag2Metadata::parse("m.yaml", "a: [1").expect_err("bad YAML");
        assert!(err.to_string().contains("m.yaml"), "{err}");
    }
}
