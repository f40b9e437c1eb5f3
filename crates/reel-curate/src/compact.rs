//! Compaction and retention of the warehouse, as the table format does them.
//!
//! Ingest commits a small file to each episode table per batch (merged by tiers as they
//! come). A compaction rewrites `episodes` into files of about 10^6 rows, each holding one
//! range of recording time (episodes recorded together, as an ingest batch holds them,
//! are in one or two files: what a commit re-ingesting them rewrites) and sorted by task
//! and recording time in small row groups, so the common filters skip most of a file by
//! its statistics; it is LZ4, not ZSTD: 1.6× the bytes, half the decode time of every
//! query. Beside each file it writes
//! the file's rows as a manifest (`<file>.base.arrow`): the bases a curation by position
//! points into. `ingestions` is rewritten by time. Both are checkpointed. Readers of any
//! version see the same rows before and after: a compaction changes no data.
//!
//! Vacuum removes the files no version within the retention (7 days by default, Delta's)
//! reads, bases with their files: a selection older than the retention fails to open,
//! naming its base, rather than reading another row.

use std::time::Duration;

use polars::prelude::*;
use reel_warehouse::episodes::{EPISODES, INGESTIONS};
use reel_warehouse::{Compression, Layout, Vacuumed};

use crate::{CurateError, Warehouse, store_error};

/// How a compaction lays out the tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactOptions {
    /// Rows a compacted file holds, about: what one commit replacing an episode rewrites,
    /// and what a compaction holds in memory at once (about 350 MB per 10^6 rows).
    pub file_rows: usize,
}

impl Default for CompactOptions {
    fn default() -> Self {
        Self { file_rows: 1 << 20 }
    }
}

/// The sort order of every compacted `episodes` file.
pub const SORT_COLUMNS: [&str; 3] = ["task", "recorded_at", "episode_id"];

/// How a compacted file's base manifest ends: `part-….parquet.base.arrow`.
pub const BASE_SUFFIX: &str = ".base.arrow";

/// The base manifest of each `episodes` file of `warehouse`'s version that has one: data
/// file key → base key.
pub(crate) fn bases_of(
    warehouse: &Warehouse,
) -> Result<std::collections::HashMap<String, String>, CurateError> {
    let store = warehouse.store();
    let files: std::collections::HashSet<&str> =
        warehouse.files().iter().map(|f| f.key.as_str()).collect();
    let prefix = warehouse
        .tables()
        .table(reel_warehouse::episodes::EPISODES)?
        .prefix();
    Ok(store
        .list(&prefix)
        .map_err(|e| crate::store_error(store, e))?
        .into_iter()
        .filter_map(|key| {
            let data = key.strip_suffix(BASE_SUFFIX)?;
            files.contains(data).then(|| (data.to_owned(), key.clone()))
        })
        .collect())
}

/// The sampling rule a compaction's base manifests carry. A selection samples by its own
/// rule; this one only makes each base a manifest of its file in its own right.
pub const BASE_SAMPLING: reel_manifest::SamplingRule = reel_manifest::SamplingRule {
    period_ns: 100_000_000,
    before_ns: 0,
    after_ns: 0,
};

/// The retention a vacuum keeps by default: Delta's, 7 days.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// What a compaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionSummary {
    /// `episodes`' version after it; `None` when it was compact already.
    pub episodes_version: Option<u64>,
    /// Rows of `episodes`: one per episode.
    pub rows: u64,
    /// `episodes`' files before and after.
    pub files_before: usize,
    pub files: usize,
    /// Base manifests written beside its files.
    pub bases: usize,
    /// `ingestions`' version after its own compaction, if one was needed.
    pub ingestions_version: Option<u64>,
    /// Captured database tables compacted (`reel-cdc`): name and rows.
    pub db_tables: Vec<(String, u64)>,
}

/// Compacts the warehouse's tables (see the module's documentation). Running it again
/// on compact tables writes nothing.
pub fn compact(warehouse: &Warehouse) -> Result<CompactionSummary, CurateError> {
    compact_with(warehouse, CompactOptions::default())
}

/// [`compact`] with explicit options.
pub fn compact_with(
    warehouse: &Warehouse,
    options: CompactOptions,
) -> Result<CompactionSummary, CurateError> {
    let tables = warehouse.tables();
    let db_tables = warehouse.db_tables().compact(tables, options)?;
    let episodes = tables.table(EPISODES)?;
    let compacted = episodes.compact(&Layout {
        file_rows: options.file_rows,
        sort_by: SORT_COLUMNS.to_vec(),
        split_by: Some("recorded_at"),
        compression: Compression::Lz4,
    })?;
    let ingestions = tables.table(INGESTIONS)?.compact(&Layout {
        file_rows: options.file_rows,
        sort_by: vec!["ingested_at_ns", "episode_id"],
        split_by: Some("ingested_at_ns"),
        compression: Compression::Zstd,
    })?;
    let current = Warehouse::from_tables(tables.clone(), None)?;
    let bases = write_bases(&current)?;
    Ok(CompactionSummary {
        episodes_version: compacted.version,
        rows: compacted.rows,
        files_before: compacted.files_before,
        files: compacted.files_after,
        bases,
        ingestions_version: ingestions.version,
        db_tables,
    })
}

/// Writes the base manifest of each `episodes` file that has none; returns how many.
/// Rows a manifest refuses (a null, an end before its start) fail the curations that
/// select them, not the compaction: that file has no base, and curation by position
/// writes its rows beside the selection.
fn write_bases(warehouse: &Warehouse) -> Result<usize, CurateError> {
    let store = warehouse.store();
    let existing = bases_of(warehouse)?;
    let mut written = 0;
    for file in warehouse.files() {
        if existing.contains_key(&file.key) {
            continue;
        }
        let key = format!("{}{BASE_SUFFIX}", file.key);
        let df = warehouse
            .scan_files([file.key.as_str()].into_iter(), None)?
            .collect()
            .map_err(CurateError::Query)?;
        let meta = reel_manifest::ManifestMeta::new(
            format!("compaction: {}", file.key),
            warehouse.snapshot_id(),
            BASE_SAMPLING,
        );
        match write_base(store, &key, &df, &meta) {
            Ok(()) => written += 1,
            Err(e) if reel_io::Kinded::kind(&e) == reel_io::ErrorKind::BadInput => {}
            Err(e) => return Err(e),
        }
    }
    Ok(written)
}

/// Writes rows `df` as the manifest `key` of `store`: in place in a local store, through
/// a temporary file to a remote one.
fn write_base(
    store: &reel_io::Store,
    key: &str,
    df: &DataFrame,
    meta: &reel_manifest::ManifestMeta,
) -> Result<(), CurateError> {
    let io = |name: &std::path::Path| {
        let name = name.display().to_string();
        move |source| store_error(store, reel_io::Error::Io { name, source })
    };
    let options = crate::CurationOptions::allowing_empty();
    let (local, _tmp) = match store.local_root() {
        Some(root) => (root.join(key), None),
        None => {
            let tmp = tempfile::tempdir().map_err(io(&std::env::temp_dir()))?;
            (tmp.path().join("base.arrow"), Some(tmp))
        }
    };
    crate::write_frame(df, meta, &local, options)?;
    if store.local_root().is_none() {
        let bytes = std::fs::read(&local).map_err(io(&local))?;
        store
            .write_atomic(key, bytes)
            .map_err(|e| store_error(store, e))?;
    }
    Ok(())
}

/// What a vacuum removed, table by table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VacuumSummary {
    pub retention: Duration,
    pub tables: Vec<(String, Vacuumed)>,
}

/// Removes, in every table of the warehouse, the files no version committed within
/// `retention` reads (and their bases), and the log before what opening the oldest kept
/// version needs.
pub fn vacuum(warehouse: &Warehouse, retention: Duration) -> Result<VacuumSummary, CurateError> {
    let tables = warehouse.tables();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let mut summary = VacuumSummary {
        retention,
        tables: Vec::new(),
    };
    for name in tables.tables()? {
        let vacuumed = tables.table(&name)?.vacuum(retention, now_ms)?;
        summary.tables.push((name, vacuumed));
    }
    Ok(summary)
}
