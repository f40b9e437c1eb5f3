//! Landing logs written by Reel's importers: a dataset's episode (LeRobot, HDF5) as an
//! MCAP the landing reader reads like any robot's log, so an import takes the one landing
//! → canonical path. Video is stored as recorded (`foxglove.CompressedVideo`, one access
//! unit per message, in any codec the reader decodes), pictures as `foxglove.RawImage`
//! (`rgb8`, or `16UC1` depth in millimetres) or `foxglove.CompressedImage` (JPEG, PNG), numbers as `reel.FloatArray` named and
//! kinded by their channel metadata, and the dataset's own metadata as records.

use std::collections::BTreeMap;
use std::io::Cursor;

use mcap::records::{MessageHeader, Metadata};
use prost::Message;
use reel_mcap::proto::{
    COMPRESSED_IMAGE, COMPRESSED_VIDEO, CompressedImage, CompressedVideo, FLOAT_ARRAY, FloatArray,
    RAW_IMAGE, RawImage, Timestamp, compressed_image_schema, compressed_video_schema,
    float_array_schema, raw_image_schema,
};
use reel_mcap::{Error, Result, SignalStream, keys};

/// One recorded video stream of a landing log.
#[derive(Debug, Clone)]
pub struct LandingVideo {
    /// Topic name.
    pub topic: String,
    /// Frame of reference.
    pub frame_id: String,
    /// The codec of the access units.
    pub codec: reel_video::VideoCodec,
    /// Access units in decode order, each with its log time (ns): H.264 and H.265 in
    /// Annex B, AV1 as a temporal unit of low-overhead OBUs.
    pub units: Vec<(u64, bytes::Bytes)>,
}

/// One picture of a [`LandingImages`] stream.
#[derive(Debug, Clone)]
pub enum LandingImage {
    /// Packed 8-bit RGB, rows top to bottom (`foxglove.RawImage`, `rgb8`).
    Rgb {
        /// Width in pixels.
        width: usize,
        /// Height in pixels.
        height: usize,
        /// `width * height * 3` bytes.
        data: bytes::Bytes,
    },
    /// A JPEG file's bytes (`foxglove.CompressedImage`).
    Jpeg(bytes::Bytes),
    /// A PNG file's bytes (`foxglove.CompressedImage`).
    Png(bytes::Bytes),
    /// Depth in millimetres, rows top to bottom (`foxglove.RawImage`, `16UC1`).
    DepthMm {
        /// Width in pixels.
        width: usize,
        /// Height in pixels.
        height: usize,
        /// `width * height` values.
        data: Vec<u16>,
    },
}

/// One camera of a landing log recorded as pictures.
#[derive(Debug, Clone)]
pub struct LandingImages {
    /// Topic name.
    pub topic: String,
    /// Frame of reference.
    pub frame_id: String,
    /// Pictures with their log times (ns), in time order.
    pub frames: Vec<(u64, LandingImage)>,
}

/// A landing log to write: its streams and metadata records.
#[derive(Debug, Clone, Default)]
pub struct LandingLog {
    /// Recorded video streams.
    pub videos: Vec<LandingVideo>,
    /// Cameras recorded as pictures.
    pub images: Vec<LandingImages>,
    /// Numeric streams (their `group` is not used: landing logs are not grouped).
    pub signals: Vec<SignalStream>,
    /// Metadata records by name (`episode` is the one ingest reads: id, robot, task...).
    pub metadata: BTreeMap<String, BTreeMap<String, String>>,
}

/// Writes `log` as one MCAP (zstd chunks, messages in log-time order) and returns its
/// bytes. `name` names the log in errors.
pub fn write_landing(name: &str, log: &LandingLog) -> Result<Vec<u8>> {
    let mcap_err = |source| Error::Mcap {
        name: name.to_owned(),
        source,
    };
    let mut writer = mcap::WriteOptions::new()
        .compression(Some(mcap::Compression::Zstd))
        .profile("")
        .library(format!("reel-mcap {}", env!("CARGO_PKG_VERSION")))
        .create(Cursor::new(Vec::new()))
        .map_err(mcap_err)?;
    // (log time, channel, message bytes), sorted before writing.
    let mut messages: Vec<(u64, u16, Vec<u8>)> = Vec::new();
    if !log.videos.is_empty() {
        let schema = writer
            .add_schema(COMPRESSED_VIDEO, "protobuf", &compressed_video_schema())
            .map_err(mcap_err)?;
        for video in &log.videos {
            let channel = writer
                .add_channel(schema, &video.topic, "protobuf", &BTreeMap::new())
                .map_err(mcap_err)?;
            for (log_time, unit) in &video.units {
                let message = CompressedVideo {
                    timestamp: Some(Timestamp::from_ns(*log_time)),
                    frame_id: video.frame_id.clone(),
                    data: unit.clone(),
                    format: video.codec.name().into(),
                };
                messages.push((*log_time, channel, message.encode_to_vec()));
            }
        }
    }
    let raw = log
        .images
        .iter()
        .flat_map(|c| &c.frames)
        .any(|(_, f)| matches!(f, LandingImage::Rgb { .. } | LandingImage::DepthMm { .. }));
    let compressed = log
        .images
        .iter()
        .flat_map(|c| &c.frames)
        .any(|(_, f)| matches!(f, LandingImage::Jpeg(_) | LandingImage::Png(_)));
    let raw_schema = raw
        .then(|| writer.add_schema(RAW_IMAGE, "protobuf", &raw_image_schema()))
        .transpose()
        .map_err(mcap_err)?;
    let compressed_schema = compressed
        .then(|| writer.add_schema(COMPRESSED_IMAGE, "protobuf", &compressed_image_schema()))
        .transpose()
        .map_err(mcap_err)?;
    for camera in &log.images {
        let Some((_, first)) = camera.frames.first() else {
            continue;
        };
        let schema = match first {
            LandingImage::Rgb { .. } | LandingImage::DepthMm { .. } => raw_schema,
            LandingImage::Jpeg(_) | LandingImage::Png(_) => compressed_schema,
        };
        let Some(schema) = schema else { continue };
        let channel = writer
            .add_channel(schema, &camera.topic, "protobuf", &BTreeMap::new())
            .map_err(mcap_err)?;
        for (log_time, image) in &camera.frames {
            let timestamp = Some(Timestamp::from_ns(*log_time));
            let frame_id = camera.frame_id.clone();
            // Raw pictures: (width, height, encoding, bytes per pixel, the pixels' bytes).
            let raw = |width: usize, height: usize, encoding: &str, depth: usize, data: Vec<u8>| {
                if data.len() != width * height * depth {
                    return Err(Error::InvalidEpisode(format!(
                        "{name}: {}: a {width}x{height} {encoding} picture of {} bytes",
                        camera.topic,
                        data.len()
                    )));
                }
                Ok(RawImage {
                    timestamp: timestamp.clone(),
                    frame_id: frame_id.clone(),
                    width: width as u32,
                    height: height as u32,
                    encoding: encoding.into(),
                    step: (width * depth) as u32,
                    data,
                }
                .encode_to_vec())
            };
            let data = match (image, first) {
                (
                    LandingImage::Rgb {
                        width,
                        height,
                        data,
                    },
                    LandingImage::Rgb { .. },
                ) => raw(*width, *height, "rgb8", 3, data.to_vec())?,
                (
                    LandingImage::DepthMm {
                        width,
                        height,
                        data,
                    },
                    LandingImage::DepthMm { .. },
                ) => raw(
                    *width,
                    *height,
                    "16UC1",
                    2,
                    data.iter().flat_map(|v| v.to_le_bytes()).collect(),
                )?,
                (LandingImage::Jpeg(data), LandingImage::Jpeg(_)) => CompressedImage {
                    timestamp,
                    frame_id,
                    data: data.clone(),
                    format: "jpeg".into(),
                }
                .encode_to_vec(),
                (LandingImage::Png(data), LandingImage::Png(_)) => CompressedImage {
                    timestamp,
                    frame_id,
                    data: data.clone(),
                    format: "png".into(),
                }
                .encode_to_vec(),
                _ => {
                    return Err(Error::InvalidEpisode(format!(
                        "{name}: {}: pictures of different kinds (RGB, JPEG, depth) in one camera",
                        camera.topic
                    )));
                }
            };
            messages.push((*log_time, channel, data));
        }
    }
    if !log.signals.is_empty() {
        let schema = writer
            .add_schema(FLOAT_ARRAY, "protobuf", &float_array_schema())
            .map_err(mcap_err)?;
        for signal in &log.signals {
            if let Some(comma) = signal.fields.iter().find(|f| f.contains(',')) {
                return Err(Error::InvalidEpisode(format!(
                    "{name}: {}: the value name `{comma}` has a comma, which `{}` cannot hold",
                    signal.topic,
                    keys::FIELDS
                )));
            }
            let metadata = BTreeMap::from([
                (keys::KIND.to_owned(), signal.kind.as_str().to_owned()),
                (keys::FIELDS.to_owned(), signal.fields.join(",")),
            ]);
            let channel = writer
                .add_channel(schema, &signal.topic, "protobuf", &metadata)
                .map_err(mcap_err)?;
            for sample in &signal.samples {
                if sample.values.len() != signal.fields.len() {
                    return Err(Error::InvalidEpisode(format!(
                        "{name}: {}: a sample of {} values for {} names",
                        signal.topic,
                        sample.values.len(),
                        signal.fields.len()
                    )));
                }
                let message = FloatArray {
                    timestamp: Some(Timestamp::from_ns(sample.stamp_ns)),
                    values: sample.values.clone(),
                };
                messages.push((sample.log_time, channel, message.encode_to_vec()));
            }
        }
    }
    // Stable: a stream's messages at one log time keep their order.
    messages.sort_by_key(|(log_time, _, _)| *log_time);
    let mut sequence: BTreeMap<u16, u32> = BTreeMap::new();
    for (log_time, channel, data) in &messages {
        let seq = sequence.entry(*channel).or_default();
        *seq += 1;
        writer
            .write_to_known_channel(
                &MessageHeader {
                    channel_id: *channel,
                    sequence: *seq,
                    log_time: *log_time,
                    publish_time: *log_time,
                },
                data,
            )
            .map_err(mcap_err)?;
    }
    for (record, metadata) in &log.metadata {
        writer
            .write_metadata(&Metadata {
                name: record.clone(),
                metadata: metadata.clone(),
            })
            .map_err(mcap_err)?;
    }
    writer.finish().map_err(mcap_err)?;
    Ok(writer.into_inner().into_inner())
}

#[cfg(test)]
mod tests {
    use reel_mcap::{Sample, SignalKind};

    use super::*;

    #[test]
    fn numbers_come_back_named_and_kinded_by_their_channel() {
        let sample = |t: u64, values: Vec<f64>| Sample {
            log_time: t,
            publish_time: t,
            stamp_ns: t,
            values,
        };
        let log = LandingLog {
            signals: vec![
                SignalStream {
                    topic: "/observation/state".into(),
                    group: String::new(),
                    kind: SignalKind::State,
                    fields: vec!["shoulder.pos".into(), "gripper.pos".into()],
                    source_schema: String::new(),
                    samples: vec![sample(10, vec![0.5, -1.25]), sample(20, vec![0.1, 0.2])],
                },
                SignalStream {
                    topic: "/act".into(),
                    group: String::new(),
                    kind: SignalKind::Action,
                    fields: vec!["a".into()],
                    source_schema: String::new(),
                    samples: vec![sample(15, vec![f32::MAX as f64])],
                },
            ],
            metadata: BTreeMap::from([(
                "episode".to_owned(),
                BTreeMap::from([("task".to_owned(), "fold".to_owned())]),
            )]),
            ..LandingLog::default()
        };
        let bytes = write_landing("t.mcap", &log).expect("writes");
        let episode = crate::read_landing("t.mcap", &bytes, &|_| false).expect("reads");
        assert!(episode.problems.is_empty(), "{:?}", episode.problems);
        assert_eq!(episode.metadata["episode"]["task"], "fold");
        let state = &episode
            .signals
            .iter()
            .find(|s| s.topic == "/observation/state");
        let state = state.expect("state");
        assert_eq!(state.kind, SignalKind::State);
        assert_eq!(state.fields, ["shoulder.pos", "gripper.pos"]);
        let values: Vec<&[f64]> = state.samples.iter().map(|s| &s.values[..]).collect();
        assert_eq!(values, [&[0.5, -1.25][..], &[0.1, 0.2][..]]);
        let action = episode
            .signals
            .iter()
            .find(|s| s.topic == "/act")
            .expect("action");
        assert_eq!(action.kind, SignalKind::Action);
        assert_eq!(action.samples[0].values, [f32::MAX as f64]);

        let mut comma = log.clone();
        comma.signals[0].fields[0] = "x,y".into();
        let err = write_landing("t.mcap", &comma).expect_err("a comma in a name");
        assert!(err.to_string().contains("x,y"), "{err}");
    }
}
