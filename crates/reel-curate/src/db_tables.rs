//! The metadata database's tables as curation sees them: the current state of each
//! table `reel-cdc` captures, rebuilt from its change log in the warehouse.
//!
//! A table's rows are its latest change per primary key, in commit order, without the
//! deleted ones and without anything before its last truncate. Only parts the progress
//! record covers are read, so a curation never sees half of a flush. A captured table
//! keeps its name in SQL, except one that shares a warehouse table's name (the
//! database's `episodes`), which is `db_<name>`.

use std::collections::BTreeMap;

use polars::prelude::*;
use reel_io::Store;
use reel_manifest::changes::{
    CHANGES_PREFIX, COMMIT_COLUMN, ChangeProgress, LSN_COLUMN, OP_COLUMN, PROGRESS_KEY, SEQ_COLUMN,
    compacted_key, ops, parse_compacted_key, parse_part_key,
};

use crate::{CurateError, EPISODES_TABLE, Warehouse, store_error};

/// The captured tables of a warehouse: what a read of each takes.
#[derive(Debug, Clone, Default)]
pub struct DbTables {
    progress: ChangeProgress,
    tables: BTreeMap<String, TableLog>,
}

/// One table's committed change log: its newest compaction and the parts after it.
#[derive(Debug, Clone, Default)]
struct TableLog {
    compacted: Option<(String, u64)>,
    /// Part keys after the compaction, oldest first.
    parts: Vec<(String, u64)>,
    /// Every compaction and part at or before the progress record (for clean-up).
    all: Vec<(String, u64)>,
}

impl TableLog {
    /// Keys to scan: newest part first (a column added later is in it, and older files
    /// read it as null), the compaction last.
    fn scan_order(&self) -> Vec<&str> {
        let parts = self.parts.iter().rev().map(|(k, _)| k.as_str());
        parts
            .chain(self.compacted.iter().map(|(k, _)| k.as_str()))
            .collect()
    }
}

/// The SQL name of captured table `table`.
pub fn sql_name(table: &str) -> String {
    if table.eq_ignore_ascii_case(EPISODES_TABLE) {
        format!("db_{table}")
    } else {
        table.to_owned()
    }
}

impl DbTables {
    /// Reads the change log of `store`: nothing when there is none, or its initial
    /// snapshot is not complete yet.
    pub fn read(store: &Store) -> Result<Self, CurateError> {
        let progress: ChangeProgress = match store.read(PROGRESS_KEY) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| CurateError::ChangeLog {
                name: store.object_uri(PROGRESS_KEY),
                reason: e.to_string(),
            })?,
            Err(reel_io::Error::NotFound { .. }) => return Ok(Self::default()),
            Err(e) => return Err(store_error(store, e)),
        };
        if !progress.snapshot_done {
            return Ok(Self::default());
        }
        let mut tables: BTreeMap<String, TableLog> = (progress.tables.keys())
            .map(|t| (t.clone(), TableLog::default()))
            .collect();
        for key in store
            .list_recursive(CHANGES_PREFIX)
            .map_err(|e| store_error(store, e))?
        {
            let (part, compaction) = (parse_part_key(&key), parse_compacted_key(&key));
            let Some((table, lsn)) = part.or(compaction) else {
                continue;
            };
            let Some(log) = tables.get_mut(table).filter(|_| lsn <= progress.lsn) else {
                continue;
            };
            log.all.push((key.clone(), lsn));
            if part.is_some() {
                log.parts.push((key, lsn));
            } else if log.compacted.as_ref().is_none_or(|(_, c)| lsn > *c) {
                log.compacted = Some((key, lsn));
            }
        }
        for log in tables.values_mut() {
            let since = log.compacted.as_ref().map_or(0, |(_, c)| *c);
            log.parts.retain(|(_, lsn)| *lsn > since);
            log.parts.sort_by_key(|(k, lsn)| (*lsn, k.clone()));
        }
        Ok(Self { progress, tables })
    }

    /// SQL names of the captured tables.
    pub fn names(&self) -> Vec<String> {
        self.tables.keys().map(|t| sql_name(t)).collect()
    }

    /// The LSN the tables are current up to (0 without a change log).
    pub fn lsn(&self) -> u64 {
        self.progress.lsn
    }

    /// The current state of each captured table whose SQL name `wanted` accepts.
    pub(crate) fn frames(
        &self,
        warehouse: &Warehouse,
        wanted: impl Fn(&str) -> bool,
    ) -> Result<Vec<(String, LazyFrame)>, CurateError> {
        let mut frames = Vec::new();
        for (table, log) in &self.tables {
            let name = sql_name(table);
            let Some(shape) = self.progress.tables.get(table).filter(|_| wanted(&name)) else {
                continue;
            };
            let columns: Vec<&str> = shape.columns.iter().map(|c| c.name.as_str()).collect();
            let rows = latest_changes(warehouse, &log.scan_order(), &shape.key, &columns)?;
            frames.push((name, rows.drop(cols([OP_COLUMN, SEQ_COLUMN]))));
        }
        Ok(frames)
    }

    /// Compacts each captured table with changes since its last compaction: writes its
    /// current state up to the progress record's LSN as one file of the change log's
    /// columns, so reads scan it and the parts after it. A curation that listed the
    /// previous compaction may still be reading it: that generation is kept, older
    /// compactions and parts are removed. Returns (table, rows) of each written.
    pub fn compact(&self, warehouse: &Warehouse) -> Result<Vec<(String, u64)>, CurateError> {
        let store = warehouse.store();
        let mut written = Vec::new();
        for (table, log) in &self.tables {
            let Some(shape) = self.progress.tables.get(table) else {
                continue;
            };
            if log.parts.is_empty() {
                continue;
            }
            let columns: Vec<&str> = shape.columns.iter().map(|c| c.name.as_str()).collect();
            let mut state = latest_changes(warehouse, &log.scan_order(), &shape.key, &columns)?
                .collect()
                .map_err(CurateError::Query)?;
            let mut encoded = Vec::new();
            ParquetWriter::new(&mut encoded)
                .with_compression(ParquetCompression::Zstd(None))
                .finish(&mut state)
                .map_err(CurateError::Query)?;
            let key = compacted_key(table, self.progress.lsn);
            store
                .write_atomic(&key, encoded)
                .map_err(|e| store_error(store, e))?;
            written.push((table.clone(), state.height() as u64));
            // Everything at or before the previous compaction belongs to a generation
            // no current reader takes.
            if let Some((_, previous)) = &log.compacted {
                for (old, lsn) in &log.all {
                    if *lsn < *previous || (*lsn == *previous && parse_part_key(old).is_some()) {
                        store.remove(old).map_err(|e| store_error(store, e))?;
                    }
                }
            }
        }
        Ok(written)
    }
}

/// The latest change of each key, in commit order, minus deletes and truncated rows,
/// with the change columns (`_op`, `_seq` included). `keys` in scan order.
fn latest_changes(
    warehouse: &Warehouse,
    keys: &[&str],
    key_columns: &[String],
    columns: &[&str],
) -> Result<LazyFrame, CurateError> {
    if keys.is_empty() {
        // Captured but empty: the table's columns, no rows.
        let mut empty: Vec<Column> = columns
            .iter()
            .map(|c| Column::new_empty((*c).into(), &DataType::String))
            .collect();
        empty.push(Column::new_empty(LSN_COLUMN.into(), &DataType::UInt64));
        empty.push(Column::new_empty(COMMIT_COLUMN.into(), &DataType::Int64));
        empty.push(Column::new_empty(OP_COLUMN.into(), &DataType::String));
        empty.push(Column::new_empty(SEQ_COLUMN.into(), &DataType::UInt32));
        return Ok(DataFrame::new_infer_height(empty)
            .map_err(CurateError::Query)?
            .lazy());
    }
    let log = warehouse.scan_parts(keys.iter().copied(), None, true, None)?;
    // Rows after the table's last truncate (every row when it has none), in the same
    // scan: the aggregates are taken over the whole log before the filter applies. A
    // truncate and the rows its transaction inserts after it share the commit's LSN, so
    // "after" is by (`_lsn`, `_seq`).
    let truncate = col(OP_COLUMN).eq(lit(ops::TRUNCATE));
    let truncated_lsn = col(LSN_COLUMN).filter(truncate.clone()).max();
    let truncated_seq = col(SEQ_COLUMN)
        .filter(
            truncate
                .clone()
                .and(col(LSN_COLUMN).eq(truncated_lsn.clone())),
        )
        .max();
    let after_truncate = truncated_lsn
        .clone()
        .is_null()
        .or(col(LSN_COLUMN).gt(truncated_lsn.clone()))
        .or(col(LSN_COLUMN)
            .eq(truncated_lsn)
            .and(col(SEQ_COLUMN).gt(truncated_seq)));
    let rows = log.filter(col(OP_COLUMN).neq(lit(ops::TRUNCATE)).and(after_truncate));
    let key: Vec<Expr> = key_columns.iter().map(|k| col(k.as_str())).collect();
    Ok(rows
        .sort_by_exprs(
            [col(LSN_COLUMN), col(SEQ_COLUMN)],
            SortMultipleOptions::default(),
        )
        .unique_stable_generic(Some(key), UniqueKeepStrategy::Last)
        .filter(col(OP_COLUMN).neq(lit(ops::DELETE))))
}
