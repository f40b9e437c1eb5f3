//! The metadata database's tables as curation sees them: each table `reel-cdc` captures
//! is a Delta table `db_<name>` holding the database's current rows (the capture keeps it
//! so, commit by commit), read at one version. A captured table keeps its name in SQL,
//! except one that shares a warehouse table's name (the database's `episodes`), which
//! stays `db_episodes`.

use polars::prelude::*;
use reel_warehouse::{Compression, Layout, TableVersion, Warehouse as Tables};

use crate::{AsOf, CompactOptions, CurateError, EPISODES_TABLE, Warehouse};

use reel_manifest::changes::{
    CAPTURE_DOMAIN, CAPTURED_PREFIX as DB_PREFIX, CaptureRecord, capture_app,
};

/// The captured tables of a warehouse, each at the version read.
#[derive(Debug, Clone, Default)]
pub struct DbTables {
    /// (database table name, its Delta table at the version read).
    tables: Vec<(String, TableVersion)>,
    /// The capture's position the tables hold (the newest a table committed).
    lsn: u64,
}

/// The SQL name of captured table `table`.
pub fn sql_name(table: &str) -> String {
    if table.eq_ignore_ascii_case(EPISODES_TABLE) {
        format!("{DB_PREFIX}{table}")
    } else {
        table.to_owned()
    }
}

impl DbTables {
    /// The captured tables of `tables`, at the versions `as_of` names or their latest.
    /// A table whose initial snapshot is not complete is not read yet.
    pub fn read(tables: &Tables, as_of: Option<&AsOf>) -> Result<Self, CurateError> {
        let mut read = Self::default();
        for delta_name in tables.tables()? {
            let Some(name) = delta_name.strip_prefix(DB_PREFIX) else {
                continue;
            };
            let table = tables.table(&delta_name)?;
            let version = crate::as_of::version(
                &table,
                as_of.and_then(|a| a.version_of(&delta_name)),
                as_of,
            )?;
            let Some(record) = version.domain(CAPTURE_DOMAIN)? else {
                continue;
            };
            let record: CaptureRecord =
                serde_json::from_str(&record).map_err(|e| CurateError::ChangeLog {
                    name: delta_name.clone(),
                    reason: format!("the capture's record does not parse: {e}"),
                })?;
            if !record.snapshot_done {
                continue;
            }
            if let Some(lsn) = version.app_version(&capture_app(&record.slot))? {
                read.lsn = read.lsn.max(lsn as u64);
            }
            read.tables.push((name.to_owned(), version));
        }
        Ok(read)
    }

    /// SQL names of the captured tables.
    pub fn names(&self) -> Vec<String> {
        self.tables.iter().map(|(t, _)| sql_name(t)).collect()
    }

    /// The capture's position the tables hold (0 without captured tables).
    pub fn lsn(&self) -> u64 {
        self.lsn
    }

    /// The Delta tables read and their versions (`db_<name>`, version).
    pub fn versions(&self) -> Vec<(String, u64)> {
        self.tables
            .iter()
            .map(|(name, v)| (format!("{DB_PREFIX}{name}"), v.number()))
            .collect()
    }

    /// The rows of each captured table whose SQL name `wanted` accepts, at the version
    /// read, without the capture's own columns.
    pub(crate) fn frames(
        &self,
        warehouse: &Warehouse,
        wanted: impl Fn(&str) -> bool,
    ) -> Result<Vec<(String, LazyFrame)>, CurateError> {
        let mut frames = Vec::new();
        for (name, version) in &self.tables {
            let name = sql_name(name);
            if !wanted(&name) {
                continue;
            }
            let schema = crate::episodes_schema::polars_schema(&version.schema()?)
                .map_err(CurateError::Query)?;
            let files = version.files()?;
            let rows = warehouse.scan_parts(
                files.iter().map(|f| f.key.as_str()),
                Some(schema),
                true,
                None,
            )?;
            frames.push((name, rows));
        }
        Ok(frames)
    }

    /// Compacts each captured table into files of about `options.file_rows` rows.
    /// Returns (table, rows) of each.
    pub fn compact(
        &self,
        tables: &Tables,
        options: CompactOptions,
    ) -> Result<Vec<(String, u64)>, CurateError> {
        let mut compacted = Vec::new();
        for (name, _) in &self.tables {
            let done = tables
                .table(&format!("{DB_PREFIX}{name}"))?
                .compact(&Layout {
                    file_rows: options.file_rows,
                    sort_by: Vec::new(),
                    split_by: None,
                    compression: Compression::Zstd,
                })?;
            compacted.push((name.clone(), done.rows));
        }
        Ok(compacted)
    }
}
