//! The MCAP schemas and channels of an episode's streams, in each flavour's encodings.

use std::collections::BTreeMap;
use std::io::{Seek, Write};

use crate::config::Flavor;
use crate::error::SynthError;
use crate::stream::{Stream, topic_of};
use crate::{foxglove, ros2};

pub(crate) struct Channels {
    pub(crate) ids: Vec<u16>,
    pub(crate) topics: Vec<String>,
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

pub(crate) fn add_channels<W: Write + Seek>(
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
