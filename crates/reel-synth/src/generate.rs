//! One episode generated into any seekable writer: messages scheduled on every stream with
//! jitter, drops and faults, written in time order, and the report and fault log of what
//! was written.

use std::collections::BTreeMap;
use std::io::{Seek, Write};
use std::path::PathBuf;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::active_fault::{ActiveFault, bind_fault};
use crate::channels::add_channels;
use crate::config::{Flavor, SynthConfig};
use crate::error::SynthError;
use crate::faults::{DropoutMode, FaultKind, FaultLog, plan_faults};
use crate::meta::{EpisodeMeta, episode_meta};
use crate::motion::{ArmMotion, JOINTS, joint_names};
use crate::payload::{camera_frame, joint_payload, joint_sample};
use crate::scene::{CameraMotion, SceneRenderer};
use crate::seed::sub_seed;
use crate::stream::{Stream, Tick, topic_of};
use crate::topics::CAMERA_NAMES;
use crate::{depth, foxglove, ros2};

/// What was generated: one JSON line per episode from the CLI.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeReport {
    pub episode_id: String,
    pub bytes: u64,
    pub duration_s: f64,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Messages per topic.
    pub counts: BTreeMap<String, u64>,
    /// Injected faults per kind (the sidecar has the details).
    pub faults: BTreeMap<FaultKind, u64>,
    pub meta: EpisodeMeta,
}

/// Generates episode `index` into any seekable writer.
pub fn generate_episode_to<W: Write + Seek>(
    config: &SynthConfig,
    index: u64,
    out: W,
) -> Result<(FaultLog, EpisodeReport), SynthError> {
    config.validate()?;
    let meta = episode_meta(config, index);
    let motion = ArmMotion::new(
        &mut ChaCha8Rng::seed_from_u64(sub_seed(config, index, 2)),
        config.seconds,
    );
    let mut faults: Vec<ActiveFault> = plan_faults(
        &mut ChaCha8Rng::seed_from_u64(sub_seed(config, index, 3)),
        &config.faults,
        config.seconds,
        config.cameras,
        JOINTS,
    )
    .into_iter()
    .map(|plan| ActiveFault {
        plan,
        touched: None,
        frozen_jpeg: None,
    })
    .collect();

    let streams: Vec<Stream> = (0..config.cameras)
        .map(Stream::Camera)
        .chain([
            Stream::Joints,
            Stream::Action,
            Stream::Hand(0),
            Stream::Hand(1),
        ])
        // Added last, so an episode without depth is the same bytes as before depth existed.
        .chain((0..config.depth_cameras).map(Stream::Depth))
        .collect();
    let mut dropped: BTreeMap<String, u64> = BTreeMap::new();
    let mut ticks = Vec::new();
    for (s, stream) in streams.iter().enumerate() {
        let hz = match stream {
            Stream::Camera(_) | Stream::Depth(_) => config.camera_hz,
            Stream::Joints => config.joint_hz,
            Stream::Action => config.action_hz,
            Stream::Hand(_) => config.hand_hz,
        };
        let period = 1.0 / hz;
        let mut rng = ChaCha8Rng::seed_from_u64(sub_seed(config, index, 100 + s as u64));
        // Each sensor starts at its own phase within its first period.
        let offset = rng.random_range(config.jitter.max(0.05)..0.9) * period;
        let mut i = 0u64;
        loop {
            let jitter = if config.jitter > 0.0 {
                rng.random_range(-config.jitter..config.jitter)
            } else {
                0.0
            };
            let t = offset + (i as f64 + jitter) * period;
            if t >= config.seconds {
                break;
            }
            i += 1;
            let stalled = faults
                .iter()
                .any(|f| f.plan.kind == FaultKind::TimestampGap && f.plan.covers(t));
            let hand_missing = faults.iter().any(|f| {
                f.plan.kind == FaultKind::HandPoseDropout
                    && f.plan.mode == DropoutMode::Missing
                    && *stream == Stream::Hand(f.plan.hand)
                    && f.plan.covers(t)
            });
            if stalled || hand_missing {
                continue;
            }
            if rng.random_bool(config.drop_probability) {
                *dropped.entry(topic_of(*stream)).or_default() += 1;
                continue;
            }
            ticks.push(Tick {
                t,
                log_time: meta.start_ns + (t * 1e9).round() as u64,
                stream: s,
            });
        }
    }
    ticks.sort_by_key(|tick| (tick.log_time, tick.stream));

    let mut writer = mcap::WriteOptions::new()
        .compression_threads(0)
        .library(concat!("reel-synth ", env!("CARGO_PKG_VERSION")))
        .create(out)?;
    let channels = add_channels(&mut writer, config.flavor, &streams)?;
    let names = joint_names();
    let renderers: Vec<SceneRenderer> = (0..config.cameras)
        .map(|c| {
            let motion = if CAMERA_NAMES[c].contains("wrist") {
                CameraMotion::WRIST
            } else {
                CameraMotion::FIXED
            };
            SceneRenderer::with_motion(
                sub_seed(config, index, 200 + c as u64),
                config.width,
                config.height,
                motion,
            )
        })
        .collect();
    let mut noise: Vec<ChaCha8Rng> = (0..streams.len())
        .map(|s| ChaCha8Rng::seed_from_u64(sub_seed(config, index, 300 + s as u64)))
        .collect();
    let mut last_jpeg: Vec<Option<Vec<u8>>> = vec![None; config.cameras];
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    let mut sequences = vec![0u32; streams.len()];

    for tick in &ticks {
        let stream = streams[tick.stream];
        let rng = &mut noise[tick.stream];
        let payload = match stream {
            Stream::Camera(c) => {
                let jpeg =
                    camera_frame(config, &renderers[c], c, tick, &mut faults, &last_jpeg[c])?;
                last_jpeg[c] = Some(jpeg.clone());
                let frame_id = format!("camera_{}", CAMERA_NAMES[c]);
                match config.flavor {
                    Flavor::Ros2 => ros2::compressed_image(tick.log_time, &frame_id, "jpeg", &jpeg),
                    Flavor::Foxglove => prost::Message::encode_to_vec(&foxglove::CompressedImage {
                        timestamp: Some(foxglove::Timestamp::from_ns(tick.log_time)),
                        frame_id,
                        data: jpeg,
                        format: "jpeg".into(),
                    }),
                }
            }
            Stream::Depth(c) => {
                let mm = depth::depth_frame(
                    config.width,
                    config.height,
                    tick.t,
                    sub_seed(config, index, 400 + c as u64),
                );
                let data: Vec<u8> = mm.iter().flat_map(|v| v.to_le_bytes()).collect();
                let frame_id = format!("camera_{}_depth", CAMERA_NAMES[c]);
                let (width, height, step) = (config.width, config.height, config.width * 2);
                match config.flavor {
                    Flavor::Ros2 => ros2::image(
                        tick.log_time,
                        &frame_id,
                        (width, height, step),
                        "16UC1",
                        &data,
                    ),
                    Flavor::Foxglove => prost::Message::encode_to_vec(&foxglove::RawImage {
                        timestamp: Some(foxglove::Timestamp::from_ns(tick.log_time)),
                        frame_id,
                        width,
                        height,
                        encoding: "16UC1".into(),
                        step,
                        data,
                    }),
                }
            }
            Stream::Joints => {
                let (position, velocity, effort) = joint_sample(&motion, tick, rng, &mut faults);
                joint_payload(
                    config.flavor,
                    tick.log_time,
                    &names,
                    &position,
                    &velocity,
                    &effort,
                )
            }
            Stream::Action => {
                // Commands lead the measured state by the controller's horizon.
                let command = motion.positions(tick.t + 0.1);
                let position: Vec<f64> = command
                    .iter()
                    .map(|q| q + rng.random_range(-2e-4..2e-4))
                    .collect();
                joint_payload(config.flavor, tick.log_time, &names, &position, &[], &[])
            }
            Stream::Hand(h) => {
                let (mut position, mut orientation) = motion.hand_pose(h, tick.t);
                for p in &mut position {
                    *p += rng.random_range(-5e-4..5e-4);
                }
                for f in faults.iter_mut() {
                    if f.plan.kind == FaultKind::HandPoseDropout
                        && f.plan.hand == h
                        && f.plan.covers(tick.t)
                    {
                        position = [f64::NAN; 3];
                        orientation = [f64::NAN; 4];
                        f.touch(tick.log_time);
                    }
                }
                let frame_id = "world";
                match config.flavor {
                    Flavor::Ros2 => {
                        ros2::pose_stamped(tick.log_time, frame_id, position, orientation)
                    }
                    Flavor::Foxglove => prost::Message::encode_to_vec(&foxglove::PoseInFrame {
                        timestamp: Some(foxglove::Timestamp::from_ns(tick.log_time)),
                        frame_id: frame_id.into(),
                        pose: Some(foxglove::Pose {
                            position: Some(foxglove::Vector3 {
                                x: position[0],
                                y: position[1],
                                z: position[2],
                            }),
                            orientation: Some(foxglove::Quaternion {
                                x: orientation[0],
                                y: orientation[1],
                                z: orientation[2],
                                w: orientation[3],
                            }),
                        }),
                    }),
                }
            }
        };
        let sequence = &mut sequences[tick.stream];
        writer.write_to_known_channel(
            &mcap::records::MessageHeader {
                channel_id: channels.ids[tick.stream],
                sequence: *sequence,
                log_time: tick.log_time,
                publish_time: tick.log_time,
            },
            &payload,
        )?;
        *sequence += 1;
        *counts
            .entry(channels.topics[tick.stream].clone())
            .or_default() += 1;
    }

    writer.write_metadata(&mcap::records::Metadata {
        name: "episode".into(),
        metadata: meta.to_map(),
    })?;
    writer.finish()?;
    let bytes = writer
        .into_inner()
        .stream_position()
        .map_err(|source| SynthError::Io {
            path: PathBuf::from(format!("<{}>", meta.episode_id)),
            source,
        })?;

    let fault_log = FaultLog {
        episode_id: meta.episode_id.clone(),
        faults: faults
            .iter()
            .filter_map(|f| bind_fault(f, &meta, &streams, &names))
            .collect(),
        dropped_messages: dropped,
    };
    let report = EpisodeReport {
        episode_id: meta.episode_id.clone(),
        bytes,
        duration_s: config.seconds,
        start_ns: ticks.first().map_or(meta.start_ns, |t| t.log_time),
        end_ns: ticks.last().map_or(meta.start_ns, |t| t.log_time),
        counts,
        faults: fault_log
            .faults
            .iter()
            .fold(BTreeMap::new(), |mut by_kind, f| {
                *by_kind.entry(f.kind).or_default() += 1;
                by_kind
            }),
        meta,
    };
    Ok((fault_log, report))
}
