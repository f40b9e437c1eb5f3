//! Compaction: the `episodes` view written out once, so queries scan it plainly.
//!
//! The warehouse is an append-only log of ingestions; the `episodes` table is
//! its latest version of each episode, and finding that version (a window over
//! every row) costs several times the query itself. A compaction writes the
//! view as Parquet under `compacted/<id>/`, sorted by task and recording time
//! in small row groups, so the common filters skip most of the file by its
//! statistics. `compacted/CURRENT.json`, replaced atomically and last, names
//! the compaction and the episode files it covers. Files ingested after it are
//! merged at query time: only their episodes are deduplicated again.

use std::path::Path;

use polars::prelude::*;
use reel_io::{Kinded, Store};
use serde::{Deserialize, Serialize};

use crate::{CurateError, Warehouse, file_set_hash, latest_of, store_error};

/// Where compactions live in a warehouse store.
pub const COMPACTED_PREFIX: &str = "compacted/";
/// The pointer to the current compaction.
pub const POINTER_KEY: &str = "compacted/CURRENT.json";
/// The pointer format this code writes and reads.
const POINTER_VERSION: u32 = 1;
/// How a compaction splits its work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactOptions {
    /// Parquet bytes of input per compacted part: bounds the memory of a
    /// compaction (each part is deduplicated and sorted in memory; 256 MiB of
    /// zstd input is about 1 GB in memory).
    pub part_input_bytes: u64,
}

impl Default for CompactOptions {
    fn default() -> Self {
        Self {
            part_input_bytes: 256 << 20,
        }
    }
}
/// Rows per row group of a compacted part: small enough that a filter on the
/// sort columns skips most of a part. Parts are LZ4, not zstd like the log:
/// 1.6× the bytes, half the decode time of every query.
const ROW_GROUP_ROWS: usize = 1 << 16;
/// The sort order of every compacted part.
pub const SORT_COLUMNS: [&str; 3] = ["task", "recorded_at", "episode_id"];

/// The pointer file: a compaction and what it covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compaction {
    pub version: u32,
    /// `c-<hash of the covered files>`: the same inputs give the same id.
    pub id: String,
    /// Episode files (key, size) whose rows the compaction holds.
    pub covers: Vec<(String, u64)>,
    /// Its Parquet parts, in order.
    pub parts: Vec<String>,
    /// Rows: one per episode.
    pub rows: u64,
    /// The largest `ingested_at_ns` among them: files ingested later whose
    /// rows are all newer only replace rows, which queries merge cheaply.
    pub newest_ingested_at_ns: i64,
    pub sorted_by: Vec<String>,
    /// Each part's rows as a manifest, in the same order: the bases a curation by
    /// position points into. Empty in pointers written before compactions wrote them.
    #[serde(default)]
    pub bases: Vec<CompactedBase>,
}

/// A compacted part's rows written as a manifest (`part-NNNNN.episodes.arrow` beside
/// it), named with what a selection checks it by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactedBase {
    pub key: String,
    pub content_hash: String,
    pub rows: u64,
}

/// How a compaction's base manifests end: `part-NNNNN.episodes.arrow`.
pub const BASE_SUFFIX: &str = ".episodes.arrow";

/// The sampling rule a compaction's base manifests carry. A selection samples by its own
/// rule; this one only makes each base a manifest of its part in its own right.
pub const BASE_SAMPLING: reel_manifest::SamplingRule = reel_manifest::SamplingRule {
    period_ns: 100_000_000,
    before_ns: 0,
    after_ns: 0,
};

/// How a warehouse's compaction relates to its episode files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompactionState {
    /// No compaction: every query deduplicates the whole log.
    None,
    /// The compaction covers `covered` files; `delta` newer files are merged
    /// at query time.
    Current {
        id: String,
        covered: usize,
        delta: usize,
    },
    /// A compaction exists but no longer matches the episode files (one it
    /// covers vanished or changed): ignored, queries read the whole log.
    Stale { id: String, reason: String },
}

/// What a compaction wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionSummary {
    pub id: String,
    pub rows: u64,
    pub parts: usize,
    pub bytes: u64,
    /// Episode files covered.
    pub covered: usize,
    /// False when the current compaction already covered exactly these files.
    pub written: bool,
    /// Captured database tables compacted (`reel-cdc`): name and rows.
    pub db_tables: Vec<(String, u64)>,
}

/// Reads the pointer, if any.
pub(crate) fn read_pointer(store: &Store) -> Result<Option<Compaction>, CurateError> {
    let bytes = match store.read(POINTER_KEY) {
        Ok(bytes) => bytes,
        Err(reel_io::Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(store_error(store, e)),
    };
    let pointer: Compaction =
        serde_json::from_slice(&bytes).map_err(|e| CurateError::BadCompaction {
            key: store.object_uri(POINTER_KEY),
            reason: e.to_string(),
        })?;
    if pointer.version != POINTER_VERSION {
        return Err(CurateError::BadCompaction {
            key: store.object_uri(POINTER_KEY),
            reason: format!(
                "pointer version {} (this build reads {POINTER_VERSION})",
                pointer.version
            ),
        });
    }
    Ok(Some(pointer))
}

/// Writes a compacted part's rows `df` as the manifest `key` of `store`: in place in a
/// local store, through a temporary file to a remote one.
fn write_base(
    store: &Store,
    key: &str,
    df: &DataFrame,
    meta: &reel_manifest::ManifestMeta,
) -> Result<CompactedBase, CurateError> {
    let io = |name: &Path| {
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
    let base = reel_manifest::Manifest::open(&local)?;
    let written = CompactedBase {
        key: key.to_string(),
        content_hash: base.content_hash().to_string(),
        rows: base.len() as u64,
    };
    if store.local_root().is_none() {
        let bytes = std::fs::read(&local).map_err(io(&local))?;
        store
            .write_atomic(key, bytes)
            .map_err(|e| store_error(store, e))?;
    }
    Ok(written)
}

/// Whether `pointer` still describes a prefix of `files`, and which files are newer.
pub(crate) fn classify(
    pointer: &Compaction,
    files: &[(String, u64)],
) -> Result<Vec<String>, String> {
    let current: std::collections::HashMap<&str, u64> =
        files.iter().map(|(k, s)| (k.as_str(), *s)).collect();
    for (key, size) in &pointer.covers {
        match current.get(key.as_str()) {
            None => return Err(format!("covered file {key} is gone")),
            Some(now) if now != size => {
                return Err(format!("covered file {key} changed size ({size} → {now})"));
            }
            Some(_) => {}
        }
    }
    let covered: std::collections::HashSet<&str> =
        pointer.covers.iter().map(|(k, _)| k.as_str()).collect();
    Ok(files
        .iter()
        .filter(|(k, _)| !covered.contains(k.as_str()))
        .map(|(k, _)| k.clone())
        .collect())
}

/// Compacts `warehouse`: writes its `episodes` view as sorted Parquet parts and
/// points `compacted/CURRENT.json` at them. Readers see the old compaction or
/// the new one, never a mix; the parts of compactions older than the previous one
/// are removed, their bases kept (selections point into them). Running it again on
/// the same files writes nothing.
pub fn compact(warehouse: &Warehouse) -> Result<CompactionSummary, CurateError> {
    compact_with(warehouse, CompactOptions::default())
}

/// [`compact`] with explicit options.
pub fn compact_with(
    warehouse: &Warehouse,
    options: CompactOptions,
) -> Result<CompactionSummary, CurateError> {
    let store = warehouse.store();
    let db_tables = warehouse.db_tables().compact(warehouse)?;
    let files = warehouse.files();
    let id = format!("c-{:016x}-{}", file_set_hash(files), files.len());
    let previous = warehouse.compaction().map(|(p, _)| p);
    if let Some(p) = previous.filter(|p| p.id == id) {
        return Ok(CompactionSummary {
            id,
            rows: p.rows,
            parts: p.parts.len(),
            bytes: p
                .parts
                .iter()
                .map(|k| store.len_of(k).map_err(|e| store_error(store, e)))
                .sum::<Result<u64, _>>()?,
            covered: p.covers.len(),
            written: false,
            db_tables,
        });
    }

    // Episodes are split into parts by key, so each part deduplicates alone
    // and only one part is in memory at a time.
    // With a current compaction, its parts stand in for the files they cover.
    let inputs: Vec<(String, u64)> = match warehouse.compaction() {
        Some((p, delta)) => {
            let mut inputs = Vec::new();
            for key in p.parts.iter().chain(delta) {
                let size = store.len_of(key).map_err(|e| store_error(store, e))?;
                inputs.push((key.clone(), size));
            }
            inputs
        }
        _ => files.to_vec(),
    };
    let input_bytes: u64 = inputs.iter().map(|(_, s)| s).sum();
    let part_count = input_bytes.div_ceil(options.part_input_bytes.max(1)).max(1);
    let all = warehouse.scan_log(inputs.iter().map(|(k, _)| k.as_str()))?;
    let (mut parts, mut bases) = (Vec::new(), Some(Vec::new()));
    let (mut rows, mut bytes, mut newest) = (0u64, 0u64, i64::MIN);
    for part in 0..part_count {
        let mine = if part_count == 1 {
            all.clone()
        } else {
            all.clone()
                .filter((col("episode_key") % lit(part_count)).eq(lit(part)))
        };
        let sort = SortMultipleOptions::default().with_maintain_order(true);
        let mut df = latest_of(mine)?
            .sort(SORT_COLUMNS, sort)
            .collect()
            .map_err(CurateError::Query)?;
        rows += df.height() as u64;
        let newest_here = df
            .column("ingested_at_ns")
            .and_then(|c| c.i64().map(|c| c.max()))
            .map_err(CurateError::Query)?;
        newest = newest.max(newest_here.unwrap_or(i64::MIN));
        let mut encoded = Vec::new();
        ParquetWriter::new(&mut encoded)
            .with_compression(ParquetCompression::Lz4Raw)
            .with_row_group_size(Some(ROW_GROUP_ROWS))
            .finish(&mut df)
            .map_err(CurateError::Query)?;
        bytes += encoded.len() as u64;
        let key = format!("{COMPACTED_PREFIX}{id}/part-{part:05}.parquet");
        store
            .write_atomic(&key, encoded)
            .map_err(|e| store_error(store, e))?;
        parts.push(key);
        let meta = reel_manifest::ManifestMeta::new(
            format!("compaction {id}, part {part}"),
            warehouse.snapshot_id(),
            BASE_SAMPLING,
        );
        let key = format!("{COMPACTED_PREFIX}{id}/part-{part:05}{BASE_SUFFIX}");
        if let Some(written) = &mut bases {
            match write_base(store, &key, &df, &meta) {
                Ok(base) => written.push(base),
                // Rows a manifest refuses (an id twice, a null, an end before its start)
                // fail the curations that select them, not the compaction: it writes no
                // bases, and curation by position writes self-contained manifests.
                Err(e) if e.kind() == reel_io::ErrorKind::BadInput => {
                    for base in written.iter().map(|b| b.key.as_str()).chain([key.as_str()]) {
                        let _ = store.remove(base);
                    }
                    bases = None;
                }
                Err(e) => return Err(e),
            }
        }
    }
    let bases = bases.unwrap_or_default();

    let pointer = Compaction {
        version: POINTER_VERSION,
        id: id.clone(),
        covers: files.to_vec(),
        parts,
        rows,
        newest_ingested_at_ns: newest,
        sorted_by: SORT_COLUMNS.map(String::from).to_vec(),
        bases,
    };
    let json = serde_json::to_vec_pretty(&pointer).map_err(|e| CurateError::BadCompaction {
        key: store.object_uri(POINTER_KEY),
        reason: e.to_string(),
    })?;
    store
        .write_atomic(POINTER_KEY, json)
        .map_err(|e| store_error(store, e))?;

    // A curation that read the previous pointer may still be scanning its
    // parts: keep those, drop older parts. Every base stays: a selection of it
    // may be in a run that has weeks to go.
    let keep = [Some(id.as_str()), previous.map(|p| p.id.as_str())];
    for key in store
        .list_recursive(COMPACTED_PREFIX)
        .map_err(|e| store_error(store, e))?
    {
        if let Some((folder, name)) = key
            .strip_prefix(COMPACTED_PREFIX)
            .and_then(|rest| rest.split_once('/'))
            && !keep.contains(&Some(folder))
            && !name.ends_with(BASE_SUFFIX)
        {
            store.remove(&key).map_err(|e| store_error(store, e))?;
        }
    }
    Ok(CompactionSummary {
        id,
        rows,
        parts: pointer.parts.len(),
        bytes,
        covered: files.len(),
        written: true,
        db_tables,
    })
}
