//! Reading landing logs: ROS 2 (`cdr` + `ros2msg`) and Foxglove (protobuf, JSON) MCAPs.

use std::collections::BTreeMap;

use bytes::Bytes;
use prost::Message as _;

use crate::proto::Timestamp;
use crate::writer::{Sample, SignalKind};
use crate::{Error, Result};

/// How a landing frame is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageEncoding {
    /// JPEG bytes.
    Jpeg,
    /// PNG bytes.
    Png,
    /// Uncompressed pixels (`sensor_msgs/msg/Image`).
    Raw {
        /// `rgb8`, `bgr8` or `mono8`.
        encoding: String,
        /// Width in pixels.
        width: usize,
        /// Height in pixels.
        height: usize,
        /// Bytes per row.
        step: usize,
    },
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

/// A landing numeric topic, already decoded to value arrays.
#[derive(Debug, Clone)]
pub struct LandingSignal {
    /// Topic.
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

/// A landing episode, parsed.
#[derive(Debug, Clone, Default)]
pub struct LandingEpisode {
    /// Camera topics.
    pub cameras: Vec<LandingCamera>,
    /// Numeric topics.
    pub signals: Vec<LandingSignal>,
    /// Metadata records by name.
    pub metadata: BTreeMap<String, BTreeMap<String, String>>,
    /// Topics left out (by configuration or unknown schema when allowed), with their schema.
    pub skipped: BTreeMap<String, String>,
}

/// What a landing topic is, recognised from its schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decoder {
    RosCompressedImage,
    RosImage,
    RosJointState,
    RosPoseStamped,
    RosFloat64Array,
    FoxgloveCompressedImage,
    FoxglovePoseInFrame,
    JsonJointState,
}

fn recognise(schema: &str, schema_encoding: &str, message_encoding: &str) -> Option<Decoder> {
    let base = schema.trim_start_matches('/').replace("/msg/", "/");
    match (message_encoding, base.as_str()) {
        ("cdr", "sensor_msgs/CompressedImage") => Some(Decoder::RosCompressedImage),
        ("cdr", "sensor_msgs/Image") => Some(Decoder::RosImage),
        ("cdr", "sensor_msgs/JointState") => Some(Decoder::RosJointState),
        ("cdr", "geometry_msgs/PoseStamped") => Some(Decoder::RosPoseStamped),
        ("cdr", "std_msgs/Float64MultiArray") => Some(Decoder::RosFloat64Array),
        ("protobuf", "foxglove.CompressedImage") => Some(Decoder::FoxgloveCompressedImage),
        ("protobuf", "foxglove.PoseInFrame") => Some(Decoder::FoxglovePoseInFrame),
        ("json", _) if schema_encoding == "jsonschema" || schema_encoding.is_empty() => {
            Some(Decoder::JsonJointState)
        }
        _ => None,
    }
}

/// Whether a topic name says it carries commands rather than measurements.
fn looks_like_action(topic: &str) -> bool {
    let t = topic.to_ascii_lowercase();
    t.contains("action") || t.contains("command") || t.contains("cmd")
}

/// Little-endian or big-endian CDR (XCDR1) reader; alignment counts from after the
/// 4-byte encapsulation header.
struct Cdr<'a> {
    buf: &'a [u8],
    pos: usize,
    little: bool,
}

impl<'a> Cdr<'a> {
    fn new(data: &'a [u8]) -> std::result::Result<Self, String> {
        if data.len() < 4 {
            return Err("shorter than the CDR header".into());
        }
        let little = match data[1] {
            0 | 2 => false,
            1 | 3 => true,
            k => return Err(format!("unknown CDR representation {k}")),
        };
        Ok(Self {
            buf: &data[4..],
            pos: 0,
            little,
        })
    }
    fn take(&mut self, n: usize, align: usize) -> std::result::Result<&'a [u8], String> {
        self.pos = self.pos.div_ceil(align) * align;
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or("message ends early")?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u32(&mut self) -> std::result::Result<u32, String> {
        let b: [u8; 4] = self.take(4, 4)?.try_into().map_err(|_| "bad u32")?;
        Ok(if self.little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        })
    }
    fn f64(&mut self) -> std::result::Result<f64, String> {
        let b: [u8; 8] = self.take(8, 8)?.try_into().map_err(|_| "bad f64")?;
        Ok(if self.little {
            f64::from_le_bytes(b)
        } else {
            f64::from_be_bytes(b)
        })
    }
    fn len(&mut self) -> std::result::Result<usize, String> {
        let n = self.u32()? as usize;
        if n > self.buf.len() {
            return Err(format!("sequence length {n} exceeds the message"));
        }
        Ok(n)
    }
    fn bytes(&mut self) -> std::result::Result<&'a [u8], String> {
        let n = self.len()?;
        self.take(n, 1)
    }
    fn string(&mut self) -> std::result::Result<String, String> {
        let b = self.bytes()?;
        let b = b.strip_suffix(&[0]).unwrap_or(b);
        String::from_utf8(b.to_vec()).map_err(|_| "string is not UTF-8".into())
    }
    fn strings(&mut self) -> std::result::Result<Vec<String>, String> {
        let n = self.len()?;
        (0..n).map(|_| self.string()).collect()
    }
    fn f64s(&mut self) -> std::result::Result<Vec<f64>, String> {
        let n = self.len()?;
        (0..n).map(|_| self.f64()).collect()
    }
    /// `std_msgs/Header`: stamp (sec, nanosec) and frame id.
    fn header(&mut self) -> std::result::Result<(u64, String), String> {
        let sec = self.u32()? as i32;
        let nanosec = self.u32()?;
        let frame = self.string()?;
        Ok(((sec.max(0) as u64) * 1_000_000_000 + nanosec as u64, frame))
    }
}

/// `foxglove.CompressedImage`.
#[derive(Clone, PartialEq, prost::Message)]
struct FoxgloveCompressedImage {
    #[prost(message, optional, tag = "1")]
    timestamp: Option<Timestamp>,
    #[prost(string, tag = "4")]
    frame_id: String,
    #[prost(bytes = "vec", tag = "2")]
    data: Vec<u8>,
    #[prost(string, tag = "3")]
    format: String,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Vector3 {
    #[prost(double, tag = "1")]
    x: f64,
    #[prost(double, tag = "2")]
    y: f64,
    #[prost(double, tag = "3")]
    z: f64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Quaternion {
    #[prost(double, tag = "1")]
    x: f64,
    #[prost(double, tag = "2")]
    y: f64,
    #[prost(double, tag = "3")]
    z: f64,
    #[prost(double, tag = "4")]
    w: f64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Pose {
    #[prost(message, optional, tag = "1")]
    position: Option<Vector3>,
    #[prost(message, optional, tag = "2")]
    orientation: Option<Quaternion>,
}

/// `foxglove.PoseInFrame`.
#[derive(Clone, PartialEq, prost::Message)]
struct PoseInFrame {
    #[prost(message, optional, tag = "1")]
    timestamp: Option<Timestamp>,
    #[prost(string, tag = "2")]
    frame_id: String,
    #[prost(message, optional, tag = "3")]
    pose: Option<Pose>,
}

#[derive(serde::Deserialize)]
struct JsonTime {
    #[serde(default)]
    sec: u64,
    #[serde(default)]
    nsec: u64,
}

#[derive(serde::Deserialize)]
struct JsonJointState {
    timestamp: Option<JsonTime>,
    #[serde(default)]
    name: Vec<String>,
    #[serde(default)]
    position: Vec<Option<f64>>,
    #[serde(default)]
    velocity: Vec<Option<f64>>,
    #[serde(default)]
    effort: Vec<Option<f64>>,
}

const POSE_FIELDS: [&str; 7] = [
    "position.x",
    "position.y",
    "position.z",
    "orientation.x",
    "orientation.y",
    "orientation.z",
    "orientation.w",
];

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

enum Decoded {
    Frame {
        stamp_ns: u64,
        frame_id: String,
        encoding: ImageEncoding,
        data: Vec<u8>,
    },
    Values {
        stamp_ns: u64,
        fields: Option<Vec<String>>,
        values: Vec<f64>,
    },
}

fn image_encoding(format: &str, data: &[u8]) -> std::result::Result<ImageEncoding, String> {
    let by_bytes = reel_video::ImageFormat::sniff(data);
    let by_name = reel_video::ImageFormat::from_name(format);
    match by_bytes.or(by_name) {
        Some(reel_video::ImageFormat::Jpeg) => Ok(ImageEncoding::Jpeg),
        Some(reel_video::ImageFormat::Png) => Ok(ImageEncoding::Png),
        None => Err(format!("unsupported image format `{format}`")),
    }
}

fn decode(kind: Decoder, data: &[u8]) -> std::result::Result<Decoded, String> {
    match kind {
        Decoder::RosCompressedImage => {
            let mut c = Cdr::new(data)?;
            let (stamp_ns, frame_id) = c.header()?;
            let format = c.string()?;
            let bytes = c.bytes()?;
            Ok(Decoded::Frame {
                stamp_ns,
                frame_id,
                encoding: image_encoding(&format, bytes)?,
                data: bytes.to_vec(),
            })
        }
        Decoder::RosImage => {
            let mut c = Cdr::new(data)?;
            let (stamp_ns, frame_id) = c.header()?;
            let height = c.u32()? as usize;
            let width = c.u32()? as usize;
            let encoding = c.string()?;
            let _big_endian = c.take(1, 1)?;
            let step = c.u32()? as usize;
            let bytes = c.bytes()?;
            if !matches!(encoding.as_str(), "rgb8" | "bgr8" | "mono8") {
                return Err(format!("unsupported raw image encoding `{encoding}`"));
            }
            let channels = if encoding == "mono8" { 1 } else { 3 };
            if step < width * channels || bytes.len() < step * height {
                return Err(format!(
                    "raw image {width}x{height} step {step} holds {} bytes",
                    bytes.len()
                ));
            }
            Ok(Decoded::Frame {
                stamp_ns,
                frame_id,
                encoding: ImageEncoding::Raw {
                    encoding,
                    width,
                    height,
                    step,
                },
                data: bytes.to_vec(),
            })
        }
        Decoder::RosJointState => {
            let mut c = Cdr::new(data)?;
            let (stamp_ns, _) = c.header()?;
            let names = c.strings()?;
            let (p, v, e) = (c.f64s()?, c.f64s()?, c.f64s()?);
            let fields = joint_fields(&names, p.len(), v.len(), e.len());
            Ok(Decoded::Values {
                stamp_ns,
                fields: Some(fields),
                values: [p, v, e].concat(),
            })
        }
        Decoder::RosPoseStamped => {
            let mut c = Cdr::new(data)?;
            let (stamp_ns, _) = c.header()?;
            let values = (0..7)
                .map(|_| c.f64())
                .collect::<std::result::Result<Vec<_>, _>>()?;
            Ok(Decoded::Values {
                stamp_ns,
                fields: None,
                values,
            })
        }
        Decoder::RosFloat64Array => {
            let mut c = Cdr::new(data)?;
            let dims = c.len()?;
            for _ in 0..dims {
                c.string()?;
                c.u32()?;
                c.u32()?;
            }
            c.u32()?;
            Ok(Decoded::Values {
                stamp_ns: 0,
                fields: None,
                values: c.f64s()?,
            })
        }
        Decoder::FoxgloveCompressedImage => {
            let m = FoxgloveCompressedImage::decode(data).map_err(|e| e.to_string())?;
            let encoding = image_encoding(&m.format, &m.data)?;
            Ok(Decoded::Frame {
                stamp_ns: m.timestamp.map(|t| t.to_ns()).unwrap_or(0),
                frame_id: m.frame_id,
                encoding,
                data: m.data,
            })
        }
        Decoder::FoxglovePoseInFrame => {
            let m = PoseInFrame::decode(data).map_err(|e| e.to_string())?;
            let pose = m.pose.unwrap_or_default();
            let p = pose.position.unwrap_or_default();
            let q = pose.orientation.unwrap_or_default();
            Ok(Decoded::Values {
                stamp_ns: m.timestamp.map(|t| t.to_ns()).unwrap_or(0),
                fields: None,
                values: vec![p.x, p.y, p.z, q.x, q.y, q.z, q.w],
            })
        }
        Decoder::JsonJointState => {
            let m: JsonJointState = serde_json::from_slice(data).map_err(|e| e.to_string())?;
            if m.position.is_empty() && m.velocity.is_empty() && m.effort.is_empty() {
                return Err("JSON message has no position, velocity or effort arrays".into());
            }
            let fields = joint_fields(&m.name, m.position.len(), m.velocity.len(), m.effort.len());
            let values = [m.position, m.velocity, m.effort]
                .concat()
                .into_iter()
                .map(|v| v.unwrap_or(f64::NAN))
                .collect();
            let stamp_ns = m
                .timestamp
                .map(|t| t.sec * 1_000_000_000 + t.nsec)
                .unwrap_or(0);
            Ok(Decoded::Values {
                stamp_ns,
                fields: Some(fields),
                values,
            })
        }
    }
}

enum Stream {
    Camera(LandingCamera),
    Signal(LandingSignal),
}

/// Parses a landing MCAP held in memory. `skip(topic)` leaves topics out; topics with a
/// schema Reel does not know are an error unless `skip_unknown`, then they are listed in
/// [`LandingEpisode::skipped`].
pub fn read_landing(
    name: &str,
    bytes: &[u8],
    skip: &dyn Fn(&str) -> bool,
    skip_unknown: bool,
) -> Result<LandingEpisode> {
    let mcap_err = |source| Error::Mcap {
        name: name.to_owned(),
        source,
    };
    let mut episode = LandingEpisode::default();
    let mut streams: BTreeMap<u16, (Decoder, Stream)> = BTreeMap::new();
    let options = mcap::read::Options::ValidateChunkCrcs.into();
    for message in mcap::MessageStream::new_with_options(bytes, options).map_err(mcap_err)? {
        let message = message.map_err(mcap_err)?;
        let channel = &message.channel;
        let topic = channel.topic.as_str();
        if episode.skipped.contains_key(topic) {
            continue;
        }
        let (decoder, stream) = match streams.get_mut(&channel.id) {
            Some(entry) => (entry.0, &mut entry.1),
            None => {
                let (schema, schema_encoding) = channel
                    .schema
                    .as_ref()
                    .map(|s| (s.name.clone(), s.encoding.clone()))
                    .unwrap_or_default();
                if skip(topic) {
                    episode.skipped.insert(topic.to_owned(), schema);
                    continue;
                }
                let Some(decoder) = recognise(&schema, &schema_encoding, &channel.message_encoding)
                else {
                    if skip_unknown {
                        episode.skipped.insert(topic.to_owned(), schema);
                        continue;
                    }
                    return Err(Error::UnknownSchema {
                        name: name.to_owned(),
                        topic: topic.to_owned(),
                        schema,
                        encoding: channel.message_encoding.clone(),
                    });
                };
                let stream = match decoder {
                    Decoder::RosCompressedImage
                    | Decoder::RosImage
                    | Decoder::FoxgloveCompressedImage => Stream::Camera(LandingCamera {
                        topic: topic.into(),
                        schema,
                        frame_id: String::new(),
                        frames: Vec::new(),
                    }),
                    _ => {
                        let kind = match decoder {
                            Decoder::RosPoseStamped | Decoder::FoxglovePoseInFrame => {
                                SignalKind::Pose
                            }
                            Decoder::RosFloat64Array => SignalKind::Signal,
                            _ if looks_like_action(topic) => SignalKind::Action,
                            _ => SignalKind::State,
                        };
                        Stream::Signal(LandingSignal {
                            topic: topic.into(),
                            schema,
                            kind,
                            fields: Vec::new(),
                            samples: Vec::new(),
                        })
                    }
                };
                let entry = streams.entry(channel.id).or_insert((decoder, stream));
                (entry.0, &mut entry.1)
            }
        };
        let bad = |reason: String| Error::BadMessage {
            name: name.to_owned(),
            topic: topic.to_owned(),
            log_time: message.log_time,
            reason,
        };
        match (decode(decoder, &message.data).map_err(bad)?, stream) {
            (
                Decoded::Frame {
                    stamp_ns,
                    frame_id,
                    encoding,
                    data,
                },
                Stream::Camera(camera),
            ) => {
                if camera.frames.is_empty() {
                    camera.frame_id = frame_id;
                }
                camera.frames.push(LandingFrame {
                    log_time: message.log_time,
                    publish_time: message.publish_time,
                    stamp_ns,
                    encoding,
                    data: Bytes::from(data),
                });
            }
            (
                Decoded::Values {
                    stamp_ns,
                    fields,
                    values,
                },
                Stream::Signal(signal),
            ) => {
                let fields = fields.unwrap_or_else(|| match signal.kind {
                    SignalKind::Pose => POSE_FIELDS.iter().map(|s| (*s).to_owned()).collect(),
                    _ => (0..values.len()).map(|i| format!("v{i}")).collect(),
                });
                if signal.samples.is_empty() {
                    signal.fields = fields;
                } else if fields != signal.fields {
                    return Err(bad(format!(
                        "fields changed from {} to {} values mid-stream",
                        signal.fields.len(),
                        fields.len()
                    )));
                }
                let stamp_ns = if stamp_ns == 0 {
                    message.log_time
                } else {
                    stamp_ns
                };
                signal.samples.push(Sample {
                    log_time: message.log_time,
                    publish_time: message.publish_time,
                    stamp_ns,
                    values,
                });
            }
            _ => return Err(bad("decoded to the wrong kind of stream".into())),
        }
    }
    // Metadata records.
    if let Ok(Some(summary)) = mcap::Summary::read(bytes) {
        for index in &summary.metadata_indexes {
            let record = mcap::read::metadata(bytes, index).map_err(mcap_err)?;
            episode.metadata.insert(record.name, record.metadata);
        }
    }
    for (_, (_, stream)) in streams {
        match stream {
            Stream::Camera(mut c) => {
                c.frames.sort_by_key(|f| f.log_time);
                episode.cameras.push(c);
            }
            Stream::Signal(mut s) => {
                s.samples.sort_by_key(|f| f.log_time);
                episode.signals.push(s);
            }
        }
    }
    episode.cameras.sort_by(|a, b| a.topic.cmp(&b.topic));
    episode.signals.sort_by(|a, b| a.topic.cmp(&b.topic));
    Ok(episode)
}
