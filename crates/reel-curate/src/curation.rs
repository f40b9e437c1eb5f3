//! A curation's result written as a manifest: the columns a manifest takes from the
//! query, checked (no nulls, no episode twice), and written self-contained or, by
//! position, as a selection of the compaction's bases.

use std::collections::HashMap;
use std::path::Path;

use polars::prelude::*;
use reel_manifest::{ManifestMeta, ManifestNumbers, ManifestWriter, SamplingRule, UriTemplate};

use crate::{CurateError, Warehouse};

/// What a curation wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurationSummary {
    pub rows: usize,
    pub samples: u64,
    pub snapshot: String,
    /// Whether the manifest is a selection of the compaction's bases (format version 3)
    /// rather than a copy of every row.
    pub selection: bool,
    /// Why a curation asked by position wrote a self-contained manifest instead.
    pub declined: Option<String>,
    /// Files written beside the manifest that it names (a selection's episodes ingested
    /// since the compaction): they go wherever it goes.
    pub beside: Vec<std::path::PathBuf>,
    /// Episodes a curation file listed more than once ([`crate::curate_from_file`]): each
    /// is in the manifest once.
    pub listed_twice: u64,
}

/// Columns the manifest takes from the query's result.
pub(crate) const NEEDED: [&str; 8] = [
    "episode_id",
    "uri",
    "start_ns",
    "end_ns",
    "bytes",
    "camera_frames",
    "state_steps",
    "action_steps",
];

/// The warehouse column (schema version 3) whose values become the manifest's digests;
/// taken when the query's result has it.
pub(crate) const DIGEST: &str = "canonical_digest";

/// How [`curate_to_manifest_with`] treats an odd result.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CurationOptions {
    /// Write an empty manifest when the query selects no episodes, instead
    /// of failing with [`CurateError::NoEpisodes`].
    pub allow_empty: bool,
    /// Keep every row's path in a `uri` column even where one template gives them all
    /// (for readers of format version 1; a third more bytes).
    pub uri_column: bool,
    /// Write a selection of the compaction's bases (format version 3, 16 bytes an episode)
    /// where the warehouse and the query allow it, and a self-contained manifest where
    /// not: for curations of many episodes, which then need no copy of their rows.
    pub by_position: bool,
}

impl CurationOptions {
    /// Options that accept an empty result.
    pub fn allowing_empty() -> Self {
        Self {
            allow_empty: true,
            ..Self::default()
        }
    }

    /// These options, keeping the `uri` column.
    pub fn with_uri_column(self) -> Self {
        Self {
            uri_column: true,
            ..self
        }
    }

    /// These options, writing a selection of the compaction's bases where it can.
    pub fn by_position(self) -> Self {
        Self {
            by_position: true,
            ..self
        }
    }
}

/// Runs `sql` and writes every selected row's columns as a self-contained manifest.
pub(crate) fn curate_self_contained(
    warehouse: &Warehouse,
    sql: &str,
    sampling: SamplingRule,
    output: &Path,
    options: CurationOptions,
) -> Result<CurationSummary, CurateError> {
    // Keep only what the manifest needs, so the scan reads only those columns.
    let mut lf = warehouse.query_lazy(sql)?;
    let schema = lf.collect_schema().map_err(CurateError::Query)?;
    if let Some(column) = NEEDED.into_iter().find(|c| schema.get(c).is_none()) {
        return Err(CurateError::MissingColumn { column });
    }
    let mut columns: Vec<Expr> = NEEDED.map(col).to_vec();
    if schema.get(DIGEST).is_some() {
        columns.push(col(DIGEST));
    }
    let df = lf.select(columns).collect().map_err(CurateError::Query)?;
    if df.height() == 0 && !options.allow_empty {
        return Err(CurateError::NoEpisodes);
    }
    let snapshot = warehouse.snapshot_id();
    let meta = ManifestMeta::new(sql, snapshot.clone(), sampling);
    let (rows, samples) = write_frame(&df, &meta, output, options)?;
    Ok(CurationSummary {
        rows,
        samples,
        snapshot,
        selection: false,
        declined: None,
        beside: Vec::new(),
        listed_twice: 0,
    })
}

/// Writes a query result as a manifest.
pub fn write_frame(
    df: &DataFrame,
    meta: &ManifestMeta,
    output: &Path,
    options: CurationOptions,
) -> Result<(usize, u64), CurateError> {
    for column in NEEDED {
        if df.column(column).is_err() {
            return Err(CurateError::MissingColumn { column });
        }
    }
    let cast = |name: &'static str, dtype: &DataType| -> Result<Column, CurateError> {
        df.column(name)
            .and_then(|c| c.cast(dtype))
            .map_err(|source| CurateError::ColumnType {
                column: name,
                source,
            })
    };
    let ids = cast("episode_id", &DataType::String)?;
    let uris = cast("uri", &DataType::String)?;
    let starts = cast("start_ns", &DataType::Int64)?;
    let ends = cast("end_ns", &DataType::Int64)?;
    let bytes = cast("bytes", &DataType::UInt64)?;
    let frames = cast("camera_frames", &DataType::UInt32)?;
    let states = cast("state_steps", &DataType::UInt32)?;
    let actions = cast("action_steps", &DataType::UInt32)?;
    let ids = strings("episode_id", &ids)?;
    refuse_duplicates(ids)?;
    let uris = strings("uri", &uris)?;
    let starts = numbers("start_ns", starts.i64())?;
    let ends = numbers("end_ns", ends.i64())?;
    let bytes = numbers("bytes", bytes.u64())?;
    let frames = numbers("camera_frames", frames.u32())?;
    let states = numbers("state_steps", states.u32())?;
    let actions = numbers("action_steps", actions.u32())?;
    let (starts, ends) = (slice("start_ns", &starts)?, slice("end_ns", &ends)?);
    let bytes = slice("bytes", &bytes)?;
    let (frames, states) = (
        slice("camera_frames", &frames)?,
        slice("state_steps", &states)?,
    );
    let actions = slice("action_steps", &actions)?;
    // Digests where the warehouse recorded them (0 for rows ingested before it did). The
    // tables keep a digest's 64 bits as a signed integer: the same bits, not its value.
    let digests = match df.column(DIGEST) {
        Ok(c) => Some(
            unsigned_bits(c)
                .and_then(|c| c.fill_null(FillNullStrategy::Zero))
                .map_err(|source| CurateError::ColumnType {
                    column: DIGEST,
                    source,
                })?,
        ),
        Err(_) => None,
    };
    let digests = match &digests {
        Some(c) => Some(numbers(DIGEST, c.u64())?),
        None => None,
    };
    let digest = match &digests {
        Some(d) => slice(DIGEST, d)?,
        None => &[],
    };

    // Object paths that all put the id inside one text (what ingest writes) are written
    // once, as the manifest's template, instead of once per row.
    let id_values = || ids.downcast_iter().flat_map(|a| a.values_iter());
    let uri_values = || uris.downcast_iter().flat_map(|a| a.values_iter());
    let template = (!options.uri_column)
        .then(|| id_values().zip(uri_values()).next())
        .flatten()
        .and_then(|(id, uri)| UriTemplate::of(uri, id))
        .filter(|t| {
            id_values()
                .zip(uri_values())
                .all(|(id, uri)| t.matches(uri, id))
        });
    let meta = ManifestMeta {
        uri_template: template,
        ..meta.clone()
    };
    let mut writer = ManifestWriter::create(output, &meta)?;
    writer.push_columns(
        ids.downcast_iter().flat_map(|a| a.values_iter()),
        uris.downcast_iter().flat_map(|a| a.values_iter()),
        ManifestNumbers {
            start_ns: starts,
            end_ns: ends,
            bytes,
            camera_frames: frames,
            state_steps: states,
            action_steps: actions,
            digest,
        },
    )?;
    Ok(writer.finish()?)
}

/// A 64-bit column as unsigned: a signed one's bits as they are (a hash stored as the
/// signed integer of the same bits), any other type cast.
fn unsigned_bits(c: &Column) -> PolarsResult<Column> {
    match c.dtype() {
        DataType::Int64 => {
            let signed = c.i64()?;
            let unsigned: UInt64Chunked =
                signed.apply_nonnull_values_generic(DataType::UInt64, |v| v as u64);
            Ok(unsigned.with_name(c.name().clone()).into_column())
        }
        _ => c.cast(&DataType::UInt64),
    }
}

/// Fails on the first episode id seen twice: a manifest that held an episode
/// twice would sample it twice and weigh it double without anyone asking.
///
/// The ids' 64-bit hashes are sorted and compared side by side: a quarter of a
/// 5·10^7-row curation went to inserting 10^7 id strings into a hash map, one cache
/// miss each. Equal hashes send the check to the ids themselves, so a collision is
/// never taken for a duplicate.
pub(crate) fn refuse_duplicates(ids: &StringChunked) -> Result<(), CurateError> {
    let mut hashes: Vec<u64> = ids
        .iter()
        .map(|id| reel_manifest::fnv1a(id.unwrap_or_default().bytes()))
        .collect();
    hashes.sort_unstable();
    if hashes.windows(2).any(|pair| pair[0] == pair[1]) {
        return refuse_duplicates_by_string(ids);
    }
    Ok(())
}

/// [`refuse_duplicates`] keyed by the ids themselves.
fn refuse_duplicates_by_string(ids: &StringChunked) -> Result<(), CurateError> {
    let mut first_rows = HashMap::with_capacity(ids.len());
    for (row, id) in ids.iter().enumerate() {
        let id = id.unwrap_or_default();
        if let Some(&first_row) = first_rows.get(id) {
            return Err(CurateError::DuplicateEpisode {
                episode_id: id.to_string(),
                first_row,
                row,
            });
        }
        first_rows.insert(id, row);
    }
    Ok(())
}

/// A string column with no nulls.
pub(crate) fn strings<'a>(
    column: &'static str,
    c: &'a Column,
) -> Result<&'a StringChunked, CurateError> {
    let ca = typed(column, c.str())?;
    match ca.first_null() {
        Some(row) => Err(CurateError::Null { row, column }),
        None => Ok(ca),
    }
}

pub(crate) fn slice<'a, T: PolarsNumericType>(
    column: &'static str,
    ca: &'a ChunkedArray<T>,
) -> Result<&'a [T::Native], CurateError> {
    typed(column, ca.cont_slice())
}

/// A numeric column with no nulls, in one chunk.
pub(crate) fn numbers<'a, T: PolarsNumericType>(
    column: &'static str,
    ca: PolarsResult<&'a ChunkedArray<T>>,
) -> Result<std::borrow::Cow<'a, ChunkedArray<T>>, CurateError> {
    let ca = typed(column, ca)?;
    match ca.first_null() {
        Some(row) => Err(CurateError::Null { row, column }),
        None => Ok(ca.rechunk()),
    }
}

fn typed<T>(column: &'static str, result: PolarsResult<T>) -> Result<T, CurateError> {
    result.map_err(|source| CurateError::ColumnType { column, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_seen_twice_is_refused_by_either_check_naming_both_rows() {
        let ids = StringChunked::from_slice("episode_id".into(), &["a", "b", "c", "b", "a"]);
        for check in [refuse_duplicates, refuse_duplicates_by_string] {
            match check(&ids) {
                Err(CurateError::DuplicateEpisode {
                    episode_id,
                    first_row,
                    row,
                }) => assert_eq!((episode_id.as_str(), first_row, row), ("b", 1, 3)),
                other => panic!("expected a duplicate, got {other:?}"),
            }
        }
        let unique = StringChunked::from_slice("episode_id".into(), &["a", "b", "c"]);
        assert!(refuse_duplicates(&unique).is_ok());
        assert!(refuse_duplicates_by_string(&unique).is_ok());
    }
}
