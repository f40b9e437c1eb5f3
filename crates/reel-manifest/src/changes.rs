//! The metadata database's captured tables in a warehouse (`docs/METADATA.md`), typed
//! once for `reel-cdc`, which writes them, and curation, which reads them.
//!
//! Each captured table is a Delta table `db_<table>` ([`captured_table_name`]) holding
//! the database's current rows, with [`LSN_COLUMN`] and [`COMMIT_COLUMN`] of the change
//! that wrote each row; every commit of the capture records a [`CaptureRecord`] as the
//! Delta domain metadata [`CAPTURE_DOMAIN`], and its position as Delta's `txn`
//! (application [`capture_app`], version the LSN).
//!
//! The rest is the earlier layout, read only to migrate it: each captured table had a
//! folder `db/<table>/` of Parquet parts, one row per change:
//! the table's columns plus [`LSN_COLUMN`] (the commit's end LSN), [`COMMIT_COLUMN`]
//! (commit time), [`OP_COLUMN`] (one of [`ops`]) and [`SEQ_COLUMN`] (order within the
//! commit). A part is named by the LSN of the last commit it holds, so a rerun over the
//! same changes replaces it instead of adding a copy.
//!
//! [`PROGRESS_KEY`] is written last, after the parts it covers: every change committed at
//! or before its `lsn` is in a part, none after it is. Readers take only parts at or
//! before it; a part after it is the litter of a killed run, removed by the next one.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Where the change log lives in a warehouse store.
pub const CHANGES_PREFIX: &str = "db/";
/// The progress record.
pub const PROGRESS_KEY: &str = "db/_progress.json";
/// The commit's end LSN (the snapshot's consistent point for snapshot rows).
pub const LSN_COLUMN: &str = "_lsn";
/// Commit time, nanoseconds since the Unix epoch, UTC.
pub const COMMIT_COLUMN: &str = "_commit_ns";
/// What happened to the row: one of [`ops`].
pub const OP_COLUMN: &str = "_op";
/// Order of the change within its commit.
pub const SEQ_COLUMN: &str = "_seq";

/// The values of [`OP_COLUMN`].
pub mod ops {
    /// A row of the initial snapshot.
    pub const SNAPSHOT: &str = "snapshot";
    pub const INSERT: &str = "insert";
    pub const UPDATE: &str = "update";
    /// The row is gone; only its key columns are set.
    pub const DELETE: &str = "delete";
    /// Every earlier row of the table is gone; no column is set.
    pub const TRUNCATE: &str = "truncate";
}

/// The prefix of a captured table's Delta table name.
pub const CAPTURED_PREFIX: &str = "db_";

/// The Delta domain metadata every commit of a capture records: a [`CaptureRecord`].
pub const CAPTURE_DOMAIN: &str = "reel.cdc";

/// Properties of the captured tables: checkpoints every 100 commits, 7 days of data-file
/// retention, statistics of every column. The capture's position (its `txn`) never
/// expires.
pub const CAPTURED_TABLE_PROPERTIES: [(&str, &str); 3] = [
    ("delta.checkpointInterval", "100"),
    ("delta.deletedFileRetentionDuration", "interval 7 days"),
    ("delta.dataSkippingNumIndexedCols", "-1"),
];

/// The Delta table captured database table `table` is kept in: `db_<table>`.
pub fn captured_table_name(table: &str) -> String {
    format!("{CAPTURED_PREFIX}{table}")
}

/// The `txn` application id of the capture through `slot`: its version in a table is the
/// LSN the table holds every change up to.
pub fn capture_app(slot: &str) -> String {
    format!("reel-cdc/{slot}")
}

/// What a capture records with each commit of a captured table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CaptureRecord {
    /// The replication slot the capture reads.
    pub slot: String,
    /// The publication naming the captured tables.
    pub publication: String,
    /// Whether the table holds the initial snapshot, complete (until then it is not read).
    pub snapshot_done: bool,
    /// The table's key and columns as the database has them.
    pub shape: TableShape,
}

/// How far the change log of the earlier layout had come, and the shape of each table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChangeProgress {
    /// The replication slot the log is read from.
    pub slot: String,
    /// The publication naming the captured tables.
    pub publication: String,
    /// Every change committed at or before this LSN is in a part; none after it is.
    pub lsn: u64,
    /// The same LSN as PostgreSQL prints it (`16/B374D848`).
    pub lsn_text: String,
    /// Whether the initial snapshot is complete (until then, nothing is readable).
    pub snapshot_done: bool,
    /// Captured tables by name.
    pub tables: BTreeMap<String, TableShape>,
    /// When this record was written, nanoseconds since the Unix epoch.
    pub updated_at_ns: i64,
}

/// The columns of a captured table, in the order its parts hold them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TableShape {
    /// The primary key's columns: what identifies a row across changes.
    pub key: Vec<String>,
    /// Every column the table has had while captured (a dropped column stays, null).
    pub columns: Vec<ColumnShape>,
}

impl TableShape {
    /// The table's columns as its Delta table holds them: the database's columns
    /// (nullable, in [`arrow_type`]), then [`LSN_COLUMN`] and [`COMMIT_COLUMN`] of the
    /// change that wrote the row.
    pub fn table_schema(&self) -> arrow_schema::SchemaRef {
        use arrow_schema::{DataType, Field, Schema};
        let mut fields: Vec<Field> = self
            .columns
            .iter()
            .map(|c| Field::new(&c.name, arrow_type(&c.pg_type), true))
            .collect();
        fields.push(Field::new(LSN_COLUMN, DataType::Int64, false));
        fields.push(Field::new(COMMIT_COLUMN, DataType::Int64, false));
        std::sync::Arc::new(Schema::new(fields))
    }
}

/// The Arrow type a column of PostgreSQL type `pg_type` is stored as: integers, floats
/// and booleans natively, everything else as PostgreSQL's text form (exact, and
/// castable in SQL).
pub fn arrow_type(pg_type: &str) -> arrow_schema::DataType {
    use arrow_schema::DataType;
    match pg_type {
        "bool" => DataType::Boolean,
        "int2" | "int4" | "int8" | "oid" => DataType::Int64,
        "float4" | "float8" => DataType::Float64,
        _ => DataType::Utf8,
    }
}

/// One column of a captured table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ColumnShape {
    pub name: String,
    /// PostgreSQL type name (`int8`, `text`, `timestamptz`, …).
    pub pg_type: String,
}

/// An LSN from PostgreSQL's text form (`0/16B6C50`).
pub fn parse_lsn(text: &str) -> Option<u64> {
    let (high, low) = text.split_once('/')?;
    let high = u64::from_str_radix(high, 16).ok()?;
    let low = u64::from_str_radix(low, 16).ok()?;
    (high <= u32::MAX as u64 && low <= u32::MAX as u64).then_some(high << 32 | low)
}

/// LSN as PostgreSQL prints it.
pub fn lsn_text(lsn: u64) -> String {
    format!("{:X}/{:X}", lsn >> 32, lsn & 0xffff_ffff)
}

/// Key of the `n`th part of `table` written at `lsn`.
pub fn part_key(table: &str, lsn: u64, n: u32) -> String {
    format!("{CHANGES_PREFIX}{table}/{lsn:016X}-{n:06}.parquet")
}

/// The table and LSN of a part key, or `None` for anything else.
pub fn parse_part_key(key: &str) -> Option<(&str, u64)> {
    let rest = key.strip_prefix(CHANGES_PREFIX)?;
    let (table, name) = rest.split_once('/')?;
    let stem = name.strip_suffix(".parquet")?;
    let (lsn, n) = stem.split_once('-')?;
    if lsn.len() != 16 || n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((table, u64::from_str_radix(lsn, 16).ok()?))
}

/// Key of the compaction of `table`'s change log up to `lsn`: the latest change of each
/// live row, in the same columns. Readers take the newest one at or before the progress
/// record's LSN and the parts after it.
pub fn compacted_key(table: &str, lsn: u64) -> String {
    format!("{CHANGES_PREFIX}{table}/compacted-{lsn:016X}.parquet")
}

/// The table and LSN of a compaction key, or `None` for anything else.
pub fn parse_compacted_key(key: &str) -> Option<(&str, u64)> {
    let rest = key.strip_prefix(CHANGES_PREFIX)?;
    let (table, name) = rest.split_once('/')?;
    let lsn = name.strip_prefix("compacted-")?.strip_suffix(".parquet")?;
    if lsn.len() != 16 {
        return None;
    }
    Some((table, u64::from_str_radix(lsn, 16).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_keys_round_trip_and_sort_by_lsn() {
        let a = part_key("annotations", 0x16_B374_D848, 0);
        let b = part_key("annotations", 0x1_0000_0000_0000, 2);
        assert_eq!(parse_part_key(&a), Some(("annotations", 0x16_B374_D848)));
        assert_eq!(
            parse_part_key(&b),
            Some(("annotations", 0x1_0000_0000_0000))
        );
        assert!(a < b);
        assert_eq!(parse_part_key("db/_progress.json"), None);
        assert_eq!(parse_part_key("db/t/xyz.parquet"), None);
        assert_eq!(lsn_text(0x16_B374_D848), "16/B374D848");
        let c = compacted_key("annotations", 0x16_B374_D848);
        assert_eq!(
            parse_compacted_key(&c),
            Some(("annotations", 0x16_B374_D848))
        );
        assert_eq!(parse_part_key(&c), None);
        assert_eq!(parse_compacted_key(&a), None);
    }
}
