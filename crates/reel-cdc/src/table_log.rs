//! One captured table's changes since the last flush, and what they leave in its table.

use std::sync::Arc;

use arrow_array::{ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, SchemaRef};
use bytes::Bytes;
use pg_walstream::{ColumnValue, RowData};
use reel_manifest::changes::{
    COMMIT_COLUMN, ColumnShape, LSN_COLUMN, OP_COLUMN, SEQ_COLUMN, TableShape, arrow_type, ops,
};

use crate::{Error, Result};

/// PostgreSQL's name of a built-in type, by OID (the ones a metadata schema uses).
pub(crate) fn type_name(oid: u32) -> String {
    let name = match oid {
        16 => "bool",
        17 => "bytea",
        20 => "int8",
        21 => "int2",
        23 => "int4",
        25 => "text",
        26 => "oid",
        114 => "json",
        700 => "float4",
        701 => "float8",
        1042 => "bpchar",
        1043 => "varchar",
        1082 => "date",
        1114 => "timestamp",
        1184 => "timestamptz",
        1700 => "numeric",
        2950 => "uuid",
        3802 => "jsonb",
        other => return format!("oid:{other}"),
    };
    name.to_owned()
}

/// Each cell in PostgreSQL's text form, parsed by `parse` (null stays null), or the
/// first cell it rejects.
fn parse_cells<'a, T>(
    cells: impl Iterator<Item = Option<&'a Bytes>>,
    parse: impl Fn(&str) -> Option<T>,
) -> std::result::Result<Vec<Option<T>>, &'a Bytes> {
    cells
        .map(|cell| match cell {
            None => Ok(None),
            Some(b) => parse(&String::from_utf8_lossy(b)).map(Some).ok_or(b),
        })
        .collect()
}

/// One change waiting for its part.
#[derive(Debug)]
struct Change {
    lsn: u64,
    commit_ns: i64,
    op: &'static str,
    /// By column of the shape at the time (a later added column is simply absent).
    values: Vec<Option<Bytes>>,
}

/// A change read from the stream, before its commit is known.
#[derive(Debug)]
pub(crate) struct RowChange {
    pub op: &'static str,
    pub values: Vec<Option<Bytes>>,
}

/// One captured table: its shape and its changes since the last flush.
#[derive(Debug)]
pub(crate) struct TableLog {
    name: String,
    pub shape: TableShape,
    pending: Vec<Change>,
}

impl TableLog {
    pub fn new(name: &str, shape: TableShape) -> Self {
        Self {
            name: name.to_owned(),
            shape,
            pending: Vec::new(),
        }
    }

    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Fits the shape to the table's columns as the server describes them now: a new
    /// column is appended (earlier rows read it as null), a column whose type changed is
    /// refused, a dropped one stays (null from now on). Returns whether the shape grew.
    pub fn fit(&mut self, columns: &[(Arc<str>, u32)]) -> Result<bool> {
        let mut grew = false;
        for (name, oid) in columns {
            let pg_type = type_name(*oid);
            if [LSN_COLUMN, COMMIT_COLUMN, OP_COLUMN, SEQ_COLUMN].contains(&name.as_ref()) {
                return Err(Error::Schema {
                    table: self.name.clone(),
                    reason: format!("column {name} has a name the change log reserves"),
                });
            }
            match self.shape.columns.iter().find(|c| *c.name == **name) {
                Some(known) if known.pg_type != pg_type => {
                    return Err(Error::Schema {
                        table: self.name.clone(),
                        reason: format!(
                            "column {name} changed type from {} to {pg_type}; the change log cannot hold both. Capture it under a new column name, or run `reel-cdc --drop` and capture again from a fresh snapshot",
                            known.pg_type
                        ),
                    });
                }
                Some(_) => {}
                None => {
                    self.shape.columns.push(ColumnShape {
                        name: name.to_string(),
                        pg_type,
                    });
                    grew = true;
                }
            }
        }
        Ok(grew)
    }

    /// The values of `row` by shape column. A column the row lacks (an unchanged TOAST
    /// value of an update) is taken from `old`, the full old row under REPLICA IDENTITY
    /// FULL; without it the change is refused rather than stored as null.
    pub fn values(
        &self,
        row: &RowData,
        old: Option<&RowData>,
        update: bool,
    ) -> Result<Vec<Option<Bytes>>> {
        let mut values = Vec::with_capacity(self.shape.columns.len());
        for column in &self.shape.columns {
            let value = match row
                .get(&column.name)
                .or_else(|| old.and_then(|o| o.get(&column.name)))
            {
                Some(ColumnValue::Null) => None,
                Some(ColumnValue::Text(b) | ColumnValue::Binary(b)) => Some(b.clone()),
                None if update => {
                    return Err(Error::Schema {
                        table: self.name.clone(),
                        reason: format!(
                            "an update left column {} out (an unchanged TOAST value); set ALTER TABLE {} REPLICA IDENTITY FULL so the server sends it",
                            column.name, self.name
                        ),
                    });
                }
                None => None,
            };
            values.push(value);
        }
        Ok(values)
    }

    /// The key columns' values of `values`.
    pub fn key_of(&self, values: &[Option<Bytes>]) -> Vec<Option<Bytes>> {
        self.shape
            .key
            .iter()
            .map(|k| {
                let i = self.shape.columns.iter().position(|c| c.name == *k);
                i.and_then(|i| values.get(i).cloned().flatten())
            })
            .collect()
    }

    pub fn push(&mut self, lsn: u64, commit_ns: i64, change: RowChange) {
        self.pending.push(Change {
            lsn,
            commit_ns,
            op: change.op,
            values: change.values,
        });
    }

    /// The table's columns as its Delta table holds them ([`TableShape::table_schema`]).
    pub fn table_schema(&self) -> SchemaRef {
        self.shape.table_schema()
    }

    /// The pending changes as what they leave (and forgets them): each key's last row,
    /// the keys deleted, and whether the table was emptied before them. A truncate drops
    /// everything before it; a later change of a key wins over an earlier one.
    pub fn take_change(&mut self) -> Result<TableChange> {
        let changes = std::mem::take(&mut self.pending);
        let mut truncate = false;
        // By key, in order of first appearance: the change that decides it.
        let mut last: Vec<Change> = Vec::new();
        let mut at: std::collections::HashMap<Vec<Option<Bytes>>, usize> =
            std::collections::HashMap::new();
        for change in changes {
            if change.op == ops::TRUNCATE {
                truncate = true;
                last.clear();
                at.clear();
                continue;
            }
            let key = self.key_of(&change.values);
            match at.get(&key) {
                Some(&i) => last[i] = change,
                None => {
                    at.insert(key, last.len());
                    last.push(change);
                }
            }
        }
        let (deleted, kept): (Vec<Change>, Vec<Change>) =
            last.into_iter().partition(|c| c.op == ops::DELETE);
        let upserts = match kept.is_empty() {
            true => None,
            false => Some(self.rows(&kept)?),
        };
        // A delete after a truncate removes a row the truncate removed already.
        let deletes = match deleted.is_empty() || truncate {
            true => None,
            false => {
                let rows = self.rows(&deleted)?;
                let key: Vec<usize> = self
                    .shape
                    .key
                    .iter()
                    .filter_map(|k| rows.schema().index_of(k).ok())
                    .collect();
                Some(rows.project(&key).map_err(|e| self.error(e.to_string()))?)
            }
        };
        Ok(TableChange {
            upserts,
            deletes,
            truncate,
        })
    }

    /// `changes` as rows of [`TableLog::table_schema`].
    fn rows(&self, changes: &[Change]) -> Result<RecordBatch> {
        let err = |reason: String| self.error(reason);
        let mut arrays: Vec<ArrayRef> = Vec::new();
        for (i, column) in self.shape.columns.iter().enumerate() {
            let cells = changes
                .iter()
                .map(|c| c.values.get(i).and_then(Option::as_ref));
            let data_type = arrow_type(&column.pg_type);
            let text = |b: &Bytes| String::from_utf8_lossy(b).into_owned();
            let bad = |b: &Bytes| {
                format!(
                    "column {} ({}) holds {:?}, which is not one",
                    column.name,
                    column.pg_type,
                    text(b)
                )
            };
            let rejected = |b: &Bytes| err(bad(b));
            let array: ArrayRef = match data_type {
                DataType::Boolean => {
                    let flag = |t: &str| match t {
                        "t" => Some(true),
                        "f" => Some(false),
                        _ => None,
                    };
                    Arc::new(BooleanArray::from(
                        parse_cells(cells, flag).map_err(rejected)?,
                    ))
                }
                DataType::Int64 => Arc::new(Int64Array::from(
                    parse_cells(cells, |t| t.parse().ok()).map_err(rejected)?,
                )),
                DataType::Float64 => Arc::new(Float64Array::from(
                    parse_cells(cells, |t| t.parse().ok()).map_err(rejected)?,
                )),
                _ => Arc::new(cells.map(|c| c.map(text)).collect::<StringArray>()),
            };
            arrays.push(array);
        }
        let lsn: Int64Array = changes.iter().map(|c| Some(c.lsn as i64)).collect();
        let commit: Int64Array = changes.iter().map(|c| Some(c.commit_ns)).collect();
        arrays.push(Arc::new(lsn));
        arrays.push(Arc::new(commit));
        RecordBatch::try_new(self.table_schema(), arrays).map_err(|e| err(e.to_string()))
    }

    fn error(&self, reason: String) -> Error {
        Error::Part {
            name: self.name.clone(),
            reason,
        }
    }
}

/// What a table's pending changes leave: rows to write (each replacing the table's row of
/// its key), keys to delete, and whether the table is emptied first.
#[derive(Debug)]
pub(crate) struct TableChange {
    pub upserts: Option<RecordBatch>,
    pub deletes: Option<RecordBatch>,
    pub truncate: bool,
}
