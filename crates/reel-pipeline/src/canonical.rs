//! Step 5: the canonical episode and its summary, and steps 2–5 on the resampled grid.

use std::collections::BTreeMap;

use rayon::prelude::*;
use reel_landing::{ConvertedDepth, StreamProblem, TopicGroups};
use reel_mcap::{
    CameraStream, CameraWindows, CanonicalEpisode, DepthStream, SignalKind, SignalStream,
};
use serde::{Deserialize, Serialize};

use crate::camera::{CameraOutput, encode_camera};
use crate::config::PipelineConfig;
use crate::derive::derive_signals;
use crate::episode::{EpisodeInfo, Landing};
use crate::qc::{CameraStats, QcReport, quality_check};
use crate::resample::{Resampled, resample};
use crate::{Error, Result, SCHEMA_VERSION};

/// What produced an output: stamped on canonical episodes, warehouse rows and labels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Provenance {
    /// Warehouse schema version.
    pub schema_version: u32,
    /// Ingest pipeline version.
    pub pipeline_version: String,
    /// Robot software version at recording time.
    pub robot_software_version: String,
    /// Digest of the resample, quality-check and encode settings.
    pub config_digest: String,
}

/// How one stream went onto the grid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamStats {
    /// Topic.
    pub topic: String,
    /// `camera`, `depth`, `state`, `action`, `pose` or `signal`.
    pub kind: String,
    /// Grid rate, Hz.
    pub grid_hz: f64,
    /// Landing messages.
    pub landing_messages: u64,
    /// Grid points between the stream's first and last message.
    pub grid_points: u64,
    /// Steps written (grid points outside gaps).
    pub steps: u64,
    /// Camera grid points repeating the previous frame.
    pub duplicated: u64,
    /// Landing frames no grid point shows.
    pub dropped: u64,
    /// Gaps longer than the bound (not filled).
    pub gaps: u64,
}

/// Everything the warehouse and later steps need about one canonical episode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeSummary {
    /// Episode id.
    pub episode_id: String,
    /// Landing object it came from (relative to the landing store).
    pub landing_key: String,
    /// Canonical object, relative to the store root.
    pub canonical_key: String,
    /// Recorder metadata.
    pub info: EpisodeInfo,
    /// What produced it.
    pub provenance: Provenance,
    /// First log time of the canonical episode, ns.
    pub start_ns: u64,
    /// Last log time of the canonical episode, ns.
    pub end_ns: u64,
    /// Start of the span in which every camera, depth camera, state, action and pose
    /// stream has data, ns: the warehouse's and the manifest's time range, so sampling
    /// anchors keep to where the streams a spec reads have data. 0 in summaries written
    /// before it existed ([`EpisodeSummary::covered`] then gives `start_ns..end_ns`).
    #[serde(default)]
    pub covered_start_ns: u64,
    /// End of that span, ns.
    #[serde(default)]
    pub covered_end_ns: u64,
    /// Cameras.
    pub cameras: u32,
    /// Grid frames per camera (the fewest of any camera).
    pub camera_frames: u32,
    /// Joint-state grid steps.
    pub state_steps: u32,
    /// Action grid steps.
    pub action_steps: u32,
    /// Hand-pose grid steps per hand (the fewest of any hand).
    pub hand_steps: u32,
    /// Canonical bytes (0 inside the canonical file itself, which cannot know its size).
    pub bytes: u64,
    /// Landing bytes.
    pub landing_bytes: u64,
    /// [`reel_manifest::object_digest`] of the landing recording (its files in order); 0
    /// in summaries written before it was recorded.
    #[serde(default)]
    pub landing_digest: u64,
    /// [`reel_manifest::object_digest`] of the canonical object (0 inside the canonical
    /// file itself, which cannot know it).
    #[serde(default)]
    pub canonical_digest: u64,
    /// Per stream.
    pub streams: Vec<StreamStats>,
    /// Quality checks.
    pub qc: QcReport,
    /// Landing topics left out, with their schema.
    pub skipped_topics: BTreeMap<String, String>,
    /// Landing topics kept as recorded in the `other` group, with why Reel did not read them.
    #[serde(default)]
    pub recorded_topics: BTreeMap<String, String>,
    /// Landing topics that lost messages to decoding.
    #[serde(default)]
    pub problems: Vec<StreamProblem>,
}

impl EpisodeSummary {
    /// The summary a canonical episode carries in its `episode` metadata record (`None`
    /// when it has none); `name` is used in errors.
    pub fn from_metadata(
        name: &str,
        metadata: &BTreeMap<String, BTreeMap<String, String>>,
    ) -> Result<Option<Self>> {
        summary_of_metadata(name, metadata)
    }

    /// The span every camera, depth camera, state, action and pose stream covers
    /// (`start_ns..end_ns` for summaries written before it was recorded).
    pub fn covered(&self) -> (u64, u64) {
        if self.covered_end_ns == 0 {
            (self.start_ns, self.end_ns)
        } else {
            (self.covered_start_ns, self.covered_end_ns)
        }
    }

    /// The episode as a manifest row, for building a manifest straight from ingest
    /// results without a warehouse query.
    pub fn manifest_row(&self) -> reel_manifest::ManifestRow<'_> {
        let (start, end) = self.covered();
        reel_manifest::ManifestRow {
            episode_id: &self.episode_id,
            uri: &self.canonical_key,
            start_ns: start as i64,
            end_ns: end as i64,
            bytes: self.bytes,
            camera_frames: self.camera_frames,
            state_steps: self.state_steps,
            action_steps: self.action_steps,
            digest: self.canonical_digest,
        }
    }
}

/// Metadata keys Reel adds to the canonical `episode` record.
pub(crate) mod keys {
    pub const PIPELINE_VERSION: &str = "reel.pipeline_version";
    pub const SCHEMA_VERSION: &str = "reel.schema_version";
    pub const CONFIG_DIGEST: &str = "reel.config_digest";
    pub const SUMMARY: &str = "reel.summary";
}

/// A processed episode: the canonical MCAP and its summary.
#[derive(Debug, Clone)]
pub struct ProcessedEpisode {
    /// Summary (with `bytes` filled in).
    pub summary: EpisodeSummary,
    /// The canonical MCAP.
    pub bytes: Vec<u8>,
}

/// The canonical object key of an episode.
pub(crate) fn canonical_key(episode_id: &str) -> String {
    format!("canonical/{episode_id}.mcap")
}

/// Steps 2–5 on the resampled grid: resample, derive, measure and encode cameras, check
/// quality, write the canonical MCAP.
pub(crate) fn process_on_grid(
    landing: Landing,
    groups: &TopicGroups,
    landing_digest: u64,
    config: &PipelineConfig,
    config_digest: String,
) -> Result<ProcessedEpisode> {
    let name = landing.name.as_str();
    let resampled = resample(&landing.episode, &config.resample);
    let derived = derive_signals(&resampled.signals, &config.encode.signal_group);
    let black_luma = config.qc.black_luma();
    // A camera kept as recorded sets the chunk windows with its keyframes; otherwise they
    // are `gop` periods of the first camera's grid from the grid origin.
    let (kept_windows, origins) = reel_landing::plan_recorded_videos(
        &landing.episode.cameras,
        config.encode.keep_recorded_video,
    );
    let windows = kept_windows.unwrap_or_else(|| {
        let period = (resampled.cameras.first()).map_or(33_333_333, |c| c.period_ns);
        config.encode.camera_windows(resampled.origin_ns, period)
    });
    let cameras: Vec<CameraOutput> = landing
        .episode
        .cameras
        .par_iter()
        .zip(&resampled.cameras)
        .zip(origins)
        .map(|((camera, grid), video)| {
            let mut output = encode_camera(
                name,
                camera,
                grid,
                windows,
                video,
                &config.encode,
                black_luma,
            )?;
            output.stream.group = groups.group_of(&camera.topic).to_owned();
            Ok(output)
        })
        .collect::<Result<_>>()?;
    // Depth frames are kept as recorded, not resampled: lossless values, no grid to fill.
    let depths: Vec<ConvertedDepth> = landing
        .episode
        .depths
        .par_iter()
        .map(|camera| {
            let group = groups.group_of(&camera.topic).to_owned();
            reel_landing::convert_depth(name, camera, group, true)
        })
        .collect::<std::result::Result<_, _>>()?;
    let stats: Vec<CameraStats<'_>> = cameras
        .iter()
        .map(|c| CameraStats {
            topic: &c.stream.topic,
            stats: &c.stats,
        })
        .collect();
    let qc = quality_check(&landing.episode, &stats, &config.resample, &config.qc);
    let summary = EpisodeSummary {
        landing_digest,
        ..summarize(
            &landing,
            &resampled,
            &(cameras.iter())
                .map(|c| (&c.stream, c.substituted))
                .collect::<Vec<_>>(),
            &(depths.iter())
                .map(|d| (&d.stream, d.bad_frames))
                .collect::<Vec<_>>(),
            qc,
            config,
            config_digest,
        )
    };
    let streams: Vec<CameraStream> = cameras.into_iter().map(|c| c.stream).collect();
    let depths = depths.into_iter().map(|d| d.stream).collect();
    let bytes = write_canonical(
        &landing, groups, &resampled, streams, depths, derived, &summary, windows, config,
    )?;
    Ok(processed(summary, bytes))
}

/// The rate of a period, Hz (0 for none: a stream of one message has no period).
fn rate_hz(period_ns: u64) -> f64 {
    if period_ns > 0 {
        1e9 / period_ns as f64
    } else {
        0.0
    }
}

/// The processed episode of a summary and the canonical bytes it describes.
pub(crate) fn processed(summary: EpisodeSummary, bytes: Vec<u8>) -> ProcessedEpisode {
    ProcessedEpisode {
        summary: EpisodeSummary {
            bytes: bytes.len() as u64,
            canonical_digest: reel_manifest::object_digest(&bytes),
            ..summary
        },
        bytes,
    }
}

/// The summary of an episode whose streams went onto `resampled` (on the grid, or the
/// one each stream recorded), given its written cameras, each with the grid points that
/// showed an earlier frame than theirs, and its depth cameras, each with the frames lost.
pub(crate) fn summarize(
    landing: &Landing,
    resampled: &Resampled,
    cameras: &[(&CameraStream, u64)],
    depths: &[(&DepthStream, u64)],
    qc: QcReport,
    config: &PipelineConfig,
    config_digest: String,
) -> EpisodeSummary {
    let mut streams = Vec::new();
    let mut first_last: Vec<(u64, u64)> = Vec::new();
    // Spans of the streams samples are made of: cameras, depth, state, action, poses.
    let mut covering: Vec<(u64, u64)> = Vec::new();
    for ((&(camera, substituted), grid), landing_camera) in cameras
        .iter()
        .zip(&resampled.cameras)
        .zip(&landing.episode.cameras)
    {
        let frames = &camera.frames;
        if let (Some(a), Some(b)) = (frames.first(), frames.last()) {
            first_last.push((a.log_time, b.log_time));
            covering.push((a.log_time, b.log_time));
        }
        streams.push(StreamStats {
            topic: camera.topic.clone(),
            kind: "camera".into(),
            grid_hz: rate_hz(grid.period_ns),
            landing_messages: landing_camera.frames.len() as u64,
            grid_points: grid.grid_points,
            steps: frames.len() as u64,
            duplicated: grid.duplicated + substituted,
            dropped: grid.dropped,
            gaps: grid.gaps.len() as u64,
        });
    }
    for &(depth, bad_frames) in depths {
        let frames = &depth.frames;
        if let (Some(a), Some(b)) = (frames.first(), frames.last()) {
            first_last.push((a.log_time, b.log_time));
            covering.push((a.log_time, b.log_time));
        }
        let grid = reel_mcap::StreamGrid::of(frames.iter().map(|f| f.log_time));
        streams.push(StreamStats {
            topic: depth.topic.clone(),
            kind: reel_mcap::keys::DEPTH_KIND.into(),
            grid_hz: rate_hz(grid.median_period_ns),
            landing_messages: frames.len() as u64 + bad_frames,
            grid_points: frames.len() as u64,
            steps: frames.len() as u64,
            duplicated: 0,
            dropped: bad_frames,
            gaps: 0,
        });
    }
    for (signal, landing_signal) in resampled.signals.iter().zip(&landing.episode.signals) {
        if let (Some(a), Some(b)) = (signal.samples.first(), signal.samples.last()) {
            first_last.push((a.log_time, b.log_time));
            // One-message streams (a latched transform) hold for the whole episode.
            if signal.kind != SignalKind::Signal && b.log_time > a.log_time {
                covering.push((a.log_time, b.log_time));
            }
        }
        streams.push(StreamStats {
            topic: signal.topic.clone(),
            kind: signal.kind.as_str().into(),
            grid_hz: rate_hz(signal.period_ns),
            landing_messages: landing_signal.samples.len() as u64,
            grid_points: signal.grid_points,
            steps: signal.samples.len() as u64,
            duplicated: 0,
            dropped: 0,
            gaps: signal.gaps.len() as u64,
        });
    }
    let steps_of = |kind: SignalKind| -> Vec<u32> {
        resampled
            .signals
            .iter()
            .filter(|s| s.kind == kind)
            .map(|s| s.samples.len() as u32)
            .collect()
    };
    let first = |v: Vec<u32>| v.first().copied().unwrap_or(0);
    let fewest = |v: Vec<u32>| v.into_iter().min().unwrap_or(0);
    let episode_id = landing.info.episode_id.clone();
    let start_ns = first_last.iter().map(|s| s.0).min().unwrap_or(0);
    let end_ns = first_last.iter().map(|s| s.1).max().unwrap_or(0);
    let covered_start_ns = covering.iter().map(|s| s.0).max().unwrap_or(start_ns);
    // Streams that never overlap leave an empty span: no sample has all of them.
    let covered_end_ns = covering
        .iter()
        .map(|s| s.1)
        .min()
        .unwrap_or(end_ns)
        .max(covered_start_ns);
    EpisodeSummary {
        canonical_key: canonical_key(&episode_id),
        episode_id,
        landing_key: landing.name.clone(),
        info: landing.info.clone(),
        provenance: Provenance {
            schema_version: SCHEMA_VERSION,
            pipeline_version: config.pipeline_version.clone(),
            robot_software_version: landing.info.robot_software_version.clone(),
            config_digest,
        },
        start_ns,
        end_ns,
        covered_start_ns,
        covered_end_ns,
        cameras: cameras.len() as u32,
        camera_frames: fewest(cameras.iter().map(|c| c.0.frames.len() as u32).collect()),
        state_steps: first(steps_of(SignalKind::State)),
        action_steps: first(steps_of(SignalKind::Action)),
        hand_steps: fewest(steps_of(SignalKind::Pose)),
        bytes: 0,
        landing_bytes: landing.bytes,
        landing_digest: 0,
        canonical_digest: 0,
        streams,
        qc,
        skipped_topics: landing.episode.skipped.clone(),
        recorded_topics: landing
            .episode
            .other
            .iter()
            .map(|r| (r.topic.clone(), r.reason.clone()))
            .collect(),
        problems: landing.episode.problems.clone(),
    }
}

/// Writes the canonical MCAP of a processed episode through `reel-mcap`: resampled
/// cameras (H.264, or kept as recorded) and depth cameras as recorded, chunked by
/// `windows`, resampled signals, each in its topic's group of `groups`, derived signals in
/// the signal group, and the landing `episode` record stamped with provenance and the
/// summary.
#[allow(clippy::too_many_arguments)]
pub fn write_canonical(
    landing: &Landing,
    groups: &TopicGroups,
    resampled: &Resampled,
    cameras: Vec<CameraStream>,
    depths: Vec<DepthStream>,
    derived: Vec<SignalStream>,
    summary: &EpisodeSummary,
    windows: CameraWindows,
    config: &PipelineConfig,
) -> Result<Vec<u8>> {
    let mut signals: Vec<SignalStream> = resampled
        .signals
        .iter()
        .map(|s| SignalStream {
            topic: s.topic.clone(),
            group: groups.group_of(&s.topic).to_owned(),
            kind: s.kind,
            fields: s.fields.clone(),
            source_schema: s.source_schema.clone(),
            samples: s.samples.clone(),
        })
        .collect();
    signals.extend(derived);
    let mut episode = landing
        .episode
        .metadata
        .get("episode")
        .cloned()
        .unwrap_or_default();
    stamp(&mut episode, summary)?;
    let recorded = groups.recorded_streams(&landing.episode.other);
    let canonical = CanonicalEpisode {
        origin_ns: resampled.origin_ns,
        cameras,
        depths,
        signals,
        recorded,
        episode,
    };
    let write = config.encode.write_config(windows);
    Ok(reel_mcap::write_episode(&canonical, &write)?)
}

/// Stamps a canonical `episode` record with the episode's id, provenance and summary.
pub(crate) fn stamp(
    episode: &mut BTreeMap<String, String>,
    summary: &EpisodeSummary,
) -> Result<()> {
    episode.insert("episode_id".into(), summary.episode_id.clone());
    episode.insert(
        keys::PIPELINE_VERSION.into(),
        summary.provenance.pipeline_version.clone(),
    );
    episode.insert(
        keys::SCHEMA_VERSION.into(),
        summary.provenance.schema_version.to_string(),
    );
    episode.insert(
        keys::CONFIG_DIGEST.into(),
        summary.provenance.config_digest.clone(),
    );
    let text = serde_json::to_string(summary).map_err(|source| Error::Json {
        name: summary.canonical_key.clone(),
        source,
    })?;
    episode.insert(keys::SUMMARY.into(), text);
    Ok(())
}

/// Reads the summary back from a canonical episode's `episode` metadata record.
pub(crate) fn summary_of_metadata(
    name: &str,
    metadata: &BTreeMap<String, BTreeMap<String, String>>,
) -> Result<Option<EpisodeSummary>> {
    let Some(text) = metadata.get("episode").and_then(|m| m.get(keys::SUMMARY)) else {
        return Ok(None);
    };
    serde_json::from_str(text)
        .map(Some)
        .map_err(|source| Error::Json {
            name: name.to_owned(),
            source,
        })
}
