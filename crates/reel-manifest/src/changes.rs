//! The metadata database's change log inside a warehouse store: what `reel-cdc` writes
//! and curation reads (layout in `docs/METADATA.md`).
//!
//! Each captured table has a folder `db/<table>/` of Parquet parts, one row per change:
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

/// How far the change log has come, and the shape of each table in it.
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

/// One column of a captured table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ColumnShape {
    pub name: String,
    /// PostgreSQL type name (`int8`, `text`, `timestamptz`, …).
    pub pg_type: String,
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
