//! What a decoded landing message means: recognition by message type (then by the
//! fields a message has), and the frames or numbers it carries.

use reel_mcap::SignalKind;

use crate::value::{Fields, Value, time_ns};

/// How a topic's messages are read, chosen from its message type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Interpretation {
    /// `sensor_msgs/CompressedImage`, `foxglove.CompressedImage`, `foxglove.CompressedVideo`:
    /// `format` + `data`.
    CompressedImage,
    /// `sensor_msgs/Image`, `foxglove.RawImage`: `width`, `height`, `encoding`, `step`, `data`.
    RawImage,
    /// `sensor_msgs/JointState` (or any message with `position`/`velocity`/`effort` arrays).
    JointState,
    /// `foxglove.JointStates`: a list of joints, each with its name and values.
    JointList,
    /// A pose: position and orientation at `path`.
    Pose(&'static str),
    /// `tf2_msgs/TFMessage`, `foxglove.FrameTransforms`: one pose stream per child frame.
    Transforms,
    /// `foxglove.FrameTransform`: one transform, its own pose stream by child frame.
    Transform,
    /// A fixed set of vectors: (path in the message, name prefix in the stream).
    Vectors(&'static [(&'static str, &'static str)]),
    /// `std_msgs/*MultiArray`: the `data` array.
    MultiArray,
    /// `reel.FloatArray` (a canonical signal, or a landing log written the same way, as
    /// Reel's importers write datasets): the `values` array, named by the channel's
    /// `reel.fields` and of the kind its `reel.kind` says.
    FloatArray,
    /// Any other message: its numeric fields, by dotted path.
    Numeric,
}

/// Names of a pose stream's values.
pub(crate) const POSE_FIELDS: [&str; 7] = [
    "position.x",
    "position.y",
    "position.z",
    "orientation.x",
    "orientation.y",
    "orientation.z",
    "orientation.w",
];

const IMU: &[(&str, &str)] = &[
    ("orientation", "orientation"),
    ("angular_velocity", "angular_velocity"),
    ("linear_acceleration", "linear_acceleration"),
];
const WRENCH: &[(&str, &str)] = &[("force", "force"), ("torque", "torque")];
const WRENCH_STAMPED: &[(&str, &str)] = &[("wrench.force", "force"), ("wrench.torque", "torque")];
const TWIST: &[(&str, &str)] = &[("linear", "linear"), ("angular", "angular")];
const TWIST_STAMPED: &[(&str, &str)] = &[("twist.linear", "linear"), ("twist.angular", "angular")];
const ODOMETRY: &[(&str, &str)] = &[
    ("pose.pose.position", "position"),
    ("pose.pose.orientation", "orientation"),
    ("twist.twist.linear", "linear"),
    ("twist.twist.angular", "angular"),
];

impl Interpretation {
    /// Recognises a message type: ROS 2 (`pkg/msg/Type`, normalised to `pkg/Type`) or
    /// Foxglove (`foxglove.Type`). `None` when the type says nothing; the fields decide.
    pub(crate) fn of_type(normalized: &str) -> Option<Self> {
        Some(match normalized {
            // A recorded video's messages carry the same fields as a compressed image:
            // `format` (h264, h265) says which it is.
            "sensor_msgs/CompressedImage"
            | "foxglove.CompressedImage"
            | "foxglove.CompressedVideo"
            | "foxglove_msgs/CompressedVideo" => Self::CompressedImage,
            "sensor_msgs/Image" | "foxglove.RawImage" => Self::RawImage,
            "sensor_msgs/JointState" => Self::JointState,
            "foxglove.JointStates" => Self::JointList,
            "geometry_msgs/PoseStamped" => Self::Pose("pose"),
            "geometry_msgs/Pose" | "foxglove.Pose" => Self::Pose(""),
            "geometry_msgs/PoseWithCovarianceStamped" => Self::Pose("pose.pose"),
            "geometry_msgs/PoseWithCovariance" => Self::Pose("pose"),
            "foxglove.PoseInFrame" => Self::Pose("pose"),
            "tf2_msgs/TFMessage" | "foxglove.FrameTransforms" => Self::Transforms,
            "foxglove.FrameTransform" => Self::Transform,
            "sensor_msgs/Imu" => Self::Vectors(IMU),
            "geometry_msgs/Wrench" => Self::Vectors(WRENCH),
            "geometry_msgs/WrenchStamped" => Self::Vectors(WRENCH_STAMPED),
            "geometry_msgs/Twist" => Self::Vectors(TWIST),
            "geometry_msgs/TwistStamped" => Self::Vectors(TWIST_STAMPED),
            "nav_msgs/Odometry" => Self::Vectors(ODOMETRY),
            t if t.starts_with("std_msgs/") && t.ends_with("MultiArray") => Self::MultiArray,
            reel_mcap::proto::FLOAT_ARRAY => Self::FloatArray,
            _ => return None,
        })
    }

    /// Recognises a message by its fields, for types [`Interpretation::of_type`] does not name
    /// (JSON logs name types freely).
    pub(crate) fn of_fields(fields: &Fields) -> Self {
        let has = |k: &str| fields.get(k).is_some();
        if has("data") && has("format") && !has("width") {
            Self::CompressedImage
        } else if has("data") && has("width") && has("height") && has("encoding") {
            Self::RawImage
        } else if has("position") && (has("velocity") || has("effort") || has("name")) {
            Self::JointState
        } else if has("transforms") {
            Self::Transforms
        } else {
            Self::Numeric
        }
    }

    /// Whether the topic is a camera.
    pub(crate) fn is_camera(self) -> bool {
        matches!(self, Self::CompressedImage | Self::RawImage)
    }

    /// What a numeric topic measures; commands by their topic name.
    pub(crate) fn kind(self, topic: &str) -> SignalKind {
        match self {
            Self::Pose(_) | Self::Transforms | Self::Transform => SignalKind::Pose,
            Self::JointState | Self::JointList if !looks_like_action(topic) => SignalKind::State,
            _ if looks_like_action(topic) => SignalKind::Action,
            _ => SignalKind::Signal,
        }
    }
}

/// Whether a topic name says it carries commands rather than measurements.
fn looks_like_action(topic: &str) -> bool {
    let t = topic.to_ascii_lowercase();
    t.contains("action") || t.contains("command") || t.contains("cmd")
}

/// A landing image as the message carries it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Image {
    pub stamp_ns: u64,
    pub frame_id: String,
    /// `format` of a compressed image, `encoding` of a raw one.
    pub format: String,
    /// Raw images: width, height, step.
    pub geometry: Option<(usize, usize, usize)>,
    /// Raw images: `is_bigendian` (Foxglove raw images are little-endian).
    pub big_endian: bool,
    pub data: Vec<u8>,
}

/// One numeric sample: values for a (sub-)stream.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Values {
    /// Sub-stream (a child frame of a transform topic), `None` for the topic itself.
    pub stream: Option<String>,
    pub stamp_ns: u64,
    pub fields: Vec<String>,
    pub values: Vec<f64>,
}

/// The header stamp and frame of a message: ROS `header`, Foxglove `timestamp`/`frame_id`.
fn stamp_and_frame(fields: &Fields) -> (u64, String) {
    let (time, frame) = match fields.get("header").and_then(Value::as_message) {
        Some(header) => (header.get("stamp"), header.get("frame_id")),
        None => (fields.get("timestamp"), fields.get("frame_id")),
    };
    let stamp = time
        .and_then(Value::as_message)
        .and_then(time_ns)
        .unwrap_or(0);
    let frame = frame.and_then(Value::as_str).unwrap_or_default().to_owned();
    (stamp, frame)
}

fn take_bytes(fields: &mut Fields, name: &str) -> Option<Vec<u8>> {
    let slot = fields.0.iter_mut().find(|(n, _)| &**n == name)?;
    match std::mem::replace(&mut slot.1, Value::Bytes(Vec::new())) {
        Value::Bytes(b) => Some(b),
        // A JSON or list-of-integers byte array.
        Value::List(items) => items
            .iter()
            .map(|v| v.as_u64().and_then(|u| u8::try_from(u).ok()))
            .collect(),
        _ => None,
    }
}

fn number(fields: &Fields, path: &str) -> Result<f64, String> {
    fields
        .path(path)
        .and_then(Value::as_f64)
        .ok_or_else(|| format!("no number at `{path}`"))
}

fn size(fields: &Fields, name: &str) -> Result<usize, String> {
    fields
        .get(name)
        .and_then(Value::as_u64)
        .and_then(|v| usize::try_from(v).ok())
        .ok_or_else(|| format!("no `{name}`"))
}

/// Reads an image message.
pub(crate) fn image(kind: Interpretation, mut fields: Fields) -> Result<Image, String> {
    let (stamp_ns, frame_id) = stamp_and_frame(&fields);
    let data = take_bytes(&mut fields, "data").ok_or("no `data` bytes")?;
    match kind {
        Interpretation::CompressedImage => Ok(Image {
            stamp_ns,
            frame_id,
            format: fields
                .get("format")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            geometry: None,
            big_endian: false,
            data,
        }),
        _ => {
            let width = size(&fields, "width")?;
            let height = size(&fields, "height")?;
            let step = size(&fields, "step")?;
            Ok(Image {
                stamp_ns,
                frame_id,
                format: fields
                    .get("encoding")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                geometry: Some((width, height, step)),
                big_endian: fields
                    .get("is_bigendian")
                    .and_then(Value::as_u64)
                    .is_some_and(|b| b != 0),
                data,
            })
        }
    }
}

fn vector(
    fields: &Fields,
    path: &str,
    prefix: &str,
    names: &mut Vec<String>,
    out: &mut Vec<f64>,
) -> Result<(), String> {
    let at = |k: &str| {
        if path.is_empty() {
            k.to_owned()
        } else {
            format!("{path}.{k}")
        }
    };
    let inner = if path.is_empty() {
        Some(fields)
    } else {
        fields.path(path).and_then(Value::as_message)
    }
    .ok_or_else(|| format!("no `{path}`"))?;
    let axes: &[&str] = if inner.get("w").is_some() {
        &["x", "y", "z", "w"]
    } else {
        &["x", "y", "z"]
    };
    for axis in axes {
        out.push(number(fields, &at(axis))?);
        names.push(format!("{prefix}.{axis}"));
    }
    Ok(())
}

fn pose(fields: &Fields, path: &str) -> Result<Vec<f64>, String> {
    let at = |k: &str| {
        if path.is_empty() {
            k.to_owned()
        } else {
            format!("{path}.{k}")
        }
    };
    let (mut names, mut values) = (Vec::new(), Vec::new());
    vector(fields, &at("position"), "position", &mut names, &mut values)?;
    vector(
        fields,
        &at("orientation"),
        "orientation",
        &mut names,
        &mut values,
    )?;
    if values.len() != 7 {
        return Err("orientation is not a quaternion".into());
    }
    Ok(values)
}

/// A transform's pose: ROS `transform.translation/rotation`, Foxglove `translation/rotation`.
fn transform(t: &Fields, fallback_stamp: u64) -> Result<Values, String> {
    let child = t
        .get("child_frame_id")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
        .ok_or("transform without `child_frame_id`")?;
    let base = if t.get("transform").is_some() {
        "transform."
    } else {
        ""
    };
    let mut values = Vec::with_capacity(7);
    for axis in ["x", "y", "z"] {
        values.push(number(t, &format!("{base}translation.{axis}"))?);
    }
    for axis in ["x", "y", "z", "w"] {
        values.push(number(t, &format!("{base}rotation.{axis}"))?);
    }
    let (stamp, _) = stamp_and_frame(t);
    Ok(Values {
        stream: Some(child.trim_start_matches('/').to_owned()),
        stamp_ns: if stamp == 0 { fallback_stamp } else { stamp },
        fields: POSE_FIELDS.iter().map(|s| (*s).to_owned()).collect(),
        values,
    })
}

fn joint_fields(names: &[String], pos: usize, vel: usize, eff: usize) -> Vec<String> {
    let name = |i: usize| {
        names
            .get(i)
            .cloned()
            .unwrap_or_else(|| format!("joint_{i}"))
    };
    let mut f: Vec<String> = (0..pos).map(|i| format!("{}.position", name(i))).collect();
    f.extend((0..vel).map(|i| format!("{}.velocity", name(i))));
    f.extend((0..eff).map(|i| format!("{}.effort", name(i))));
    f
}

/// Numeric leaves by dotted path, header and stamps left out; lists of numbers by index.
fn flatten(fields: &Fields, prefix: &str, names: &mut Vec<String>, values: &mut Vec<f64>) {
    for (name, value) in &fields.0 {
        if prefix.is_empty() && matches!(&**name, "header" | "timestamp") {
            continue;
        }
        let path = if prefix.is_empty() {
            name.to_string()
        } else {
            format!("{prefix}.{name}")
        };
        match value {
            Value::Message(inner) => flatten(inner, &path, names, values),
            Value::List(items) => {
                for (i, item) in items.iter().enumerate() {
                    if let Some(v) = item.as_f64() {
                        names.push(format!("{path}[{i}]"));
                        values.push(v);
                    }
                }
            }
            Value::Bytes(_) | Value::String(_) => {}
            scalar => {
                if let Some(v) = scalar.as_f64() {
                    names.push(path);
                    values.push(v);
                }
            }
        }
    }
}

/// Reads a numeric message into one sample per (sub-)stream. An empty result means the
/// message has no numbers (the topic is kept as recorded instead).
pub(crate) fn values(kind: Interpretation, fields: &Fields) -> Result<Vec<Values>, String> {
    let (stamp_ns, _) = stamp_and_frame(fields);
    let one = |fields: Vec<String>, values: Vec<f64>| {
        Ok(vec![Values {
            stream: None,
            stamp_ns,
            fields,
            values,
        }])
    };
    match kind {
        Interpretation::JointState => {
            let names: Vec<String> = fields
                .get("name")
                .and_then(Value::as_list)
                .map(|l| {
                    l.iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            let array = |k: &str| {
                fields
                    .get(k)
                    .map(|v| v.as_f64s().ok_or_else(|| format!("`{k}` is not numeric")))
                    .transpose()
                    .map(Option::unwrap_or_default)
            };
            let (p, v, e) = (array("position")?, array("velocity")?, array("effort")?);
            if p.is_empty() && v.is_empty() && e.is_empty() {
                return Err("joint state has no position, velocity or effort values".into());
            }
            let names = joint_fields(&names, p.len(), v.len(), e.len());
            one(names, [p, v, e].concat())
        }
        Interpretation::JointList => {
            let joints = fields
                .get("joints")
                .and_then(Value::as_list)
                .ok_or("no `joints` list")?;
            let mut names = Vec::with_capacity(joints.len());
            let mut columns: [Vec<f64>; 3] = Default::default();
            for (i, joint) in joints.iter().enumerate() {
                let joint = joint.as_message().ok_or("a joint is not a message")?;
                names.push(
                    joint
                        .get("name")
                        .and_then(Value::as_str)
                        .filter(|n| !n.is_empty())
                        .map_or_else(|| format!("joint_{i}"), str::to_owned),
                );
                for (column, key) in columns.iter_mut().zip(["position", "velocity", "effort"]) {
                    column.push(joint.get(key).and_then(Value::as_f64).unwrap_or(f64::NAN));
                }
            }
            let n = names.len();
            let [p, v, e] = columns;
            one(joint_fields(&names, n, n, n), [p, v, e].concat())
        }
        Interpretation::Pose(path) => one(
            POSE_FIELDS.iter().map(|s| (*s).to_owned()).collect(),
            pose(fields, path)?,
        ),
        Interpretation::Transforms => fields
            .get("transforms")
            .and_then(Value::as_list)
            .ok_or("no `transforms` list")?
            .iter()
            .map(|t| {
                transform(
                    t.as_message().ok_or("a transform is not a message")?,
                    stamp_ns,
                )
            })
            .collect(),
        Interpretation::Transform => Ok(vec![transform(fields, stamp_ns)?]),
        Interpretation::Vectors(vectors) => {
            let (mut names, mut values) = (Vec::new(), Vec::new());
            for (path, prefix) in vectors {
                vector(fields, path, prefix, &mut names, &mut values)?;
            }
            one(names, values)
        }
        Interpretation::MultiArray => {
            let data = fields
                .get("data")
                .and_then(Value::as_f64s)
                .ok_or("no numeric `data` array")?;
            one((0..data.len()).map(|i| format!("v{i}")).collect(), data)
        }
        // Named by the caller from the channel's `reel.fields`.
        Interpretation::FloatArray => {
            let values = match fields.get("values") {
                Some(v) => v.as_f64s().ok_or("`values` is not numeric")?,
                // Protobuf leaves an empty repeated field out.
                None => Vec::new(),
            };
            one((0..values.len()).map(|i| format!("v{i}")).collect(), values)
        }
        Interpretation::Numeric => {
            let (mut names, mut values) = (Vec::new(), Vec::new());
            flatten(fields, "", &mut names, &mut values);
            if names.is_empty() {
                return Ok(Vec::new());
            }
            one(names, values)
        }
        Interpretation::CompressedImage | Interpretation::RawImage => {
            Err("an image is not numeric".into())
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // Tests fail loudly by design.
mod tests {
    use std::sync::Arc;

    use super::*;

    fn msg(fields: Vec<(&str, Value)>) -> Value {
        Value::Message(Fields(
            fields.into_iter().map(|(k, v)| (Arc::from(k), v)).collect(),
        ))
    }
    fn xyz(x: f64, y: f64, z: f64) -> Value {
        msg(vec![
            ("x", Value::Float(x)),
            ("y", Value::Float(y)),
            ("z", Value::Float(z)),
        ])
    }
    fn quat() -> Value {
        msg(vec![
            ("x", Value::Float(0.0)),
            ("y", Value::Float(0.0)),
            ("z", Value::Float(0.0)),
            ("w", Value::Float(1.0)),
        ])
    }
    fn header(sec: i64) -> Value {
        msg(vec![
            (
                "stamp",
                msg(vec![("sec", Value::Int(sec)), ("nanosec", Value::UInt(5))]),
            ),
            ("frame_id", Value::String("odom".into())),
        ])
    }

    #[test]
    fn tf_gives_one_pose_stream_per_child_frame() {
        let t = |child: &str, x: f64| {
            msg(vec![
                ("header", header(2)),
                ("child_frame_id", Value::String(child.into())),
                (
                    "transform",
                    msg(vec![
                        ("translation", xyz(x, 0.0, 0.0)),
                        ("rotation", quat()),
                    ]),
                ),
            ])
        };
        let Value::Message(m) = msg(vec![(
            "transforms",
            Value::List(vec![t("/base", 1.0), t("gripper", 2.0)]),
        )]) else {
            unreachable!()
        };
        let kind = Interpretation::of_type("tf2_msgs/TFMessage").unwrap();
        let out = values(kind, &m).unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].stream.as_deref(), Some("base"));
        assert_eq!(out[1].stream.as_deref(), Some("gripper"));
        assert_eq!(out[1].values, [2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]);
        assert_eq!(out[0].stamp_ns, 2_000_000_005);
        assert_eq!(kind.kind("/tf"), SignalKind::Pose);
    }

    #[test]
    fn imu_wrench_and_generic_messages_name_their_values() {
        let Value::Message(imu) = msg(vec![
            ("header", header(1)),
            ("orientation", quat()),
            (
                "orientation_covariance",
                Value::List(vec![Value::Float(0.0); 9]),
            ),
            ("angular_velocity", xyz(0.1, 0.2, 0.3)),
            ("linear_acceleration", xyz(0.0, 0.0, 9.8)),
        ]) else {
            unreachable!()
        };
        let out = values(Interpretation::of_type("sensor_msgs/Imu").unwrap(), &imu).unwrap();
        assert_eq!(out[0].fields.len(), 10);
        assert_eq!(out[0].fields[4], "angular_velocity.x");
        assert_eq!(out[0].values[9], 9.8);

        let Value::Message(generic) = msg(vec![
            ("header", header(1)),
            ("label", Value::String("x".into())),
            ("temperature", Value::Float(21.5)),
            ("ok", Value::Bool(true)),
            ("limits", Value::List(vec![Value::Int(-1), Value::Int(1)])),
        ]) else {
            unreachable!()
        };
        let kind = Interpretation::of_fields(&generic);
        let out = values(kind, &generic).unwrap();
        assert_eq!(
            out[0].fields,
            ["temperature", "ok", "limits[0]", "limits[1]"]
        );
        assert_eq!(out[0].values, [21.5, 1.0, -1.0, 1.0]);
        assert_eq!(out[0].stamp_ns, 1_000_000_005);

        let Value::Message(text) = msg(vec![("data", Value::String("hello".into()))]) else {
            unreachable!()
        };
        assert!(values(Interpretation::Numeric, &text).unwrap().is_empty());
    }
}
