//! Landing log → canonical episode.

use std::collections::BTreeMap;
use std::time::Instant;

use rayon::prelude::*;
use reel_io::{ErrorKind, Kinded, Store, StoreOptions, split_object_uri};
use reel_mcap::records::median_period_ns;
use reel_mcap::{
    CameraStream, CameraWindows, CanonicalEpisode, Error, RecordedStream, Result, SignalKind,
    SignalStream, VideoOrigin, WriteConfig, write_episode,
};
use serde::{Deserialize, Serialize};

use crate::camera_encoder::{CameraEncoder, FrameTimes};
use crate::depth::{ConvertedDepth, convert_depth};
use crate::encoding::EncodeConfig;
use crate::episode::{LandingCamera, LandingEpisode, LandingSignal, StreamProblem};
use crate::frames::CameraFrames;
use crate::read::{read_landing, read_landing_object};
use crate::recorded_video::{check_recorded_video, is_recorded_video, keep_recorded_video};

/// Assigns topics matching a pattern to a group, or skips them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicRule {
    /// Topic pattern; `*` matches any run of characters (`/camera/*`).
    #[serde(rename = "match")]
    pub pattern: String,
    /// Group to put matching topics in.
    #[serde(default)]
    pub group: Option<String>,
    /// Leave matching topics out of the canonical episode.
    #[serde(default)]
    pub skip: bool,
    /// What matching numeric topics measure (`state`, `action`, `pose` or `signal`),
    /// instead of what Reel infers from the message type and topic name.
    #[serde(default)]
    pub role: Option<String>,
    /// The values to keep from matching numeric topics, by name and in this order
    /// (`["temperature", "limits[0]"]`), instead of all of them.
    #[serde(default)]
    pub fields: Option<Vec<String>>,
}

impl TopicRule {
    fn matches(&self, topic: &str) -> bool {
        glob_match(&self.pattern, topic)
    }
}

fn glob_match(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    true
}

/// Packing settings; every field has a default, and a TOML file may set any of them.
/// `[encode]` is the canonical encoding ([`EncodeConfig`]), the same table as ingest's.
///
/// ```toml
/// [encode]
/// gop = 30
/// crf = 23
/// signal_window_s = 2.0
/// [[topic]]
/// match = "/camera/*"
/// group = "cameras"
/// [[topic]]
/// match = "/diagnostics"
/// skip = true
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PackConfig {
    /// The canonical encoding: H.264 settings, chunk windows, default groups.
    pub encode: EncodeConfig,
    /// Group of topics kept as recorded (nothing reads them, or none of their messages
    /// decoded).
    pub other_group: String,
    /// Leave the topics Reel does not read out (listed as skipped) instead of keeping them
    /// as recorded in `other_group`.
    pub skip_unknown: bool,
    /// Drop landing frames that do not decode instead of failing.
    pub skip_bad_frames: bool,
    /// Topic rules, first match wins.
    #[serde(rename = "topic")]
    pub topics: Vec<TopicRule>,
}

impl Default for PackConfig {
    fn default() -> Self {
        Self {
            encode: EncodeConfig::default(),
            other_group: reel_mcap::keys::OTHER_GROUP.into(),
            skip_unknown: false,
            skip_bad_frames: false,
            topics: Vec::new(),
        }
    }
}

impl PackConfig {
    /// Parses a TOML config; `name` is used in errors.
    pub fn from_toml(name: &str, text: &str) -> Result<Self> {
        let config: Self = toml::from_str(text).map_err(|e| Error::Config {
            name: name.into(),
            reason: e.to_string(),
        })?;
        config.encode.validate(name)?;
        for rule in &config.topics {
            if let Some(role) = &rule.role
                && SignalKind::from_name(role).is_none()
            {
                return Err(Error::Config {
                    name: name.into(),
                    reason: format!(
                        "topic rule `{}`: role `{role}` is not state, action, pose or signal",
                        rule.pattern
                    ),
                });
            }
        }
        Ok(config)
    }

    /// Whether a rule leaves `topic` out.
    fn skips(&self, topic: &str) -> bool {
        self.rule(topic).is_some_and(|r| r.skip)
    }

    fn rule(&self, topic: &str) -> Option<&TopicRule> {
        self.topics.iter().find(|r| r.matches(topic))
    }

    fn group_of(&self, topic: &str, default: &str) -> String {
        self.rule(topic)
            .and_then(|r| r.group.clone())
            .unwrap_or_else(|| default.to_owned())
    }
}

/// What packing one episode did: one JSON line per file from `reel-pack`.
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

fn encode_camera(
    name: &str,
    camera: &LandingCamera,
    group: String,
    windows: CameraWindows,
    video: VideoOrigin,
    config: &PackConfig,
) -> Result<EncodedCamera> {
    let fps = median_period(camera).map_or(30, |p| (1e9 / p as f64).round() as u32);
    let mut encoder = CameraEncoder::new(name, &camera.topic, windows, config.encode.encoder(fps));
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
            Err(e) if config.skip_bad_frames && e.kind() == ErrorKind::BadInput => bad_frames += 1,
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

/// The recorded videos of an episode that can be kept as recorded, and the chunk windows
/// they set: the first one that meets the canonical rules decides the windows, the others
/// are kept only if their keyframes fit them too. Every other recorded video is
/// transcoded, with the reason; with `keep` off, every one is.
pub fn plan_recorded_videos(
    cameras: &[LandingCamera],
    keep: bool,
) -> (Option<CameraWindows>, Vec<VideoOrigin>) {
    let mut windows = None;
    let origins = cameras
        .iter()
        .map(|camera| {
            if !is_recorded_video(camera) {
                return VideoOrigin::Encoded;
            }
            if !keep {
                return VideoOrigin::Transcoded("encode.keep_recorded_video is off".into());
            }
            match check_recorded_video(camera, windows) {
                Ok(w) => {
                    windows = Some(w);
                    VideoOrigin::Kept
                }
                Err(reason) => VideoOrigin::Transcoded(reason),
            }
        })
        .collect();
    (windows, origins)
}

/// Packs one landing episode held in memory; returns the canonical MCAP and a report
/// (`output` left for the caller to fill).
pub fn pack_episode(
    name: &str,
    landing: &[u8],
    config: &PackConfig,
) -> Result<(Vec<u8>, PackReport)> {
    let started = Instant::now();
    write_prepared(prepare_episode(name, landing, config)?, started)
}

/// Writes a prepared episode and completes its report with the bytes and the time taken.
fn write_prepared(
    (episode, write_config, report): (CanonicalEpisode, WriteConfig, PackReport),
    started: Instant,
) -> Result<(Vec<u8>, PackReport)> {
    let bytes = write_episode(&episode, &write_config)?;
    let report = PackReport {
        bytes_out: bytes.len() as u64,
        seconds: started.elapsed().as_secs_f64(),
        ..report
    };
    Ok((bytes, report))
}

/// The part of [`pack_episode`] before writing: the landing episode parsed and its cameras
/// encoded, with the chunk windows to write it with. Lets a caller write other layouts of
/// the very same content (the container benchmarks do).
pub fn prepare_episode(
    name: &str,
    landing: &[u8],
    config: &PackConfig,
) -> Result<(CanonicalEpisode, WriteConfig, PackReport)> {
    let landing_episode = read_landing(name, landing, &|topic| config.skips(topic))?;
    prepare_landing(name, landing_episode, landing.len() as u64, config)
}

/// Applies a topic rule's `role` and `fields` to a numeric stream.
fn apply_rule(
    name: &str,
    signal: &LandingSignal,
    rule: Option<&TopicRule>,
) -> Result<SignalStream> {
    let mut stream = SignalStream {
        topic: signal.topic.clone(),
        group: String::new(),
        kind: signal.kind,
        fields: signal.fields.clone(),
        source_schema: signal.schema.clone(),
        samples: signal.samples.clone(),
    };
    let Some(rule) = rule else {
        return Ok(stream);
    };
    if let Some(kind) = rule.role.as_deref().and_then(SignalKind::from_name) {
        stream.kind = kind;
    }
    if let Some(wanted) = &rule.fields {
        let index = wanted
            .iter()
            .map(|w| {
                signal
                    .fields
                    .iter()
                    .position(|f| f == w)
                    .ok_or_else(|| Error::Config {
                        name: name.into(),
                        reason: format!(
                            "topic rule `{}`: `{}` has no value `{w}` (it has {})",
                            rule.pattern,
                            signal.topic,
                            signal.fields.join(", ")
                        ),
                    })
            })
            .collect::<Result<Vec<_>>>()?;
        stream.fields = wanted.clone();
        for sample in &mut stream.samples {
            sample.values = index.iter().map(|&i| sample.values[i]).collect();
        }
    }
    Ok(stream)
}

/// [`prepare_episode`] from an episode already read (an MCAP or a rosbag2 recording of
/// `bytes_in` bytes).
pub fn prepare_landing(
    name: &str,
    landing_episode: LandingEpisode,
    bytes_in: u64,
    config: &PackConfig,
) -> Result<(CanonicalEpisode, WriteConfig, PackReport)> {
    let readable = landing_episode
        .cameras
        .iter()
        .chain(&landing_episode.depths)
        .any(|c| !c.frames.is_empty())
        || landing_episode
            .signals
            .iter()
            .any(|s| !s.samples.is_empty());
    if !readable {
        // Ingest refuses such a recording too: a canonical file of nothing would pass
        // for an episode.
        return Err(Error::NothingToRead { name: name.into() });
    }
    let origin = landing_episode
        .cameras
        .iter()
        .filter_map(|c| c.frames.first().map(|f| f.log_time))
        .chain(
            landing_episode
                .depths
                .iter()
                .filter_map(|c| c.frames.first().map(|f| f.log_time)),
        )
        .chain(
            landing_episode
                .signals
                .iter()
                .filter_map(|s| s.samples.first().map(|f| f.log_time)),
        )
        .min()
        .unwrap_or(0);
    // One GOP window for all cameras: a camera kept as recorded sets it with its
    // keyframes; otherwise `gop` frames of the first camera's nominal period.
    let (kept_windows, origins) =
        plan_recorded_videos(&landing_episode.cameras, config.encode.keep_recorded_video);
    let windows = kept_windows.unwrap_or_else(|| {
        let period = landing_episode
            .cameras
            .iter()
            .find_map(median_period)
            .unwrap_or(33_333_333);
        CameraWindows {
            origin_ns: origin,
            window_ns: (period * config.encode.gop as u64).max(1),
        }
    });

    let encoded: Vec<EncodedCamera> = landing_episode
        .cameras
        .par_iter()
        .zip(origins)
        .map(|(camera, video)| {
            let group = config.group_of(&camera.topic, &config.encode.camera_group);
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
            encode_camera(name, camera, group, windows, video, config)
        })
        .collect::<Result<_>>()?;

    let depths: Vec<ConvertedDepth> = landing_episode
        .depths
        .par_iter()
        .map(|camera| {
            convert_depth(
                name,
                camera,
                config.group_of(&camera.topic, &config.encode.camera_group),
                config.skip_bad_frames,
            )
        })
        .collect::<Result<_>>()?;

    let signals: Vec<SignalStream> = landing_episode
        .signals
        .iter()
        .map(|s| {
            let mut stream = apply_rule(name, s, config.rule(&s.topic))?;
            stream.group = config.group_of(&s.topic, &config.encode.signal_group);
            Ok(stream)
        })
        .collect::<Result<_>>()?;
    let mut skipped_topics = landing_episode.skipped.clone();
    let recorded: Vec<RecordedStream> = if config.skip_unknown {
        for r in &landing_episode.other {
            skipped_topics.insert(r.topic.clone(), r.schema.clone());
        }
        Vec::new()
    } else {
        landing_episode
            .other
            .iter()
            .map(|r| RecordedStream {
                group: config.group_of(&r.topic, &config.other_group),
                recorded: r.clone(),
            })
            .collect()
    };

    let mut episode_meta = landing_episode
        .metadata
        .get("episode")
        .cloned()
        .unwrap_or_default();
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
        skipped_topics,
        recorded_topics: recorded
            .iter()
            .map(|r| (r.recorded.topic.clone(), r.recorded.reason.clone()))
            .collect(),
        problems: landing_episode.problems.clone(),
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
    let write_config = WriteConfig {
        camera_window_ns: windows.window_ns,
        camera_origin_ns: Some(windows.origin_ns),
        signal_window_ns: config.encode.signal_window_ns(),
        compress: config.encode.compress_chunks,
        ..WriteConfig::default()
    };
    Ok((episode, write_config, report))
}

/// Packs the landing object at `input` (local path or S3 URI) into `output`, written
/// atomically, both through opendal.
pub fn pack(
    input: &str,
    output: &str,
    config: &PackConfig,
    options: &StoreOptions,
) -> Result<PackReport> {
    let started = Instant::now();
    let (in_store, in_key) = split_object_uri(input)?;
    let (landing, bytes_in) = read_landing_object(
        &Store::open_existing_with(&in_store, options)?,
        &in_key,
        &|topic| config.skips(topic),
    )?;
    let (bytes, report) =
        write_prepared(prepare_landing(input, landing, bytes_in, config)?, started)?;
    let (out_store, out_key) = split_object_uri(output)?;
    Store::open_with(&out_store, options)?.write_atomic(&out_key, bytes)?;
    Ok(PackReport {
        output: output.into(),
        ..report
    })
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn globs() {
        assert!(glob_match("/camera/*", "/camera/high/image_raw/compressed"));
        assert!(glob_match("*action*", "/robot/action_chunk"));
        assert!(glob_match("/joint_states", "/joint_states"));
        assert!(!glob_match("/joint_states", "/joint_states2"));
        assert!(!glob_match("/camera/*/x", "/camera/x"));
    }
}
