//! Errors of the loader.

use std::fmt;
use std::path::PathBuf;

use reel_io::Kinded;

/// What can go wrong building a loader or a batch.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoaderError {
    /// The sample spec could not be read or is not valid.
    #[error("sample spec {path}: {reason}")]
    Spec { path: PathBuf, reason: String },
    /// The manifest could not be used.
    #[error(transparent)]
    Manifest(#[from] reel_manifest::ManifestError),
    /// Opening the store or the cache failed.
    #[error(transparent)]
    Io(#[from] reel_io::Error),
    /// The block cache failed.
    #[error(transparent)]
    Cache(#[from] reel_cache::Error),
    /// An episode could not be read (reported per sample; the loader skips it).
    #[error("{uri}: {source}")]
    Episode {
        uri: String,
        #[source]
        source: Box<reel_mcap::Error>,
    },
    /// An episode does not have what the spec asks for.
    #[error("{uri}: {reason}")]
    Mismatch { uri: String, reason: String },
    /// Rank and world size do not describe a shard.
    #[error("rank {rank} is not in a world of {world}")]
    BadShard { rank: usize, world: usize },
    /// The manifest selects no sample under the spec.
    #[error("{path}: no samples under this spec (episodes shorter than its windows?)")]
    NoSamples { path: PathBuf },
    /// The spec samples by another rule than the manifest was curated with, and the
    /// manifest is too large to index under the spec's rule on every rank.
    #[error(
        "{path}: the spec samples with {spec}, the manifest was curated with {curated}; \
         its {rows} rows are more than the {limit} a loader re-indexes under another rule: \
         curate it with {spec}"
    )]
    ResampledManifest {
        path: PathBuf,
        rows: usize,
        limit: usize,
        spec: String,
        curated: String,
    },
    /// A resume state that does not belong to this loader.
    #[error("resume state epoch {epoch} batch {batch} is past the {batches} batches of an epoch")]
    BadState {
        epoch: u64,
        batch: u64,
        batches: u64,
    },
    /// A saved state belongs to another run: resuming it would deliver other samples.
    #[error(
        "the loader state is from another run: its {what} is {was}, this loader's is {is} \
         (resume with ResumeCheck::KeepPosition to go on from its epoch and batch in this \
         loader's order anyway)"
    )]
    OtherRun {
        what: &'static str,
        was: String,
        is: String,
    },
    /// The saved states given cannot say where this rank resumes.
    #[error("cannot resume: {reason}")]
    BadResume { reason: String },
    /// An epoch holds no batch on this rank (with `drop_last`, fewer samples than a batch).
    #[error("rank {rank} has no batch in epoch {epoch}")]
    NoBatches { epoch: u64, rank: usize },
    /// More samples of the epoch were skipped (their episodes corrupt or not matching the
    /// spec) than `LoaderOptions::max_skipped` allows: the data, not a sample, is broken.
    #[error(
        "{skipped} of the epoch's {samples} samples skipped, more than the {limit} allowed \
         (max_skipped {fraction}); the first: {first}"
    )]
    TooManySkipped {
        skipped: u64,
        samples: u64,
        limit: u64,
        fraction: f64,
        first: String,
    },
    /// No episode of the manifest opens (each one tried is named in `reasons`).
    #[error("no episode of the manifest can be read: {reasons}")]
    NoReadableEpisode { reasons: String },
    /// A mixture of manifests that cannot be loaded: a weight that is not a positive
    /// number, no source, sources whose episodes differ in what the spec reads.
    #[error("mixture: {reason}")]
    Mixture { reason: String },
    /// A worker thread panicked building `batch`: a bug, not bad data. The epoch's
    /// iterator ends with it; its state still names the first batch not delivered.
    #[error("loader worker lost building batch {batch}: {reason}")]
    WorkerLost { batch: u64, reason: String },
    /// Warming a working set into the block cache failed at `step`, which names the
    /// manifest, store or cache; `source` says why.
    #[error("{step}")]
    Warm {
        step: WarmStep,
        #[source]
        source: Box<LoaderError>,
    },
}

/// Wrapped errors, a warm's too, keep their cause's kind; an episode without what the
/// spec asks for is bad input; a spec, shard or resume state that does not fit, and a lost
/// worker (a bug, not the data), are the environment's.
impl Kinded for LoaderError {
    fn kind(&self) -> reel_io::ErrorKind {
        use reel_io::ErrorKind;
        match self {
            Self::Manifest(e) => e.kind(),
            Self::Io(e) => e.kind(),
            Self::Cache(e) => e.kind(),
            Self::Episode { source, .. } => source.kind(),
            Self::Warm { source, .. } => source.kind(),
            Self::Mismatch { .. }
            | Self::TooManySkipped { .. }
            | Self::NoReadableEpisode { .. }
            | Self::OtherRun { .. }
            | Self::BadResume { .. }
            | Self::BadState { .. }
            | Self::Mixture { .. } => ErrorKind::BadInput,
            Self::Spec { .. }
            | Self::ResampledManifest { .. }
            | Self::BadShard { .. }
            | Self::NoSamples { .. }
            | Self::NoBatches { .. }
            | Self::WorkerLost { .. } => ErrorKind::Environment,
        }
    }
}

pub type Result<T, E = LoaderError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::LoaderError;
    use reel_io::{ErrorKind, Kinded};

    #[test]
    fn wrapped_errors_keep_their_cause_s_kind() {
        let corrupt = LoaderError::Episode {
            uri: "canonical/ep.mcap".into(),
            source: Box::new(reel_mcap::Error::Truncated {
                name: "canonical/ep.mcap".into(),
                len: 7,
            }),
        };
        assert_eq!(corrupt.kind(), ErrorKind::BadInput);
        let replaced = LoaderError::Io(reel_io::Error::Changed {
            name: "s3://b/ep.mcap".into(),
        });
        assert_eq!(replaced.kind(), ErrorKind::Changed);
        let cache = LoaderError::Cache(reel_cache::Error::Source(reel_io::Error::NotFound {
            name: "s3://b/ep.mcap".into(),
        }));
        assert_eq!(cache.kind(), ErrorKind::Environment);
        let late = LoaderError::Manifest(reel_manifest::ManifestError::FetchTimeout {
            path: "manifest.arrow".into(),
            seconds: 60,
        });
        assert_eq!(late.kind(), ErrorKind::Transient);
        let lost = LoaderError::WorkerLost {
            batch: 3,
            reason: "boom".into(),
        };
        assert_eq!(lost.kind(), ErrorKind::Environment);
    }
}

/// Where warming failed, naming the manifest, store or cache concerned (store URIs
/// without their credentials).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WarmStep {
    /// Opening (or fetching to the node) this manifest.
    OpenManifest(String),
    /// Opening this store.
    OpenStore(String),
    /// Listing what this manifest's loader reads.
    FindWorkingSet(String),
    /// Opening the cache whose first folder is this one.
    OpenCache(PathBuf),
    /// Planning this manifest's warm: the set may not fit.
    Plan(String),
    /// Fetching this manifest's working set.
    Fetch(String),
}

impl fmt::Display for WarmStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::OpenManifest(manifest) => write!(f, "opening manifest {manifest}"),
            Self::OpenStore(store) => write!(f, "opening store {store}"),
            Self::FindWorkingSet(manifest) => {
                write!(f, "finding the working set of {manifest}")
            }
            Self::OpenCache(dir) => write!(f, "opening the cache in {}", dir.display()),
            Self::Plan(manifest) => write!(f, "planning the warm of {manifest}"),
            Self::Fetch(manifest) => write!(f, "warming {manifest}"),
        }
    }
}
