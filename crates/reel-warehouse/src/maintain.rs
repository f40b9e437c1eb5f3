//! Keeping a table fast and small, as the format does it: compaction (its rows rewritten
//! into large files, sorted, each holding one range of its key), checkpoints (the log's
//! state in one file, so opening stays flat as commits add up), and vacuum (files no
//! version within the retention reads, removed).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use arrow_array::{Array, Int64Array, RecordBatch};
use delta_kernel::arrow::compute::{SortColumn, lexsort_to_indices, take_record_batch};
use delta_kernel::committer::FileSystemCommitter;
use delta_kernel::engine::arrow_data::ArrowEngineData;
use delta_kernel::transaction::{CommitResult, UpdateTableOperation};

use crate::data_file::Compression;
use crate::table::{ENGINE_INFO, Table, TableVersion};
use crate::{Result, WarehouseError};

/// How [`Table::compact`] lays out a table's rows.
#[derive(Debug, Clone)]
pub struct Layout<'a> {
    /// Rows a file holds, about.
    pub file_rows: usize,
    /// Inside a file, rows sorted by these columns (filters on them skip row groups).
    pub sort_by: Vec<&'a str>,
    /// An integer or timestamp column whose values split the rows among the files (each
    /// file one range of it, the ranges of about equal rows): rows that are replaced
    /// together (an ingest batch's episodes, recorded together) lie in few files, which
    /// is what a commit replacing them rewrites. Without it, files follow the table's
    /// order.
    pub split_by: Option<&'a str>,
    /// How the files are compressed.
    pub compression: Compression,
}

/// What a compaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compacted {
    /// The table's version after it; `None` when the table was already compact.
    pub version: Option<u64>,
    pub files_before: usize,
    pub files_after: usize,
    pub rows: u64,
}

/// What a vacuum removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vacuumed {
    /// Data files (and the files named after them) no version within the retention reads.
    pub files: Vec<String>,
    /// Log entries older than the oldest version kept, past the newest checkpoint before it.
    pub log_entries: Vec<String>,
    /// The oldest version that stays readable.
    pub oldest_version: u64,
}

/// Whether a table's current files are the output of a compaction with `layout`.
const COMPACTED_BY: &str = "reel.compacted";

/// Set while a compaction runs (when it started): small-file merges wait for it.
const COMPACTING: &str = "reel.compacting";

/// How long a compaction's mark holds off small-file merges at most (one that crashed
/// leaves it behind).
const COMPACTING_HOLDS_MS: i64 = 6 * 3600 * 1000;

/// Times a compaction commits again after writers committed meanwhile.
const COMPACT_ATTEMPTS: usize = 50;

/// Files of fewer rows are merged by tiers after commits ([`Table::merge_small_files`]).
pub const SMALL_FILE_ROWS: u64 = 1 << 17;

/// Files a tier holds before they are merged into one, and the size ratio between tiers.
pub const TIER_FILES: usize = 8;

/// A file's tier by its rows: 0 for up to 7 rows, 1 up to 63, … (powers of [`TIER_FILES`]).
fn tier_of(rows: u64) -> u32 {
    let mut tier = 0;
    let mut bound = TIER_FILES as u64;
    while rows >= bound {
        tier += 1;
        bound = bound.saturating_mul(TIER_FILES as u64);
    }
    tier
}

impl Table {
    /// Rewrites the table's rows as files of `layout` in one commit that changes no data
    /// (every version reads the same rows; readers of older versions keep theirs), then
    /// writes a checkpoint. Reads one range of the key at a time: memory holds one output
    /// file's rows. Nothing is done when the current files are already such output.
    pub fn compact(&self, layout: &Layout<'_>) -> Result<Compacted> {
        let current = self.version(None)?;
        let files = current.files()?;
        let rows: u64 = files.iter().map(|f| f.rows.unwrap_or(0)).sum();
        let ranges = (rows as usize).div_ceil(layout.file_rows.max(1)).max(1);
        if files.len() <= ranges && self.compacted_files(&current)? == files.len() {
            return Ok(Compacted {
                version: None,
                files_before: files.len(),
                files_after: files.len(),
                rows,
            });
        }
        let schema = Arc::new(current.schema()?);
        let bloom = current.bloom_column();
        // Small-file merges stand aside while the compaction runs: each would remove
        // files the compaction is rewriting, and make it start over.
        self.set_domain(
            &current,
            COMPACTING,
            Some(serde_json::json!({ "started_ms": crate::data_file::now_ms() }).to_string()),
        )?;
        let compacted = self.compact_marked(layout, &schema, bloom.as_deref());
        if compacted.is_err() {
            // Merges may go on at once: the mark is removed (its age would release them
            // only hours later). The compaction's error is the one to report.
            let _ = self
                .version(None)
                .and_then(|latest| self.set_domain(&latest, COMPACTING, None));
        }
        compacted
    }

    /// [`Table::compact`] once its mark is set: rewrites the files of the version with the
    /// mark, and commits, removing the mark.
    fn compact_marked(
        &self,
        layout: &Layout<'_>,
        schema: &arrow_schema::SchemaRef,
        bloom: Option<&str>,
    ) -> Result<Compacted> {
        let engine = self.location.engine.as_ref();
        // The files as of the mark: any commit after it makes the compaction's commit
        // conflict, and is looked at then.
        let mut version = self.version(None)?;
        let files = version.files()?;
        let rows: u64 = files.iter().map(|f| f.rows.unwrap_or(0)).sum();
        let ranges = (rows as usize).div_ceil(layout.file_rows.max(1)).max(1);
        let txn = self.rewrite_transaction(&version)?;
        let context = txn
            .write_state()
            .and_then(|s| s.write_context_builder().build())
            .map_err(|e| self.error(e))?;
        let written = match layout.split_by {
            Some(column) if ranges > 1 => {
                let bounds = self.split_points(&files, column, ranges)?;
                self.write_ranges(&files, schema, layout, column, &bounds, &context, bloom)?
            }
            _ => self.write_in_order(&files, schema, layout, &context, bloom)?,
        };
        let compacted = serde_json::json!({
            "files": written.iter().map(|f| f.key.clone()).collect::<Vec<_>>(),
        })
        .to_string();
        let inputs: HashSet<String> = files.iter().map(|f| f.key.clone()).collect();
        let mut txn = Some(txn);
        let mut attempt = 0;
        let version = loop {
            let mut this = match txn.take() {
                Some(txn) => txn,
                None => self.rewrite_transaction(&version)?,
            };
            for file in &written {
                this.add_files(Box::new(ArrowEngineData::new(file.add.clone())));
            }
            for selected in self.select_files(&version, &inputs)? {
                this.remove_files(selected);
            }
            let this = this
                .with_domain_metadata(COMPACTED_BY.to_owned(), compacted.clone())
                .with_domain_metadata_removed(COMPACTING.to_owned());
            match this.commit(engine).map_err(|e| self.error(e))? {
                CommitResult::Committed(done) => break done.commit_version(),
                // Writers committed meanwhile. Files they added stay as they are; if one
                // removed a file the compaction read (a row replaced), the compaction's
                // files are stale: it is run again later (they are vacuumed).
                CommitResult::Conflicted(_) => {
                    attempt += 1;
                    version = self.version(None)?;
                    let present: HashSet<String> =
                        version.files()?.into_iter().map(|f| f.key).collect();
                    let schema_kept = version.schema()? == **schema;
                    if attempt >= COMPACT_ATTEMPTS
                        || !schema_kept
                        || !inputs.iter().all(|k| present.contains(k))
                    {
                        return Err(WarehouseError::Contended {
                            table: self.name().to_owned(),
                            attempts: attempt,
                        });
                    }
                }
                CommitResult::Retryable(retry) => return Err(self.error(retry.error)),
            }
        };
        self.checkpoint()?;
        Ok(Compacted {
            version: Some(version),
            files_before: files.len(),
            files_after: written.len(),
            rows,
        })
    }

    /// Merges small files by tiers, as a log-structured merge does: files of under
    /// [`SMALL_FILE_ROWS`] rows not written by a compaction fall in tiers by size (a factor
    /// of [`TIER_FILES`] apart); once a tier holds [`TIER_FILES`] files they become one file
    /// of the next tier, in a commit that changes no data. A table committed to in small
    /// batches thus holds a few dozen small files however many commits it takes, and each
    /// row is rewritten a few times at most before a compaction. Returns the version made,
    /// if any; a merge lost to another writer's commit is left to the next one.
    pub fn merge_small_files(&self) -> Result<Option<u64>> {
        self.merge_small_files_on(&self.version(None)?)
    }

    /// [`Table::merge_small_files`] on `current`, a version known to be the newest.
    pub(crate) fn merge_small_files_on(&self, current: &TableVersion) -> Result<Option<u64>> {
        if let Some(mark) = current.domain(COMPACTING)? {
            let started = serde_json::from_str::<serde_json::Value>(&mark)
                .ok()
                .and_then(|v| v.get("started_ms")?.as_i64())
                .unwrap_or(0);
            if crate::data_file::now_ms() - started < COMPACTING_HOLDS_MS {
                return Ok(None);
            }
        }
        let compacted = self.compacted_set(current)?;
        let files = current.files()?;
        let mut tiers: std::collections::BTreeMap<u32, Vec<&crate::TableFile>> =
            std::collections::BTreeMap::new();
        for file in &files {
            let Some(rows) = file.rows else { continue };
            if rows < SMALL_FILE_ROWS && !compacted.contains(&file.key) {
                tiers.entry(tier_of(rows)).or_default().push(file);
            }
        }
        let Some(merged) = tiers.into_values().find(|t| t.len() >= TIER_FILES) else {
            return Ok(None);
        };
        let schema = Arc::new(current.schema()?);
        let mut batches = Vec::with_capacity(merged.len());
        for file in &merged {
            batches.push(self.read_file_as(&file.key, None, &schema)?);
        }
        let rows = delta_kernel::arrow::compute::concat_batches(&schema, &batches)
            .map_err(|e| self.bad_file("", e.to_string()))?;
        let engine = self.location.engine.as_ref();
        let mut txn = self.rewrite_transaction(current)?;
        let context = txn
            .write_state()
            .and_then(|s| s.write_context_builder().build())
            .map_err(|e| self.error(e))?;
        // LZ4, as a commit writes them: merged files are merged again soon.
        let file = self.write_file(
            &rows,
            &context,
            Compression::Lz4,
            current.bloom_column().as_deref(),
        )?;
        txn.add_files(Box::new(ArrowEngineData::new(file.add)));
        let keys: HashSet<String> = merged.iter().map(|f| f.key.clone()).collect();
        for selected in self.select_files(current, &keys)? {
            txn.remove_files(selected);
        }
        match txn.commit(engine).map_err(|e| self.error(e))? {
            CommitResult::Committed(done) => Ok(Some(done.commit_version())),
            // Another writer committed first; its commit merges next (the file written
            // here is vacuumed).
            CommitResult::Conflicted(_) => Ok(None),
            CommitResult::Retryable(retry) => Err(self.error(retry.error)),
        }
    }

    /// Commits domain metadata `domain` alone (no data), on `version` or a newer one.
    /// A transaction on `version` that rewrites files without changing data (Delta's
    /// `OPTIMIZE`): what compaction and small-file merges commit.
    fn rewrite_transaction(
        &self,
        version: &TableVersion,
    ) -> Result<delta_kernel::transaction::Transaction> {
        version
            .snapshot()
            .clone()
            .update_table(UpdateTableOperation::Optimize, ENGINE_INFO, false)
            .build(
                self.location.engine.as_ref(),
                Box::new(FileSystemCommitter::new()),
            )
            .map_err(|e| self.error(e))
    }

    fn set_domain(
        &self,
        version: &TableVersion,
        domain: &str,
        configuration: Option<String>,
    ) -> Result<u64> {
        let engine = self.location.engine.as_ref();
        let mut version = version.clone();
        for _ in 0..COMPACT_ATTEMPTS {
            let builder = version.snapshot().clone().update_table(
                UpdateTableOperation::Write,
                ENGINE_INFO,
                false,
            );
            let builder = match &configuration {
                Some(configuration) => builder.with_domain_metadata(domain, configuration.clone()),
                None => builder.with_domain_metadata_removed(domain),
            };
            let txn = builder
                .build(engine, Box::new(FileSystemCommitter::new()))
                .map_err(|e| self.error(e))?;
            match txn.commit(engine).map_err(|e| self.error(e))? {
                CommitResult::Committed(done) => return Ok(done.commit_version()),
                CommitResult::Conflicted(_) => version = self.version(None)?,
                CommitResult::Retryable(retry) => return Err(self.error(retry.error)),
            }
        }
        Err(WarehouseError::Contended {
            table: self.name().to_owned(),
            attempts: COMPACT_ATTEMPTS,
        })
    }

    /// Values of `column` that split the rows of `files` into `ranges` ranges of about
    /// equal rows: quantiles of a sample of at most about 2^20 of its values.
    fn split_points(
        &self,
        files: &[crate::TableFile],
        column: &str,
        ranges: usize,
    ) -> Result<Vec<i64>> {
        let rows: u64 = files.iter().map(|f| f.rows.unwrap_or(0)).sum();
        let step = (rows >> 20).max(1) as usize;
        let mut sample = Vec::new();
        for file in files {
            let values = self.read_file(&file.key, Some(&[column]))?;
            let values =
                int_values(&values, column).map_err(|reason| self.bad_file(&file.key, reason))?;
            sample.extend(values.iter().step_by(step).flatten());
        }
        sample.sort_unstable();
        if sample.is_empty() {
            return Ok(Vec::new());
        }
        let mut points: Vec<i64> = (1..ranges)
            .map(|i| sample[sample.len() * i / ranges])
            .collect();
        points.dedup();
        Ok(points)
    }

    /// Writes the rows of `files` as one file per range of `column` between `bounds`
    /// (each sorted by the layout's columns), reading each file once: its rows go to
    /// their range's spill file (local) first.
    #[allow(clippy::too_many_arguments)]
    fn write_ranges(
        &self,
        files: &[crate::TableFile],
        schema: &arrow_schema::SchemaRef,
        layout: &Layout<'_>,
        column: &str,
        bounds: &[i64],
        context: &delta_kernel::transaction::BoundWriteContext,
        bloom: Option<&str>,
    ) -> Result<Vec<crate::data_file::WrittenFile>> {
        let folder = tempfile::tempdir().map_err(|source| reel_io::Error::Io {
            name: "a temporary folder for compaction".into(),
            source,
        })?;
        let mut spills: Vec<Option<Spill>> = (0..=bounds.len()).map(|_| None).collect();
        for file in files {
            let batch = self.read_file_as(&file.key, None, schema)?;
            let ranges = range_of_rows(&batch, column, bounds)
                .map_err(|reason| self.bad_file(&file.key, reason))?;
            for (range, slot) in spills.iter_mut().enumerate() {
                let keep: Vec<bool> = ranges.iter().map(|&r| r == range).collect();
                if !keep.contains(&true) {
                    continue;
                }
                let part = delta_kernel::arrow::compute::filter_record_batch(
                    &batch,
                    &arrow_array::BooleanArray::from(keep),
                )
                .map_err(|e| self.bad_file(&file.key, e.to_string()))?;
                let spill = match slot {
                    Some(spill) => spill,
                    None => slot.insert(
                        Spill::create(&folder.path().join(format!("{range}.parquet")), schema)
                            .map_err(|reason| self.bad_file("", reason))?,
                    ),
                };
                spill
                    .write(&part)
                    .map_err(|reason| self.bad_file("", reason))?;
            }
        }
        let mut written = Vec::new();
        for slot in spills.into_iter().flatten() {
            let rows = slot.finish().map_err(|reason| self.bad_file("", reason))?;
            let rows = sort(&rows, &layout.sort_by).map_err(|reason| self.bad_file("", reason))?;
            written.push(self.write_file(&rows, context, layout.compression, bloom)?);
        }
        Ok(written)
    }

    /// Writes the rows of `files` in the table's order as files of the layout's rows, each
    /// sorted by its columns.
    fn write_in_order(
        &self,
        files: &[crate::TableFile],
        schema: &arrow_schema::SchemaRef,
        layout: &Layout<'_>,
        context: &delta_kernel::transaction::BoundWriteContext,
        bloom: Option<&str>,
    ) -> Result<Vec<crate::data_file::WrittenFile>> {
        let mut written = Vec::new();
        let mut pending: Vec<RecordBatch> = Vec::new();
        let mut pending_rows = 0;
        let flush = |pending: &mut Vec<RecordBatch>, written: &mut Vec<_>| -> Result<()> {
            if pending.is_empty() {
                return Ok(());
            }
            let rows = delta_kernel::arrow::compute::concat_batches(schema, pending.iter())
                .map_err(|e| self.bad_file("", e.to_string()))?;
            pending.clear();
            let rows = sort(&rows, &layout.sort_by).map_err(|reason| self.bad_file("", reason))?;
            written.push(self.write_file(&rows, context, layout.compression, bloom)?);
            Ok(())
        };
        for file in files {
            let batch = self.read_file_as(&file.key, None, schema)?;
            pending_rows += batch.num_rows();
            pending.push(batch);
            if pending_rows >= layout.file_rows {
                flush(&mut pending, &mut written)?;
                pending_rows = 0;
            }
        }
        flush(&mut pending, &mut written)?;
        Ok(written)
    }

    /// The files of `version` the last compaction wrote.
    fn compacted_set(&self, version: &TableVersion) -> Result<HashSet<String>> {
        let engine = self.location.engine.as_ref();
        let Some(text) = version
            .snapshot()
            .get_domain_metadata(COMPACTED_BY, engine)
            .map_err(|e| self.error(e))?
        else {
            return Ok(HashSet::new());
        };
        Ok(serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| {
                v.get("files")?.as_array().map(|a| {
                    a.iter()
                        .filter_map(|f| f.as_str().map(str::to_owned))
                        .collect()
                })
            })
            .unwrap_or_default())
    }

    /// How many of `version`'s files the last compaction wrote.
    fn compacted_files(&self, version: &TableVersion) -> Result<usize> {
        let written = self.compacted_set(version)?;
        Ok(version
            .files()?
            .iter()
            .filter(|f| written.contains(&f.key))
            .count())
    }

    /// Writes a checkpoint of the latest version (the log's state in one Parquet file and
    /// `_last_checkpoint`), unless it has one. Returns the version checkpointed.
    pub fn checkpoint(&self) -> Result<u64> {
        let current = self.version(None)?;
        let engine = self.location.engine.as_ref();
        current
            .snapshot()
            .checkpoint(engine, None)
            .map_err(|e| self.error(e))?;
        Ok(current.number())
    }

    /// Removes the files no version committed within `retention` of `now_ms` reads (nor
    /// the current one), and log entries older than the oldest version kept except what
    /// opening it needs. A file written within the retention is kept whether or not a
    /// commit names it: a writer may be about to commit it.
    pub fn vacuum(&self, retention: Duration, now_ms: i64) -> Result<Vacuumed> {
        let current = self.version(None)?;
        let cutoff =
            now_ms.saturating_sub(i64::try_from(retention.as_millis()).unwrap_or(i64::MAX));
        let oldest = self.oldest_version_after(&current, cutoff)?;
        // Files read by the oldest version kept, and every file added since.
        let mut needed: HashSet<String> = self
            .version(Some(oldest))?
            .files()?
            .into_iter()
            .map(|f| f.key)
            .collect();
        let log = format!("{}_delta_log/", self.prefix());
        for version in oldest + 1..=current.number() {
            let key = format!("{log}{version:020}.json");
            let text = self.location.store.read(&key)?;
            for line in String::from_utf8_lossy(&text).lines() {
                let Ok(action) = serde_json::from_str::<serde_json::Value>(line) else {
                    continue;
                };
                if let Some(path) = action.pointer("/add/path").and_then(|p| p.as_str()) {
                    needed.insert(format!(
                        "{}{}",
                        self.prefix(),
                        crate::table::percent_decode(path)
                    ));
                }
            }
        }
        let store = &self.location.store;
        let mut removed = Vacuumed {
            oldest_version: oldest,
            ..Vacuumed::default()
        };
        for (key, _) in store.list_recursive_sized(&self.prefix())? {
            if key.starts_with(&log) {
                continue;
            }
            // A file named after a data file (`<file>.parquet.<suffix>`) follows it.
            let data = match key.find(".parquet") {
                Some(end) => &key[..end + ".parquet".len()],
                None => key.as_str(),
            };
            if needed.contains(data) {
                continue;
            }
            if store.modified_ms(&key)?.is_some_and(|m| m >= cutoff) {
                continue;
            }
            store.remove(&key)?;
            removed.files.push(key);
        }
        removed.log_entries = self.clean_log(oldest)?;
        Ok(removed)
    }

    /// The oldest version to keep readable: the newest version committed before
    /// `cutoff_ms` (it was current then, and readers may have opened it), or, where every
    /// version still in the log is younger, the oldest of them. Versions are committed in
    /// time order, so a binary search finds it opening a few dozen versions, however long
    /// the log.
    fn oldest_version_after(&self, current: &TableVersion, cutoff_ms: i64) -> Result<u64> {
        // Whether version `v` is gone from the log or was committed before the cutoff:
        // true up to some version, false after it.
        let before = |v: u64| -> Result<bool> {
            if v == current.number() {
                return Ok(current.timestamp_ms()? < cutoff_ms);
            }
            match self.version(Some(v)) {
                Ok(version) => Ok(version.timestamp_ms()? < cutoff_ms),
                Err(WarehouseError::NoVersion { .. }) => Ok(true),
                Err(e) => Err(e),
            }
        };
        if !before(0)? {
            return Ok(0);
        }
        // `before(low)` holds; find the last version where it does.
        let (mut low, mut high) = (0, current.number() + 1);
        while high - low > 1 {
            let mid = low + (high - low) / 2;
            if before(mid)? {
                low = mid;
            } else {
                high = mid;
            }
        }
        match self.version(Some(low)) {
            Ok(_) => Ok(low),
            // Gone from the log: every version kept is younger than the cutoff.
            Err(WarehouseError::NoVersion { .. }) => Ok(low + 1),
            Err(e) => Err(e),
        }
    }

    /// Removes commit and checkpoint files of versions before the newest checkpoint at or
    /// before `oldest` (opening `oldest` starts from that checkpoint).
    fn clean_log(&self, oldest: u64) -> Result<Vec<String>> {
        let log = format!("{}_delta_log/", self.prefix());
        let store = &self.location.store;
        let entries = store.list(&log)?;
        let version_of = |key: &str| -> Option<u64> {
            let name = key.strip_prefix(&log)?;
            name.get(..20)?.parse().ok()
        };
        let checkpoint = entries
            .iter()
            .filter(|k| k.contains(".checkpoint"))
            .filter_map(|k| version_of(k))
            .filter(|&v| v <= oldest)
            .max();
        let Some(checkpoint) = checkpoint else {
            return Ok(Vec::new());
        };
        let mut removed = Vec::new();
        for key in entries {
            if version_of(&key).is_some_and(|v| v < checkpoint) {
                store.remove(&key)?;
                removed.push(key);
            }
        }
        Ok(removed)
    }

    fn bad_file(&self, key: &str, reason: impl Into<String>) -> WarehouseError {
        WarehouseError::BadFile {
            table: self.name().to_owned(),
            file: key.to_owned(),
            reason: reason.into(),
        }
    }
}

/// Rows a compaction's spill writes out at a time.
const SPILL_ROW_GROUP_ROWS: usize = 1 << 16;

/// One range's rows on local disk while a compaction reads the table.
struct Spill {
    path: std::path::PathBuf,
    writer: parquet::arrow::ArrowWriter<std::fs::File>,
}

impl Spill {
    fn create(
        path: &std::path::Path,
        schema: &arrow_schema::SchemaRef,
    ) -> std::result::Result<Self, String> {
        let file = std::fs::File::create(path).map_err(|e| e.to_string())?;
        // Small row groups, uncompressed: a range's rows go to disk as they come, not held
        // until the spill is read back.
        let properties = parquet::file::properties::WriterProperties::builder()
            .set_max_row_group_row_count(Some(SPILL_ROW_GROUP_ROWS))
            .build();
        let writer = parquet::arrow::ArrowWriter::try_new(file, schema.clone(), Some(properties))
            .map_err(|e| e.to_string())?;
        Ok(Self {
            path: path.to_owned(),
            writer,
        })
    }

    fn write(&mut self, rows: &RecordBatch) -> std::result::Result<(), String> {
        self.writer.write(rows).map_err(|e| e.to_string())
    }

    /// The range's rows, as one batch.
    fn finish(self) -> std::result::Result<RecordBatch, String> {
        self.writer.close().map_err(|e| e.to_string())?;
        let bytes = std::fs::read(&self.path).map_err(|e| e.to_string())?;
        crate::data_file::decode(bytes::Bytes::from(bytes), None)
    }
}

/// An integer or timestamp column's values as 64-bit integers (null where null).
fn int_values(batch: &RecordBatch, column: &str) -> std::result::Result<Vec<Option<i64>>, String> {
    let array = batch
        .column_by_name(column)
        .ok_or_else(|| format!("no column {column}"))?;
    let array = delta_kernel::arrow::compute::cast(array, &arrow_schema::DataType::Int64)
        .map_err(|e| format!("column {column}: {e}"))?;
    let values = array
        .as_any()
        .downcast_ref::<Int64Array>()
        .ok_or_else(|| format!("column {column} is not an integer"))?;
    Ok((0..values.len())
        .map(|i| (!values.is_null(i)).then(|| values.value(i)))
        .collect())
}

/// Each row's range among `bounds` by its `column` (a row without a value goes with the
/// first).
fn range_of_rows(
    batch: &RecordBatch,
    column: &str,
    bounds: &[i64],
) -> std::result::Result<Vec<usize>, String> {
    Ok(int_values(batch, column)?
        .into_iter()
        .map(|v| v.map_or(0, |v| bounds.partition_point(|&b| b <= v)))
        .collect())
}

/// `batch` sorted by `columns`, ascending, nulls first.
fn sort(batch: &RecordBatch, columns: &[&str]) -> std::result::Result<RecordBatch, String> {
    if columns.is_empty() {
        return Ok(batch.clone());
    }
    let sort_columns = columns
        .iter()
        .map(|c| {
            Ok(SortColumn {
                values: batch
                    .column_by_name(c)
                    .cloned()
                    .ok_or_else(|| format!("no column {c} to sort by"))?,
                options: None,
            })
        })
        .collect::<std::result::Result<Vec<_>, String>>()?;
    let indices = lexsort_to_indices(&sort_columns, None).map_err(|e| e.to_string())?;
    take_record_batch(batch, &indices).map_err(|e| e.to_string())
}
