//! A landing episode written as recorded: every topic kept at its recorded times, cameras
//! encoded frame for frame (or a conforming recorded H.264 kept), depth stored losslessly,
//! numeric topics as their messages logged them. `reel-pack` writes this; ingest's
//! as-recorded grid calls it too.

use std::collections::BTreeMap;

use rayon::prelude::*;
use reel_io::{ErrorKind, Kinded};
use reel_mcap::records::median_period_ns;
use reel_mcap::{
    CameraStream, CameraWindows, CanonicalEpisode, Error, RecordedStream, Result, SignalStream,
    VideoOrigin, WriteConfig,
};
use serde::{Deserialize, Serialize};

use crate::camera_encoder::{CameraEncoder, FrameTimes};
use crate::depth::{ConvertedDepth, convert_depth};
use crate::encoding::EncodeConfig;
use crate::episode::{LandingCamera, LandingEpisode, StreamProblem};
use crate::frames::CameraFrames;
use crate::recorded_video::{keep_recorded_video, plan_recorded_videos};
use crate::topics::TopicGroups;

/// What writing one episode as recorded did: one JSON line per file from `reel-pack`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PackReport {
    /// Input file.
    pub input: String,
    /// Output file.
    pub output: String,
    /// `episode_id` from the landing metadata, if any.
    pub episode_id: Option<String>,
    /// Landing bytes.
    pub bytes_in: u64,
    /// Canonical bytes.
    pub bytes_out: u64,
    /// Landing camera-image bytes (the JPEG/PNG/raw/depth payloads alone).
    pub image_bytes_in: u64,
    /// Canonical H.264 bytes (access units alone).
    pub video_bytes_out: u64,
    /// Camera topics.
    pub cameras: usize,
    /// Frames encoded.
    pub frames: u64,
    /// Recorded H.264 cameras kept as recorded.
    pub kept_videos: Vec<String>,
    /// Recorded video cameras transcoded, with why they could not be kept.
    pub transcoded_videos: BTreeMap<String, String>,
    /// Depth (16-bit) camera topics.
    pub depth_cameras: usize,
    /// Depth frames stored.
    pub depth_frames: u64,
    /// Numeric topics.
    pub signals: usize,
    /// Numeric samples.
    pub samples: u64,
    /// Landing frames dropped because they did not decode (with `skip_bad_frames`).
    pub bad_frames: u64,
    /// Topics left out, with their schema.
    pub skipped_topics: BTreeMap<String, String>,
    /// Topics kept as recorded in the `other` group, with why Reel did not read them.
    pub recorded_topics: BTreeMap<String, String>,
    /// Topics that lost messages to decoding.
    pub problems: Vec<StreamProblem>,
    /// Wall time, seconds.
    pub seconds: f64,
}

/// The camera's nominal period: the median interval between its frames.
fn median_period(camera: &LandingCamera) -> Option<u64> {
    median_period_ns(camera.frames.iter().map(|f| f.log_time))
}

struct EncodedCamera {
    stream: CameraStream,
    bad_frames: u64,
    image_bytes: u64,
}

/// Encodes every frame of `camera` at its recorded times; with `skip_bad_frames` a frame
/// that does not decode is dropped, otherwise it fails the episode.
fn encode_camera(
    name: &str,
    camera: &LandingCamera,
    group: String,
    windows: CameraWindows,
    video: VideoOrigin,
    encode: &EncodeConfig,
    skip_bad_frames: bool,
) -> Result<EncodedCamera> {
    let fps = median_period(camera).map_or(30, |p| (1e9 / p as f64).round() as u32);
    let mut encoder = CameraEncoder::new(name, &camera.topic, windows, encode.encoder(fps));
    let mut pictures = CameraFrames::new(camera);
    let mut bad_frames = 0;
    while let Some((index, decoded)) = pictures.next_decoded() {
        let frame = &camera.frames[index];
        let pushed = decoded
            .map_err(|source| Error::CorruptFrame {
                name: name.into(),
                topic: camera.topic.clone(),
                log_time: frame.log_time,
                source,
            })
            .and_then(|decoded| {
                let times = FrameTimes {
                    log_time: frame.log_time,
                    publish_time: frame.publish_time,
                    stamp_ns: frame.stamp_ns,
                };
                encoder.push(&decoded, times)
            });
        match pushed {
            Ok(()) => {}
            // A frame that does not decode, or not at the stream's size, costs that frame;
            // an encoder failure is no bad frame.
            Err(e) if skip_bad_frames && e.kind() == ErrorKind::BadInput => bad_frames += 1,
            Err(e) => return Err(e),
        }
    }
    let (width, height) = encoder.size().unwrap_or((0, 0));
    Ok(EncodedCamera {
        stream: CameraStream {
            topic: camera.topic.clone(),
            group,
            frame_id: camera.frame_id.clone(),
            width,
            height,
            source_encoding: camera.source_encoding(),
            video,
            frames: encoder.finish()?,
        },
        bad_frames,
        image_bytes: camera.frames.iter().map(|f| f.data.len() as u64).sum(),
    })
}

/// The earliest log time of any camera, depth camera or numeric stream.
fn first_log_time(episode: &LandingEpisode) -> u64 {
    let frames = (episode.cameras.iter().chain(&episode.depths))
        .filter_map(|c| c.frames.first().map(|f| f.log_time));
    let samples = (episode.signals.iter()).filter_map(|s| s.samples.first().map(|f| f.log_time));
    frames.chain(samples).min().unwrap_or(0)
}

/// The canonical episode of a landing episode with its topic rules applied
/// ([`crate::TopicConfig::apply`] gives it and its `groups`), every stream at its recorded
/// times, with how to write it and what was done. `bytes_in` is the landing recording's
/// size; with `skip_bad_frames` a camera frame
/// that does not decode is dropped instead of failing the episode.
pub fn prepare_as_recorded(
    name: &str,
    landing: &LandingEpisode,
    groups: &TopicGroups,
    bytes_in: u64,
    encode: &EncodeConfig,
    skip_bad_frames: bool,
) -> Result<(CanonicalEpisode, WriteConfig, PackReport)> {
    let readable = (landing.cameras.iter().chain(&landing.depths)).any(|c| !c.frames.is_empty())
        || landing.signals.iter().any(|s| !s.samples.is_empty());
    if !readable {
        // Ingest refuses such a recording too: a canonical file of nothing would pass
        // for an episode.
        return Err(Error::NothingToRead { name: name.into() });
    }
    let origin = first_log_time(landing);
    // One GOP window for all cameras: a camera kept as recorded sets it with its
    // keyframes; otherwise `gop` frames of the first camera's nominal period.
    let (kept_windows, origins) =
        plan_recorded_videos(&landing.cameras, encode.keep_recorded_video);
    let windows = kept_windows.unwrap_or_else(|| {
        let period = landing
            .cameras
            .iter()
            .find_map(median_period)
            .unwrap_or(33_333_333);
        encode.camera_windows(origin, period)
    });

    let encoded: Vec<EncodedCamera> = landing
        .cameras
        .par_iter()
        .zip(origins)
        .map(|(camera, video)| {
            let group = groups.group_of(&camera.topic).to_owned();
            if video == VideoOrigin::Kept {
                let stream = keep_recorded_video(camera, group).map_err(|source| Error::Video {
                    name: name.into(),
                    topic: camera.topic.clone(),
                    source,
                })?;
                return Ok(EncodedCamera {
                    // Frames before the first keyframe cannot be decoded.
                    bad_frames: (camera.frames.len() - stream.frames.len()) as u64,
                    stream,
                    image_bytes: camera.frames.iter().map(|f| f.data.len() as u64).sum(),
                });
            }
            encode_camera(name, camera, group, windows, video, encode, skip_bad_frames)
        })
        .collect::<Result<_>>()?;

    let depths: Vec<ConvertedDepth> = landing
        .depths
        .par_iter()
        .map(|camera| {
            let group = groups.group_of(&camera.topic).to_owned();
            convert_depth(name, camera, group, skip_bad_frames)
        })
        .collect::<Result<_>>()?;

    let signals: Vec<SignalStream> = landing
        .signals
        .iter()
        .map(|s| SignalStream {
            topic: s.topic.clone(),
            group: groups.group_of(&s.topic).to_owned(),
            kind: s.kind,
            fields: s.fields.clone(),
            source_schema: s.schema.clone(),
            samples: s.samples.clone(),
        })
        .collect();
    let recorded = groups.recorded_streams(&landing.other);

    let mut episode_meta = landing.metadata.get("episode").cloned().unwrap_or_default();
    episode_meta.insert("reel.source".into(), name.into());
    let report = PackReport {
        input: name.into(),
        output: String::new(),
        episode_id: episode_meta.get("episode_id").cloned(),
        bytes_in,
        bytes_out: 0,
        image_bytes_in: encoded.iter().map(|c| c.image_bytes).sum::<u64>()
            + depths.iter().map(|d| d.image_bytes).sum::<u64>(),
        video_bytes_out: encoded
            .iter()
            .flat_map(|c| &c.stream.frames)
            .map(|f| f.data.len() as u64)
            .sum(),
        cameras: encoded.len(),
        frames: encoded.iter().map(|c| c.stream.frames.len() as u64).sum(),
        kept_videos: encoded
            .iter()
            .filter(|c| c.stream.video == VideoOrigin::Kept)
            .map(|c| c.stream.topic.clone())
            .collect(),
        transcoded_videos: encoded
            .iter()
            .filter_map(|c| match &c.stream.video {
                VideoOrigin::Transcoded(reason) => Some((c.stream.topic.clone(), reason.clone())),
                _ => None,
            })
            .collect(),
        signals: signals.len(),
        samples: signals.iter().map(|s| s.samples.len() as u64).sum(),
        depth_cameras: depths.len(),
        depth_frames: depths.iter().map(|d| d.stream.frames.len() as u64).sum(),
        bad_frames: encoded.iter().map(|c| c.bad_frames).sum::<u64>()
            + depths.iter().map(|d| d.bad_frames).sum::<u64>(),
        skipped_topics: landing.skipped.clone(),
        recorded_topics: recorded
            .iter()
            .map(|r: &RecordedStream| (r.recorded.topic.clone(), r.recorded.reason.clone()))
            .collect(),
        problems: landing.problems.clone(),
        seconds: 0.0,
    };
    let episode = CanonicalEpisode {
        origin_ns: origin,
        cameras: encoded.into_iter().map(|c| c.stream).collect(),
        depths: depths.into_iter().map(|d| d.stream).collect(),
        signals,
        recorded,
        episode: episode_meta,
    };
    Ok((episode, encode.write_config(windows), report))
}
