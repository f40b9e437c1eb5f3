//! A LeRobot Parquet file read whole with arrow-rs, and its columns as plain values: the
//! numbers of a feature row by row, integers, strings.

use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Float64Type, Int32Type, Int64Type};
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::{Error, Result};

/// One Parquet file's rows, as the record batches it holds.
pub(crate) struct Table {
    path: String,
    batches: Vec<RecordBatch>,
}

impl Table {
    pub(crate) fn read(path: &Path) -> Result<Self> {
        let name = path.display().to_string();
        let file = std::fs::File::open(path).map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound => Error::dataset(&name, "missing"),
            _ => Error::Read {
                path: name.clone(),
                source,
            },
        })?;
        let parquet_err = |e: parquet::errors::ParquetError| {
            Error::dataset(&name, format!("not a readable Parquet file: {e}"))
        };
        let reader = ParquetRecordBatchReaderBuilder::try_new(file)
            .map_err(parquet_err)?
            .build()
            .map_err(parquet_err)?;
        let batches = reader
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| Error::dataset(&name, format!("not a readable Parquet file: {e}")))?;
        Ok(Self {
            path: name,
            batches,
        })
    }

    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    pub(crate) fn rows(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }

    pub(crate) fn has(&self, column: &str) -> bool {
        self.batches
            .first()
            .is_some_and(|b| b.schema().column_with_name(column).is_some())
    }

    fn columns(&self, column: &str) -> Result<Vec<&dyn Array>> {
        self.batches
            .iter()
            .map(|b| {
                b.column_by_name(column)
                    .map(|c| c.as_ref())
                    .ok_or_else(|| Error::dataset(&self.path, format!("no column `{column}`")))
            })
            .collect()
    }

    /// An integer column, row by row.
    pub(crate) fn integers(&self, column: &str) -> Result<Vec<i64>> {
        let mut out = Vec::with_capacity(self.rows());
        for array in self.columns(column)? {
            match array.data_type() {
                DataType::Int64 => out.extend(
                    array
                        .as_primitive::<Int64Type>()
                        .iter()
                        .map(|v| v.unwrap_or(-1)),
                ),
                DataType::Int32 => out.extend(
                    array
                        .as_primitive::<Int32Type>()
                        .iter()
                        .map(|v| v.map_or(-1, i64::from)),
                ),
                other => {
                    return Err(Error::dataset(
                        &self.path,
                        format!("column `{column}` is {other}, not integers"),
                    ));
                }
            }
        }
        Ok(out)
    }

    /// A float column, row by row.
    pub(crate) fn floats(&self, column: &str) -> Result<Vec<f64>> {
        let rows = self.numbers(column)?;
        rows.into_iter()
            .map(|row| match row[..] {
                [v] => Ok(v),
                _ => Err(Error::dataset(
                    &self.path,
                    format!(
                        "column `{column}` holds {} values a row, not one",
                        row.len()
                    ),
                )),
            })
            .collect()
    }

    /// A numeric feature column (a number or a list of numbers a row), row by row, each
    /// value as f64 (exact for every float32, float64 and 32-bit integer).
    pub(crate) fn numbers(&self, column: &str) -> Result<Vec<Vec<f64>>> {
        let mut out = Vec::with_capacity(self.rows());
        for array in self.columns(column)? {
            numbers_of(array, &mut out).map_err(|reason| {
                Error::dataset(&self.path, format!("column `{column}`: {reason}"))
            })?;
        }
        Ok(out)
    }

    /// An image column (Hugging Face's `Image`: a struct of the file's `bytes` and its
    /// `path`), row by row: each row's encoded picture (PNG, JPEG). A row without bytes is
    /// an error naming it.
    pub(crate) fn image_bytes(&self, column: &str) -> Result<Vec<Vec<u8>>> {
        let mut out = Vec::with_capacity(self.rows());
        for array in self.columns(column)? {
            let bad =
                |reason: String| Error::dataset(&self.path, format!("column `{column}`: {reason}"));
            let DataType::Struct(_) = array.data_type() else {
                return Err(bad(format!("{} is not an image struct", array.data_type())));
            };
            let bytes = array
                .as_struct()
                .column_by_name("bytes")
                .ok_or_else(|| bad("no `bytes` field".into()))?;
            for row in 0..bytes.len() {
                let value = match bytes.data_type() {
                    DataType::Binary => bytes
                        .as_binary::<i32>()
                        .is_valid(row)
                        .then(|| bytes.as_binary::<i32>().value(row)),
                    DataType::LargeBinary => bytes
                        .as_binary::<i64>()
                        .is_valid(row)
                        .then(|| bytes.as_binary::<i64>().value(row)),
                    other => return Err(bad(format!("`bytes` is {other}"))),
                };
                let value = value
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| bad(format!("row {} has no picture bytes", out.len())))?;
                out.push(value.to_vec());
            }
        }
        Ok(out)
    }

    /// A list-of-strings column (or a string column), row by row.
    pub(crate) fn string_lists(&self, column: &str) -> Result<Vec<Vec<String>>> {
        let mut out = Vec::with_capacity(self.rows());
        let bad = |other: &DataType| {
            Error::dataset(
                &self.path,
                format!("column `{column}` is {other}, not strings"),
            )
        };
        for array in self.columns(column)? {
            match array.data_type() {
                DataType::List(_) => {
                    for row in array.as_list::<i32>().iter() {
                        out.push(match row {
                            Some(values) => {
                                strings(values.as_ref()).ok_or_else(|| bad(values.data_type()))?
                            }
                            None => Vec::new(),
                        });
                    }
                }
                DataType::LargeList(_) => {
                    for row in array.as_list::<i64>().iter() {
                        out.push(match row {
                            Some(values) => {
                                strings(values.as_ref()).ok_or_else(|| bad(values.data_type()))?
                            }
                            None => Vec::new(),
                        });
                    }
                }
                other => out.extend(
                    strings(array)
                        .ok_or_else(|| bad(other))?
                        .into_iter()
                        .map(|s| vec![s]),
                ),
            }
        }
        Ok(out)
    }
}

fn strings(array: &dyn Array) -> Option<Vec<String>> {
    match array.data_type() {
        DataType::Utf8 => Some(
            array
                .as_string::<i32>()
                .iter()
                .map(|s| s.unwrap_or_default().to_owned())
                .collect(),
        ),
        DataType::LargeUtf8 => Some(
            array
                .as_string::<i64>()
                .iter()
                .map(|s| s.unwrap_or_default().to_owned())
                .collect(),
        ),
        DataType::Utf8View => Some(
            array
                .as_string_view()
                .iter()
                .map(|s| s.unwrap_or_default().to_owned())
                .collect(),
        ),
        _ => None,
    }
}

/// Appends each row of `array` as its numbers; a null is NaN (a missing reading).
fn numbers_of(array: &dyn Array, out: &mut Vec<Vec<f64>>) -> std::result::Result<(), String> {
    match array.data_type() {
        DataType::FixedSizeList(_, _) => {
            let list = array.as_fixed_size_list();
            for i in 0..list.len() {
                out.push(flat(list.value(i).as_ref())?);
            }
        }
        DataType::List(_) => {
            for row in array.as_list::<i32>().iter() {
                out.push(
                    row.map(|r| flat(r.as_ref()))
                        .transpose()?
                        .unwrap_or_default(),
                );
            }
        }
        DataType::LargeList(_) => {
            for row in array.as_list::<i64>().iter() {
                out.push(
                    row.map(|r| flat(r.as_ref()))
                        .transpose()?
                        .unwrap_or_default(),
                );
            }
        }
        _ => out.extend(flat(array)?.into_iter().map(|v| vec![v])),
    }
    Ok(())
}

/// The values of a flat numeric array.
fn flat(array: &dyn Array) -> std::result::Result<Vec<f64>, String> {
    Ok(match array.data_type() {
        DataType::Float32 => array
            .as_primitive::<Float32Type>()
            .iter()
            .map(|v| v.map_or(f64::NAN, f64::from))
            .collect(),
        DataType::Float64 => array
            .as_primitive::<Float64Type>()
            .iter()
            .map(|v| v.unwrap_or(f64::NAN))
            .collect(),
        DataType::Int64 => array
            .as_primitive::<Int64Type>()
            .iter()
            .map(|v| v.map_or(f64::NAN, |v| v as f64))
            .collect(),
        DataType::Int32 => array
            .as_primitive::<Int32Type>()
            .iter()
            .map(|v| v.map_or(f64::NAN, f64::from))
            .collect(),
        DataType::Boolean => array
            .as_boolean()
            .iter()
            .map(|v| v.map_or(f64::NAN, |b| f64::from(u8::from(b))))
            .collect(),
        other => return Err(format!("{other} is not numeric")),
    })
}
