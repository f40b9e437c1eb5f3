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
//!
//! Files: `info` (`meta/info.json` and its features), `episodes` (the episode table of
//! each format), `landing` (one episode read as a landing log), `table` (Parquet columns),
//! `depth` (depth videos back to millimetres), `keys` (the episode record's keys) and
//! `export` (a curated manifest's episodes written as a LeRobot dataset).

mod depth;
mod episodes;
pub mod export;
mod info;
pub mod keys;
mod landing;
mod table;

use std::path::{Path, PathBuf};

use reel_landing::LandingLog;

use crate::{Error, Result, Source, SourceEpisode};
pub use episodes::{EpisodeEntry, VideoSpan};
use episodes::{read_episode_list, read_episode_table};
pub use info::{Feature, Info};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
