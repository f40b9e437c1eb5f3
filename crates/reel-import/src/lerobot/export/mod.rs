//! A curated manifest's episodes written out as a LeRobot v3.0 dataset, which LeRobot
//! opens, iterates and trains on: every camera an MP4 video feature (LeRobot's encoder
//! settings unless told otherwise), every numeric stream a float32 feature sampled on the
//! dataset's fps grid (the latest value at or before each frame), each episode's task, and
//! the statistics LeRobot's policies normalise with.
//!
//! The dataset is written under a temporary name beside the output folder and renamed
//! when whole, so a failed export leaves no half-written dataset. An episode that cannot
//! be exported (a damaged file, streams other than the first episode's) is reported and
//! left out; the others are exported.

mod episode;
mod stats;
mod tables;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use reel_io::{ErrorKind, Kinded, Store};
use reel_manifest::Manifest;
use reel_mcap::EpisodeReader;
use reel_video::Mp4Encoding;
use serde::Serialize;
use serde_json::json;

use crate::{Error, Result};
use episode::{EpisodeFrames, Features};
use stats::{ImageStats, NumericStats};
use tables::Columns;

/// Episodes (and video files) per chunk folder, as LeRobot lays them out.
const CHUNK_SIZE: usize = 1000;
/// Frame rows per data file before the next file starts (LeRobot aims at 100 MB files).
const DATA_FILE_BYTES: usize = 100 << 20;

/// How an export writes the dataset.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    /// The video encoding of every camera: LeRobot's defaults unless told otherwise.
    pub encoding: Mp4Encoding,
    /// Frames per second of the dataset; by default the first episode's (the rate a
    /// LeRobot import kept, else its first camera's).
    pub fps: Option<u32>,
    /// `robot_type` of the dataset; by default the first episode's robot.
    pub robot_type: Option<String>,
}

impl Default for ExportOptions {
    fn default() -> Self {
        Self {
            encoding: Mp4Encoding::lerobot_default(),
            fps: None,
            robot_type: None,
        }
    }
}

/// What became of one manifest row.
#[derive(Debug, Clone, Serialize)]
pub struct ExportedEpisode {
    /// The row's episode id.
    pub episode_id: String,
    /// The row's object key.
    pub uri: String,
    /// Its index in the dataset written (absent when it failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub episode_index: Option<i64>,
    /// Frames written.
    pub frames: usize,
    /// Bytes of its video files.
    pub video_bytes: u64,
    /// `exported` or `failed`.
    pub status: &'static str,
    /// Why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// An export's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct ExportReport {
    /// The dataset folder written.
    pub output: String,
    /// Frames per second.
    pub fps: u32,
    /// Feature keys, videos first.
    pub features: Vec<String>,
    /// Streams of the first episode that no LeRobot feature holds (depth cameras, topics
    /// kept as recorded).
    pub left_out: Vec<String>,
    /// Each manifest row, in order.
    pub episodes: Vec<ExportedEpisode>,
}

impl ExportReport {
    /// Rows that could not be exported.
    pub fn failed(&self) -> impl Iterator<Item = &ExportedEpisode> {
        self.episodes.iter().filter(|e| e.status == "failed")
    }
}

/// Writes the episodes of `manifest` (canonical episodes in `store`) into a new LeRobot
/// v3.0 dataset at `output`, which must not exist yet. Episodes are exported in parallel;
/// `on_episode` hears of each as it ends. Episodes at fault are reported and left out;
/// failures of the environment (disk, store, FFmpeg) end the export with nothing written.
pub fn export(
    manifest: &Manifest,
    store: &Store,
    output: &Path,
    options: &ExportOptions,
    on_episode: &(dyn Fn(&ExportedEpisode) + Sync),
) -> Result<ExportReport> {
    if output.exists() {
        return Err(Error::dataset(
            output.display(),
            "already exists: an export writes a new dataset",
        ));
    }
    let rows: Vec<(String, String, std::ops::Range<u64>)> = manifest
        .episodes()
        .map(|e| -> Result<_> {
            let start = e.start_ns().max(0) as u64;
            let end = (e.end_ns().max(0) as u64).saturating_add(1);
            Ok((
                e.episode_id()?.to_owned(),
                e.uri()?.into_owned(),
                start..end,
            ))
        })
        .collect::<Result<_>>()?;
    let Some((_, first_uri, _)) = rows.first() else {
        return Err(Error::dataset(
            manifest.path().display(),
            "has no episodes to export",
        ));
    };
    let open =
        |uri: &str| -> Result<EpisodeReader<_>> { Ok(EpisodeReader::open(store.source(uri))?) };
    let first = open(first_uri)?;
    let features = Features::of(&first)?;
    let fps = match options.fps {
        Some(fps) => fps,
        None => {
            let fps = episode::episode_fps(&first, &features).ok_or_else(|| {
                Error::dataset(first.name(), "says no frame rate: give the export one")
            })?;
            let rounded = fps.round();
            if rounded < 1.0 || (fps - rounded).abs() > 1e-3 {
                return Err(Error::dataset(
                    first.name(),
                    format!(
                        "is recorded at {fps} fps; LeRobot datasets have a whole number of \
                         frames per second: give the export one"
                    ),
                ));
            }
            rounded as u32
        }
    };
    let robot_type = options.robot_type.clone().or_else(|| {
        first
            .episode_record()
            .ok()
            .and_then(|e| e.robot_id().map(str::to_owned))
    });
    drop(first);

    let staging = staging_dir(output)?;
    let result = (|| {
        let video_path = |key: &str, position: usize| {
            staging.join(format!(
                "videos/{key}/chunk-{:03}/file-{:03}.mp4",
                position / CHUNK_SIZE,
                position % CHUNK_SIZE
            ))
        };
        // Each row's report is made once, as its episode ends; its index in the dataset
        // is known only when all have, in row order.
        let outcomes: Vec<(ExportedEpisode, Result<EpisodeFrames>)> = rows
            .par_iter()
            .enumerate()
            .map(|(position, (episode_id, uri, window))| {
                let outcome = open(uri).and_then(|reader| {
                    let own = Features::of(&reader)?;
                    if own.cameras != features.cameras || own.numeric != features.numeric {
                        return Err(Error::dataset(
                            uri,
                            format!(
                                "its streams ({}) are not the first episode's ({})",
                                describe(&own),
                                describe(&features)
                            ),
                        ));
                    }
                    episode::export_episode(
                        &reader,
                        &features,
                        window.clone(),
                        fps,
                        &options.encoding,
                        &|key| video_path(key, position),
                    )
                });
                let report = ExportedEpisode {
                    episode_id: episode_id.clone(),
                    uri: uri.clone(),
                    episode_index: None,
                    frames: outcome.as_ref().map_or(0, |e| e.frames),
                    video_bytes: outcome.as_ref().map_or(0, |e| e.video_bytes),
                    status: if outcome.is_ok() {
                        "exported"
                    } else {
                        "failed"
                    },
                    error: outcome.as_ref().err().map(ToString::to_string),
                };
                on_episode(&report);
                (report, outcome)
            })
            .collect();
        let mut episodes = Vec::with_capacity(rows.len());
        let mut exported = Vec::new();
        for (mut report, outcome) in outcomes {
            match outcome {
                Ok(frames) => {
                    report.episode_index = Some(exported.len() as i64);
                    exported.push((episodes.len(), frames));
                }
                Err(e) if e.kind() == ErrorKind::BadInput => {}
                Err(e) => return Err(e),
            }
            episodes.push(report);
        }
        if exported.is_empty() {
            return Err(Error::dataset(
                manifest.path().display(),
                "none of its episodes could be exported",
            ));
        }
        let dataset = DatasetLayout {
            fps,
            robot_type: robot_type.clone(),
            encoding: &options.encoding,
            features: &features,
        };
        dataset.write_tables(&staging, &exported)?;
        Ok(episodes)
    })();
    let episodes = match result {
        Ok(episodes) => episodes,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(e);
        }
    };
    std::fs::rename(&staging, output).map_err(|source| Error::Write {
        path: output.display().to_string(),
        source,
    })?;
    Ok(ExportReport {
        output: output.display().to_string(),
        fps,
        features: features
            .cameras
            .iter()
            .map(|c| c.key.clone())
            .chain(features.numeric.iter().map(|n| n.key.clone()))
            .collect(),
        left_out: features.left_out.clone(),
        episodes,
    })
}

/// A fresh folder beside `output` to write into, renamed to `output` when whole.
fn staging_dir(output: &Path) -> Result<PathBuf> {
    let name = output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "dataset".into());
    let staging = output.with_file_name(format!(".{name}.partial-{}", std::process::id()));
    let io = |source| Error::Write {
        path: staging.display().to_string(),
        source,
    };
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(io)?;
    }
    std::fs::create_dir_all(&staging).map_err(io)?;
    Ok(staging)
}

fn describe(features: &Features) -> String {
    features
        .cameras
        .iter()
        .map(|c| format!("{} {}x{}", c.topic, c.width, c.height))
        .chain(
            features
                .numeric
                .iter()
                .map(|n| format!("{} [{}]", n.topic, n.names.len())),
        )
        .collect::<Vec<_>>()
        .join(", ")
}

/// The dataset-wide facts the metadata files repeat.
struct DatasetLayout<'a> {
    fps: u32,
    robot_type: Option<String>,
    encoding: &'a Mp4Encoding,
    features: &'a Features,
}

impl DatasetLayout<'_> {
    /// Writes the frame rows, the episode and task tables, `meta/info.json` and
    /// `meta/stats.json` for the `exported` episodes (their positions among the manifest's
    /// rows name their video files).
    fn write_tables(&self, root: &Path, exported: &[(usize, EpisodeFrames)]) -> Result<()> {
        let features = self.features;
        let mut tasks: Vec<String> = Vec::new();
        let mut task_of: BTreeMap<String, i64> = BTreeMap::new();
        for (_, e) in exported {
            if !task_of.contains_key(&e.task) {
                task_of.insert(e.task.clone(), tasks.len() as i64);
                tasks.push(e.task.clone());
            }
        }
        let mut numeric_stats: Vec<NumericStats> = features
            .numeric
            .iter()
            .map(|n| NumericStats::new(n.names.len()))
            .collect();
        let mut image_stats = vec![ImageStats::default(); features.cameras.len()];
        let row_bytes = 4 * features
            .numeric
            .iter()
            .map(|n| n.names.len())
            .sum::<usize>()
            + 36;
        let rows_per_file = (DATA_FILE_BYTES / row_bytes).max(1);

        // Frame rows, rolled into a new data file when one grows past its size.
        let mut episode_rows = Columns::default();
        let (mut index_col, mut length_col, mut tasks_col) = (vec![], vec![], vec![]);
        let (mut data_chunk, mut data_file, mut from_col, mut to_col) =
            (vec![], vec![], vec![], vec![]);
        let mut video_cols: Vec<[Vec<f64>; 2]> = vec![[vec![], vec![]]; features.cameras.len()];
        let mut video_files: Vec<[Vec<i64>; 2]> = vec![[vec![], vec![]]; features.cameras.len()];
        let mut pending: Vec<&EpisodeFrames> = Vec::new();
        let mut pending_rows = 0;
        let mut file_number = 0usize;
        let mut first_row = 0i64;
        let flush = |pending: &mut Vec<&EpisodeFrames>,
                     first_row_of_file: i64,
                     first_episode: i64,
                     file_number: usize|
         -> Result<()> {
            if pending.is_empty() {
                return Ok(());
            }
            let mut columns = Columns::default();
            for (f, feature) in features.numeric.iter().enumerate() {
                let rows: Vec<Vec<f32>> = pending
                    .iter()
                    .flat_map(|e| e.numeric[f].iter().cloned())
                    .collect();
                columns.float32_rows(&feature.key, feature.names.len(), &rows)?;
            }
            let (mut timestamp, mut frame_index, mut episode_index, mut index, mut task_index) =
                (vec![], vec![], vec![], vec![], vec![]);
            let mut row = first_row_of_file;
            for (i, e) in pending.iter().enumerate() {
                for frame in 0..e.frames {
                    timestamp.push((frame as f64 / f64::from(self.fps)) as f32);
                    frame_index.push(frame as i64);
                    episode_index.push(first_episode + i as i64);
                    index.push(row);
                    task_index.push(task_of[&e.task]);
                    row += 1;
                }
            }
            columns.float32("timestamp", timestamp);
            columns.int64("frame_index", frame_index);
            columns.int64("episode_index", episode_index);
            columns.int64("index", index);
            columns.int64("task_index", task_index);
            let widths: Vec<(String, usize)> = features
                .numeric
                .iter()
                .map(|n| (n.key.clone(), n.names.len()))
                .collect();
            columns.write(
                &root.join(format!(
                    "data/chunk-{:03}/file-{:03}.parquet",
                    file_number / CHUNK_SIZE,
                    file_number % CHUNK_SIZE
                )),
                vec![("huggingface", tables::frames_hf_metadata(&widths))],
            )?;
            pending.clear();
            Ok(())
        };
        let mut file_first_row = 0i64;
        let mut file_first_episode = 0i64;
        for (episode_index, (position, e)) in exported.iter().enumerate() {
            if pending_rows > 0 && pending_rows + e.frames > rows_per_file {
                flush(
                    &mut pending,
                    file_first_row,
                    file_first_episode,
                    file_number,
                )?;
                file_number += 1;
                pending_rows = 0;
                file_first_row = first_row;
                file_first_episode = episode_index as i64;
            }
            pending.push(e);
            pending_rows += e.frames;
            index_col.push(episode_index as i64);
            length_col.push(e.frames as i64);
            tasks_col.push(vec![e.task.clone()]);
            data_chunk.push((file_number / CHUNK_SIZE) as i64);
            data_file.push((file_number % CHUNK_SIZE) as i64);
            from_col.push(first_row);
            to_col.push(first_row + e.frames as i64);
            first_row += e.frames as i64;
            let seconds = e.frames as f64 / f64::from(self.fps);
            for (c, _) in features.cameras.iter().enumerate() {
                video_cols[c][0].push(0.0);
                video_cols[c][1].push(seconds);
                video_files[c][0].push((position / CHUNK_SIZE) as i64);
                video_files[c][1].push((position % CHUNK_SIZE) as i64);
                image_stats[c].merge(&e.image_stats[c]);
            }
            for (stats, theirs) in numeric_stats.iter_mut().zip(&e.numeric_stats) {
                stats.merge(theirs.clone());
            }
        }
        flush(
            &mut pending,
            file_first_row,
            file_first_episode,
            file_number,
        )?;

        let episodes = exported.len();
        episode_rows.int64("episode_index", index_col);
        episode_rows.string_lists("tasks", &tasks_col);
        episode_rows.int64("length", length_col);
        episode_rows.int64("data/chunk_index", data_chunk);
        episode_rows.int64("data/file_index", data_file);
        episode_rows.int64("dataset_from_index", from_col);
        episode_rows.int64("dataset_to_index", to_col);
        for (c, camera) in features.cameras.iter().enumerate() {
            let [chunks, files] = std::mem::take(&mut video_files[c]);
            let [from, to] = std::mem::take(&mut video_cols[c]);
            let column = |name: &str| format!("videos/{}/{name}", camera.key);
            episode_rows.int64(&column("chunk_index"), chunks);
            episode_rows.int64(&column("file_index"), files);
            episode_rows.float64(&column("from_timestamp"), from);
            episode_rows.float64(&column("to_timestamp"), to);
        }
        episode_rows.int64("meta/episodes/chunk_index", vec![0; episodes]);
        episode_rows.int64("meta/episodes/file_index", vec![0; episodes]);
        episode_rows.write(
            &root.join("meta/episodes/chunk-000/file-000.parquet"),
            Vec::new(),
        )?;

        let mut task_table = Columns::default();
        task_table.int64("task_index", (0..tasks.len() as i64).collect());
        task_table.string("task", tasks.clone());
        task_table.write(
            &root.join("meta/tasks.parquet"),
            vec![("pandas", tables::tasks_pandas_metadata())],
        )?;

        let mut stats = serde_json::Map::new();
        for (camera, s) in features.cameras.iter().zip(&image_stats) {
            stats.insert(camera.key.clone(), s.to_json());
        }
        for (feature, s) in features.numeric.iter().zip(&numeric_stats) {
            stats.insert(feature.key.clone(), s.to_json());
        }
        write_json(
            &root.join("meta/stats.json"),
            &serde_json::Value::Object(stats),
        )?;
        let total_frames = usize::try_from(first_row).unwrap_or(0);
        write_json(
            &root.join("meta/info.json"),
            &self.info(episodes, total_frames, tasks.len())?,
        )
    }

    /// `meta/info.json`.
    fn info(&self, episodes: usize, frames: usize, tasks: usize) -> Result<serde_json::Value> {
        let codec = self.encoding.codec_name()?;
        let mut features = serde_json::Map::new();
        for camera in &self.features.cameras {
            features.insert(
                camera.key.clone(),
                json!({
                    "dtype": "video",
                    "shape": [camera.height, camera.width, 3],
                    "names": ["height", "width", "channels"],
                    "info": {
                        "video.height": camera.height,
                        "video.width": camera.width,
                        "video.codec": codec,
                        "video.pix_fmt": "yuv420p",
                        "video.fps": self.fps,
                        "video.channels": 3,
                        "has_audio": false,
                        "video.g": self.encoding.gop,
                        "video.crf": self.encoding.crf,
                        "video.preset": self.encoding.preset,
                        "video.fast_decode": 0,
                        "video.video_backend": "pyav",
                        "video.extra_options": {},
                        "is_depth_map": false,
                    },
                }),
            );
        }
        for feature in &self.features.numeric {
            features.insert(
                feature.key.clone(),
                json!({
                    "dtype": "float32",
                    "shape": [feature.names.len()],
                    "names": feature.names,
                }),
            );
        }
        features.insert(
            "timestamp".into(),
            json!({"dtype": "float32", "shape": [1], "names": null}),
        );
        for key in ["frame_index", "episode_index", "index", "task_index"] {
            features.insert(
                key.into(),
                json!({"dtype": "int64", "shape": [1], "names": null}),
            );
        }
        Ok(json!({
            "codebase_version": "v3.0",
            "fps": self.fps,
            "features": features,
            "total_episodes": episodes,
            "total_frames": frames,
            "total_tasks": tasks,
            "chunks_size": CHUNK_SIZE,
            "data_files_size_in_mb": DATA_FILE_BYTES >> 20,
            "video_files_size_in_mb": 200,
            "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
            "video_path": "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4",
            "robot_type": self.robot_type,
            "splits": {"train": format!("0:{episodes}")},
        }))
    }
}

fn write_json(path: &Path, value: &serde_json::Value) -> Result<()> {
    let text = serde_json::to_string_pretty(value).unwrap_or_default();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| Error::Write {
            path: dir.display().to_string(),
            source,
        })?;
    }
    std::fs::write(path, text).map_err(|source| Error::Write {
        path: path.display().to_string(),
        source,
    })
}
