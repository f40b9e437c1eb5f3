//! The capture's side of the warehouse: each captured table a Delta table holding the
//! database's current rows, each flush one commit per table that carries the capture's
//! position (Delta's `txn`: application `reel-cdc/<slot>`, version the LSN) atomically
//! with the changes it covers.
//!
//! A commit is made once: after a crash the capture starts again from the oldest
//! position any table committed, and a table skips the changes at or before its own.
//! Only once every table holding a flush's changes has committed is the server told.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use reel_io::Store;
use reel_manifest::changes::{
    CAPTURE_DOMAIN, CAPTURED_TABLE_PROPERTIES, CaptureRecord, capture_app, captured_table_name,
};
use reel_warehouse::{Change, Operation, Table, Warehouse};

use crate::table_log::{RowChange, TableLog};
use crate::{Error, Result};

/// What one flush made durable and visible.
#[derive(Debug, Clone, Default)]
pub struct Flush {
    /// Everything committed at or before this LSN is now in the warehouse.
    pub lsn: u64,
    /// Changes written, by table.
    pub changes: BTreeMap<String, usize>,
    /// Commit time of each transaction the flush holds, nanoseconds since the Unix epoch.
    pub commits_ns: Vec<i64>,
    /// When the last table's commit made them visible, nanoseconds since the Unix epoch.
    pub visible_ns: i64,
    /// Whether these are rows of the initial snapshot.
    pub snapshot: bool,
    /// Table versions the flush committed, by table.
    pub versions: BTreeMap<String, u64>,
}

pub(crate) fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// One captured table: its log of pending changes, its Delta table, and how far that
/// table has come.
#[derive(Debug)]
struct Captured {
    log: TableLog,
    table: Table,
    /// The last LSN committed to the table by this slot (`None`: no snapshot yet).
    committed: Option<u64>,
    snapshot_done: bool,
    /// Columns the Delta table is known to have (0: not checked yet).
    columns_in_table: usize,
}

/// The warehouse side of a capture.
#[derive(Debug)]
pub(crate) struct ChangeLog {
    app: String,
    slot: String,
    publication: String,
    tables: BTreeMap<String, Captured>,
    /// LSN of the newest commit taken since the last flush.
    pending_lsn: Option<u64>,
    pending_since: Option<Instant>,
    pending_commits: Vec<i64>,
    /// Whether pending rows belong to the initial snapshot.
    in_snapshot: bool,
}

impl ChangeLog {
    /// Opens the captured tables of `slot` in the warehouse in `store`, with the tables
    /// and keys captured now. A table another slot captures is refused: two captures must
    /// not write one table.
    pub fn open(
        store: Store,
        slot: &str,
        publication: &str,
        keys: &BTreeMap<String, Vec<String>>,
    ) -> Result<Self> {
        let warehouse = Warehouse::for_store(&store)?;
        let app = capture_app(slot);
        let mut tables = BTreeMap::new();
        for (name, key) in keys {
            let table = warehouse.table(&captured_table_name(name))?;
            let (record, committed) = match table.exists()? {
                false => (None, None),
                true => {
                    let version = table.version(None)?;
                    let record: Option<CaptureRecord> = version
                        .domain(CAPTURE_DOMAIN)?
                        .and_then(|text| serde_json::from_str(&text).ok());
                    let committed = version.app_version(&app)?.map(|v| v as u64);
                    (record, committed)
                }
            };
            if let Some(record) = &record
                && record.slot != slot
            {
                return Err(Error::Slot {
                    slot: slot.to_owned(),
                    reason: format!(
                        "the warehouse {} keeps table {name} for slot {:?}; give each capture its own warehouse, or use --slot {}",
                        reel_io::redact(store.uri()),
                        record.slot,
                        record.slot
                    ),
                });
            }
            let mut shape = record.as_ref().map(|r| r.shape.clone()).unwrap_or_default();
            shape.key.clone_from(key);
            tables.insert(
                name.clone(),
                Captured {
                    log: TableLog::new(name, shape),
                    table,
                    committed,
                    snapshot_done: record.is_some_and(|r| r.snapshot_done),
                    columns_in_table: 0,
                },
            );
        }
        Ok(Self {
            app,
            slot: slot.to_owned(),
            publication: publication.to_owned(),
            tables,
            pending_lsn: None,
            pending_since: None,
            pending_commits: Vec::new(),
            in_snapshot: false,
        })
    }

    /// The position to stream from: the oldest any table committed (the server never
    /// sends what it was told is durable, and each table skips what it holds).
    pub fn lsn(&self) -> u64 {
        self.tables
            .values()
            .map(|t| t.committed.unwrap_or(0))
            .min()
            .unwrap_or(0)
    }

    /// Whether every captured table holds the initial snapshot.
    pub fn snapshot_done(&self) -> bool {
        self.tables.values().all(|t| t.snapshot_done)
    }

    pub fn table(&mut self, name: &str) -> Option<&mut TableLog> {
        self.tables.get_mut(name).map(|t| &mut t.log)
    }

    pub fn pending_rows(&self) -> usize {
        self.tables.values().map(|t| t.log.pending()).sum()
    }

    pub fn has_pending(&self) -> bool {
        self.pending_lsn.is_some()
    }

    /// How long changes have waited for a flush.
    pub fn pending_for(&self) -> Option<std::time::Duration> {
        self.pending_since.map(|t| t.elapsed())
    }

    /// Empties the captured tables (a snapshot that never finished cannot be resumed):
    /// one commit each, whose earlier versions stay readable within the retention.
    pub fn reset(&mut self) -> Result<()> {
        for captured in self.tables.values_mut() {
            captured.log.shape.columns.clear();
            captured.committed = None;
            captured.snapshot_done = false;
            if captured.table.exists()? {
                let record = CaptureRecord {
                    slot: self.slot.clone(),
                    publication: self.publication.clone(),
                    snapshot_done: false,
                    shape: captured.log.shape.clone(),
                };
                captured.table.commit(&Change {
                    truncate: true,
                    operation: Operation::Delete,
                    domain: Some((CAPTURE_DOMAIN, to_json(&record)?)),
                    ..Change::default()
                })?;
            }
        }
        Ok(())
    }

    /// Takes a committed transaction's changes (`(table, change)` in order); a table
    /// that holds this commit already (a restart) skips it.
    pub fn take_commit(&mut self, lsn: u64, commit_ns: i64, changes: Vec<(Arc<str>, RowChange)>) {
        for (table, change) in changes {
            if let Some(captured) = self.tables.get_mut(table.as_ref())
                && captured.committed.is_none_or(|done| done < lsn)
            {
                captured.log.push(lsn, commit_ns, change);
            }
        }
        self.pending_lsn = Some(lsn);
        self.pending_since.get_or_insert_with(Instant::now);
        self.pending_commits.push(commit_ns);
    }

    /// Starts the snapshot taken at consistent point `lsn`: its rows, however many
    /// (none included), become visible together with the flush that marks it done.
    pub fn begin_snapshot(&mut self, lsn: u64) {
        self.pending_lsn = Some(lsn);
        self.pending_since.get_or_insert_with(Instant::now);
        self.in_snapshot = true;
    }

    /// Takes one row of the snapshot begun at `lsn`, taken at `taken_ns`.
    pub fn take_snapshot_row(&mut self, lsn: u64, taken_ns: i64, table: &str, change: RowChange) {
        if let Some(captured) = self.tables.get_mut(table) {
            captured.log.push(lsn, taken_ns, change);
        }
        self.pending_lsn = Some(lsn);
    }

    /// Commits the pending changes, one commit per table holding any, each recording
    /// the capture's position: after this returns they are durable and visible, and only
    /// then may the server be told. With `snapshot_done`, a snapshot in progress is
    /// complete: every table commits it (rows or none) and records it done.
    pub fn flush(&mut self, snapshot_done: bool) -> Result<Option<Flush>> {
        let Some(lsn) = self.pending_lsn else {
            return Ok(None);
        };
        let completing = self.in_snapshot && snapshot_done;
        let mut flush = Flush {
            lsn,
            snapshot: self.in_snapshot,
            ..Flush::default()
        };
        for (name, captured) in &mut self.tables {
            let rows = captured.log.pending();
            if rows == 0 && !completing {
                continue;
            }
            let change = captured.log.take_change()?;
            let record = CaptureRecord {
                slot: self.slot.clone(),
                publication: self.publication.clone(),
                snapshot_done: captured.snapshot_done || completing,
                shape: captured.log.shape.clone(),
            };
            // The table made, or widened by the columns the database added since.
            if captured.log.shape.columns.len() > captured.columns_in_table {
                let schema = captured.log.table_schema();
                let mut properties = CAPTURED_TABLE_PROPERTIES.to_vec();
                if let Some(first) = captured.log.shape.key.first() {
                    properties.push((reel_warehouse::BLOOM_COLUMN_PROPERTY, first.as_str()));
                }
                if !captured.table.create(&schema, &properties)? {
                    let fields: Vec<_> =
                        schema.fields().iter().map(|f| f.as_ref().clone()).collect();
                    captured.table.add_columns(&fields)?;
                }
                captured.columns_in_table = captured.log.shape.columns.len();
            }
            // A snapshot's rows before it completes carry no position: a capture killed
            // then starts the snapshot over.
            let app = (!self.in_snapshot || completing).then_some((self.app.as_str(), lsn as i64));
            let committed = captured.table.commit(&Change {
                app,
                add: change.upserts.into_iter().collect(),
                key: captured.log.shape.key.iter().map(String::as_str).collect(),
                delete: change.deletes,
                truncate: change.truncate,
                operation: Operation::Merge,
                domain: Some((CAPTURE_DOMAIN, to_json(&record)?)),
                newest: None,
            })?;
            if app.is_some() {
                captured.committed = Some(lsn);
            }
            captured.snapshot_done = record.snapshot_done;
            flush.versions.insert(name.clone(), committed.version);
            if rows > 0 {
                flush.changes.insert(name.clone(), rows);
            }
        }
        if completing || !self.in_snapshot {
            self.in_snapshot = false;
        }
        flush.visible_ns = now_ns();
        flush.commits_ns = std::mem::take(&mut self.pending_commits);
        self.pending_lsn = None;
        self.pending_since = None;
        Ok(Some(flush))
    }
}

fn to_json(record: &CaptureRecord) -> Result<String> {
    serde_json::to_string(record).map_err(|e| Error::Part {
        name: CAPTURE_DOMAIN.into(),
        reason: e.to_string(),
    })
}
