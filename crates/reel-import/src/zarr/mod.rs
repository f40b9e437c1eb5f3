//! Zarr replay buffers as Diffusion Policy's and UMI's `ReplayBuffer` write them: a group
//! (Zarr v2 or v3; a folder, or a `.zip` as UMI publishes) holding `data/<key>` arrays with
//! a row per step and `meta/episode_ends`, the step after each episode's last. Read through
//! zarrs, with its codecs (Blosc, Zstd, Gzip, Zlib, sharding) and UMI's JPEG XL pictures
//! (`imagecodecs_jpegxl`, decoded by jxl-oxide).
//!
//! Each episode becomes a landing log on the rate given (replay buffers do not store
//! theirs): `[steps, height, width, 3]` arrays cameras of 8-bit RGB, every other array a
//! signal with its values unchanged (`action…` an action, the rest state); `meta/` arrays
//! with a row per episode go into the episode record as `zarr.meta.<key>`.
//! [`ZarrReplayBuffer::mappings`] says how each array maps before anything is read.
//!
//! Files: `arrays` (storage and arrays through zarrs), `landing` (an episode as a landing
//! log), `jpegxl` (the JPEG XL codec).

mod arrays;
mod jpegxl;
mod landing;

use std::path::{Path, PathBuf};

use reel_landing::LandingLog;
use reel_pipeline::PlanEpisode;
use serde::Serialize;
use zarrs::group::{Group, GroupCreateError, GroupMetadata};
use zarrs::storage::{ReadableListableStorage, StorageError};

use crate::record::path_segment;
use crate::{Error, Result, Source, SourceEpisode};
use arrays::{Dtype, ZarrArray, open_storage};

/// The least frame rate an import takes (a frame every 1000 s).
const MIN_FPS: f64 = 1e-3;

/// File names replay buffers are often given whatever they hold (Diffusion Policy's
/// `replay_buffer.zarr`, UMI's `dataset.zarr.zip`): not a name for their episodes alone.
const GENERIC_NAMES: [&str; 4] = ["replay_buffer", "dataset", "data", "buffer"];

/// What to import of a replay buffer.
#[derive(Debug, Clone, Default)]
pub struct ZarrOptions {
    /// Frames per second: replay buffers do not record theirs (needed to import).
    pub fps: Option<f64>,
    /// The buffer's name, which its episode ids start with (default: the file or folder
    /// name without `.zip` and `.zarr`, after its folder's when that name is one many
    /// buffers share, such as `replay_buffer`).
    pub name: Option<String>,
    /// Only these episodes, by their ids (as a plan's batch names them, see
    /// [`ZarrReplayBuffer::plan_episodes`]).
    pub episodes: Option<Vec<String>>,
}

/// How one array of the buffer maps into Reel.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArrayMapping {
    /// Its path in the buffer (`data/img`).
    pub array: String,
    /// What Zarr says it is: data type, shape and codecs (`float32 [27, 96, 96, 3] blosc`).
    pub zarr: String,
    /// What Reel makes of it: `signal /state (state, 5 values)`, `camera …` or
    /// `not read: <why>`.
    pub reel: String,
}

/// An array that does not open: its path, and why.
type Unreadable = (String, String);

/// A replay buffer opened for import: its arrays opened and `meta/episode_ends` read.
pub struct ZarrReplayBuffer {
    path: PathBuf,
    name: String,
    batch: String,
    /// `zarr v2` or `zarr v3`.
    revision: String,
    /// `meta/episode_ends` (one number per episode, not per step).
    ends: Vec<u64>,
    /// The episodes imported, by index.
    selected: Vec<usize>,
    data: Vec<ZarrArray>,
    /// Arrays of `data/` that do not open (a codec zarrs lacks…).
    unreadable: Vec<Unreadable>,
    meta: Vec<ZarrArray>,
    attributes: Option<String>,
    fps: Option<f64>,
}

impl std::fmt::Debug for ZarrReplayBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZarrReplayBuffer")
            .field("path", &self.path)
            .field("revision", &self.revision)
            .field("episodes", &self.ends.len())
            .finish_non_exhaustive()
    }
}

impl ZarrReplayBuffer {
    /// Opens the buffer at `path` (a folder, or a zip of one). Errors name the file and
    /// what is wrong: not a Zarr group, no `meta/episode_ends`, arrays shorter than the
    /// episodes.
    pub fn open(path: &Path, options: &ZarrOptions) -> Result<Self> {
        let storage = open_storage(path)?;
        let unreadable_path = |e| Error::Read {
            path: path.display().to_string(),
            source: e,
        };
        // The name from the path as given (a link's own name), the record's path resolved,
        // so that it names the buffer wherever the import ran from.
        let given = std::path::absolute(path).map_err(unreadable_path)?;
        let path = &std::fs::canonicalize(path).map_err(unreadable_path)?;
        let location = path.display().to_string();
        let bad = |reason: String| Error::dataset(&location, reason);
        let root =
            Group::open(storage.clone(), "/").map_err(|e| bad(format!("not a Zarr group: {e}")))?;
        let revision = match root.metadata() {
            GroupMetadata::V2(_) => "zarr v2",
            GroupMetadata::V3(_) => "zarr v3",
        };
        let attributes = Some(root.attributes())
            .filter(|a| !a.is_empty())
            .and_then(|a| serde_json::to_string(a).ok());
        let episode_ends = ZarrArray::open(&storage, "meta/episode_ends", &location).map_err(
            |e| match e {
                Error::Dataset { reason, .. } => bad(format!(
                    "no readable meta/episode_ends array ({reason}): not a replay buffer (Diffusion Policy and UMI write one)"
                )),
                other => other,
            },
        )?;
        let ends = read_ends(&episode_ends)?;
        let steps = ends.last().copied().unwrap_or(0);
        let (data, unreadable) = arrays_under(&storage, "data", &location)?;
        if data.is_empty() {
            return Err(bad("no readable arrays under data/".into()));
        }
        for array in &data {
            if array.shape.first().is_none_or(|&rows| rows < steps) {
                return Err(Error::dataset(
                    array.location(),
                    format!(
                        "shape {:?}: fewer rows than meta/episode_ends's {steps} steps",
                        array.shape
                    ),
                ));
            }
        }
        let meta = arrays_under(&storage, "meta", &location)?
            .0
            .into_iter()
            .filter(|a| a.path != "meta/episode_ends")
            .filter(|a| a.shape.first() == Some(&(ends.len() as u64)) && a.dtype.is_some())
            .filter(|a| a.row_width() <= 64)
            .collect();
        let name = options.name.clone().unwrap_or_else(|| dataset_name(&given));
        let episode_id = |index: usize| format!("{name}_{index:06}");
        let has_steps = |&e: &usize| e.checked_sub(1).map_or(0, |i| ends[i]) < ends[e];
        let (selected, batch) = match &options.episodes {
            // Episodes without steps (a writer's empty episode) are left out, not failed.
            None => ((0..ends.len()).filter(has_steps).collect(), name.clone()),
            Some(ids) => {
                let selected = ids
                    .iter()
                    .map(|id| {
                        id.strip_prefix(&format!("{name}_"))
                            .and_then(|n| n.parse::<usize>().ok())
                            .filter(|&i| i < ends.len() && episode_id(i) == *id)
                            .ok_or_else(|| {
                                bad(format!("holds no episode `{id}` (in the plan's batch)"))
                            })
                    })
                    .collect::<Result<Vec<_>>>()?;
                let hash = reel_manifest::fnv1a(ids.join("\n").into_bytes()) >> 32;
                (selected, format!("{name}-{hash:08x}"))
            }
        };
        if let Some(fps) = options.fps
            && !(fps.is_finite() && fps >= MIN_FPS)
        {
            return Err(bad(format!(
                "--fps {fps} is not a frame rate (at least {MIN_FPS})"
            )));
        }
        Ok(Self {
            path: path.to_owned(),
            name,
            batch,
            revision: revision.to_owned(),
            ends,
            selected,
            data,
            unreadable,
            meta,
            attributes,
            fps: options.fps,
        })
    }

    /// The frame rate given; an error naming the buffer when none was (replay buffers do
    /// not record theirs).
    pub fn fps(&self) -> Result<f64> {
        self.fps.ok_or_else(|| {
            Error::dataset(
                self.path.display(),
                "a replay buffer does not record its frame rate: give it (--fps)",
            )
        })
    }

    /// `zarr v2` or `zarr v3`.
    pub fn revision(&self) -> &str {
        &self.revision
    }

    /// Steps in the buffer (the last of `meta/episode_ends`).
    pub fn steps(&self) -> u64 {
        self.ends.last().copied().unwrap_or(0)
    }

    /// How each array of `data/` maps into Reel, by path.
    pub fn mappings(&self) -> Vec<ArrayMapping> {
        let unreadable = self.unreadable.iter().map(|(path, why)| ArrayMapping {
            array: path.clone(),
            zarr: String::new(),
            reel: format!("not read: {why}"),
        });
        let mut mappings: Vec<ArrayMapping> = self
            .data
            .iter()
            .map(|array| ArrayMapping {
                array: array.path.clone(),
                zarr: format!(
                    "{} {:?} {}",
                    array.type_name,
                    array.shape,
                    array.codecs.join(" ")
                )
                .trim_end()
                .to_owned(),
                reel: landing::target(array).describe(),
            })
            .chain(unreadable)
            .collect();
        mappings.sort_by(|a, b| a.array.cmp(&b.array));
        mappings
    }

    /// The episodes as a plan lists them (`reel-plan --zarr`): each by its id, sized by
    /// its steps' bytes as decoded, so bin-packing balances the work.
    pub fn plan_episodes(&self) -> Vec<PlanEpisode> {
        let step_bytes: u64 = self
            .data
            .iter()
            .filter(|a| !matches!(landing::target(a), landing::Target::Skipped(_)))
            .map(|a| a.row_width() * a.dtype.map_or(0, Dtype::size))
            .sum();
        self.selected
            .iter()
            .map(|&e| {
                let steps = self.steps_of(e);
                PlanEpisode {
                    key: self.episode_id(e),
                    bytes: (steps.end - steps.start) * step_bytes,
                }
            })
            .collect()
    }

    fn episode_id(&self, index: usize) -> String {
        format!("{}_{index:06}", self.name)
    }

    fn steps_of(&self, index: usize) -> std::ops::Range<u64> {
        let start = index.checked_sub(1).map_or(0, |i| self.ends[i]);
        start..self.ends[index]
    }
}

impl Source for ZarrReplayBuffer {
    fn name(&self) -> &str {
        &self.name
    }

    fn batch_name(&self) -> &str {
        &self.batch
    }

    fn kind(&self) -> &'static str {
        "zarr"
    }

    fn episodes(&self) -> Vec<SourceEpisode> {
        self.selected
            .iter()
            .map(|&e| SourceEpisode {
                index: e as i64,
                id: self.episode_id(e),
            })
            .collect()
    }

    fn landing_log(&self, position: usize) -> Result<LandingLog> {
        let index = *self
            .selected
            .get(position)
            .ok_or_else(|| Error::dataset(self.path.display(), format!("no episode {position}")))?;
        let episode = landing::EpisodeContext {
            id: self.episode_id(index),
            dataset: self.path.display().to_string(),
            revision: self.revision.clone(),
            index,
            steps: self.steps_of(index),
            fps: self.fps()?,
            meta: &self.meta,
            attributes: self.attributes.as_deref(),
        };
        landing::landing_log(&episode, &self.data)
    }
}

/// The buffer's name: its file or folder name without `.zip` and `.zarr` (after its
/// folder's name when that is one of [`GENERIC_NAMES`]), characters other than letters,
/// digits and `-` as `_`.
fn dataset_name(path: &Path) -> String {
    let name_of = |p: &Path| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let file = name_of(path);
    let mut stem = file
        .trim_end_matches(".zip")
        .trim_end_matches(".zarr")
        .to_owned();
    if GENERIC_NAMES.contains(&stem.as_str())
        && let Some(folder) = path.parent().map(name_of).filter(|f| !f.is_empty())
    {
        stem = format!("{folder}_{stem}");
    }
    if stem.is_empty() {
        stem = "zarr".to_owned();
    }
    path_segment(&stem)
}

/// `meta/episode_ends`: whole numbers, not decreasing.
fn read_ends(array: &ZarrArray) -> Result<Vec<u64>> {
    let bad = |reason: String| Error::dataset(array.location(), reason);
    if array.shape.len() != 1 {
        return Err(bad(format!(
            "shape {:?}: not one number per episode",
            array.shape
        )));
    }
    let values = array.numbers(0..array.shape[0])?;
    let mut ends = Vec::with_capacity(values.len());
    for (e, value) in values.iter().flatten().enumerate() {
        if value.fract() != 0.0 || *value < 0.0 {
            return Err(bad(format!("episode {e} ends at {value}, not a step")));
        }
        let end = *value as u64;
        if ends.last().is_some_and(|&last| end < last) {
            return Err(bad(format!(
                "episode {e} ends at step {end}, before the episode before it"
            )));
        }
        ends.push(end);
    }
    Ok(ends)
}

/// The arrays directly under `group`, by name (none when there is no such group), and
/// those that do not open with why (the disk's errors end the open).
fn arrays_under(
    storage: &ReadableListableStorage,
    group: &str,
    location: &str,
) -> Result<(Vec<ZarrArray>, Vec<Unreadable>)> {
    let node = match Group::open(storage.clone(), &format!("/{group}")) {
        Ok(node) => node,
        Err(GroupCreateError::StorageError(StorageError::IOError(io))) => {
            return Err(Error::Read {
                path: format!("{location}/{group}"),
                source: std::io::Error::new(io.kind(), io.to_string()),
            });
        }
        Err(_) => return Ok((Vec::new(), Vec::new())),
    };
    let mut paths: Vec<String> = node
        .child_array_paths()
        .map_err(|e| Error::dataset(format!("{location}/{group}"), e.to_string()))?
        .into_iter()
        .map(|p| p.as_str().trim_start_matches('/').to_owned())
        .collect();
    paths.sort();
    let (mut arrays, mut unreadable) = (Vec::new(), Vec::new());
    for path in paths {
        match ZarrArray::open(storage, &path, location) {
            Ok(array) => arrays.push(array),
            Err(Error::Dataset { reason, .. }) => unreadable.push((path, reason)),
            Err(other) => return Err(other),
        }
    }
    Ok((arrays, unreadable))
}
