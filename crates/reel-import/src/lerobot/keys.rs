//! The `episode` metadata keys an import adds (beside `episode_id`, `task`, `robot_id`).
//! The `source…` keys become the warehouse's `source_*` columns.

use reel_pipeline::source_keys;

/// The source dataset's format: `lerobot`, `hdf5.aloha`, `hdf5.robomimic`, `hdf5.mapped`,
/// `rlds`, `zarr`.
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
/// The RLDS split an episode comes from (`train`…).
pub const RLDS_SPLIT: &str = "rlds.split";
/// `features.json` of the RLDS build, as it holds it.
pub const RLDS_FEATURES: &str = "rlds.features";
/// The prefix of a Zarr replay buffer's per-episode `meta/<key>` values (`zarr.meta.<key>`).
pub const ZARR_META: &str = "zarr.meta.";
/// A Zarr replay buffer's root attributes, as JSON.
pub const ZARR_ATTRIBUTES: &str = "zarr.attributes";
