//! The episode table: v3.0's Parquet table under `meta/episodes/` and v2's
//! `meta/episodes.jsonl`, read as each episode's length, tasks, data file and video spans.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::info::Info;
use super::table::Table;
use crate::{Error, Result};

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

/// Reads `meta/episodes/**.parquet`: each episode's length, tasks, data file and video
/// spans.
pub(super) fn read_episode_table(root: &Path, info: &Info) -> Result<Vec<EpisodeEntry>> {
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
pub(super) fn read_episode_list(root: &Path, info: &Info) -> Result<Vec<EpisodeEntry>> {
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
}
