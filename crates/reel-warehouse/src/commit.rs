//! Commits to a table: rows added, rows replaced or deleted by key (copy-on-write: a file
//! holding a replaced row is rewritten without it, so every reader sees one row per key
//! with no reader-side rule), idempotent by application id, and retried from the newest
//! version when another writer commits first.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use arrow_array::{Array, BooleanArray, RecordBatch, StringArray};
use arrow_schema::SchemaRef;
use delta_kernel::FilteredEngineData;
use delta_kernel::arrow::compute::{concat_batches, filter_record_batch};
use delta_kernel::arrow::row::{OwnedRow, RowConverter, SortField};
use delta_kernel::committer::FileSystemCommitter;
use delta_kernel::engine::arrow_data::ArrowEngineData;
use delta_kernel::expressions::{Expression, Predicate, Scalar};
use delta_kernel::transaction::{CommitResult, UpdateTableOperation};

use crate::data_file::{Compression, ProbeValue, WrittenFile};
use crate::table::{ENGINE_INFO, Table, TableVersion, percent_decode};
use crate::{Result, WarehouseError};

/// What one commit does to a table. Rows carry the table's columns (its Arrow schema).
#[derive(Debug, Clone, Default)]
pub struct Change<'a> {
    /// The writer and how far it has come: a commit is made once per (application,
    /// version). When the table already records this application at this version or a
    /// later one, nothing is committed ([`Committed::already`]).
    pub app: Option<(&'a str, i64)>,
    /// Rows to add, one key each (when `key` is set).
    pub add: Vec<RecordBatch>,
    /// Columns that identify a row. An added row replaces the table's row of the same
    /// key; an empty key adds rows as they are.
    pub key: Vec<&'a str>,
    /// Of an added row and the table's row of the same key, the one whose value in this
    /// column is larger stays (the added row on a tie); without it the added row does.
    pub newest: Option<&'a str>,
    /// Rows of the key columns whose rows are removed.
    pub delete: Option<RecordBatch>,
    /// Every row of the table is removed first.
    pub truncate: bool,
    /// Recorded in the commit's `commitInfo` as its operation.
    pub operation: Operation,
    /// Delta domain metadata recorded with the commit (domain, configuration): what a
    /// writer keeps of its progress, atomically with the rows it covers.
    pub domain: Option<(&'a str, String)>,
}

/// The operation a commit records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Operation {
    #[default]
    Write,
    Merge,
    Delete,
}

/// What a commit did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// The table's version after it (the version that already had it, if `already`).
    pub version: u64,
    /// The application had committed this change before: nothing was done.
    pub already: bool,
    pub rows_added: u64,
    pub rows_removed: u64,
    /// Added rows left out because the table held a newer row of the same key.
    pub rows_older: u64,
    /// Files written without a replaced or deleted row.
    pub files_rewritten: usize,
    /// Attempts lost to other writers before this one.
    pub conflicts: usize,
    /// The upkeep after the commit (merging small files, a checkpoint) failed, and why:
    /// the commit stands, and a later commit's upkeep does the work.
    pub upkeep_failed: Option<String>,
}

/// Commits between checkpoints, where a table does not say (Delta's own default).
pub const CHECKPOINT_INTERVAL: u64 = 10;

/// Attempts at one commit before other writers are said to hold the table.
const ATTEMPTS: usize = 200;
/// Keys past which candidate files are not narrowed by their statistics.
const SKIPPING_KEYS: usize = 4096;

impl Table {
    /// Commits `change`: its rows and removals in one atomic commit, or nothing.
    pub fn commit(&self, change: &Change<'_>) -> Result<Committed> {
        let add = match change.add.as_slice() {
            [] => None,
            batches => {
                Some(concat_batches(&batches[0].schema(), batches).map_err(|e| self.bad_rows(e))?)
            }
        };
        let keys = Keys::new(self, change, add.as_ref())?;
        let mut written: Option<(Vec<bool>, WrittenFile)> = None;
        for attempt in 0..ATTEMPTS {
            let version = self.version(None)?;
            if let Some((app, v)) = change.app
                && version.app_version(app)?.is_some_and(|done| done >= v)
            {
                return Ok(Committed {
                    version: version.number(),
                    already: true,
                    rows_added: 0,
                    rows_removed: 0,
                    rows_older: 0,
                    files_rewritten: 0,
                    conflicts: attempt,
                    upkeep_failed: None,
                });
            }
            let plan = keys.plan(self, &version, change.truncate)?;
            let bloom = version.bloom_column();
            let operation = match change.operation {
                Operation::Write => UpdateTableOperation::Write,
                Operation::Merge => UpdateTableOperation::Merge,
                Operation::Delete => UpdateTableOperation::Delete,
            };
            let mut builder = version
                .snapshot()
                .clone()
                .update_table(operation, ENGINE_INFO, true);
            if let Some((app, v)) = change.app {
                builder = builder.with_transaction_id(app.to_owned(), v);
            }
            if let Some((domain, configuration)) = &change.domain {
                builder = builder.with_domain_metadata((*domain).to_owned(), configuration.clone());
            }
            let engine = self.location.engine.as_ref();
            let mut txn = builder
                .build(engine, Box::new(FileSystemCommitter::new()))
                .map_err(|e| self.error(e))?;
            let context = txn
                .write_state()
                .and_then(|s| s.write_context_builder().build())
                .map_err(|e| self.error(e))?;
            // The added rows this attempt keeps, written once for every attempt that
            // keeps the same ones.
            let mut rows_added = 0;
            if let Some(rows) = &add {
                let same = written
                    .as_ref()
                    .is_some_and(|(kept, _)| *kept == plan.keep_added);
                if !same {
                    let kept = filter(rows, &plan.keep_added).map_err(|e| self.bad_rows(e))?;
                    // LZ4: Parquet makes a ZSTD chunk's two codec contexts for every
                    // column chunk it reads or writes, which outweighs a small file's
                    // pages (a tenth of a commit's CPU with ZSTD).
                    written = match kept.num_rows() {
                        0 => None,
                        _ => Some((
                            plan.keep_added.clone(),
                            self.write_file(&kept, &context, Compression::Lz4, bloom.as_deref())?,
                        )),
                    };
                }
                if let Some((_, file)) = &written {
                    txn.add_files(Box::new(ArrowEngineData::new(file.add.clone())));
                    rows_added = file.rows as u64;
                }
            }
            let mut removed_rows = 0u64;
            for rewrite in &plan.rewrites {
                removed_rows += rewrite.removed as u64;
                if let Some(gone) = &rewrite.gone
                    && let Some(file) = self.rewrite_without(
                        &rewrite.key,
                        gone,
                        &plan.schema,
                        &context,
                        bloom.as_deref(),
                    )?
                {
                    txn.add_files(Box::new(ArrowEngineData::new(file.add)));
                }
            }
            let removed: HashSet<String> = plan.rewrites.iter().map(|r| r.key.clone()).collect();
            if !removed.is_empty() {
                for selected in self.select_files(&version, &removed)? {
                    txn.remove_files(selected);
                }
            }
            if rows_added == 0
                && removed.is_empty()
                && change.app.is_none()
                && change.domain.is_none()
            {
                return Ok(Committed {
                    version: version.number(),
                    already: false,
                    rows_added: 0,
                    rows_removed: 0,
                    rows_older: plan.older,
                    files_rewritten: 0,
                    conflicts: attempt,
                    upkeep_failed: None,
                });
            }
            match txn.commit(engine).map_err(|e| self.error(e))? {
                CommitResult::Committed(done) => {
                    // Small files are merged as they come, so that the files a commit
                    // probes and a reader opens stay few however many commits come.
                    // The commit has landed: upkeep that fails is reported, not an error
                    // (a caller retrying would commit the rows again).
                    let mut upkeep_failed = None;
                    // The commit's own snapshot: the merge needs no second read of the log.
                    let after = match done.post_commit_snapshot() {
                        Some(snapshot) => TableVersion {
                            table: self.clone(),
                            snapshot: snapshot.clone(),
                        },
                        None => self.version(None)?,
                    };
                    let merged = match rows_added > 0 || !removed.is_empty() {
                        true => match self.merge_small_files_on(&after) {
                            Ok(merge) => merge.is_some() as u64,
                            Err(e) => {
                                upkeep_failed = Some(e.to_string());
                                0
                            }
                        },
                        false => 0,
                    };
                    let since = done.post_commit_stats().commits_since_checkpoint + merged;
                    if let Err(e) = self.checkpoint_if_due(&version, since) {
                        upkeep_failed.get_or_insert(e.to_string());
                    }
                    return Ok(Committed {
                        version: done.commit_version(),
                        already: false,
                        rows_added,
                        rows_removed: removed_rows,
                        rows_older: plan.older,
                        files_rewritten: plan.rewrites.len(),
                        conflicts: attempt,
                        upkeep_failed,
                    });
                }
                // Another writer took the version: start again from the newest one.
                CommitResult::Conflicted(_) => {
                    std::thread::sleep(backoff(attempt));
                }
                CommitResult::Retryable(retry) => return Err(self.error(retry.error)),
            }
        }
        Err(WarehouseError::Contended {
            table: self.name().to_owned(),
            attempts: ATTEMPTS,
        })
    }

    /// Writes a checkpoint once `delta.checkpointInterval` commits (default
    /// [`CHECKPOINT_INTERVAL`]) came since the last: opening the table then reads one
    /// checkpoint and fewer than that many commits, however many it has.
    fn checkpoint_if_due(&self, before: &TableVersion, since_checkpoint: u64) -> Result<()> {
        let interval = before
            .snapshot()
            .table_properties()
            .checkpoint_interval
            .map_or(CHECKPOINT_INTERVAL, |n| n.get());
        if since_checkpoint >= interval {
            self.checkpoint()?;
        }
        Ok(())
    }

    /// The scan rows of `version` for the files whose keys are in `keys`, selected for
    /// removal.
    pub(crate) fn select_files(
        &self,
        version: &TableVersion,
        keys: &HashSet<String>,
    ) -> Result<Vec<FilteredEngineData>> {
        let engine = self.location.engine.as_ref();
        let prefix = self.prefix();
        let scan = version
            .snapshot()
            .clone()
            .scan_builder()
            .build()
            .map_err(|e| self.error(e))?;
        let mut selected = Vec::new();
        for metadata in scan.scan_metadata(engine).map_err(|e| self.error(e))? {
            let (data, selection) = metadata.map_err(|e| self.error(e))?.scan_files.into_parts();
            let data = ArrowEngineData::try_from_engine_data(data).map_err(|e| self.error(e))?;
            let batch = data.record_batch();
            let paths = batch
                .column_by_name("path")
                .and_then(|c| c.as_any().downcast_ref::<StringArray>())
                .ok_or_else(|| WarehouseError::BadRows {
                    table: self.name().to_owned(),
                    reason: "the kernel's scan rows have no path column".into(),
                })?;
            let chosen: Vec<bool> = (0..batch.num_rows())
                .map(|i| {
                    // Rows past the selection vector are selected.
                    selection.get(i).copied().unwrap_or(true)
                        && !paths.is_null(i)
                        && keys.contains(&format!("{prefix}{}", percent_decode(paths.value(i))))
                })
                .collect();
            if chosen.iter().any(|&c| c) {
                let data =
                    ArrowEngineData::new(without_stats(batch).map_err(|e| self.bad_rows(e))?);
                selected.push(
                    FilteredEngineData::try_new(Box::new(data), chosen)
                        .map_err(|e| self.error(e))?,
                );
            }
        }
        Ok(selected)
    }

    fn bad_rows(&self, error: impl std::fmt::Display) -> WarehouseError {
        WarehouseError::BadRows {
            table: self.name().to_owned(),
            reason: error.to_string(),
        }
    }
}

/// Scan rows with their `stats` null, so the `remove` actions made of them carry none.
/// A removed file's statistics serve no reader (the protocol makes them optional), and a
/// tombstone stays in every checkpoint for `delta.deletedFileRetentionDuration`: with its
/// statistics it is ten times the size.
fn without_stats(
    batch: &RecordBatch,
) -> std::result::Result<RecordBatch, arrow_schema::ArrowError> {
    let schema = batch.schema();
    let columns = schema
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(field, column)| match field.name().as_str() {
            "stats" => arrow_array::new_null_array(field.data_type(), batch.num_rows()),
            _ => column.clone(),
        })
        .collect();
    RecordBatch::try_new(schema, columns)
}

/// A short, growing, jittered wait before trying again against other writers.
fn backoff(attempt: usize) -> Duration {
    let jitter = (std::process::id() as u64 ^ (attempt as u64).wrapping_mul(0x9e37_79b9)) % 20;
    Duration::from_millis((5 * attempt.min(20) as u64) + jitter)
}

/// The keys a commit adds and deletes, and how to compare them with the table's rows.
struct Keys<'a> {
    columns: Vec<&'a str>,
    newest: Option<&'a str>,
    converter: Option<RowConverter>,
    /// Added rows' keys, by key, with their index and `newest` value.
    added: HashMap<OwnedRow, (usize, Option<i64>)>,
    deleted: HashSet<OwnedRow>,
    added_rows: usize,
    /// Data skipping on the first key column, where it is a string or an integer.
    skipping: Option<Arc<Predicate>>,
    /// The first key column's values, added and deleted, where it is a string or an
    /// integer: what a file's Bloom filter is probed for.
    probe: Vec<ProbeValue>,
}

/// What one attempt removes and keeps, decided on one version of the table.
struct Plan {
    /// Per added row: whether it is added (no newer row of its key in the table).
    keep_added: Vec<bool>,
    older: u64,
    rewrites: Vec<Rewrite>,
    /// The table's columns in that version.
    schema: SchemaRef,
}

/// A file holding replaced or deleted rows: its key, and the places of the rows it loses
/// (ascending), or `None` where it loses every row.
struct Rewrite {
    key: String,
    gone: Option<Vec<usize>>,
    removed: usize,
}

impl<'a> Keys<'a> {
    fn new(table: &Table, change: &Change<'a>, add: Option<&RecordBatch>) -> Result<Self> {
        let added_rows = add.map_or(0, |a| a.num_rows());
        let mut keys = Self {
            columns: change.key.clone(),
            newest: change.newest,
            converter: None,
            added: HashMap::new(),
            deleted: HashSet::new(),
            added_rows,
            skipping: None,
            probe: Vec::new(),
        };
        if change.key.is_empty() {
            if change.delete.is_some() {
                return Err(table.bad_rows("rows to delete need key columns"));
            }
            return Ok(keys);
        }
        // Nothing to add or delete (a commit of a position alone): no key to look for.
        let Some(sample) = add.or(change.delete.as_ref()) else {
            return Ok(keys);
        };
        let fields = change
            .key
            .iter()
            .map(|c| {
                sample
                    .schema()
                    .field_with_name(c)
                    .map(|f| SortField::new(f.data_type().clone()))
                    .map_err(|e| table.bad_rows(e))
            })
            .collect::<Result<Vec<_>>>()?;
        let converter = RowConverter::new(fields).map_err(|e| table.bad_rows(e))?;
        let mut probe: Vec<ProbeValue> = Vec::new();
        if let Some(add) = add {
            let rows = key_rows(&converter, add, &change.key).map_err(|e| table.bad_rows(e))?;
            let newest = match change.newest {
                Some(column) => Some(int_column(add, column).map_err(|e| table.bad_rows(e))?),
                None => None,
            };
            for (i, row) in rows.iter().enumerate() {
                let value = newest.as_ref().map(|v| v[i]);
                if keys.added.insert(row.owned(), (i, value)).is_some() {
                    return Err(table.bad_rows(format!(
                        "two added rows have one key ({})",
                        change.key.join(", ")
                    )));
                }
            }
            probe.extend(probe_values(add, change.key[0]));
        }
        if let Some(delete) = &change.delete {
            let rows = key_rows(&converter, delete, &change.key).map_err(|e| table.bad_rows(e))?;
            keys.deleted.extend(rows.iter().map(|r| r.owned()));
            probe.extend(probe_values(delete, change.key[0]));
        }
        if !probe.is_empty() && probe.len() <= SKIPPING_KEYS {
            let column = Expression::column([change.key[0]]);
            keys.skipping = Some(Arc::new(Predicate::or_from(probe.iter().map(|value| {
                let literal = match value {
                    ProbeValue::Long(v) => Scalar::Long(*v),
                    ProbeValue::Text(v) => Scalar::String(v.clone()),
                };
                Predicate::eq(column.clone(), Expression::literal(literal))
            }))));
        }
        keys.probe = probe;
        keys.converter = Some(converter);
        Ok(keys)
    }

    /// Decides, on `version`, which added rows stay and which files are rewritten.
    fn plan(&self, table: &Table, version: &TableVersion, truncate: bool) -> Result<Plan> {
        let mut plan = Plan {
            keep_added: vec![true; self.added_rows],
            older: 0,
            rewrites: Vec::new(),
            schema: Arc::new(version.schema()?),
        };
        if truncate {
            for file in version.files()? {
                plan.rewrites.push(Rewrite {
                    key: file.key,
                    gone: None,
                    removed: file.rows.unwrap_or(0) as usize,
                });
            }
            return Ok(plan);
        }
        let Some(converter) = &self.converter else {
            return Ok(plan);
        };
        // Files carrying a Bloom filter of the first key column are probed before they
        // are read: most files a commit's keys fall in (by their statistics) hold none.
        let bloom = version
            .bloom_column()
            .filter(|column| column == self.columns[0] && !self.probe.is_empty());
        let mut read: Vec<&str> = self.columns.clone();
        if let Some(newest) = self.newest {
            read.push(newest);
        }
        for (file, size) in self.candidates(table, version)? {
            let probe = bloom
                .as_deref()
                .map(|column| (column, self.probe.as_slice()));
            let Some(stored) = table.probe_keys(&file, size, &read, probe)? else {
                continue;
            };
            let places = stored.places;
            let stored = stored.rows;
            let rows =
                key_rows(converter, &stored, &self.columns).map_err(|e| table.bad_rows(e))?;
            let newest = match self.newest {
                Some(column) => Some(int_column(&stored, column).map_err(|e| table.bad_rows(e))?),
                None => None,
            };
            // Places in the file of the rows it loses.
            let mut gone = Vec::new();
            for (i, row) in rows.iter().enumerate() {
                let row = row.owned();
                if self.deleted.contains(&row) {
                    gone.push(places[i]);
                } else if let Some(&(added, value)) = self.added.get(&row) {
                    let theirs = newest.as_ref().map(|v| v[i]);
                    if let (Some(ours), Some(theirs)) = (value, theirs)
                        && theirs > ours
                    {
                        // A newer row of this key is there: ours is not added.
                        plan.keep_added[added] = false;
                        plan.older += 1;
                    } else {
                        gone.push(places[i]);
                    }
                }
            }
            let removed = gone.len();
            if removed > 0 {
                plan.rewrites.push(Rewrite {
                    key: file,
                    gone: Some(gone),
                    removed,
                });
            }
        }
        Ok(plan)
    }

    /// The files of `version` that may hold a key of the change: all of them, narrowed by
    /// their statistics on the first key column where that can be done.
    fn candidates(&self, table: &Table, version: &TableVersion) -> Result<Vec<(String, u64)>> {
        let Some(predicate) = &self.skipping else {
            return Ok(version
                .files()?
                .into_iter()
                .map(|f| (f.key, f.size))
                .collect());
        };
        let engine = table.location.engine.as_ref();
        let scan = version
            .snapshot()
            .clone()
            .scan_builder()
            .with_predicate(predicate.clone())
            .build()
            .map_err(|e| table.error(e))?;
        let mut paths: Vec<(String, u64)> = Vec::new();
        for metadata in scan.scan_metadata(engine).map_err(|e| table.error(e))? {
            let metadata = metadata.map_err(|e| table.error(e))?;
            paths = metadata
                .visit_scan_files(paths, |paths: &mut Vec<(String, u64)>, file| {
                    paths.push((file.path, file.size.max(0) as u64))
                })
                .map_err(|e| table.error(e))?;
        }
        let prefix = table.prefix();
        Ok(paths
            .into_iter()
            .map(|(p, size)| (format!("{prefix}{}", percent_decode(&p)), size))
            .collect())
    }
}

/// The rows of `batch`'s `columns`, comparable as keys.
fn key_rows(
    converter: &RowConverter,
    batch: &RecordBatch,
    columns: &[&str],
) -> std::result::Result<delta_kernel::arrow::row::Rows, String> {
    let arrays = columns
        .iter()
        .map(|c| {
            batch
                .column_by_name(c)
                .cloned()
                .ok_or_else(|| format!("no key column {c}"))
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    converter
        .convert_columns(&arrays)
        .map_err(|e| e.to_string())
}

/// An integer column's values (nulls as `i64::MIN`: older than any).
fn int_column(batch: &RecordBatch, column: &str) -> std::result::Result<Vec<i64>, String> {
    let array = batch
        .column_by_name(column)
        .ok_or_else(|| format!("no column {column}"))?;
    let array = delta_kernel::arrow::compute::cast(array, &arrow_schema::DataType::Int64)
        .map_err(|e| e.to_string())?;
    let values = array
        .as_any()
        .downcast_ref::<arrow_array::Int64Array>()
        .ok_or_else(|| format!("column {column} is not an integer"))?;
    Ok((0..values.len())
        .map(|i| {
            if values.is_null(i) {
                i64::MIN
            } else {
                values.value(i)
            }
        })
        .collect())
}

/// The values of `column`, where it is a string or a 64-bit integer column.
fn probe_values(batch: &RecordBatch, column: &str) -> Vec<ProbeValue> {
    let Some(array) = batch.column_by_name(column) else {
        return Vec::new();
    };
    if let Some(s) = array.as_any().downcast_ref::<StringArray>() {
        return (0..s.len())
            .filter(|&i| !s.is_null(i))
            .map(|i| ProbeValue::Text(s.value(i).to_owned()))
            .collect();
    }
    if let Some(v) = array.as_any().downcast_ref::<arrow_array::Int64Array>() {
        return (0..v.len())
            .filter(|&i| !v.is_null(i))
            .map(|i| ProbeValue::Long(v.value(i)))
            .collect();
    }
    Vec::new()
}

fn filter(batch: &RecordBatch, keep: &[bool]) -> std::result::Result<RecordBatch, String> {
    filter_record_batch(batch, &BooleanArray::from(keep.to_vec())).map_err(|e| e.to_string())
}
