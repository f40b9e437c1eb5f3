//! What a checkpoint saw, link by link: checkpoint → each rank's loader state → each
//! manifest it loaded (its query, warehouse snapshot, CDC position, creation time) →
//! each episode (canonical object and digest, pipeline, schema and robot software
//! versions) → the landing recording it was made from, with its digest.
//!
//! Nothing is looked up by a name that could have changed since: a manifest is checked
//! against the content hash the loader state recorded, and each canonical object
//! against the digest its manifest row recorded, so a manifest or an episode replaced
//! under the same name is reported as changed (its current metadata is then not the one
//! the run read).
//!
//! ```no_run
//! use reel_lineage::{Lineage, LineageOptions, Record};
//!
//! let lineage = Lineage::new(LineageOptions::default());
//! lineage.walk("checkpoints/step-0000001000".as_ref(), &mut |record: Record| {
//!     println!("{}", record.text());
//!     Ok(())
//! })?;
//! # Ok::<(), reel_lineage::LineageError>(())
//! ```

mod error;
mod records;
mod walk;

pub use error::LineageError;
pub use records::{EpisodeLineage, ManifestLineage, Record, Status};
pub use walk::{Lineage, LineageOptions};
