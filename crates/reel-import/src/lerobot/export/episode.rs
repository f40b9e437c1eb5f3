//! One canonical episode as LeRobot frames: its streams named as LeRobot features, one
//! row per frame of the dataset's fps grid, every camera re-encoded into an MP4 file.

use std::path::Path;

use reel_io::ObjectSource;
use reel_mcap::EpisodeReader;
use reel_mcap::records::{ChannelContent, SignalKind};
use reel_video::{H264Decoder, Mp4Encoding, Mp4Writer};

use super::stats::{ImageStats, NumericStats};
use crate::lerobot::keys;
use crate::{Error, Result};

type Reader = EpisodeReader<ObjectSource>;

/// Frames decoded at once while re-encoding a camera: bounds memory on long episodes.
const FRAMES_PER_DECODE: usize = 64;

/// A camera exported as a video feature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CameraFeature {
    pub(crate) topic: String,
    pub(crate) key: String,
    pub(crate) width: usize,
    pub(crate) height: usize,
}

/// A numeric stream exported as a float32 feature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NumericFeature {
    pub(crate) topic: String,
    pub(crate) key: String,
    pub(crate) names: Vec<String>,
}

/// The features an episode's streams become, and the streams left out (depth cameras,
/// topics kept as recorded), which LeRobot's RGB video features cannot hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Features {
    pub(crate) cameras: Vec<CameraFeature>,
    pub(crate) numeric: Vec<NumericFeature>,
    pub(crate) left_out: Vec<String>,
}

impl Features {
    /// Reads the episode's channels: every camera a video feature
    /// (`observation.images.<topic>`), every numeric stream a feature named by its topic;
    /// an episode's one state stream is `observation.state` and its one action stream
    /// `action`, the keys LeRobot's policies read.
    pub(crate) fn of(reader: &Reader) -> Result<Self> {
        let mut cameras = Vec::new();
        let mut numeric = Vec::new();
        let mut left_out = Vec::new();
        let mut kinds = Vec::new();
        for topic in reader.groups().values().flatten() {
            let info = reader.channel_info(topic)?;
            let name = topic.trim_start_matches('/').replace('/', ".");
            match info.content {
                ChannelContent::Camera(camera) => {
                    cameras.push(CameraFeature {
                        topic: topic.clone(),
                        key: if name.starts_with("observation.images.") {
                            name
                        } else {
                            format!("observation.images.{name}")
                        },
                        width: camera.width,
                        height: camera.height,
                    });
                }
                ChannelContent::Signal(signal) => {
                    kinds.push(signal.kind);
                    numeric.push(NumericFeature {
                        topic: topic.clone(),
                        key: name,
                        names: signal.fields,
                    });
                }
                _ => left_out.push(topic.clone()),
            }
        }
        for (kind, key) in [
            (SignalKind::State, "observation.state"),
            (SignalKind::Action, "action"),
        ] {
            let of_kind: Vec<usize> = (0..numeric.len()).filter(|&i| kinds[i] == kind).collect();
            if let [only] = of_kind[..]
                && numeric.iter().all(|n| n.key != key)
            {
                numeric[only].key = key.to_owned();
            }
        }
        cameras.sort_by(|a, b| a.key.cmp(&b.key));
        numeric.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Self {
            cameras,
            numeric,
            left_out,
        })
    }
}

/// What one exported episode holds, beside its video files.
#[derive(Debug)]
pub(crate) struct EpisodeFrames {
    pub(crate) frames: usize,
    pub(crate) task: String,
    /// Per numeric feature (in [`Features::numeric`] order), one row of values per frame.
    pub(crate) numeric: Vec<Vec<Vec<f32>>>,
    pub(crate) numeric_stats: Vec<NumericStats>,
    pub(crate) image_stats: Vec<ImageStats>,
    /// Bytes of its video files.
    pub(crate) video_bytes: u64,
}

/// The frame rate an episode says it was recorded at: the rate a LeRobot import kept, else
/// its first camera's, else its first stream's.
pub(crate) fn episode_fps(reader: &Reader, features: &Features) -> Option<f64> {
    if let Some(fps) = reader
        .episode_record()
        .ok()
        .and_then(|e| e.fields.get(keys::FPS)?.parse::<f64>().ok())
    {
        return Some(fps);
    }
    let streams = reader.streams_record().ok()??;
    let period = |topic: &str| streams.grids.get(topic)?.period_ns().map(|p| p as f64);
    let first = features
        .cameras
        .first()
        .map(|c| c.topic.as_str())
        .or_else(|| features.numeric.first().map(|n| n.topic.as_str()))?;
    period(first).map(|p| 1e9 / p)
}

/// Exports one episode: the frames of its `window` on an `fps` grid that starts at its
/// first camera frame (or first sample), each camera written to `video_path(key)`.
pub(crate) fn export_episode(
    reader: &Reader,
    features: &Features,
    window: std::ops::Range<u64>,
    fps: u32,
    encoding: &Mp4Encoding,
    video_path: &dyn Fn(&str) -> std::path::PathBuf,
) -> Result<EpisodeFrames> {
    let name = reader.name().to_owned();
    let signal_topics: Vec<&str> = features.numeric.iter().map(|n| n.topic.as_str()).collect();
    let signals = reader.signals(&signal_topics, window.clone())?;
    let mut camera_times = Vec::new();
    for camera in &features.cameras {
        let times: Vec<u64> = reader
            .read_topics(&[camera.topic.as_str()], window.clone())?
            .iter()
            .map(|m| m.log_time)
            .collect();
        if times.is_empty() {
            return Err(Error::dataset(
                &name,
                format!(
                    "camera {} has no frames in the manifest's window",
                    camera.topic
                ),
            ));
        }
        camera_times.push(times);
    }
    // The grid spans the time every camera has a frame: from the latest first frame to
    // the earliest last one (or, without cameras, the numeric streams' common span).
    let spans: Vec<(u64, u64)> = if camera_times.is_empty() {
        signals
            .iter()
            .filter_map(|s| Some((*s.log_times.first()?, *s.log_times.last()?)))
            .collect()
    } else {
        camera_times
            .iter()
            .filter_map(|t| Some((*t.first()?, *t.last()?)))
            .collect()
    };
    let first = spans.iter().map(|s| s.0).max();
    let last = spans.iter().map(|s| s.1).min();
    let (Some(first), Some(last)) = (first, last) else {
        return Err(Error::dataset(&name, "no frames in the manifest's window"));
    };
    if last < first {
        return Err(Error::dataset(&name, "its streams share no time span"));
    }
    let period = 1e9 / f64::from(fps);
    // A thousandth of a period of slack: grids recorded at a rounded period end a few ns
    // short of a whole number of periods.
    let frames = ((last - first) as f64 / period + 1e-3).floor() as usize + 1;
    let grid: Vec<u64> = (0..frames)
        .map(|i| first + (i as f64 * period).round() as u64)
        .collect();

    let mut numeric = Vec::with_capacity(features.numeric.len());
    let mut numeric_stats = Vec::with_capacity(features.numeric.len());
    for feature in &features.numeric {
        let window = signals
            .iter()
            .find(|s| s.topic == feature.topic)
            .ok_or_else(|| Error::dataset(&name, format!("no stream {}", feature.topic)))?;
        let width = window.fields.len();
        if window.log_times.is_empty() || width != feature.names.len() {
            return Err(Error::dataset(
                &name,
                format!(
                    "{} has {} samples of {width} values; the dataset's feature {} has {}",
                    feature.topic,
                    window.log_times.len(),
                    feature.key,
                    feature.names.len()
                ),
            ));
        }
        let mut stats = NumericStats::new(width);
        let rows: Vec<Vec<f32>> = grid
            .iter()
            .map(|&t| {
                // The latest sample at or before the frame (the first for earlier frames).
                let i = window.log_times.partition_point(|&s| s <= t).max(1) - 1;
                let row: Vec<f32> = window.values[i * width..(i + 1) * width]
                    .iter()
                    .map(|&v| v as f32)
                    .collect();
                stats.push(&row);
                row
            })
            .collect();
        numeric.push(rows);
        numeric_stats.push(stats);
    }

    let mut image_stats = Vec::with_capacity(features.cameras.len());
    let mut video_bytes = 0;
    let mut decoder = H264Decoder::new()?;
    for camera in &features.cameras {
        let path = video_path(&camera.key);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| Error::Write {
                path: dir.display().to_string(),
                source,
            })?;
        }
        let mut writer = Mp4Writer::create(&path, camera.width, camera.height, fps, encoding)?;
        let mut stats = ImageStats::default();
        for times in grid.chunks(FRAMES_PER_DECODE) {
            for frame in reader.frames_at(&camera.topic, times, &mut decoder, None)? {
                stats.push(&frame.data);
                writer.push(&frame)?;
            }
        }
        writer.finish()?;
        video_bytes += file_len(&path)?;
        image_stats.push(stats);
    }
    let task = reader
        .episode_record()?
        .task()
        .unwrap_or_default()
        .to_owned();
    Ok(EpisodeFrames {
        frames,
        task,
        numeric,
        numeric_stats,
        image_stats,
        video_bytes,
    })
}

fn file_len(path: &Path) -> Result<u64> {
    std::fs::metadata(path)
        .map(|m| m.len())
        .map_err(|source| Error::Write {
            path: path.display().to_string(),
            source,
        })
}
