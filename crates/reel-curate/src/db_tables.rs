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
    CHANGES_PREFIX, ChangeProgress, LSN_COLUMN, OP_COLUMN, PROGRESS_KEY, SEQ_COLUMN, ops,
    parse_part_key,
};

use crate::{CurateError, EPISODES_TABLE, Warehouse, store_error};

/// The captured tables of a warehouse: committed parts by table.
#[derive(Debug, Clone, Default)]
pub struct DbTables {
    progress: ChangeProgress,
    /// Committed part keys of each table, oldest first.
    parts: BTreeMap<String, Vec<String>>,
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
        let mut parts: BTreeMap<String, Vec<String>> = (progress.tables.keys())
            .map(|t| (t.clone(), Vec::new()))
            .collect();
        for key in store
            .list_recursive(CHANGES_PREFIX)
            .map_err(|e| store_error(store, e))?
        {
            if let Some((table, lsn)) = parse_part_key(&key)
                && lsn <= progress.lsn
                && let Some(keys) = parts.get_mut(table)
            {
                keys.push(key);
            }
        }
        Ok(Self { progress, parts })
    }

    /// SQL names of the captured tables.
    pub fn names(&self) -> Vec<String> {
        self.parts.keys().map(|t| sql_name(t)).collect()
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
        for (table, keys) in &self.parts {
            let name = sql_name(table);
            let Some(shape) = self.progress.tables.get(table).filter(|_| wanted(&name)) else {
                continue;
            };
            let columns: Vec<&str> = shape.columns.iter().map(|c| c.name.as_str()).collect();
            frames.push((name, current_state(warehouse, keys, &shape.key, &columns)?));
        }
        Ok(frames)
    }
}

/// The latest change of each key, in commit order, minus deletes and truncated rows.
fn current_state(
    warehouse: &Warehouse,
    keys: &[String],
    key_columns: &[String],
    columns: &[&str],
) -> Result<LazyFrame, CurateError> {
    if keys.is_empty() {
        // Captured but empty: the table's columns, no rows.
        let empty: Vec<Column> = columns
            .iter()
            .map(|c| Column::new_empty((*c).into(), &DataType::String))
            .collect();
        return Ok(DataFrame::new_infer_height(empty)
            .map_err(CurateError::Query)?
            .lazy());
    }
    // Newest part first: a column added later is in it, and older parts read it as
    // null. Commit order comes from the sort below, not from the files' order.
    let log = warehouse.scan_parts(keys.iter().rev().map(String::as_str), true)?;
    let truncated = log
        .clone()
        .filter(col(OP_COLUMN).eq(lit(ops::TRUNCATE)))
        .select([col(LSN_COLUMN).max()])
        .collect()
        .map_err(CurateError::Query)?;
    let truncated_at = truncated
        .column(LSN_COLUMN)
        .and_then(|c| c.u64().map(|c| c.get(0)))
        .map_err(CurateError::Query)?;
    let mut rows = log.filter(col(OP_COLUMN).neq(lit(ops::TRUNCATE)));
    if let Some(lsn) = truncated_at {
        rows = rows.filter(col(LSN_COLUMN).gt(lit(lsn)));
    }
    let key: Vec<Expr> = key_columns.iter().map(|k| col(k.as_str())).collect();
    Ok(rows
        .sort_by_exprs(
            [col(LSN_COLUMN), col(SEQ_COLUMN)],
            SortMultipleOptions::default(),
        )
        .unique_stable_generic(Some(key), UniqueKeepStrategy::Last)
        .filter(col(OP_COLUMN).neq(lit(ops::DELETE)))
        .drop(cols([OP_COLUMN, SEQ_COLUMN])))
}
