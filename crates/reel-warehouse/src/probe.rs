//! What a commit reads of a data file to find the rows of its keys: the footer, the Bloom
//! filters of the first key column, and the key columns of only the row groups whose
//! filters may hold a key, each by ranged reads. A commit of 64 keys against a file of
//! 10^6 rows then decodes a row group or two of two columns, not the file.

use std::ops::Range;
use std::sync::Arc;

use arrow_array::RecordBatch;
use bytes::Bytes;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use parquet::bloom_filter::Sbbf;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use parquet::file::reader::{ChunkReader, Length};
use reel_io::ByteSource;

use crate::data_file::{ProbeValue, projection};
use crate::table::Table;
use crate::{Result, WarehouseError};

/// Bytes read from a file's end to find its footer in one request, most of the time.
const FOOTER_GUESS: u64 = 64 << 10;

/// Column chunks closer than this are fetched in one read (a request saved is worth more
/// than the bytes between).
const COALESCE_GAP: u64 = 1 << 20;

/// The key columns' rows of a file's row groups that may hold a commit's keys, and each
/// row's place in the file.
pub(crate) struct KeyRows {
    pub(crate) rows: RecordBatch,
    pub(crate) places: Vec<usize>,
}

impl Table {
    /// The rows of `columns` in data file `key` (`size` bytes) that may hold one of
    /// `values` in `bloom_column` (the file's Bloom filters answer by row group; a file
    /// without them is read whole), with their places in the file. `None` where no row
    /// group may hold one.
    pub(crate) fn probe_keys(
        &self,
        key: &str,
        size: u64,
        columns: &[&str],
        bloom: Option<(&str, &[ProbeValue])>,
    ) -> Result<Option<KeyRows>> {
        let source = self.location.store.source(key);
        let bad = |reason: String| WarehouseError::BadFile {
            table: self.name().to_owned(),
            file: key.to_owned(),
            reason,
        };
        let metadata = footer(&source, size).map_err(&bad)?;
        let all: Vec<usize> = (0..metadata.num_row_groups()).collect();
        let groups = match bloom {
            Some((column, values)) => groups_holding(&source, size, &metadata, column, values)
                .map_err(&bad)?
                .unwrap_or(all),
            None => all,
        };
        if groups.is_empty() {
            return Ok(None);
        }
        let mask = projection(metadata.file_metadata().schema_descr(), columns);
        let mut wanted: Vec<Range<u64>> = Vec::new();
        for &g in &groups {
            for (i, chunk) in metadata.row_group(g).columns().iter().enumerate() {
                if mask.leaf_included(i) {
                    let (start, length) = chunk.byte_range();
                    wanted.push(start..start + length);
                }
            }
        }
        let chunks = Chunks::fetch(&source, size, wanted).map_err(|e| match e {
            Fetch::Store(e) => WarehouseError::from(e),
            Fetch::Bad(reason) => bad(reason),
        })?;
        let starts: Vec<usize> = metadata
            .row_groups()
            .iter()
            .scan(0usize, |next, g| {
                let start = *next;
                *next += g.num_rows().max(0) as usize;
                Some(start)
            })
            .collect();
        let places: Vec<usize> = groups
            .iter()
            .flat_map(|&g| {
                let start = starts[g];
                start..start + metadata.row_group(g).num_rows().max(0) as usize
            })
            .collect();
        let options = ArrowReaderOptions::new();
        let reader_metadata = ArrowReaderMetadata::try_new(Arc::new(metadata), options)
            .map_err(|e| bad(e.to_string()))?;
        let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(chunks, reader_metadata)
            .with_projection(mask)
            .with_row_groups(groups)
            .build()
            .map_err(|e| bad(e.to_string()))?;
        let schema = arrow_array::RecordBatchReader::schema(&reader);
        let batches = reader
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| bad(e.to_string()))?;
        let rows = delta_kernel::arrow::compute::concat_batches(&schema, &batches)
            .map_err(|e| bad(e.to_string()))?;
        if rows.num_rows() != places.len() {
            return Err(bad(format!(
                "{} rows read where its row groups say {}",
                rows.num_rows(),
                places.len()
            )));
        }
        Ok(Some(KeyRows { rows, places }))
    }
}

/// A file's footer, read from its end (one ranged read, two for a large footer).
fn footer(source: &dyn ByteSource, size: u64) -> std::result::Result<ParquetMetaData, String> {
    if size < 12 {
        return Err(format!("{size} bytes is no Parquet file"));
    }
    let tail_start = size.saturating_sub(FOOTER_GUESS);
    let read = |range: Range<u64>| source.read_range(range).map_err(|e| e.to_string());
    let mut tail = read(tail_start..size)?;
    if tail.len() as u64 != size - tail_start {
        return Err(format!(
            "shorter than the {size} bytes the table's log says"
        ));
    }
    let footer: [u8; 8] = tail[tail.len() - 8..]
        .try_into()
        .map_err(|_| "no footer".to_string())?;
    if &footer[4..] != b"PAR1" {
        return Err("no Parquet footer (PAR1)".into());
    }
    let metadata_len = u64::from(u32::from_le_bytes([
        footer[0], footer[1], footer[2], footer[3],
    ]));
    if metadata_len + 8 > size {
        return Err(format!("a footer of {metadata_len} bytes in {size}"));
    }
    let metadata_start = size - 8 - metadata_len;
    let mut tail_begins = tail_start;
    if metadata_start < tail_start {
        tail = read(metadata_start..size)?;
        tail_begins = metadata_start;
        if (tail.len() as u64) < size - metadata_start {
            return Err("shorter than its footer says".into());
        }
    }
    let skip = (metadata_start - tail_begins) as usize;
    ParquetMetaDataReader::decode_metadata(&tail[skip..tail.len() - 8]).map_err(|e| e.to_string())
}

/// The row groups that may hold a row whose `column` is one of `values`, by their Bloom
/// filters on `column`; `None` where a row group has no filter to ask (any may). The
/// filters lie together at the file's end: one read for all of them.
fn groups_holding(
    source: &dyn ByteSource,
    size: u64,
    metadata: &ParquetMetaData,
    column: &str,
    values: &[ProbeValue],
) -> std::result::Result<Option<Vec<usize>>, String> {
    let schema = metadata.file_metadata().schema_descr();
    let Some(index) =
        (0..schema.num_columns()).find(|&i| schema.column(i).path().string() == column)
    else {
        return Ok(None);
    };
    let mut filters = Vec::new();
    for group in metadata.row_groups() {
        let chunk = group.column(index);
        match (chunk.bloom_filter_offset(), chunk.bloom_filter_length()) {
            (Some(offset), Some(length)) if offset >= 0 && length > 0 => {
                filters.push(offset as u64..offset as u64 + length as u64);
            }
            _ => return Ok(None),
        }
    }
    let (Some(start), Some(end)) = (
        filters.iter().map(|r| r.start).min(),
        filters.iter().map(|r| r.end).max(),
    ) else {
        return Ok(Some(Vec::new()));
    };
    if end > size {
        return Err(format!("a Bloom filter at bytes {start}..{end} of {size}"));
    }
    let region = source.read_range(start..end).map_err(|e| e.to_string())?;
    if (region.len() as u64) < end - start {
        return Err(format!(
            "shorter than its Bloom filters (bytes {start}..{end})"
        ));
    }
    let mut holding = Vec::new();
    for (group, range) in filters.into_iter().enumerate() {
        let bytes = &region[(range.start - start) as usize..(range.end - start) as usize];
        let filter = Sbbf::from_bytes(bytes).map_err(|e| e.to_string())?;
        let hit = values.iter().any(|v| match v {
            ProbeValue::Long(v) => filter.check(v),
            ProbeValue::Text(v) => filter.check(v.as_str()),
        });
        if hit {
            holding.push(group);
        }
    }
    Ok(Some(holding))
}

/// Why fetching a file's column chunks failed.
enum Fetch {
    Store(reel_io::Error),
    Bad(String),
}

/// Some byte ranges of a file, fetched, read by Parquet's reader as if the file were whole:
/// a reader that asks for bytes outside them gets an error, not a read.
struct Chunks {
    size: u64,
    /// Ascending, not overlapping: (where the range starts in the file, its bytes).
    ranges: Vec<(u64, Bytes)>,
}

impl Chunks {
    fn fetch(
        source: &dyn ByteSource,
        size: u64,
        mut wanted: Vec<Range<u64>>,
    ) -> std::result::Result<Self, Fetch> {
        wanted.sort_by_key(|r| r.start);
        let mut merged: Vec<Range<u64>> = Vec::new();
        for range in wanted {
            match merged.last_mut() {
                Some(last) if range.start <= last.end + COALESCE_GAP => {
                    last.end = last.end.max(range.end);
                }
                _ => merged.push(range),
            }
        }
        let mut ranges = Vec::with_capacity(merged.len());
        for range in merged {
            if range.end > size {
                return Err(Fetch::Bad(format!(
                    "a column chunk at bytes {}..{} of {size}",
                    range.start, range.end
                )));
            }
            let bytes = source.read_range(range.clone()).map_err(Fetch::Store)?;
            if (bytes.len() as u64) < range.end - range.start {
                return Err(Fetch::Bad(format!(
                    "shorter than its column chunk at bytes {}..{}",
                    range.start, range.end
                )));
            }
            ranges.push((range.start, bytes));
        }
        Ok(Self { size, ranges })
    }

    /// The fetched bytes from `start` to the end of the range holding it.
    fn from(&self, start: u64) -> parquet::errors::Result<Bytes> {
        let at = self.ranges.partition_point(|(s, _)| *s <= start);
        let found = at.checked_sub(1).and_then(|i| self.ranges.get(i));
        match found {
            Some((s, bytes)) if start < s + bytes.len() as u64 => {
                Ok(bytes.slice((start - s) as usize..))
            }
            _ => Err(parquet::errors::ParquetError::General(format!(
                "byte {start} of the file was not fetched"
            ))),
        }
    }
}

impl Length for Chunks {
    fn len(&self) -> u64 {
        self.size
    }
}

impl ChunkReader for Chunks {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(bytes::Buf::reader(self.from(start)?))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        let bytes = self.from(start)?;
        if bytes.len() < length {
            return Err(parquet::errors::ParquetError::General(format!(
                "bytes {start}..{} of the file were not all fetched",
                start + length as u64
            )));
        }
        Ok(bytes.slice(..length))
    }
}
