//! One captured table's changes since the last flush, and their Parquet part.

use std::sync::Arc;

use arrow_array::builder::{Int64Builder, StringBuilder, UInt32Builder, UInt64Builder};
use arrow_array::{ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use pg_walstream::{ColumnValue, RowData};
use reel_manifest::changes::{
    COMMIT_COLUMN, ColumnShape, LSN_COLUMN, OP_COLUMN, SEQ_COLUMN, TableShape,
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

/// The Arrow type a column of PostgreSQL type `pg_type` is stored as: integers, floats
/// and booleans natively, everything else as PostgreSQL's text form (exact, and
/// castable in SQL).
pub(crate) fn arrow_type(pg_type: &str) -> DataType {
    match pg_type {
        "bool" => DataType::Boolean,
        "int2" | "int4" | "int8" | "oid" => DataType::Int64,
        "float4" | "float8" => DataType::Float64,
        _ => DataType::Utf8,
    }
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
    seq: u32,
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

    pub fn push(&mut self, lsn: u64, commit_ns: i64, seq: u32, change: RowChange) {
        self.pending.push(Change {
            lsn,
            commit_ns,
            op: change.op,
            seq,
            values: change.values,
        });
    }

    /// The pending changes as one zstd Parquet part (and forgets them), or `None` when
    /// there are none. `name` is used in errors.
    pub fn take_part(&mut self, name: &str) -> Result<Option<Vec<u8>>> {
        if self.pending.is_empty() {
            return Ok(None);
        }
        let err = |reason: String| Error::Part {
            name: name.to_owned(),
            reason,
        };
        let changes = std::mem::take(&mut self.pending);
        let mut fields = Vec::new();
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
            fields.push(Field::new(&column.name, array.data_type().clone(), true));
            arrays.push(array);
        }
        let mut lsn = UInt64Builder::new();
        let mut commit = Int64Builder::new();
        let mut op = StringBuilder::new();
        let mut seq = UInt32Builder::new();
        for c in &changes {
            lsn.append_value(c.lsn);
            commit.append_value(c.commit_ns);
            op.append_value(c.op);
            seq.append_value(c.seq);
        }
        fields.push(Field::new(LSN_COLUMN, DataType::UInt64, false));
        arrays.push(Arc::new(lsn.finish()));
        fields.push(Field::new(COMMIT_COLUMN, DataType::Int64, false));
        arrays.push(Arc::new(commit.finish()));
        fields.push(Field::new(OP_COLUMN, DataType::Utf8, false));
        arrays.push(Arc::new(op.finish()));
        fields.push(Field::new(SEQ_COLUMN, DataType::UInt32, false));
        arrays.push(Arc::new(seq.finish()));
        let schema = Arc::new(Schema::new(fields));
        let batch = RecordBatch::try_new(schema.clone(), arrays).map_err(|e| err(e.to_string()))?;
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(
                ZstdLevel::try_new(3).map_err(|e| err(e.to_string()))?,
            ))
            .build();
        let mut out = Vec::new();
        let mut writer =
            ArrowWriter::try_new(&mut out, schema, Some(props)).map_err(|e| err(e.to_string()))?;
        writer.write(&batch).map_err(|e| err(e.to_string()))?;
        writer.close().map_err(|e| err(e.to_string()))?;
        Ok(Some(out))
    }
}
