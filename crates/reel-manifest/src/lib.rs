//! Training manifests: which episodes a run reads and where each one starts
//! and stops, as one uncompressed Arrow IPC file that every rank
//! memory-maps.
//!
//! A manifest has one row per episode (URI, time range, steps per stream,
//! bytes, the number of training samples under the manifest's
//! [`SamplingRule`], and the cumulative sample offset). Opening one maps the
//! file and decodes the Arrow footer and record-batch headers only: no column
//! is copied or scanned, so [`Manifest::open`] costs the same for a thousand
//! rows or fifty million, and all ranks of a node share one page-cache copy.
//! [`Manifest::sample`] maps a global sample index to (episode, anchor time)
//! by binary search over the cumulative offsets; [`Manifest::shard`] gives
//! each rank a disjoint, complete slice of the sample space.
//!
//! A selection ([`write_selection`], format version 3) holds, instead of its
//! episodes, their positions in base manifests it names (16 bytes a row instead
//! of about 83): a curation of millions of episodes out of a compacted warehouse
//! points into the manifests the compaction wrote once. [`Manifest::open`] opens
//! its bases with it and reads it like any manifest.
//!
//! This crate reads and writes manifests with arrow-rs alone; building one
//! from SQL lives in `reel-curate`, which is the only crate that links polars.
//!
//! ```
//! use reel_manifest::{Manifest, ManifestMeta, ManifestRow, SamplingRule, write_manifest};
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("manifest.arrow");
//! let rule = SamplingRule { period_ns: 100_000_000, before_ns: 0, after_ns: 0 }; // 10 Hz anchors
//! let rows = [
//!     ManifestRow { episode_id: "ep-a", uri: "canonical/ep-a.mcap", start_ns: 0, end_ns: 1_000_000_000, ..Default::default() },
//!     ManifestRow { episode_id: "ep-b", uri: "canonical/ep-b.mcap", start_ns: 0, end_ns: 500_000_000, ..Default::default() },
//! ];
//! write_manifest(&path, &rows, &ManifestMeta::new("SELECT * FROM episodes", "snap-1", rule))?;
//!
//! let manifest = Manifest::open(&path)?;
//! assert_eq!(manifest.len(), 2);
//! assert_eq!(manifest.num_samples(), 11 + 6);
//! let sample = manifest.sample(12)?; // the second sample of ep-b
//! assert_eq!(sample.episode.episode_id()?, "ep-b");
//! assert_eq!(sample.time_ns, 100_000_000);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#[cfg(feature = "warehouse")]
pub mod changes;
mod error;
mod fetch;
mod hash;
mod layout;
mod read;
mod select;
mod write;

pub use error::ManifestError;
pub use fetch::{
    fetch_once, local_copy, node_manifest_dir, open_base_in, open_in, open_uri, open_uri_with,
};
pub use hash::{digest_text, fnv1a, object_digest, parts_digest};
pub use layout::BaseRef;
pub use read::{EpisodeRef, Manifest, Sample, ShardView};
pub use select::{Picks, write_selection};
pub use write::{ManifestNumbers, ManifestRow, ManifestWriter, write_manifest};

/// The manifest format version this crate writes. Version 2 added the `digest` column;
/// version 1 manifests (without it) are read too.
pub const FORMAT_VERSION: &str = "2";

/// The format version of a selection ([`write_selection`]): rows that are positions in
/// base manifests, which hold the episodes.
pub const SELECTION_VERSION: &str = "3";

/// Format versions this crate reads.
pub const READABLE_VERSIONS: [&str; 3] = ["1", "2", "3"];

/// Schema-metadata keys.
pub mod keys {
    pub const VERSION: &str = "reel.manifest.version";
    pub const QUERY: &str = "reel.manifest.query";
    pub const SNAPSHOT: &str = "reel.manifest.warehouse_snapshot";
    pub const CREATED_AT: &str = "reel.manifest.created_at";
    pub const PERIOD_NS: &str = "reel.manifest.sampling.period_ns";
    pub const BEFORE_NS: &str = "reel.manifest.sampling.before_ns";
    pub const AFTER_NS: &str = "reel.manifest.sampling.after_ns";
    /// In the file's footer (Arrow's custom metadata), written last: `xxh3_128:` and the
    /// hash of every byte before the end-of-stream marker.
    pub const CONTENT_HASH: &str = "reel.manifest.content_hash";
    /// Format version 2, in place of the `uri` column when every row's object path is
    /// the episode id inside the same text: that text with `{episode_id}` for the id.
    pub const URI_TEMPLATE: &str = "reel.manifest.uri_template";
    /// A selection's base manifests, a line each: `rows content_hash location`.
    pub const BASES: &str = "reel.manifest.bases";
}

/// The placeholder of [`keys::URI_TEMPLATE`].
pub const EPISODE_ID_PLACEHOLDER: &str = "{episode_id}";

/// Column names, in file order.
pub mod columns {
    pub const EPISODE_ID: &str = "episode_id";
    pub const URI: &str = "uri";
    pub const START_NS: &str = "start_ns";
    pub const END_NS: &str = "end_ns";
    pub const BYTES: &str = "bytes";
    pub const CAMERA_FRAMES: &str = "camera_frames";
    pub const STATE_STEPS: &str = "state_steps";
    pub const ACTION_STEPS: &str = "action_steps";
    pub const NUM_SAMPLES: &str = "num_samples";
    pub const SAMPLE_OFFSET: &str = "sample_offset";
    /// Format version 2: the canonical object's [`object_digest`](crate::object_digest)
    /// when the manifest was written, 0 where the warehouse row had none.
    pub const DIGEST: &str = "digest";
    /// A selection's (format version 3) position of the row in its bases taken in order.
    pub const ROW: &str = "row";
}

/// Which anchor times of an episode are training samples: every `period_ns`
/// from `start + before_ns` while the whole window `[t - before, t + after]`
/// stays inside the episode. Integer nanoseconds keep anchors exact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SamplingRule {
    pub period_ns: u64,
    /// History the sample needs before its anchor (e.g. a 1 s state window).
    pub before_ns: u64,
    /// Future the sample needs after its anchor (e.g. a 1 s action chunk).
    pub after_ns: u64,
}

impl SamplingRule {
    /// Anchors at `hz` with the given margins in seconds.
    pub fn at_hz(hz: f64, before_s: f64, after_s: f64) -> Self {
        Self {
            period_ns: (1e9 / hz).round().max(1.0) as u64,
            before_ns: (before_s * 1e9).round().max(0.0) as u64,
            after_ns: (after_s * 1e9).round().max(0.0) as u64,
        }
    }

    /// Samples an episode spanning `start_ns..=end_ns` yields.
    pub fn num_samples(&self, start_ns: i64, end_ns: i64) -> u64 {
        let span = end_ns.saturating_sub(start_ns);
        let need = (self.before_ns + self.after_ns) as i64;
        if span < need || self.period_ns == 0 {
            return 0;
        }
        (span - need) as u64 / self.period_ns + 1
    }

    /// The anchor time of sample `k` of an episode starting at `start_ns`.
    pub fn anchor_ns(&self, start_ns: i64, k: u64) -> i64 {
        start_ns + self.before_ns as i64 + (k * self.period_ns) as i64
    }
}

/// What follows it in a warehouse snapshot id is the change-data-capture position (a
/// PostgreSQL LSN) the database's tables were read at.
pub const CDC_POSITION_MARK: &str = "+db-";

/// What a manifest says about itself (its Arrow schema metadata).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestMeta {
    /// The curation query that selected the rows.
    pub query: String,
    /// Identifies the warehouse state the query ran on.
    pub warehouse_snapshot: String,
    /// RFC 3339 creation time.
    pub created_at: String,
    pub sampling: SamplingRule,
    /// Every row's object path as the episode id inside one text (`canonical/{episode_id}.mcap`):
    /// written once instead of a `uri` column (a third of a manifest's bytes).
    pub uri_template: Option<UriTemplate>,
}

/// Object paths that are the episode id inside one text: `prefix` + id + `suffix`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UriTemplate {
    pub prefix: String,
    pub suffix: String,
}

impl UriTemplate {
    /// The template `uri` follows for episode `id`, if `id` occurs in it once.
    pub fn of(uri: &str, id: &str) -> Option<Self> {
        let at = uri.find(id).filter(|_| !id.is_empty())?;
        (uri.matches(id).count() == 1).then(|| Self {
            prefix: uri[..at].to_string(),
            suffix: uri[at + id.len()..].to_string(),
        })
    }

    /// Parses `prefix{episode_id}suffix`.
    pub fn parse(text: &str) -> Option<Self> {
        let (prefix, suffix) = text.split_once(EPISODE_ID_PLACEHOLDER)?;
        Some(Self {
            prefix: prefix.to_string(),
            suffix: suffix.to_string(),
        })
    }

    /// The object path of episode `id`.
    pub fn uri(&self, id: &str) -> String {
        format!("{}{id}{}", self.prefix, self.suffix)
    }

    /// Whether `uri` is episode `id`'s path under this template.
    pub fn matches(&self, uri: &str, id: &str) -> bool {
        uri.len() == self.prefix.len() + id.len() + self.suffix.len()
            && uri.starts_with(&self.prefix)
            && uri.ends_with(&self.suffix)
            && &uri[self.prefix.len()..uri.len() - self.suffix.len()] == id
    }
}

impl std::fmt::Display for UriTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{EPISODE_ID_PLACEHOLDER}{}", self.prefix, self.suffix)
    }
}

impl ManifestMeta {
    /// The change-data-capture position the curation read the database's tables at, when
    /// it read any ([`CDC_POSITION_MARK`] in the snapshot id).
    pub fn cdc_position(&self) -> Option<&str> {
        self.warehouse_snapshot
            .split_once(CDC_POSITION_MARK)
            .map(|(_, lsn)| lsn)
    }

    /// Metadata stamped with the current time.
    pub fn new(
        query: impl Into<String>,
        warehouse_snapshot: impl Into<String>,
        sampling: SamplingRule,
    ) -> Self {
        let created_at = time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
        Self {
            query: query.into(),
            warehouse_snapshot: warehouse_snapshot.into(),
            created_at,
            sampling,
            uri_template: None,
        }
    }
}
