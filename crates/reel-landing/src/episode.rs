//! A landing episode, parsed: its cameras with their frames still compressed as recorded,
//! its numeric streams decoded to values, and the topics kept as recorded.

use std::collections::BTreeMap;

use bytes::Bytes;
use reel_mcap::{RecordedTopic, Sample, SignalKind};

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

impl LandingCamera {
    /// The landing encoding of its first frame (`jpeg`, `rgb8`, `h264`...), which the
    /// canonical stream records as its source; empty without frames.
    pub fn source_encoding(&self) -> String {
        self.frames
            .first()
            .map(|f| f.encoding.name())
            .unwrap_or_default()
    }
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
    pub other: Vec<RecordedTopic>,
    /// Topics that lost messages, or whose every message failed (then also in `other`).
    pub problems: Vec<StreamProblem>,
    /// Metadata records by name.
    pub metadata: BTreeMap<String, BTreeMap<String, String>>,
    /// Topics left out by configuration, with their schema.
    pub skipped: BTreeMap<String, String>,
    /// Chunks that repeated an earlier chunk byte for byte, read once (a QC finding).
    pub duplicate_chunks: u64,
}
