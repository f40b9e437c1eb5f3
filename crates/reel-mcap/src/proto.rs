//! The protobuf messages of canonical episodes, with their schemas built by hand
//! (a serialized `FileDescriptorSet`, as Foxglove and `mcap-protobuf-support` expect).

use prost::Message;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FieldDescriptorProto, FileDescriptorProto, FileDescriptorSet};

/// `google.protobuf.Timestamp`.
#[derive(Clone, PartialEq, Message)]
pub struct Timestamp {
    /// Seconds since the Unix epoch.
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    /// Nanoseconds within the second.
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

impl Timestamp {
    /// From nanoseconds since the Unix epoch.
    pub fn from_ns(ns: u64) -> Self {
        Self {
            seconds: (ns / 1_000_000_000) as i64,
            nanos: (ns % 1_000_000_000) as i32,
        }
    }

    /// To nanoseconds since the Unix epoch (negative times clamp to 0).
    pub fn to_ns(&self) -> u64 {
        (self.seconds.max(0) as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(self.nanos.max(0) as u64)
    }
}

/// `foxglove.CompressedVideo`: one H.264 access unit (Annex B) per message.
#[derive(Clone, PartialEq, Message)]
pub struct CompressedVideo {
    /// Capture time of the frame.
    #[prost(message, optional, tag = "1")]
    pub timestamp: Option<Timestamp>,
    /// Camera frame of reference.
    #[prost(string, tag = "2")]
    pub frame_id: String,
    /// The access unit: a slice of the message it was decoded from, not a copy, when
    /// decoded from [`bytes::Bytes`].
    #[prost(bytes = "bytes", tag = "3")]
    pub data: bytes::Bytes,
    /// Codec: `h264`.
    #[prost(string, tag = "4")]
    pub format: String,
}

/// `foxglove.CompressedImage`: one JPEG or PNG picture (landing logs Reel's importers write).
#[derive(Clone, PartialEq, Message)]
pub struct CompressedImage {
    /// Capture time of the picture.
    #[prost(message, optional, tag = "1")]
    pub timestamp: Option<Timestamp>,
    /// Camera frame of reference.
    #[prost(string, tag = "4")]
    pub frame_id: String,
    /// The compressed picture.
    #[prost(bytes = "bytes", tag = "2")]
    pub data: bytes::Bytes,
    /// `jpeg` or `png`.
    #[prost(string, tag = "3")]
    pub format: String,
}

/// `foxglove.RawImage`: canonical depth frames (`16UC1` millimetres, `mono16` counts),
/// little-endian rows without padding; the chunk's zstd is their lossless compression.
#[derive(Clone, PartialEq, Message)]
pub struct RawImage {
    /// Capture time of the frame.
    #[prost(message, optional, tag = "1")]
    pub timestamp: Option<Timestamp>,
    /// Camera frame of reference.
    #[prost(string, tag = "7")]
    pub frame_id: String,
    /// Width in pixels.
    #[prost(fixed32, tag = "2")]
    pub width: u32,
    /// Height in pixels.
    #[prost(fixed32, tag = "3")]
    pub height: u32,
    /// `16UC1` or `mono16`.
    #[prost(string, tag = "4")]
    pub encoding: String,
    /// Bytes per row.
    #[prost(fixed32, tag = "5")]
    pub step: u32,
    /// The pixels.
    #[prost(bytes = "vec", tag = "6")]
    pub data: Vec<u8>,
}

/// `reel.FloatArray`: one sample of a signal; value names live in the channel metadata
/// (`reel.fields`), so each message carries only numbers.
#[derive(Clone, PartialEq, Message)]
pub struct FloatArray {
    /// Capture time of the sample (the source message's header stamp).
    #[prost(message, optional, tag = "1")]
    pub timestamp: Option<Timestamp>,
    /// The values, in the order of `reel.fields`.
    #[prost(double, repeated, tag = "2")]
    pub values: Vec<f64>,
}

/// Schema name of camera channels.
pub const COMPRESSED_VIDEO: &str = "foxglove.CompressedVideo";
/// Schema name of compressed pictures.
pub const COMPRESSED_IMAGE: &str = "foxglove.CompressedImage";
/// Schema name of depth channels.
pub const RAW_IMAGE: &str = "foxglove.RawImage";
/// Schema name of signal channels.
pub const FLOAT_ARRAY: &str = "reel.FloatArray";

fn field(
    name: &str,
    number: i32,
    kind: Type,
    label: Label,
    type_name: Option<&str>,
) -> FieldDescriptorProto {
    FieldDescriptorProto {
        name: Some(name.into()),
        number: Some(number),
        label: Some(label as i32),
        r#type: Some(kind as i32),
        type_name: type_name.map(Into::into),
        json_name: Some(name.into()),
        ..Default::default()
    }
}

fn timestamp_file() -> FileDescriptorProto {
    FileDescriptorProto {
        name: Some("google/protobuf/timestamp.proto".into()),
        package: Some("google.protobuf".into()),
        message_type: vec![DescriptorProto {
            name: Some("Timestamp".into()),
            field: vec![
                field("seconds", 1, Type::Int64, Label::Optional, None),
                field("nanos", 2, Type::Int32, Label::Optional, None),
            ],
            ..Default::default()
        }],
        syntax: Some("proto3".into()),
        ..Default::default()
    }
}

fn schema(file: &str, package: &str, message: &str, fields: Vec<FieldDescriptorProto>) -> Vec<u8> {
    FileDescriptorSet {
        file: vec![
            timestamp_file(),
            FileDescriptorProto {
                name: Some(file.into()),
                package: Some(package.into()),
                dependency: vec!["google/protobuf/timestamp.proto".into()],
                message_type: vec![DescriptorProto {
                    name: Some(message.into()),
                    field: fields,
                    ..Default::default()
                }],
                syntax: Some("proto3".into()),
                ..Default::default()
            },
        ],
    }
    .encode_to_vec()
}

/// Schema data of `foxglove.CompressedVideo`.
pub fn compressed_video_schema() -> Vec<u8> {
    let stamp = Some(".google.protobuf.Timestamp");
    schema(
        "foxglove/CompressedVideo.proto",
        "foxglove",
        "CompressedVideo",
        vec![
            field("timestamp", 1, Type::Message, Label::Optional, stamp),
            field("frame_id", 2, Type::String, Label::Optional, None),
            field("data", 3, Type::Bytes, Label::Optional, None),
            field("format", 4, Type::String, Label::Optional, None),
        ],
    )
}

/// Schema data of `foxglove.CompressedImage`.
pub fn compressed_image_schema() -> Vec<u8> {
    let stamp = Some(".google.protobuf.Timestamp");
    schema(
        "foxglove/CompressedImage.proto",
        "foxglove",
        "CompressedImage",
        vec![
            field("timestamp", 1, Type::Message, Label::Optional, stamp),
            field("frame_id", 4, Type::String, Label::Optional, None),
            field("data", 2, Type::Bytes, Label::Optional, None),
            field("format", 3, Type::String, Label::Optional, None),
        ],
    )
}

/// Schema data of `reel.FloatArray`.
pub fn float_array_schema() -> Vec<u8> {
    let stamp = Some(".google.protobuf.Timestamp");
    schema(
        "reel/FloatArray.proto",
        "reel",
        "FloatArray",
        vec![
            field("timestamp", 1, Type::Message, Label::Optional, stamp),
            field("values", 2, Type::Double, Label::Repeated, None),
        ],
    )
}

/// Schema data of `foxglove.RawImage`.
pub fn raw_image_schema() -> Vec<u8> {
    let stamp = Some(".google.protobuf.Timestamp");
    schema(
        "foxglove/RawImage.proto",
        "foxglove",
        "RawImage",
        vec![
            field("timestamp", 1, Type::Message, Label::Optional, stamp),
            field("frame_id", 7, Type::String, Label::Optional, None),
            field("width", 2, Type::Fixed32, Label::Optional, None),
            field("height", 3, Type::Fixed32, Label::Optional, None),
            field("encoding", 4, Type::String, Label::Optional, None),
            field("step", 5, Type::Fixed32, Label::Optional, None),
            field("data", 6, Type::Bytes, Label::Optional, None),
        ],
    )
}
