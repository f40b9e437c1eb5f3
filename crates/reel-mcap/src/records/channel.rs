//! A canonical channel's metadata: its topic group and what it holds (a camera, a depth
//! camera, a numeric stream or a topic kept as recorded), with the facts a reader needs.

use std::collections::BTreeMap;

use reel_video::DepthUnit;
use serde::Serialize;

use super::{Fields, RecordError};
use crate::keys;

/// What a signal stream measures; recorded as `reel.kind` in the channel metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SignalKind {
    /// Measured joint state.
    State,
    /// Commanded action.
    Action,
    /// A pose (position + quaternion).
    Pose,
    /// Anything else numeric.
    Signal,
}

impl SignalKind {
    /// The kind of a name written by [`SignalKind::as_str`].
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "state" => Self::State,
            "action" => Self::Action,
            "pose" => Self::Pose,
            "signal" => Self::Signal,
            _ => return None,
        })
    }

    /// The name written in channel metadata.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::State => "state",
            Self::Action => "action",
            Self::Pose => "pose",
            Self::Signal => "signal",
        }
    }
}

/// How a camera's canonical stream was made, recorded in its channel metadata
/// (`reel.video`), and shown by `reel inspect`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VideoOrigin {
    /// Encoded from landing pictures (JPEG, PNG, raw).
    Encoded,
    /// A recorded H.264 stream kept message for message.
    Kept,
    /// A recorded video decoded and encoded again, and why it could not be kept.
    Transcoded(String),
}

impl VideoOrigin {
    /// `encoded`, `kept` or `transcoded`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Encoded => "encoded",
            Self::Kept => "kept",
            Self::Transcoded(_) => "transcoded",
        }
    }
}

/// An H.264 camera (`foxglove.CompressedVideo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CameraInfo {
    /// Frame width in pixels.
    pub width: usize,
    /// Frame height in pixels.
    pub height: usize,
    /// Video codec (`h264`).
    pub codec: String,
    /// Encoded from pictures, kept as recorded, or transcoded (and why).
    pub video: VideoOrigin,
    /// The landing encoding it came from, when known.
    pub source_encoding: Option<String>,
    /// Every frame after a keyframe predicts from that keyframe alone and is not a
    /// reference picture, so any frame decodes from its keyframe and itself.
    pub star_gops: bool,
}

/// A 16-bit single-channel camera (`foxglove.RawImage`), stored losslessly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DepthInfo {
    /// Frame width in pixels.
    pub width: usize,
    /// Frame height in pixels.
    pub height: usize,
    /// What the values mean.
    pub unit: DepthUnit,
    /// The landing encoding it came from.
    pub source_encoding: String,
}

/// A numeric stream (`reel.FloatArray`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignalInfo {
    /// What it measures.
    pub kind: SignalKind,
    /// The names of its values, in order.
    pub fields: Vec<String>,
    /// Schema of the landing topic it came from.
    pub source_schema: String,
}

/// What a channel holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChannelContent {
    /// An H.264 camera.
    Camera(CameraInfo),
    /// A depth (16-bit) camera.
    Depth(DepthInfo),
    /// A numeric stream.
    Signal(SignalInfo),
    /// A topic Reel does not read, kept with its own schema and encoding, and why.
    Recorded {
        /// Why Reel did not read it.
        reason: String,
    },
}

/// A canonical channel's metadata, typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelInfo {
    /// Its topic group.
    pub group: String,
    /// What it holds.
    pub content: ChannelContent,
}

const CAMERA_KIND: &str = "camera";

impl ChannelInfo {
    /// Every key a channel's metadata may hold.
    pub const KEYS: [&'static str; 13] = [
        keys::GROUP,
        keys::KIND,
        keys::RECORDED_REASON,
        keys::WIDTH,
        keys::HEIGHT,
        keys::CODEC,
        keys::VIDEO,
        keys::VIDEO_REASON,
        keys::SOURCE_ENCODING,
        keys::GOP_STRUCTURE,
        keys::UNIT,
        keys::FIELDS,
        keys::SOURCE_SCHEMA,
    ];

    /// The topic group named in a channel's metadata, canonical or not.
    pub fn group_of(metadata: &BTreeMap<String, String>) -> Option<&str> {
        metadata.get(keys::GROUP).map(String::as_str)
    }

    /// The landing encoding a camera or depth camera came from, when recorded.
    pub fn source_encoding(&self) -> Option<&str> {
        match &self.content {
            ChannelContent::Camera(camera) => camera.source_encoding.as_deref(),
            ChannelContent::Depth(depth) => Some(depth.source_encoding.as_str()),
            _ => None,
        }
    }

    /// How a camera's stream was made.
    pub fn video(&self) -> Option<&VideoOrigin> {
        match &self.content {
            ChannelContent::Camera(camera) => Some(&camera.video),
            _ => None,
        }
    }

    /// The `reel.kind` it is written with.
    pub fn kind_name(&self) -> &'static str {
        match &self.content {
            ChannelContent::Camera(_) => CAMERA_KIND,
            ChannelContent::Depth(_) => keys::DEPTH_KIND,
            ChannelContent::Signal(signal) => signal.kind.as_str(),
            ChannelContent::Recorded { .. } => keys::RECORDED_KIND,
        }
    }

    /// The channel metadata it is written as.
    pub fn to_metadata(&self) -> BTreeMap<String, String> {
        let mut map = BTreeMap::new();
        let mut put = |key: &str, value: String| {
            map.insert(key.to_owned(), value);
        };
        put(keys::GROUP, self.group.clone());
        put(keys::KIND, self.kind_name().to_owned());
        match &self.content {
            ChannelContent::Camera(camera) => {
                put(keys::WIDTH, camera.width.to_string());
                put(keys::HEIGHT, camera.height.to_string());
                put(keys::CODEC, camera.codec.clone());
                put(keys::VIDEO, camera.video.as_str().to_owned());
                if let Some(encoding) = &camera.source_encoding {
                    put(keys::SOURCE_ENCODING, encoding.clone());
                }
                if let VideoOrigin::Transcoded(reason) = &camera.video {
                    put(keys::VIDEO_REASON, reason.clone());
                }
                if camera.star_gops {
                    put(keys::GOP_STRUCTURE, keys::STAR.to_owned());
                }
            }
            ChannelContent::Depth(depth) => {
                put(keys::WIDTH, depth.width.to_string());
                put(keys::HEIGHT, depth.height.to_string());
                put(keys::UNIT, depth.unit.as_str().to_owned());
                put(keys::SOURCE_ENCODING, depth.source_encoding.clone());
            }
            ChannelContent::Signal(signal) => {
                put(keys::FIELDS, signal.fields.join(","));
                put(keys::SOURCE_SCHEMA, signal.source_schema.clone());
            }
            ChannelContent::Recorded { reason } => put(keys::RECORDED_REASON, reason.clone()),
        }
        map
    }

    /// Parses the metadata of the channel on `topic`. Every key the canonical format has
    /// written since its first version is required; `reel.video` (format 3) reads as
    /// `encoded` when absent.
    pub fn parse(topic: &str, metadata: &BTreeMap<String, String>) -> Result<Self, RecordError> {
        let record = format!("channel {topic}");
        let fields = Fields::new(&record, metadata);
        let group = fields.text(keys::GROUP)?.to_owned();
        let kind = fields.text(keys::KIND)?;
        let content = match kind {
            CAMERA_KIND => ChannelContent::Camera(CameraInfo {
                width: fields.number(keys::WIDTH)?,
                height: fields.number(keys::HEIGHT)?,
                codec: fields.text(keys::CODEC)?.to_owned(),
                video: match fields.optional(keys::VIDEO) {
                    None | Some("encoded") => VideoOrigin::Encoded,
                    Some("kept") => VideoOrigin::Kept,
                    Some("transcoded") => VideoOrigin::Transcoded(
                        fields
                            .optional(keys::VIDEO_REASON)
                            .unwrap_or_default()
                            .to_owned(),
                    ),
                    Some(other) => {
                        return Err(fields.error(format!("unknown `{}` {other:?}", keys::VIDEO)));
                    }
                },
                source_encoding: fields.optional(keys::SOURCE_ENCODING).map(str::to_owned),
                star_gops: fields.optional(keys::GOP_STRUCTURE) == Some(keys::STAR),
            }),
            keys::DEPTH_KIND => ChannelContent::Depth(DepthInfo {
                width: fields.number(keys::WIDTH)?,
                height: fields.number(keys::HEIGHT)?,
                unit: {
                    let unit = fields.text(keys::UNIT)?;
                    DepthUnit::from_name(unit)
                        .ok_or_else(|| fields.error(format!("unknown `{}` {unit:?}", keys::UNIT)))?
                },
                source_encoding: fields
                    .optional(keys::SOURCE_ENCODING)
                    .unwrap_or_default()
                    .to_owned(),
            }),
            keys::RECORDED_KIND => ChannelContent::Recorded {
                reason: fields
                    .optional(keys::RECORDED_REASON)
                    .unwrap_or_default()
                    .to_owned(),
            },
            other => match SignalKind::from_name(other) {
                Some(kind) => ChannelContent::Signal(SignalInfo {
                    kind,
                    // The key is required; its list may be empty.
                    fields: {
                        fields.text(keys::FIELDS)?;
                        keys::field_names(metadata)
                            .into_iter()
                            .map(str::to_owned)
                            .collect()
                    },
                    source_schema: fields.text(keys::SOURCE_SCHEMA)?.to_owned(),
                }),
                None => {
                    return Err(fields.error(format!("unknown `{}` {other:?}", keys::KIND)));
                }
            },
        };
        Ok(Self { group, content })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // Tests fail loudly by design.
mod tests {
    use super::*;

    fn round_trip(info: ChannelInfo) {
        let metadata = info.to_metadata();
        assert_eq!(ChannelInfo::parse("/t", &metadata), Ok(info));
        for key in metadata.keys() {
            assert!(
                ChannelInfo::KEYS.contains(&key.as_str()),
                "{key} is not listed"
            );
        }
    }

    #[test]
    fn every_kind_parses_back_to_what_was_written() {
        round_trip(ChannelInfo {
            group: "cameras".into(),
            content: ChannelContent::Camera(CameraInfo {
                width: 641,
                height: 479,
                codec: "h264".into(),
                video: VideoOrigin::Transcoded("B-frames".into()),
                source_encoding: Some("jpeg".into()),
                star_gops: true,
            }),
        });
        round_trip(ChannelInfo {
            group: "cameras".into(),
            content: ChannelContent::Camera(CameraInfo {
                width: 64,
                height: 48,
                codec: "h264".into(),
                video: VideoOrigin::Kept,
                source_encoding: None,
                star_gops: false,
            }),
        });
        round_trip(ChannelInfo {
            group: "cameras".into(),
            content: ChannelContent::Depth(DepthInfo {
                width: 8,
                height: 6,
                unit: DepthUnit::Raw,
                source_encoding: "mono16".into(),
            }),
        });
        round_trip(ChannelInfo {
            group: "proprio".into(),
            content: ChannelContent::Signal(SignalInfo {
                kind: SignalKind::Action,
                fields: vec!["a".into(), "b".into()],
                source_schema: "sensor_msgs/msg/JointState".into(),
            }),
        });
        round_trip(ChannelInfo {
            group: "other".into(),
            content: ChannelContent::Recorded {
                reason: "no reader for tf2_msgs/msg/TFMessage".into(),
            },
        });
    }

    #[test]
    fn a_missing_or_malformed_key_is_named() {
        let mut metadata = ChannelInfo {
            group: "cameras".into(),
            content: ChannelContent::Camera(CameraInfo {
                width: 64,
                height: 48,
                codec: "h264".into(),
                video: VideoOrigin::Encoded,
                source_encoding: None,
                star_gops: false,
            }),
        }
        .to_metadata();
        metadata.insert(keys::WIDTH.into(), "wide".into());
        let error = ChannelInfo::parse("/cam", &metadata).unwrap_err();
        assert_eq!(
            error.to_string(),
            "channel /cam: `reel.width` is \"wide\", not a number"
        );
        metadata.remove(keys::WIDTH);
        let error = ChannelInfo::parse("/cam", &metadata).unwrap_err();
        assert_eq!(error.to_string(), "channel /cam: no `reel.width`");
        metadata.insert(keys::KIND.into(), "lidar".into());
        let error = ChannelInfo::parse("/cam", &metadata).unwrap_err();
        assert_eq!(
            error.to_string(),
            "channel /cam: unknown `reel.kind` \"lidar\""
        );
    }

    #[test]
    fn a_camera_written_before_format_3_is_an_encoded_one() {
        let metadata = BTreeMap::from(
            [
                (keys::GROUP, "cameras"),
                (keys::KIND, "camera"),
                (keys::WIDTH, "64"),
                (keys::HEIGHT, "48"),
                (keys::CODEC, "h264"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned())),
        );
        let info = ChannelInfo::parse("/cam", &metadata).unwrap();
        let ChannelContent::Camera(camera) = info.content else {
            panic!("not a camera: {info:?}")
        };
        assert_eq!(camera.video, VideoOrigin::Encoded);
    }
}
