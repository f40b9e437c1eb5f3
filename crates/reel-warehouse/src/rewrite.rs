//! A data file written again without some of its rows, for a commit that replaces or
//! deletes them: the row groups that lose rows are decoded, filtered and encoded again;
//! every other row group is copied as it was encoded, column chunk by column chunk (with
//! its Bloom filter). A commit whose keys fall one or two to a file then costs a row
//! group's encoding per key, not the whole file's.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BooleanArray, Int64Array, RecordBatch, StructArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use bytes::Bytes;
use delta_kernel::arrow::compute::{concat, concat_batches, filter_record_batch};
use delta_kernel::transaction::BoundWriteContext;
use delta_kernel_default_engine::stats::FileStatsAccumulator;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::arrow::arrow_writer::{ArrowRowGroupWriterFactory, compute_leaves};
use parquet::bloom_filter::Sbbf;
use parquet::column::writer::ColumnCloseResult;
use parquet::file::metadata::{PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader};
use parquet::file::writer::SerializedFileWriter;

use crate::data_file::{WrittenFile, compression_of, writer_properties};
use crate::table::Table;
use crate::{Result, WarehouseError};

impl Table {
    /// Writes data file `key` again without the rows at `gone` (positions in the file,
    /// ascending), in the columns of `schema` (the table's), and returns the new file's
    /// add metadata for `context`'s transaction; `None` when no row is left. A file whose
    /// columns are not the table's (written before a column was added) is decoded and
    /// encoded whole.
    pub(crate) fn rewrite_without(
        &self,
        key: &str,
        gone: &[usize],
        schema: &SchemaRef,
        context: &BoundWriteContext,
        bloom: Option<&str>,
    ) -> Result<Option<WrittenFile>> {
        let bytes = Bytes::from(self.location.store.read(key)?.to_vec());
        let bad = |reason: String| WarehouseError::BadFile {
            table: self.name().to_owned(),
            file: key.to_owned(),
            reason,
        };
        let metadata = ParquetMetaDataReader::new()
            .with_page_index_policy(PageIndexPolicy::Optional)
            .parse_and_finish(&bytes)
            .map_err(|e| bad(e.to_string()))?;
        // Copied where the file has the table's columns, with the add's statistics from
        // the new footer; otherwise (or where a row group lacks statistics) decoded whole,
        // as a new file is written.
        if same_columns(&metadata, schema)
            && let Some((encoded, written)) =
                copy_without(&bytes, &metadata, gone, bloom).map_err(bad)?
        {
            let rows = written.file_metadata().num_rows().max(0) as usize;
            if rows == 0 {
                return Ok(None);
            }
            if let Some(stats) = stats_of(&written, schema, context).map_err(bad)? {
                return self.add_file(encoded, rows, stats, context).map(Some);
            }
        }
        let whole = self.read_file_as(key, None, schema)?;
        let mut keep = vec![true; whole.num_rows()];
        for &place in gone {
            *keep
                .get_mut(place)
                .ok_or_else(|| bad(format!("holds no row {place}")))? = false;
        }
        let kept = filter_record_batch(&whole, &BooleanArray::from(keep))
            .map_err(|e| bad(e.to_string()))?;
        if kept.num_rows() == 0 {
            return Ok(None);
        }
        let compression = compression_of(&metadata);
        self.write_file(&kept, context, compression, bloom)
            .map(Some)
    }
}

/// Whether the file's columns are the table's, by name, type and order (a flat schema):
/// its column chunks can then be copied into a file of the table's columns.
fn same_columns(metadata: &ParquetMetaData, schema: &SchemaRef) -> bool {
    let parquet = metadata.file_metadata().schema_descr();
    let Ok(file) = parquet::arrow::parquet_to_arrow_schema(parquet, None) else {
        return false;
    };
    parquet.num_columns() == schema.fields().len()
        && file.fields().len() == schema.fields().len()
        && file
            .fields()
            .iter()
            .zip(schema.fields())
            .all(|(column, field)| {
                column.name() == field.name() && same_type(column.data_type(), field.data_type())
            })
}

/// Types equal, a timestamp's zone aside (a file's UTC is `+00:00`, the table's `UTC`).
fn same_type(file: &DataType, table: &DataType) -> bool {
    match (file, table) {
        (DataType::Timestamp(a, x), DataType::Timestamp(b, y)) => {
            a == b && x.is_some() == y.is_some()
        }
        _ => file == table,
    }
}

/// The file `bytes` without the rows at `gone`: row groups that lose rows decoded, filtered
/// and encoded with the file's codec; the others copied. Returns the new file and its
/// metadata, or `None` where a copied row group's statistics are not complete enough for
/// the table's (the caller then decodes the file whole).
fn copy_without(
    bytes: &Bytes,
    metadata: &ParquetMetaData,
    gone: &[usize],
    bloom: Option<&str>,
) -> std::result::Result<Option<(Vec<u8>, ParquetMetaData)>, String> {
    let schema = metadata.file_metadata().schema_descr_ptr();
    let rows_in_file = metadata.file_metadata().num_rows().max(0) as usize;
    if let Some(&last) = gone.last()
        && last >= rows_in_file
    {
        return Err(format!("holds {rows_in_file} rows, not a row {last}"));
    }
    let bloom_index = bloom
        .and_then(|column| (0..schema.num_columns()).find(|&i| schema.column(i).name() == column));
    let props = Arc::new(writer_properties(
        compression_of(metadata),
        bloom,
        rows_in_file,
    )?);
    let mut out = Vec::new();
    let mut writer = SerializedFileWriter::new(&mut out, schema.root_schema_ptr(), props)
        .map_err(|e| e.to_string())?;
    let mut gone = gone.iter().copied().peekable();
    let mut first_row = 0usize;
    let mut written_groups = 0usize;
    for (index, group) in metadata.row_groups().iter().enumerate() {
        let rows = group.num_rows().max(0) as usize;
        let mut lost = Vec::new();
        while let Some(place) = gone.next_if(|&p| p < first_row + rows) {
            lost.push(place - first_row);
        }
        first_row += rows;
        if lost.is_empty() {
            if !statistics_complete(group) {
                return Ok(None);
            }
            let mut group_writer = writer.next_row_group().map_err(|e| e.to_string())?;
            for (column, chunk) in group.columns().iter().enumerate() {
                let bloom_filter = match bloom_index == Some(column) {
                    true => bloom_filter_of(bytes, chunk)?,
                    false => None,
                };
                // The page index goes along (the writer moves its page offsets).
                let page_index = metadata.page_index();
                let close = ColumnCloseResult {
                    bytes_written: chunk.compressed_size().max(0) as u64,
                    rows_written: rows as u64,
                    metadata: chunk.clone(),
                    bloom_filter,
                    column_index: page_index
                        .and_then(|p| p.column_index(index, column))
                        .cloned(),
                    offset_index: page_index
                        .and_then(|p| p.offset_index(index, column))
                        .cloned(),
                };
                group_writer
                    .append_column(bytes, close)
                    .map_err(|e| e.to_string())?;
            }
            group_writer.close().map_err(|e| e.to_string())?;
            written_groups += 1;
            continue;
        }
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes.clone())
            .map_err(|e| e.to_string())?
            .with_row_groups(vec![index])
            .with_batch_size(rows.max(1))
            .build()
            .map_err(|e| e.to_string())?;
        let arrow_schema = arrow_array::RecordBatchReader::schema(&reader);
        let batches = reader
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        let decoded = concat_batches(&arrow_schema, &batches).map_err(|e| e.to_string())?;
        let mut keep = vec![true; decoded.num_rows()];
        for place in lost {
            *keep
                .get_mut(place)
                .ok_or_else(|| format!("row group {index} holds fewer rows than it says"))? = false;
        }
        let kept =
            filter_record_batch(&decoded, &BooleanArray::from(keep)).map_err(|e| e.to_string())?;
        if kept.num_rows() == 0 {
            continue;
        }
        let factory = ArrowRowGroupWriterFactory::new(&writer, arrow_schema.clone());
        let mut columns = factory
            .create_column_writers(written_groups)
            .map_err(|e| e.to_string())?
            .into_iter();
        let mut chunks = Vec::new();
        for (field, array) in arrow_schema.fields().iter().zip(kept.columns()) {
            for leaf in compute_leaves(field, array).map_err(|e| e.to_string())? {
                let mut column = columns
                    .next()
                    .ok_or_else(|| "more leaves than the file's columns".to_string())?;
                column.write(&leaf).map_err(|e| e.to_string())?;
                chunks.push(column.close().map_err(|e| e.to_string())?);
            }
        }
        let mut group_writer = writer.next_row_group().map_err(|e| e.to_string())?;
        for chunk in chunks {
            chunk
                .append_to_row_group(&mut group_writer)
                .map_err(|e| e.to_string())?;
        }
        group_writer.close().map_err(|e| e.to_string())?;
        written_groups += 1;
    }
    let written = writer.close().map_err(|e| e.to_string())?;
    Ok(Some((out, written)))
}

/// Whether every column chunk of `group` has the minimum, maximum and null count that make
/// the table's statistics (a chunk of nulls only has no minimum).
fn statistics_complete(group: &parquet::file::metadata::RowGroupMetaData) -> bool {
    group.columns().iter().all(|chunk| {
        chunk.statistics().is_some_and(|s| {
            let nulls = s.null_count_opt();
            let all_null = nulls == Some(group.num_rows().max(0) as u64);
            nulls.is_some()
                && (all_null || (s.min_bytes_opt().is_some() && s.max_bytes_opt().is_some()))
        })
    })
}

/// The Bloom filter of a column chunk of the file, where it has one.
fn bloom_filter_of(
    bytes: &Bytes,
    chunk: &parquet::file::metadata::ColumnChunkMetaData,
) -> std::result::Result<Option<Sbbf>, String> {
    let (Some(offset), Some(length)) = (chunk.bloom_filter_offset(), chunk.bloom_filter_length())
    else {
        return Ok(None);
    };
    let (start, end) = (
        offset.max(0) as usize,
        offset.max(0) as usize + length.max(0) as usize,
    );
    let region = bytes
        .get(start..end)
        .ok_or_else(|| format!("a Bloom filter at bytes {start}..{end} of {}", bytes.len()))?;
    Sbbf::from_bytes(region)
        .map(Some)
        .map_err(|e| e.to_string())
}

/// The table's statistics of a file (numRecords, nullCount, minValues, maxValues), from
/// its footer: each row group's minimum and maximum stand in for its rows (the kernel
/// reduces them as it reduces rows), and the counts are the footer's own. `None` where a
/// row group lacks statistics.
fn stats_of(
    metadata: &ParquetMetaData,
    schema: &SchemaRef,
    context: &BoundWriteContext,
) -> std::result::Result<Option<StructArray>, String> {
    if !metadata.row_groups().iter().all(statistics_complete) {
        return Ok(None);
    }
    // The table's columns, nullable: a row group's bounds of a column of nulls are nulls.
    let bounds_schema = Arc::new(Schema::new(
        schema
            .fields()
            .iter()
            .map(|f| Field::new(f.name(), f.data_type().clone(), true))
            .collect::<Vec<_>>(),
    ));
    let parquet = metadata.file_metadata().schema_descr();
    let converters = bounds_schema
        .fields()
        .iter()
        .map(|field| StatisticsConverter::try_new(field.name(), &bounds_schema, parquet))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let mut stats =
        FileStatsAccumulator::new(context.stats_columns(), context.physical_data_schema());
    let mut null_counts = vec![0i64; converters.len()];
    for group in metadata.row_groups() {
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(converters.len());
        for (i, converter) in converters.iter().enumerate() {
            let one = std::iter::once(group);
            let mins = converter
                .row_group_mins(one.clone())
                .map_err(|e| e.to_string())?;
            let maxes = converter
                .row_group_maxes(one.clone())
                .map_err(|e| e.to_string())?;
            let nulls = converter
                .row_group_null_counts(one)
                .map_err(|e| e.to_string())?;
            null_counts[i] += nulls.iter().flatten().sum::<u64>() as i64;
            columns.push(concat(&[&mins, &maxes]).map_err(|e| e.to_string())?);
        }
        let bounds =
            RecordBatch::try_new(bounds_schema.clone(), columns).map_err(|e| e.to_string())?;
        stats.merge(&bounds).map_err(|e| e.to_string())?;
    }
    let Some(reduced) = stats.finish().map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    let rows = metadata.file_metadata().num_rows();
    let nulls_of = |name: &str| {
        bounds_schema
            .fields()
            .iter()
            .position(|f| f.name() == name)
            .map(|i| null_counts[i])
    };
    with_counts(&reduced, rows, nulls_of).map(Some)
}

/// `stats` with `numRecords` and each `nullCount` replaced by the file's own counts (the
/// bounds' rows counted two a row group, and their nulls).
fn with_counts(
    stats: &StructArray,
    rows: i64,
    nulls_of: impl Fn(&str) -> Option<i64>,
) -> std::result::Result<StructArray, String> {
    let (fields, arrays, validity) = stats.clone().into_parts();
    let arrays = fields
        .iter()
        .zip(arrays)
        .map(|(field, array)| match field.name().as_str() {
            "numRecords" => Ok(Arc::new(Int64Array::from(vec![rows])) as ArrayRef),
            "nullCount" => {
                let counts = array
                    .as_any()
                    .downcast_ref::<StructArray>()
                    .ok_or_else(|| "the statistics' nullCount is not a struct".to_string())?;
                let (count_fields, count_arrays, count_validity) = counts.clone().into_parts();
                let count_arrays = count_fields
                    .iter()
                    .zip(count_arrays)
                    .map(|(f, a)| match nulls_of(f.name()) {
                        Some(n) if a.data_type() == &arrow_schema::DataType::Int64 => {
                            Arc::new(Int64Array::from(vec![n])) as ArrayRef
                        }
                        _ => a,
                    })
                    .collect();
                StructArray::try_new(count_fields, count_arrays, count_validity)
                    .map(|a| Arc::new(a) as ArrayRef)
                    .map_err(|e| e.to_string())
            }
            _ => Ok(array),
        })
        .collect::<std::result::Result<Vec<_>, String>>()?;
    StructArray::try_new(fields, arrays, validity).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data_file::{Compression, encode};
    use arrow_array::{StringArray, TimestampMicrosecondArray};
    use arrow_schema::TimeUnit;

    fn footer(rows: &RecordBatch) -> ParquetMetaData {
        let bytes = Bytes::from(encode(rows, Compression::Lz4, None).expect("encodes"));
        ParquetMetaDataReader::new()
            .parse_and_finish(&bytes)
            .expect("footer")
    }

    #[test]
    fn a_file_of_the_tables_columns_is_copied_and_one_without_a_new_column_is_not() {
        let at = Field::new(
            "at",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        );
        let id = Field::new("id", DataType::Utf8, false);
        let table: SchemaRef = Arc::new(Schema::new(vec![id.clone(), at.clone()]));
        let rows = RecordBatch::try_new(
            table.clone(),
            vec![
                Arc::new(StringArray::from(vec!["a"])),
                Arc::new(TimestampMicrosecondArray::from(vec![1]).with_timezone("UTC")),
            ],
        )
        .expect("rows");
        assert!(same_columns(&footer(&rows), &table));
        let grown: SchemaRef = Arc::new(Schema::new(vec![
            id,
            at,
            Field::new("note", DataType::Utf8, true),
        ]));
        assert!(!same_columns(&footer(&rows), &grown));
        let retyped: SchemaRef = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new("at", DataType::Int64, false),
        ]));
        assert!(!same_columns(&footer(&rows), &retyped));
    }
}
