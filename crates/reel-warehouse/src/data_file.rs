//! A table's data files: rows written as one Parquet file (ZSTD, statistics in the log for
//! every reader's data skipping), and files read back, whole or some columns.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use arrow_array::{RecordBatch, StructArray};
use bytes::Bytes;
use delta_kernel::FileMeta;
use delta_kernel::engine::arrow_data::ArrowEngineData;
use delta_kernel::transaction::BoundWriteContext;
use delta_kernel_default_engine::build_add_file_metadata;
use delta_kernel_default_engine::parquet::DataFileMetadata;
use delta_kernel_default_engine::stats::collect_stats;
use parquet::arrow::ArrowWriter;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::ZstdLevel;
use parquet::file::properties::{BloomFilterPosition, WriterProperties};
use parquet::schema::types::ColumnPath;

use crate::table::Table;
use crate::{Result, WarehouseError};

/// Rows a row group holds at most: row-group statistics let readers skip most of a large
/// file on a selective filter.
pub const ROW_GROUP_ROWS: usize = 1 << 16;

/// The false-positive rate of a key column's Bloom filters: about 1.2 bytes a row, and one
/// file in a hundred read for nothing when a commit probes for a key it does not hold.
pub const BLOOM_FPP: f64 = 0.01;

/// A value a commit probes a file's Bloom filter for: a key column's value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum ProbeValue {
    Long(i64),
    Text(String),
}

/// How a data file's pages are compressed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Compression {
    /// ZSTD (level 3): small files, for what is compacted once and read rarely.
    #[default]
    Zstd,
    /// LZ4: about 1.6× ZSTD's bytes, half its decode time, for what queries read and
    /// what commits write and merge.
    Lz4,
}

/// A data file written for a commit, and its `add` action's metadata.
#[derive(Debug, Clone)]
pub(crate) struct WrittenFile {
    pub(crate) key: String,
    pub(crate) rows: usize,
    /// The add metadata (the kernel's add-files schema), kept as Arrow so that every
    /// attempt at the commit adds the same file.
    pub(crate) add: RecordBatch,
}

impl Table {
    /// Writes `rows` (at least one) as a new data file of the table, named uniquely, and
    /// returns its add metadata for `context`'s transaction. Nothing is read until a commit
    /// adds it; a file no commit adds is removed by [`Table::vacuum`] after the retention.
    pub(crate) fn write_file(
        &self,
        rows: &RecordBatch,
        context: &BoundWriteContext,
        compression: Compression,
        bloom: Option<&str>,
    ) -> Result<WrittenFile> {
        let bytes = encode(rows, compression, bloom).map_err(|reason| WarehouseError::BadRows {
            table: self.name().to_owned(),
            reason,
        })?;
        let stats = collect_stats(
            rows,
            context.stats_columns(),
            context.physical_data_schema(),
        )
        .map_err(|e| self.error(e))?;
        self.add_file(bytes, rows.num_rows(), stats, context)
    }

    /// Stores `bytes` (a Parquet file of `rows` rows whose statistics are `stats`) as a
    /// new data file of the table, named uniquely, and returns its add metadata.
    pub(crate) fn add_file(
        &self,
        bytes: Vec<u8>,
        rows: usize,
        stats: StructArray,
        context: &BoundWriteContext,
    ) -> Result<WrittenFile> {
        let name = unique_name();
        let key = format!("{}{name}", self.prefix());
        let size = bytes.len() as u64;
        self.location.store.write_atomic(&key, bytes)?;
        let url = context
            .write_dir()
            .join(&name)
            .map_err(|e| WarehouseError::BadRows {
                table: self.name().to_owned(),
                reason: e.to_string(),
            })?;
        let meta = DataFileMetadata::new(FileMeta::new(url, now_ms(), size), stats);
        let add = build_add_file_metadata(meta, context).map_err(|e| self.error(e))?;
        let add = ArrowEngineData::try_from_engine_data(add)
            .map_err(|e| self.error(e))?
            .record_batch()
            .clone();
        Ok(WrittenFile { key, rows, add })
    }

    /// Every row of data file `key` (all columns, or `columns` only), with the columns of
    /// `schema` (the table's, which may have grown since the file was written, projected
    /// to `columns`) in its order: a column the file lacks is null.
    pub(crate) fn read_file_as(
        &self,
        key: &str,
        columns: Option<&[&str]>,
        schema: &arrow_schema::SchemaRef,
    ) -> Result<RecordBatch> {
        let rows = self.read_file(key, columns)?;
        conform(&rows, schema).map_err(|reason| WarehouseError::BadFile {
            table: self.name().to_owned(),
            file: key.to_owned(),
            reason,
        })
    }

    /// The rows of data file `key` (all columns, or `columns` only).
    pub(crate) fn read_file(&self, key: &str, columns: Option<&[&str]>) -> Result<RecordBatch> {
        let bytes = self.location.store.read(key)?;
        decode(Bytes::from(bytes.to_vec()), columns).map_err(|reason| WarehouseError::BadFile {
            table: self.name().to_owned(),
            file: key.to_owned(),
            reason,
        })
    }
}

/// `rows` as Parquet: row groups of [`ROW_GROUP_ROWS`], no Arrow schema embedded (readers
/// take the table's schema from the log), and a Bloom filter on column `bloom` at the end
/// of the file (where a writer probing for keys reads it in one range).
pub(crate) fn encode(
    rows: &RecordBatch,
    compression: Compression,
    bloom: Option<&str>,
) -> std::result::Result<Vec<u8>, String> {
    let props = writer_properties(compression, bloom, rows.num_rows())?;
    let mut out = Vec::new();
    let options = parquet::arrow::arrow_writer::ArrowWriterOptions::new()
        .with_properties(props)
        .with_skip_arrow_metadata(true);
    let mut writer = ArrowWriter::try_new_with_options(&mut out, rows.schema(), options)
        .map_err(|e| e.to_string())?;
    writer.write(rows).map_err(|e| e.to_string())?;
    writer.close().map_err(|e| e.to_string())?;
    Ok(out)
}

/// How Reel writes a table's Parquet: `compression`, row groups of [`ROW_GROUP_ROWS`], and
/// a Bloom filter on column `bloom` (sized for a row group of a file of `rows` rows) at the
/// file's end.
pub(crate) fn writer_properties(
    compression: Compression,
    bloom: Option<&str>,
    rows: usize,
) -> std::result::Result<WriterProperties, String> {
    let codec = match compression {
        Compression::Zstd => {
            parquet::basic::Compression::ZSTD(ZstdLevel::try_new(3).map_err(|e| e.to_string())?)
        }
        Compression::Lz4 => parquet::basic::Compression::LZ4_RAW,
    };
    let mut props = WriterProperties::builder()
        .set_compression(codec)
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS));
    if let Some(column) = bloom {
        let column = ColumnPath::from(column);
        let ndv = rows.clamp(1, ROW_GROUP_ROWS) as u64;
        props = props
            .set_bloom_filter_position(BloomFilterPosition::End)
            .set_column_bloom_filter_enabled(column.clone(), true)
            .set_column_bloom_filter_fpp(column.clone(), BLOOM_FPP)
            .set_column_bloom_filter_max_ndv(column, ndv);
    }
    Ok(props.build())
}

/// How a file's pages are compressed, by its first column chunk.
pub(crate) fn compression_of(metadata: &parquet::file::metadata::ParquetMetaData) -> Compression {
    match metadata
        .row_groups()
        .first()
        .and_then(|g| g.columns().first())
        .map(|c| c.compression())
    {
        Some(parquet::basic::Compression::LZ4_RAW) => Compression::Lz4,
        _ => Compression::Zstd,
    }
}

/// The rows of a Parquet file, all columns or `columns`, as one batch.
pub(crate) fn decode(
    bytes: Bytes,
    columns: Option<&[&str]>,
) -> std::result::Result<RecordBatch, String> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(|e| e.to_string())?;
    let builder = match columns {
        None => builder,
        Some(columns) => {
            let mask = projection(builder.parquet_schema(), columns);
            builder.with_projection(mask)
        }
    };
    let reader = builder.build().map_err(|e| e.to_string())?;
    // The projected columns' schema (the builder's is the whole file's).
    let schema = arrow_array::RecordBatchReader::schema(&reader);
    let batches: Vec<RecordBatch> = reader
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| e.to_string())?;
    arrow_select_concat(&schema, &batches)
}

/// `batch` with `schema`'s columns: a column the file was written without (added to the
/// table since) is null, as every reader reads it.
pub(crate) fn conform(
    batch: &RecordBatch,
    schema: &arrow_schema::SchemaRef,
) -> std::result::Result<RecordBatch, String> {
    if batch.schema().fields() == schema.fields() {
        return Ok(batch.clone());
    }
    let columns = schema
        .fields()
        .iter()
        .map(|field| match batch.column_by_name(field.name()) {
            Some(column) if column.data_type() == field.data_type() => Ok(column.clone()),
            Some(column) => delta_kernel::arrow::compute::cast(column, field.data_type())
                .map_err(|e| format!("column {}: {e}", field.name())),
            None => Ok(arrow_array::new_null_array(
                field.data_type(),
                batch.num_rows(),
            )),
        })
        .collect::<std::result::Result<Vec<_>, String>>()?;
    RecordBatch::try_new(schema.clone(), columns).map_err(|e| e.to_string())
}

/// The leaves of `schema` named in `columns`. A column the file was written without is
/// left out (read as null by `conform`, as the table's schema says).
pub(crate) fn projection(
    schema: &parquet::schema::types::SchemaDescriptor,
    columns: &[&str],
) -> ProjectionMask {
    let indices = columns
        .iter()
        .filter_map(|column| {
            (0..schema.num_columns()).find(|&i| schema.column(i).name() == *column)
        })
        .collect::<Vec<_>>();
    ProjectionMask::leaves(schema, indices)
}

fn arrow_select_concat(
    schema: &arrow_schema::SchemaRef,
    batches: &[RecordBatch],
) -> std::result::Result<RecordBatch, String> {
    delta_kernel::arrow::compute::concat_batches(schema, batches).map_err(|e| e.to_string())
}

/// A data file's name no other writer picks: the time, the process and a counter, hashed
/// with the host's name (Delta readers take any name; this one sorts by time).
pub(crate) fn unique_name() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let salt = reel_io_hash(format!("{host}/{}/{n}/{now}", std::process::id()).as_bytes());
    format!("part-{now:016x}-{salt:016x}.parquet")
}

/// FNV-1a, for the names' salt.
fn reel_io_hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
