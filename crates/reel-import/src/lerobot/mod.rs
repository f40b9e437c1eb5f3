//! LeRobot datasets read from a local folder or a Hugging Face cache snapshot (nothing is
//! downloaded): format v3.0, as LeRobot 0.4–0.6 writes it (`meta/info.json`, the episode
//! table `meta/episodes/…parquet`, frame rows in `data/…parquet`, video files holding many
//! episodes each in `videos/<key>/…mp4`), and formats v2.0 and v2.1, as LeRobot 0.1–0.3
//! wrote them (`meta/episodes.jsonl`, one Parquet file and one MP4 per episode and video
//! feature). Video is AV1, H.264 or HEVC.
//!
//! Each episode becomes a landing log ([`Dataset::landing_log`]): every video feature a
//! camera topic holding its access units as recorded, every numeric feature a signal topic
//! of its own (`/<feature key>`) with the feature's value names, all on the dataset's fps
//! grid from 0, and the dataset's info and stats in the `episode` record.

mod depth;
pub mod export;
mod table;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use reel_mcap::{
    LandingImage, LandingImages, LandingLog, LandingVideo, Sample, SignalKind, SignalStream,
};
use serde::Deserialize;

use crate::{Error, Result, Source, SourceEpisode};
use table::Table;

/// Columns LeRobot keeps for its own bookkeeping: not features Reel imports as topics.
const BOOKKEEPING: [&str; 5] = [
    "timestamp",
    "frame_index",
    "episode_index",
    "index",
    "task_index",
];

/// The `episode` metadata keys an import adds (beside `episode_id`, `task`, `robot_id`).
/// The `source…` keys become the warehouse's `source_*` columns.
pub mod keys {
    use reel_pipeline::source_keys;

    /// The source dataset's format: `lerobot`, `hdf5.aloha`, `hdf5.robomimic`, `hdf5.mapped`.
    pub const SOURCE: &str = source_keys::FORMAT;
    /// The dataset: its folder, or its repository id in a Hugging Face cache; the HDF5 file.
    pub const SOURCE_DATASET: &str = source_keys::DATASET;
    /// The dataset's revision: format version, and the snapshot of a Hugging Face cache.
    pub const SOURCE_REVISION: &str = source_keys::REVISION;
    /// The episode's index in the dataset (HDF5: the number ending its group or file name).
    pub const SOURCE_EPISODE_INDEX: &str = source_keys::EPISODE_INDEX;
    /// The dataset's frame rate.
    pub const FPS: &str = source_keys::FPS;
    /// `meta/info.json` as the dataset holds it.
    pub const INFO: &str = "lerobot.info";
    /// `meta/stats.json` as the dataset holds it (absent when the dataset has none).
    pub const STATS: &str = "lerobot.stats";
}

/// One feature of `meta/info.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct Feature {
    /// `video`, `image`, `float32`, `int64`, `bool`, `string`…
    pub dtype: String,
    /// Shape of one frame's value.
    #[serde(default)]
    pub shape: Vec<usize>,
    /// Value names: a list, or a map with one list (`{"motors": […]}`), or none.
    #[serde(default)]
    pub names: Option<serde_json::Value>,
    /// Video settings (`video.codec`, `video.is_depth_map`…).
    #[serde(default)]
    pub info: Option<serde_json::Value>,
}

impl Feature {
    /// Value names for `count` values: the feature's own when it names each, else the
    /// key with the value's index.
    fn value_names(&self, key: &str, count: usize) -> Vec<String> {
        let list = match &self.names {
            Some(serde_json::Value::Array(names)) => Some(names),
            Some(serde_json::Value::Object(map)) if map.len() == 1 => {
                map.values().next().and_then(serde_json::Value::as_array)
            }
            _ => None,
        };
        let named: Option<Vec<String>> = list.and_then(|names| {
            names
                .iter()
                .map(|n| n.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
        });
        match named {
            Some(names)
                if names.len() == count
                    && names.iter().all(|n| !n.is_empty() && !n.contains(',')) =>
            {
                names
            }
            _ if count == 1 => vec![key.to_owned()],
            _ => (0..count).map(|i| format!("{key}.{i}")).collect(),
        }
    }

    fn is_depth(&self) -> bool {
        let info = self.info.as_ref();
        ["video.is_depth_map", "is_depth_map"].iter().any(|k| {
            info.and_then(|i| i.get(k))
                .and_then(serde_json::Value::as_bool)
                == Some(true)
        })
    }
}

/// `meta/info.json`: what an import reads of it.
#[derive(Debug, Clone, Deserialize)]
pub struct Info {
    /// Format version (`v3.0`).
    pub codebase_version: String,
    /// Frames per second of every feature.
    pub fps: f64,
    /// The robot.
    #[serde(default)]
    pub robot_type: Option<String>,
    /// Features by key.
    pub features: BTreeMap<String, Feature>,
    /// Data file path template.
    #[serde(default)]
    pub data_path: Option<String>,
    /// Video file path template.
    #[serde(default)]
    pub video_path: Option<String>,
    /// Episodes per chunk folder (v2: the folder of an episode's files).
    #[serde(default = "default_chunks_size")]
    pub chunks_size: i64,
}

fn default_chunks_size() -> i64 {
    1000
}

/// Where one video feature of an episode lies.
#[derive(Debug, Clone, PartialEq)]
pub struct VideoSpan {
    /// The MP4 file.
    pub path: PathBuf,
    /// Start of the episode in it (s).
    pub from_s: f64,
    /// End of the episode in it (s, exclusive).
    pub to_s: f64,
}

/// One row of the episode table.
#[derive(Debug, Clone)]
pub struct EpisodeEntry {
    /// Episode index.
    pub index: i64,
    /// Frames.
    pub length: usize,
    /// Tasks, in the dataset's words.
    pub tasks: Vec<String>,
    /// The data file holding its rows.
    pub data_path: PathBuf,
    /// Each video feature's file and span.
    pub videos: BTreeMap<String, VideoSpan>,
    /// The episode's own stats (v2.1's `meta/episodes_stats.jsonl` line), where the
    /// dataset keeps them per episode.
    pub stats: Option<String>,
}

/// A LeRobot dataset opened for import.
#[derive(Debug, Clone)]
pub struct Dataset {
    root: PathBuf,
    name: String,
    revision: String,
    info: Info,
    info_text: String,
    stats_text: Option<String>,
    episodes: Vec<EpisodeEntry>,
}

impl Dataset {
    /// Opens the dataset at `root` (the folder holding `meta/`): its info and episode
    /// table. Anything missing or inconsistent is an error naming the file.
    pub fn open(root: impl AsRef<Path>) -> Result<Self> {
        let root = root.as_ref().to_path_buf();
        let info_path = root.join("meta/info.json");
        let info_text = std::fs::read_to_string(&info_path).map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound => Error::dataset(
                info_path.display(),
                "missing: not a LeRobot dataset (a LeRobot dataset folder holds meta/info.json)",
            ),
            _ => Error::Read {
                path: info_path.display().to_string(),
                source,
            },
        })?;
        let info: Info = serde_json::from_str(&info_text)
            .map_err(|e| Error::dataset(info_path.display(), format!("not LeRobot's info: {e}")))?;
        if !(info.fps.is_finite() && info.fps > 0.0) {
            return Err(Error::dataset(
                info_path.display(),
                format!("fps is {}", info.fps),
            ));
        }
        let episodes = match info.codebase_version.as_str() {
            "v3.0" => read_episode_table(&root, &info)?,
            "v2.0" | "v2.1" => read_episode_list(&root, &info)?,
            other => {
                return Err(Error::dataset(
                    info_path.display(),
                    format!("format {other} is not read (Reel reads LeRobot v2.0, v2.1 and v3.0)"),
                ));
            }
        };
        let stats_text = std::fs::read_to_string(root.join("meta/stats.json")).ok();
        let (name, revision) = identity(&root, &info);
        Ok(Self {
            root,
            name,
            revision,
            info,
            info_text,
            stats_text,
            episodes,
        })
    }

    /// The dataset's name: its repository id in a Hugging Face cache, else its folder's
    /// name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The dataset's revision: its format version, and the cache snapshot it was read from.
    pub fn revision(&self) -> &str {
        &self.revision
    }

    /// `meta/info.json`.
    pub fn info(&self) -> &Info {
        &self.info
    }

    /// The episode table, by episode index.
    pub fn episodes(&self) -> &[EpisodeEntry] {
        &self.episodes
    }

    /// The episode's id in Reel: the dataset's name and the episode index, so that no two
    /// datasets' episodes share one.
    pub fn episode_id(&self, episode: &EpisodeEntry) -> String {
        let name: String = self
            .name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        format!("{name}_episode_{:06}", episode.index)
    }

    /// Reads one episode as a landing log: its rows from the data file, its video units
    /// from each video file. A video whose frame count or times disagree with the rows is
    /// an error naming the file.
    pub fn landing_log(&self, episode: &EpisodeEntry) -> Result<LandingLog> {
        let period_ns = (1e9 / self.info.fps).round() as u64;
        let data = Table::read(&episode.data_path)?;
        let in_episode: Vec<bool> = data
            .integers("episode_index")?
            .into_iter()
            .map(|e| e == episode.index)
            .collect();
        let rows = in_episode.iter().filter(|&&b| b).count();
        if rows != episode.length {
            return Err(Error::dataset(
                data.path(),
                format!(
                    "episode {} has {rows} rows, its entry in meta/episodes says {}",
                    episode.index, episode.length
                ),
            ));
        }
        let pick = |all: Vec<Vec<f64>>| -> Vec<Vec<f64>> {
            all.into_iter()
                .zip(&in_episode)
                .filter_map(|(v, &keep)| keep.then_some(v))
                .collect()
        };
        let frame_index: Vec<i64> = data
            .integers("frame_index")?
            .into_iter()
            .zip(&in_episode)
            .filter_map(|(v, &keep)| keep.then_some(v))
            .collect();
        let timestamps: Vec<f64> = data
            .floats("timestamp")?
            .into_iter()
            .zip(&in_episode)
            .filter_map(|(v, &keep)| keep.then_some(v))
            .collect();
        // LeRobot checks every timestamp within 1e-4 s of frame_index / fps; the log puts
        // each row on that grid exactly, so values land on grid points unchanged.
        for (i, (&f, &t)) in frame_index.iter().zip(&timestamps).enumerate() {
            let expected = f as f64 / self.info.fps;
            if f != i as i64 || (t - expected).abs() > 1e-4 {
                return Err(Error::dataset(
                    data.path(),
                    format!(
                        "episode {} row {i}: frame_index {f} at {t} s is not frame {i} of a {} fps grid",
                        episode.index, self.info.fps
                    ),
                ));
            }
        }
        let log_time = |i: usize| i as u64 * period_ns;

        let mut signals = Vec::new();
        for (key, feature) in &self.info.features {
            if BOOKKEEPING.contains(&key.as_str())
                || matches!(feature.dtype.as_str(), "video" | "image" | "string")
            {
                continue;
            }
            if !data.has(key) {
                return Err(Error::dataset(
                    data.path(),
                    format!("no column for feature `{key}`"),
                ));
            }
            let values = pick(data.numbers(key)?);
            let count = values.first().map_or(0, Vec::len);
            if let Some(row) = values.iter().position(|v| v.len() != count) {
                return Err(Error::dataset(
                    data.path(),
                    format!(
                        "feature `{key}` has {} values in row {row}, {count} in the first",
                        values[row].len()
                    ),
                ));
            }
            signals.push(SignalStream {
                topic: format!("/{key}"),
                group: String::new(),
                kind: kind_of(key),
                fields: feature.value_names(key, count),
                source_schema: format!("lerobot.{}", feature.dtype),
                samples: values
                    .into_iter()
                    .enumerate()
                    .map(|(i, values)| Sample {
                        log_time: log_time(i),
                        publish_time: log_time(i),
                        stamp_ns: log_time(i),
                        values,
                    })
                    .collect(),
            });
        }

        let mut videos = Vec::new();
        // Depth videos and image features: cameras landing as pictures.
        let mut pictures = Vec::new();
        for (key, feature) in &self.info.features {
            match feature.dtype.as_str() {
                "video" => {}
                "image" => {
                    pictures.push(self.picture_frames(&data, key, &in_episode, period_ns)?);
                    continue;
                }
                _ => continue,
            }
            let span = episode.videos.get(key).ok_or_else(|| {
                Error::dataset(
                    self.root.join("meta/episodes").display(),
                    format!("episode {} has no video entry for `{key}`", episode.index),
                )
            })?;
            if feature.is_depth() {
                let read = self.checked_span(key, span, episode)?;
                let quantizer = depth::Quantizer::of(feature);
                pictures.push(
                    depth::depth_images(key, &read, &quantizer, period_ns).map_err(|e| {
                        Error::dataset(span.path.display(), format!("depth video `{key}`: {e}"))
                    })?,
                );
            } else {
                videos.push(self.video_units(key, span, episode, period_ns)?);
            }
        }

        let mut record = BTreeMap::from([
            ("episode_id".to_owned(), self.episode_id(episode)),
            ("task".to_owned(), episode.tasks.join("; ")),
            (
                "robot_id".to_owned(),
                self.info.robot_type.clone().unwrap_or_default(),
            ),
            (keys::SOURCE.to_owned(), "lerobot".to_owned()),
            (keys::SOURCE_DATASET.to_owned(), self.name.clone()),
            (keys::SOURCE_REVISION.to_owned(), self.revision.clone()),
            (
                keys::SOURCE_EPISODE_INDEX.to_owned(),
                episode.index.to_string(),
            ),
            (keys::FPS.to_owned(), self.info.fps.to_string()),
            (keys::INFO.to_owned(), self.info_text.clone()),
        ]);
        if let Some(stats) = episode.stats.as_ref().or(self.stats_text.as_ref()) {
            record.insert(keys::STATS.to_owned(), stats.clone());
        }
        Ok(LandingLog {
            videos,
            images: pictures,
            signals,
            metadata: BTreeMap::from([("episode".to_owned(), record)]),
        })
    }

    /// An image feature's pictures for one episode (PNG or JPEG files in the frame rows),
    /// frame `i` at `i * period_ns`, stored as they are.
    fn picture_frames(
        &self,
        data: &Table,
        key: &str,
        in_episode: &[bool],
        period_ns: u64,
    ) -> Result<LandingImages> {
        let frames = data
            .image_bytes(key)?
            .into_iter()
            .zip(in_episode)
            .filter_map(|(bytes, &keep)| keep.then_some(bytes))
            .enumerate()
            .map(|(i, bytes)| {
                let picture = match reel_video::ImageFormat::sniff(&bytes) {
                    Some(reel_video::ImageFormat::Jpeg) => LandingImage::Jpeg(Bytes::from(bytes)),
                    Some(reel_video::ImageFormat::Png) => LandingImage::Png(Bytes::from(bytes)),
                    _ => {
                        return Err(Error::dataset(
                            data.path(),
                            format!("`{key}` row {i} is neither a PNG nor a JPEG picture"),
                        ));
                    }
                };
                Ok((i as u64 * period_ns, picture))
            })
            .collect::<Result<_>>()?;
        Ok(LandingImages {
            topic: format!("/{key}"),
            frame_id: key.to_owned(),
            frames,
        })
    }

    /// Reads one episode's span of a video file, checked against the episode: a frame per
    /// row, each on the dataset's fps grid. Errors name the file.
    fn checked_span(
        &self,
        key: &str,
        span: &VideoSpan,
        episode: &EpisodeEntry,
    ) -> Result<reel_video::VideoSpan> {
        let path = span.path.display().to_string();
        if !span.path.is_file() {
            return Err(Error::dataset(&path, format!("missing (video `{key}`)")));
        }
        let read = reel_video::read_video_span(&span.path, span.from_s, span.to_s)?;
        if read.units.len() != episode.length {
            return Err(Error::dataset(
                &path,
                format!(
                    "`{key}` has {} frames from {} s to {} s, episode {} has {} rows",
                    read.units.len(),
                    span.from_s,
                    span.to_s,
                    episode.index,
                    episode.length
                ),
            ));
        }
        // Units come in decode order; the n-th picture out of a decoder is the n-th in
        // presentation order, so the n-th unit takes the n-th grid time.
        let mut shown: Vec<f64> = read.units.iter().map(|u| u.pts_s - span.from_s).collect();
        shown.sort_by(f64::total_cmp);
        let half = 0.5 / self.info.fps;
        if let Some(i) = shown
            .iter()
            .enumerate()
            .position(|(i, t)| (t - i as f64 / self.info.fps).abs() >= half)
        {
            return Err(Error::dataset(
                &path,
                format!(
                    "`{key}` frame {i} of episode {} is shown at {:.4} s, not on its {} fps grid",
                    episode.index, shown[i], self.info.fps
                ),
            ));
        }
        Ok(read)
    }

    fn video_units(
        &self,
        key: &str,
        span: &VideoSpan,
        episode: &EpisodeEntry,
        period_ns: u64,
    ) -> Result<LandingVideo> {
        let read = self.checked_span(key, span, episode)?;
        Ok(LandingVideo {
            topic: format!("/{key}"),
            frame_id: key.to_owned(),
            codec: read.codec,
            units: read
                .units
                .into_iter()
                .enumerate()
                .map(|(i, u)| (i as u64 * period_ns, Bytes::from(u.data)))
                .collect(),
        })
    }
}

impl Source for Dataset {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        "lerobot"
    }

    fn episodes(&self) -> Vec<SourceEpisode> {
        self.episodes
            .iter()
            .map(|e| SourceEpisode {
                index: e.index,
                id: self.episode_id(e),
            })
            .collect()
    }

    fn landing_log(&self, index: usize) -> Result<LandingLog> {
        let episode = self
            .episodes
            .get(index)
            .ok_or_else(|| Error::dataset(&self.name, format!("no episode at {index}")))?;
        Dataset::landing_log(self, episode)
    }
}

/// What a numeric feature measures: LeRobot's names say it.
fn kind_of(key: &str) -> SignalKind {
    if key == "action" || key.starts_with("action.") {
        SignalKind::Action
    } else if key == "observation.state" {
        SignalKind::State
    } else {
        SignalKind::Signal
    }
}

/// The dataset's name and revision: in a Hugging Face cache
/// (`…/datasets--<org>--<name>/snapshots/<revision>/`) the repository id and snapshot,
/// else the folder's name.
fn identity(root: &Path, info: &Info) -> (String, String) {
    let parts: Vec<String> = root
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let folder = parts
        .last()
        .cloned()
        .unwrap_or_else(|| "dataset".to_owned());
    if let [.., repo, snapshots, revision] = &parts[..]
        && snapshots == "snapshots"
        && let Some(id) = repo.strip_prefix("datasets--")
    {
        return (
            id.replacen("--", "/", 1),
            format!("{} {revision}", info.codebase_version),
        );
    }
    (folder, info.codebase_version.clone())
}

/// Reads `meta/episodes/**.parquet`: each episode's length, tasks, data file and video
/// spans.
fn read_episode_table(root: &Path, info: &Info) -> Result<Vec<EpisodeEntry>> {
    let dir = root.join("meta/episodes");
    let mut files = Vec::new();
    collect_parquet(&dir, &mut files)?;
    files.sort();
    if files.is_empty() {
        return Err(Error::dataset(
            dir.display(),
            "no episode table (Parquet files) in it",
        ));
    }
    let data_template = info
        .data_path
        .clone()
        .unwrap_or_else(|| "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet".into());
    let video_template = info.video_path.clone().unwrap_or_else(|| {
        "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4".into()
    });
    let video_keys: Vec<&String> = info
        .features
        .iter()
        .filter(|(_, f)| f.dtype == "video")
        .map(|(k, _)| k)
        .collect();
    let mut episodes = Vec::new();
    for file in files {
        let table = Table::read(&file)?;
        let index = table.integers("episode_index")?;
        let length = table.integers("length")?;
        let tasks = table.string_lists("tasks")?;
        let data_chunk = table.integers("data/chunk_index")?;
        let data_file = table.integers("data/file_index")?;
        let mut videos = Vec::new();
        for key in &video_keys {
            let column = |c: &str| format!("videos/{key}/{c}");
            videos.push(VideoColumns {
                key: (*key).clone(),
                chunk: table.integers(&column("chunk_index"))?,
                file: table.integers(&column("file_index"))?,
                from: table.floats(&column("from_timestamp"))?,
                to: table.floats(&column("to_timestamp"))?,
            });
        }
        for row in 0..table.rows() {
            let length = usize::try_from(length[row]).map_err(|_| {
                Error::dataset(
                    table.path(),
                    format!("episode {} has length {}", index[row], length[row]),
                )
            })?;
            let data_path = root.join(fill(
                &data_template,
                &[
                    ("chunk_index", data_chunk[row]),
                    ("file_index", data_file[row]),
                ],
            ));
            let videos = videos
                .iter()
                .map(|v| {
                    let path = fill(
                        &video_template,
                        &[("chunk_index", v.chunk[row]), ("file_index", v.file[row])],
                    )
                    .replace("{video_key}", &v.key);
                    (
                        v.key.clone(),
                        VideoSpan {
                            path: root.join(path),
                            from_s: v.from[row],
                            to_s: v.to[row],
                        },
                    )
                })
                .collect();
            episodes.push(EpisodeEntry {
                index: index[row],
                length,
                tasks: tasks[row].clone(),
                data_path,
                videos,
                stats: None,
            });
        }
    }
    episodes.sort_by_key(|e| e.index);
    if let Some(pair) = episodes.windows(2).find(|w| w[0].index == w[1].index) {
        return Err(Error::dataset(
            dir.display(),
            format!("episode {} is listed twice", pair[0].index),
        ));
    }
    Ok(episodes)
}

/// One line of a v2 dataset's `meta/episodes.jsonl`.
#[derive(Deserialize)]
struct EpisodeLine {
    episode_index: i64,
    #[serde(default)]
    tasks: Vec<String>,
    length: usize,
}

/// Reads a v2.0 / v2.1 dataset's `meta/episodes.jsonl` (and v2.1's per-episode stats): each
/// episode's length and tasks, its own data file and, for each video feature, its own MP4
/// from the start.
fn read_episode_list(root: &Path, info: &Info) -> Result<Vec<EpisodeEntry>> {
    let list = root.join("meta/episodes.jsonl");
    let lines = |path: &Path| -> Result<Vec<(usize, serde_json::Value)>> {
        let text = std::fs::read_to_string(path).map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound => Error::dataset(path.display(), "missing"),
            _ => Error::Read {
                path: path.display().to_string(),
                source,
            },
        })?;
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(n, l)| {
                serde_json::from_str(l)
                    .map(|v| (n + 1, v))
                    .map_err(|e| Error::dataset(path.display(), format!("line {}: {e}", n + 1)))
            })
            .collect()
    };
    let stats_path = root.join("meta/episodes_stats.jsonl");
    let mut stats: BTreeMap<i64, String> = BTreeMap::new();
    if stats_path.is_file() {
        for (_, line) in lines(&stats_path)? {
            if let (Some(index), Some(s)) = (line["episode_index"].as_i64(), line.get("stats")) {
                stats.insert(index, s.to_string());
            }
        }
    }
    let data_template = info.data_path.clone().unwrap_or_else(|| {
        "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet".into()
    });
    let video_template = info.video_path.clone().unwrap_or_else(|| {
        "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4".into()
    });
    let chunks = info.chunks_size.max(1);
    let mut episodes = Vec::new();
    for (n, line) in lines(&list)? {
        let entry: EpisodeLine = serde_json::from_value(line)
            .map_err(|e| Error::dataset(list.display(), format!("line {n}: {e}")))?;
        let fields = [
            ("episode_chunk", entry.episode_index / chunks),
            ("episode_index", entry.episode_index),
        ];
        let videos = info
            .features
            .iter()
            .filter(|(_, f)| f.dtype == "video")
            .map(|(key, _)| {
                let path = fill(&video_template, &fields).replace("{video_key}", key);
                let span = VideoSpan {
                    path: root.join(path),
                    from_s: 0.0,
                    to_s: entry.length as f64 / info.fps,
                };
                (key.clone(), span)
            })
            .collect();
        episodes.push(EpisodeEntry {
            index: entry.episode_index,
            length: entry.length,
            tasks: entry.tasks,
            data_path: root.join(fill(&data_template, &fields)),
            videos,
            stats: stats.remove(&entry.episode_index),
        });
    }
    if episodes.is_empty() {
        return Err(Error::dataset(list.display(), "lists no episodes"));
    }
    episodes.sort_by_key(|e| e.index);
    if let Some(pair) = episodes.windows(2).find(|w| w[0].index == w[1].index) {
        return Err(Error::dataset(
            list.display(),
            format!("episode {} is listed twice", pair[0].index),
        ));
    }
    Ok(episodes)
}

/// The episode table's columns locating one video feature, row by row.
struct VideoColumns {
    key: String,
    chunk: Vec<i64>,
    file: Vec<i64>,
    from: Vec<f64>,
    to: Vec<f64>,
}

/// Fills `{name:03d}`-style fields of a LeRobot path template.
fn fill(template: &str, values: &[(&str, i64)]) -> String {
    let mut out = template.to_owned();
    for (name, value) in values {
        for width in [3, 6, 0] {
            let field = if width == 0 {
                format!("{{{name}}}")
            } else {
                format!("{{{name}:0{width}d}}")
            };
            out = out.replace(&field, &format!("{value:0width$}"));
        }
    }
    out
}

fn collect_parquet(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => Error::dataset(dir.display(), "missing"),
        _ => Error::Read {
            path: dir.display().to_string(),
            source,
        },
    })?;
    for entry in entries {
        let path = entry
            .map_err(|source| Error::Read {
                path: dir.display().to_string(),
                source,
            })?
            .path();
        if path.is_dir() {
            collect_parquet(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "parquet") {
            out.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_templates_fill_like_python_format() {
        assert_eq!(
            fill(
                "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
                &[("chunk_index", 2), ("file_index", 14)]
            ),
            "data/chunk-002/file-014.parquet"
        );
    }

    #[test]
    fn a_hugging_face_snapshot_names_its_repository_and_revision() {
        let info: Info =
            serde_json::from_str(r#"{"codebase_version":"v3.0","fps":30,"features":{}}"#)
                .expect("info");
        let root = Path::new("/cache/hub/datasets--lerobot--aloha_sim/snapshots/0123abcd");
        assert_eq!(
            identity(root, &info),
            ("lerobot/aloha_sim".to_owned(), "v3.0 0123abcd".to_owned())
        );
        assert_eq!(identity(Path::new("/data/pusht"), &info).0, "pusht");
    }

    #[test]
    fn value_names_come_from_the_feature_when_it_names_each_value() {
        let feature = |names: serde_json::Value| Feature {
            dtype: "float32".into(),
            shape: vec![2],
            names: Some(names),
            info: None,
        };
        let listed = feature(serde_json::json!(["a.pos", "b.pos"]));
        assert_eq!(
            listed.value_names("observation.state", 2),
            ["a.pos", "b.pos"]
        );
        let mapped = feature(serde_json::json!({"motors": ["m0", "m1"]}));
        assert_eq!(mapped.value_names("action", 2), ["m0", "m1"]);
        assert_eq!(
            listed.value_names("action", 3),
            ["action.0", "action.1", "action.2"]
        );
        assert_eq!(kind_of("action"), SignalKind::Action);
        assert_eq!(kind_of("observation.state"), SignalKind::State);
        assert_eq!(kind_of("observation.environment_state"), SignalKind::Signal);
    }
}
