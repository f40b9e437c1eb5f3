//! The DAG engine: steps run over a batch, with each step's completion recorded durably
//! per batch. Its rooms: the vocabulary (`dag`: steps, profiles, batches, run options),
//! what a run reports (`report`), the executor and its one step skeleton (`run`), the
//! steps' bodies (`steps`), and which episodes a new version must redo (`stale`).
//!
//! Resume works at two levels. A step whose completion record covers the whole batch is
//! skipped. Inside an unfinished step, an episode whose artifact already exists with the
//! same pipeline version and settings is reused instead of recomputed: the canonical MCAP
//! carries its own summary, a label set its provenance. Artifacts are keyed by episode,
//! not by run, so every run (and every batch that overlaps another) shares them; objects
//! are written whole, so a killed process leaves at most temporary files.

mod dag;
mod report;
mod run;
mod stale;
mod steps;

pub use dag::{BatchSpec, Profile, RunOptions, Step};
pub use report::{BatchReport, EpisodeEvent, EpisodeStatus, Event, StepReport};
pub use run::Pipeline;
pub use stale::{StaleEpisode, current_landing_keys, stale_episodes};
