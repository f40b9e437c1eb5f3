//! Foxglove SDK-style messages: `foxglove.CompressedImage`, `foxglove.RawImage` and
//! `foxglove.PoseInFrame` in protobuf (schema = a serialized
//! `FileDescriptorSet`, as the Foxglove SDK embeds it), and joint states as
//! JSON with a JSON Schema, as Foxglove users log custom data.

use prost::Message;
use prost_types::{
    DescriptorProto, FieldDescriptorProto, FileDescriptorProto, FileDescriptorSet,
    field_descriptor_proto::{Label, Type},
};
use serde::Serialize;

/// `google.protobuf.Timestamp`.
#[derive(Clone, PartialEq, Message)]
pub struct Timestamp {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

impl Timestamp {
    pub fn from_ns(ns: u64) -> Self {
        Self {
            seconds: (ns / 1_000_000_000) as i64,
            nanos: (ns % 1_000_000_000) as i32,
        }
    }
}

/// `foxglove.CompressedImage`.
#[derive(Clone, PartialEq, Message)]
pub struct CompressedImage {
    #[prost(message, optional, tag = "1")]
    pub timestamp: Option<Timestamp>,
    #[prost(string, tag = "4")]
    pub frame_id: String,
    #[prost(bytes = "vec", tag = "2")]
    pub data: Vec<u8>,
    #[prost(string, tag = "3")]
    pub format: String,
}

/// `foxglove.RawImage` (depth cameras: `16UC1`).
#[derive(Clone, PartialEq, Message)]
pub struct RawImage {
    #[prost(message, optional, tag = "1")]
    pub timestamp: Option<Timestamp>,
    #[prost(string, tag = "7")]
    pub frame_id: String,
    #[prost(fixed32, tag = "2")]
    pub width: u32,
    #[prost(fixed32, tag = "3")]
    pub height: u32,
    #[prost(string, tag = "4")]
    pub encoding: String,
    #[prost(fixed32, tag = "5")]
    pub step: u32,
    #[prost(bytes = "vec", tag = "6")]
    pub data: Vec<u8>,
}

/// `foxglove.Vector3`.
#[derive(Clone, PartialEq, Message)]
pub struct Vector3 {
    #[prost(double, tag = "1")]
    pub x: f64,
    #[prost(double, tag = "2")]
    pub y: f64,
    #[prost(double, tag = "3")]
    pub z: f64,
}

/// `foxglove.Quaternion`.
#[derive(Clone, PartialEq, Message)]
pub struct Quaternion {
    #[prost(double, tag = "1")]
    pub x: f64,
    #[prost(double, tag = "2")]
    pub y: f64,
    #[prost(double, tag = "3")]
    pub z: f64,
    #[prost(double, tag = "4")]
    pub w: f64,
}

/// `foxglove.Pose`.
#[derive(Clone, PartialEq, Message)]
pub struct Pose {
    #[prost(message, optional, tag = "1")]
    pub position: Option<Vector3>,
    #[prost(message, optional, tag = "2")]
    pub orientation: Option<Quaternion>,
}

/// `foxglove.PoseInFrame`.
#[derive(Clone, PartialEq, Message)]
pub struct PoseInFrame {
    #[prost(message, optional, tag = "1")]
    pub timestamp: Option<Timestamp>,
    #[prost(string, tag = "2")]
    pub frame_id: String,
    #[prost(message, optional, tag = "3")]
    pub pose: Option<Pose>,
}

fn field(name: &str, number: i32, kind: Type, type_name: Option<&str>) -> FieldDescriptorProto {
    FieldDescriptorProto {
        name: Some(name.into()),
        number: Some(number),
        label: Some(Label::Optional as i32),
        r#type: Some(kind as i32),
        type_name: type_name.map(Into::into),
        json_name: Some(name.into()),
        ..Default::default()
    }
}

fn message(name: &str, fields: Vec<FieldDescriptorProto>) -> DescriptorProto {
    DescriptorProto {
        name: Some(name.into()),
        field: fields,
        ..Default::default()
    }
}

fn file(
    name: &str,
    package: &str,
    deps: &[&str],
    messages: Vec<DescriptorProto>,
) -> FileDescriptorProto {
    FileDescriptorProto {
        name: Some(name.into()),
        package: Some(package.into()),
        dependency: deps.iter().map(|d| d.to_string()).collect(),
        message_type: messages,
        syntax: Some("proto3".into()),
        ..Default::default()
    }
}

fn timestamp_file() -> FileDescriptorProto {
    file(
        "google/protobuf/timestamp.proto",
        "google.protobuf",
        &[],
        vec![message(
            "Timestamp",
            vec![
                field("seconds", 1, Type::Int64, None),
                field("nanos", 2, Type::Int32, None),
            ],
        )],
    )
}

fn encode_set(files: Vec<FileDescriptorProto>) -> Vec<u8> {
    FileDescriptorSet { file: files }.encode_to_vec()
}

/// The schema data for `foxglove.CompressedImage`.
pub fn compressed_image_schema() -> Vec<u8> {
    encode_set(vec![
        timestamp_file(),
        file(
            "foxglove/CompressedImage.proto",
            "foxglove",
            &["google/protobuf/timestamp.proto"],
            vec![message(
                "CompressedImage",
                vec![
                    field(
                        "timestamp",
                        1,
                        Type::Message,
                        Some(".google.protobuf.Timestamp"),
                    ),
                    field("frame_id", 4, Type::String, None),
                    field("data", 2, Type::Bytes, None),
                    field("format", 3, Type::String, None),
                ],
            )],
        ),
    ])
}

/// The schema data for `foxglove.RawImage`.
pub fn raw_image_schema() -> Vec<u8> {
    let fixed = |n: &str, i| field(n, i, Type::Fixed32, None);
    encode_set(vec![
        timestamp_file(),
        file(
            "foxglove/RawImage.proto",
            "foxglove",
            &["google/protobuf/timestamp.proto"],
            vec![message(
                "RawImage",
                vec![
                    field(
                        "timestamp",
                        1,
                        Type::Message,
                        Some(".google.protobuf.Timestamp"),
                    ),
                    field("frame_id", 7, Type::String, None),
                    fixed("width", 2),
                    fixed("height", 3),
                    field("encoding", 4, Type::String, None),
                    fixed("step", 5),
                    field("data", 6, Type::Bytes, None),
                ],
            )],
        ),
    ])
}

/// The schema data for `foxglove.PoseInFrame`.
pub fn pose_in_frame_schema() -> Vec<u8> {
    let double = |n: &str, i| field(n, i, Type::Double, None);
    encode_set(vec![
        timestamp_file(),
        file(
            "foxglove/Vector3.proto",
            "foxglove",
            &[],
            vec![message(
                "Vector3",
                vec![double("x", 1), double("y", 2), double("z", 3)],
            )],
        ),
        file(
            "foxglove/Quaternion.proto",
            "foxglove",
            &[],
            vec![message(
                "Quaternion",
                vec![
                    double("x", 1),
                    double("y", 2),
                    double("z", 3),
                    double("w", 4),
                ],
            )],
        ),
        file(
            "foxglove/Pose.proto",
            "foxglove",
            &["foxglove/Vector3.proto", "foxglove/Quaternion.proto"],
            vec![message(
                "Pose",
                vec![
                    field("position", 1, Type::Message, Some(".foxglove.Vector3")),
                    field(
                        "orientation",
                        2,
                        Type::Message,
                        Some(".foxglove.Quaternion"),
                    ),
                ],
            )],
        ),
        file(
            "foxglove/PoseInFrame.proto",
            "foxglove",
            &["google/protobuf/timestamp.proto", "foxglove/Pose.proto"],
            vec![message(
                "PoseInFrame",
                vec![
                    field(
                        "timestamp",
                        1,
                        Type::Message,
                        Some(".google.protobuf.Timestamp"),
                    ),
                    field("frame_id", 2, Type::String, None),
                    field("pose", 3, Type::Message, Some(".foxglove.Pose")),
                ],
            )],
        ),
    ])
}

/// JSON Schema for joint-state messages in the Foxglove flavour.
pub const JOINT_STATE_JSON_SCHEMA: &str = r#"{"title":"reel.JointState","type":"object","properties":{"timestamp":{"type":"object","properties":{"sec":{"type":"integer"},"nsec":{"type":"integer"}}},"name":{"type":"array","items":{"type":"string"}},"position":{"type":"array","items":{"type":"number"}},"velocity":{"type":"array","items":{"type":"number"}},"effort":{"type":"array","items":{"type":"number"}}}}"#;

#[derive(Serialize)]
struct JsonTime {
    sec: u64,
    nsec: u64,
}

#[derive(Serialize)]
struct JsonJointState<'a> {
    timestamp: JsonTime,
    name: &'a [String],
    position: &'a [f64],
    velocity: &'a [f64],
    effort: &'a [f64],
}

/// A joint-state message as JSON.
pub fn joint_state_json(
    stamp_ns: u64,
    names: &[String],
    position: &[f64],
    velocity: &[f64],
    effort: &[f64],
) -> Vec<u8> {
    let msg = JsonJointState {
        timestamp: JsonTime {
            sec: stamp_ns / 1_000_000_000,
            nsec: stamp_ns % 1_000_000_000,
        },
        name: names,
        position,
        velocity,
        effort,
    };
    // Serializing plain numbers and strings cannot fail; NaN becomes null.
    serde_json::to_vec(&msg).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_sets_decode_and_name_the_message() {
        let set = FileDescriptorSet::decode(compressed_image_schema().as_slice())
            .expect("valid descriptor set");
        let names: Vec<_> = set.file.iter().map(|f| f.name().to_string()).collect();
        assert_eq!(
            names,
            [
                "google/protobuf/timestamp.proto",
                "foxglove/CompressedImage.proto"
            ]
        );
        let set = FileDescriptorSet::decode(pose_in_frame_schema().as_slice())
            .expect("valid descriptor set");
        assert!(
            set.file
                .iter()
                .any(|f| f.message_type.iter().any(|m| m.name() == "PoseInFrame"))
        );
    }

    #[test]
    fn image_round_trips() {
        let img = CompressedImage {
            timestamp: Some(Timestamp::from_ns(1_700_000_000_123_456_789)),
            frame_id: "cam".into(),
            data: vec![1, 2, 3],
            format: "jpeg".into(),
        };
        let back = CompressedImage::decode(img.encode_to_vec().as_slice()).expect("decodes");
        assert_eq!(back, img);
        assert_eq!(back.timestamp.map(|t| t.nanos), Some(123_456_789));
    }
}
