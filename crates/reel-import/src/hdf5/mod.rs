//! HDF5 episodes, read with the HDF5 library (hdf5-metno): the ALOHA layout (one episode
//! per file: `/observations/images/<camera>` raw or JPEG, `/observations/qpos`, `qvel`,
//! `effort`, `/action`, root attributes) and the robomimic layout (one file of demos:
//! `data/demo_N/obs/*`, `actions`, `rewards`, `dones`, `states`, the environment in
//! `data`'s `env_args`), and any other layout through a TOML [`Mapping`]. Each episode
//! becomes a landing log like a LeRobot episode: every
//! dataset a topic on the episode's fps grid from 0, values unchanged, pictures as recorded
//! (raw RGB, or the JPEG bytes ALOHA compressed them to).
//!
//! Files: `episode` (a file's layout and the episodes it holds), `file` (opening files and
//! reading datasets as values and pictures), `landing` (streams on the fps grid and the
//! episode record), `aloha`, `robomimic` and `mapped` (each layout's episode as a landing
//! log) and `mapping` (the TOML description of other layouts).

mod aloha;
mod episode;
mod file;
mod landing;
mod mapped;
mod mapping;
mod robomimic;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use reel_landing::LandingLog;

use crate::{Error, Result, Source, SourceEpisode};
pub use aloha::ALOHA_FPS;
use aloha::{aloha_log, task_of};
pub use episode::Layout;
use episode::{Episode, episode_id};
use file::{h5_err, open};
use mapped::{mapped_log, matching_groups};
pub use mapping::{MappedCamera, MappedSignal, Mapping};
pub use robomimic::ROBOMIMIC_FPS;
use robomimic::{control_freq, env_args, robomimic_log};

/// HDF5 files opened for import, their episodes listed.
#[derive(Debug, Clone)]
pub struct Hdf5Files {
    name: String,
    episodes: Vec<Episode>,
    mapping: Option<Arc<Mapping>>,
}

impl Hdf5Files {
    /// Lists the episodes of `files` (each file's layout detected). `fps` overrides the
    /// rate a file records or its layout's default. A file that does not open, or holds
    /// no episode, is an error naming it.
    pub fn open(files: &[PathBuf], fps: Option<f64>) -> Result<Self> {
        Self::open_with(files, fps, None)
    }

    /// Like [`open`](Self::open), but with `mapping` (when given) describing every file's
    /// layout instead of detecting ALOHA's or robomimic's.
    pub fn open_with(
        files: &[PathBuf],
        fps: Option<f64>,
        mapping: Option<Mapping>,
    ) -> Result<Self> {
        let mut episodes = Vec::new();
        for path in files {
            let stem = path.file_stem().map_or_else(
                || "episode".to_owned(),
                |s| s.to_string_lossy().into_owned(),
            );
            if let Some(mapping) = &mapping {
                let file = open(path)?;
                let groups = match &mapping.episodes {
                    Some(pattern) => matching_groups(path, &file, pattern)?,
                    None => vec![String::new()],
                };
                for group in groups {
                    episodes.push(Episode {
                        file: path.clone(),
                        layout: Layout::Mapped,
                        id: episode_id(&stem, group.rsplit('/').next().unwrap_or_default())
                            .trim_end_matches('_')
                            .to_owned(),
                        demo: (!group.is_empty()).then_some(group),
                        fps: fps.unwrap_or(mapping.fps),
                    });
                }
                continue;
            }
            let layout = Layout::detect(path)?;
            let stem = path.file_stem().map_or_else(
                || "episode".to_owned(),
                |s| s.to_string_lossy().into_owned(),
            );
            match layout {
                Layout::Aloha => episodes.push(Episode {
                    file: path.clone(),
                    layout,
                    demo: None,
                    id: episode_id(&task_of(path), &stem),
                    fps: fps.unwrap_or(ALOHA_FPS),
                }),
                Layout::Robomimic => {
                    let file = open(path)?;
                    let data = file.group("data").map_err(|e| h5_err(path, "/data", e))?;
                    let env = env_args(&data);
                    let rate = fps
                        .or_else(|| env.as_ref().and_then(control_freq))
                        .unwrap_or(ROBOMIMIC_FPS);
                    let mut demos: Vec<String> = data
                        .member_names()
                        .map_err(|e| h5_err(path, "/data", e))?
                        .into_iter()
                        .filter(|n| n.starts_with("demo_"))
                        .collect();
                    // demo_2 before demo_10.
                    demos.sort_by_key(|n| (n.len(), n.clone()));
                    if demos.is_empty() {
                        return Err(Error::dataset(
                            path.display(),
                            "no demo_N group under /data",
                        ));
                    }
                    for demo in demos {
                        episodes.push(Episode {
                            file: path.clone(),
                            layout,
                            id: episode_id(&stem, &demo),
                            demo: Some(demo),
                            fps: rate,
                        });
                    }
                }
                Layout::Mapped => {}
            }
        }
        if let Some(pair) = episodes.windows(2).find(|w| w[0].id == w[1].id) {
            return Err(Error::dataset(
                pair[1].file.display(),
                format!("its episode id `{}` is another file's too", pair[1].id),
            ));
        }
        let name = match files {
            [one] => one
                .file_stem()
                .map_or_else(|| "hdf5".to_owned(), |s| s.to_string_lossy().into_owned()),
            _ => files
                .first()
                .and_then(|f| f.parent())
                .and_then(Path::file_name)
                .map_or_else(|| "hdf5".to_owned(), |s| s.to_string_lossy().into_owned()),
        };
        Ok(Self {
            name,
            episodes,
            mapping: mapping.map(Arc::new),
        })
    }
}

impl Hdf5Files {
    /// The frame rate of every episode: one import runs the pipeline at one rate, so files
    /// of different rates are imported apart.
    pub fn fps(&self) -> Result<f64> {
        let first = self.episodes.first().map_or(ALOHA_FPS, |e| e.fps);
        match self.episodes.iter().find(|e| e.fps != first) {
            Some(other) => Err(Error::dataset(
                other.file.display(),
                format!(
                    "recorded at {} fps, the other files at {first}: import them apart",
                    other.fps
                ),
            )),
            None => Ok(first),
        }
    }
}

impl Source for Hdf5Files {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        "hdf5"
    }

    fn episodes(&self) -> Vec<SourceEpisode> {
        self.episodes
            .iter()
            .enumerate()
            .map(|(index, e)| SourceEpisode {
                index: index as i64,
                id: e.id.clone(),
            })
            .collect()
    }

    fn landing_log(&self, index: usize) -> Result<LandingLog> {
        let episode = self
            .episodes
            .get(index)
            .ok_or_else(|| Error::dataset(&self.name, format!("no episode {index}")))?;
        match (episode.layout, &self.mapping) {
            (Layout::Aloha, _) => aloha_log(episode),
            (Layout::Robomimic, _) => robomimic_log(episode),
            (Layout::Mapped, Some(mapping)) => mapped_log(episode, mapping),
            (Layout::Mapped, None) => Err(Error::dataset(
                episode.file.display(),
                "a mapped episode without its mapping",
            )),
        }
    }
}
