//! A time-aligned multi-rate dataloader: the part of Reel a trainer touches every step.
//!
//! A [`SampleSpec`] says what one sample holds around its anchor time: frames of each
//! camera at given offsets, state windows and action chunks of each numeric stream, each
//! at its own rate. The [`Loader`] walks a memory-mapped manifest
//! ([`reel_manifest::Manifest`]), reads each canonical episode with one ranged read per
//! topic group ([`reel_mcap::EpisodeReader`]) — from the store or through the node's block
//! cache ([`Sources`]) — decodes only the frames needed from their GOP's keyframe, and
//! hands over [`Batch`]es of named contiguous tensors built in place by worker threads.
//!
//! - Every element carries the time of the data it holds (`<name>.time_ns`) and a mask:
//!   on the episode's grid the data is the grid point itself, never a neighbour.
//! - The order is deterministic for (seed, epoch), sharded by (rank, world) with no
//!   overlap and full coverage, shuffled globally or by runs of nearby anchors
//!   ([`Shuffle::Locality`]: one read and one GOP decode serve a whole run).
//! - [`LoaderState`] (epoch, batch) resumes a run exactly where it stopped, and a
//!   [`SavedState`] names the run it belongs to (manifest content, spec, seed, order,
//!   batch size): [`Loader::restore`] refuses another run's, and from the states of all
//!   ranks resumes on a world of another size, every remaining sample delivered once;
//!   [`Loader::epochs`] rolls over from epoch to epoch for runs counted in steps.
//! - A corrupt episode is skipped and reported in [`Batch::skipped`], never a crash; a
//!   worker that panics ends the epoch at once with [`LoaderError::WorkerLost`].
//! - [`pack`] packs variable-length samples (valid steps of a stream) into fixed token
//!   budgets with `cu_seqlens` and position ids for variable-length attention.
//! - Workers share decoded GOPs, and wait for one another's decode of the same GOP
//!   instead of repeating it; pictures are converted to RGB only when a sample uses them.
//! - With feature `cuda` and [`LoaderOptions::pin_memory`], batch buffers are page-locked
//!   host memory ([`HostMemory`]), ready for asynchronous copies to the GPU.
//! - [`working_set`] gives the byte ranges a spec reads, to warm the block cache with;
//!   [`PreparedWarm`] plans, pins and fetches a [`WarmRequest`]'s working set into the
//!   cache (what `reel-warm` and `reel.warm` run).
//! - [`to_record_batch`] and [`ArrowStreamWriter`] turn batches into Arrow record batches
//!   and an Arrow IPC stream (a row per sample, a column per tensor).
//!
//! ```
//! use reel_loader::{Loader, LoaderOptions, SampleSpec, Sources};
//! use reel_manifest::{Manifest, ManifestMeta, ManifestWriter};
//! use reel_pipeline::{PipelineConfig, process_episode};
//! use reel_synth::{SynthConfig, generate_episode};
//!
//! // One short canonical episode in a local store, and a manifest listing it.
//! let store_dir = tempfile::tempdir()?;
//! let synth = SynthConfig { seconds: 3.0, cameras: 1, width: 64, height: 48, ..SynthConfig::default() };
//! let landing = generate_episode(&synth, 0)?;
//! let episode = process_episode(&landing.name, &landing.name, &landing.mcap, &PipelineConfig::default())?;
//! let s = &episode.summary;
//! std::fs::create_dir_all(store_dir.path().join("canonical"))?;
//! std::fs::write(store_dir.path().join(&s.canonical_key), &episode.bytes)?;
//!
//! let spec = SampleSpec::from_toml_str(r#"
//!     anchor_hz = 10.0
//!     [[camera]]
//!     name = "cam"
//!     topic = "/camera/high/image_raw/compressed"
//!     offsets_s = [-0.5, 0.0]
//!     [[proprio]]
//!     name = "action"
//!     topic = "/action"
//!     kind = "chunk"
//!     steps = 50
//!     hz = 50.0
//! "#)?;
//! let manifest_path = store_dir.path().join("manifest.arrow");
//! let meta = ManifestMeta::new("SELECT * FROM episodes", "example", spec.sampling_rule());
//! let mut writer = ManifestWriter::create(&manifest_path, &meta)?;
//! writer.push(&s.manifest_row())?;
//! writer.finish()?;
//!
//! let store = reel_io::Store::open(store_dir.path().to_str().unwrap())?;
//! let options = LoaderOptions { batch_size: 4, ..LoaderOptions::default() };
//! let loader = Loader::new(Manifest::open(&manifest_path)?, &spec, Sources::Store(store), options)?;
//! let batch = loader.epoch(0)?.next().expect("a batch")?;
//! assert_eq!(batch.get("cam").unwrap().shape, vec![4, 2, 48, 64, 3]);
//! assert_eq!(batch.get("action").unwrap().shape[..2], [4, 50]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod arrow;
mod assemble;
mod batch;
mod batch_tensors;
mod epochs;
mod error;
mod gop_cache;
mod host;
mod loader;
pub mod mixture;
mod open;
mod options;
mod order;
mod pack;
mod resolve;
mod row_check;
mod shared;
mod skipped;
mod sources;
mod spec;
mod state;
#[cfg(test)]
mod test_fixture;
mod warm;
mod working_set;

pub use arrow::{ArrowExportError, ArrowStreamWriter, SHAPE_KEY, to_record_batch};
pub use batch::{Batch, DType, Skipped, Tensor, TensorData};
pub use epochs::Epochs;
pub use error::{LoaderError, Result, WarmStep};
pub use host::{Element, HostBuf, HostMemory};
pub use loader::{Batches, EpochSize, LoadStats, Loader};
pub use mixture::{MixtureEntry, MixtureSource};
pub use open::open_loader;
pub use options::LoaderOptions;
pub use order::{LoaderState, Shuffle, Span};
pub use pack::{PackError, Packed, pack};
pub use reel_video::RgbConversion;
pub use skipped::SkippedEpisode;
pub use sources::Sources;
pub use spec::{
    CameraSpec, DepthSpec, DepthTensorUnit, EdgePolicy, Layout, ProprioKind, ProprioSpec,
    SampleSpec,
};
pub use state::{LOADER_CHECKPOINT_FILE, ResumeCheck, RunIdentity, SavedState};
pub use warm::{PinChoice, PreparedWarm, WarmOutcome, WarmRequest};
pub use working_set::{whole_episodes, working_set};
