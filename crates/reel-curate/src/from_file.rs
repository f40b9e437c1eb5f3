//! A curation computed elsewhere: the episodes a team selected in Spark, Trino or DuckDB,
//! handed over as a file (Parquet, Arrow IPC, or a Delta table) with an `episode_id`
//! column, written as a manifest of the warehouse's rows for them, with the same options
//! and checks as a SQL curation.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use arrow_array::{Array, RecordBatch, StringArray};
use polars::prelude::*;
use reel_manifest::SamplingRule;

use crate::{CurateError, CurationOptions, CurationSummary, Warehouse, curate_to_manifest_with};

/// The column a curation file must hold.
pub const EPISODE_ID: &str = "episode_id";

/// The table the file's episodes are known by in the query a curation from a file runs.
pub const SELECTED_TABLE: &str = "selected";

/// The query that writes the episodes of [`SELECTED_TABLE`] (the manifest records it).
pub const SELECTED_QUERY: &str = "SELECT episodes.* FROM episodes \
    INNER JOIN selected ON episodes.episode_id = selected.episode_id";

/// Writes the manifest for the episodes `source` lists (a local Parquet or Arrow IPC file,
/// or a Delta table: a folder or `s3://` URI holding `_delta_log/`), at `warehouse`'s
/// versions. An id listed twice is one episode; an id the warehouse's `episodes` does not
/// hold is an error, and nothing is written.
pub fn curate_from_file(
    warehouse: &Warehouse,
    source: &str,
    sampling: SamplingRule,
    output: &Path,
    options: CurationOptions,
) -> Result<CurationSummary, CurateError> {
    let ids = read_episode_ids(source)?;
    let listed = ids.len();
    let mut seen = HashSet::with_capacity(ids.len());
    let unique: Vec<String> = ids
        .into_iter()
        .filter(|id| seen.insert(id.clone()))
        .collect();
    let selected = df!(EPISODE_ID => unique.clone()).map_err(CurateError::Query)?;
    let warehouse = warehouse.clone().with_selected(selected);
    let found = warehouse
        .query("SELECT episodes.episode_id FROM episodes INNER JOIN selected ON episodes.episode_id = selected.episode_id")?;
    let found: HashSet<String> = found
        .column(EPISODE_ID)
        .and_then(|c| c.str().cloned())
        .map_err(CurateError::Query)?
        .iter()
        .flatten()
        .map(str::to_owned)
        .collect();
    let missing: Vec<&String> = unique.iter().filter(|id| !found.contains(*id)).collect();
    if !missing.is_empty() {
        let first: Vec<&str> = missing.iter().take(5).map(|s| s.as_str()).collect();
        return Err(CurateError::FromFile {
            file: source.to_owned(),
            reason: format!(
                "{} of its {} episode ids are not in the warehouse's episodes ({}): {}{}",
                missing.len(),
                unique.len(),
                warehouse.snapshot_id(),
                first.join(", "),
                if missing.len() > first.len() {
                    ", …"
                } else {
                    ""
                }
            ),
        });
    }
    let summary = curate_to_manifest_with(&warehouse, SELECTED_QUERY, sampling, output, options)?;
    Ok(CurationSummary {
        listed_twice: (listed - unique.len()) as u64,
        ..summary
    })
}

/// The `episode_id` column of a Parquet file, an Arrow IPC file (or stream), or a Delta
/// table's current version.
pub fn read_episode_ids(source: &str) -> Result<Vec<String>, CurateError> {
    let bad = |reason: String| CurateError::FromFile {
        file: source.to_owned(),
        reason,
    };
    let path = Path::new(source);
    let is_delta = source.starts_with("s3://") || path.join("_delta_log").is_dir();
    let batches: Vec<RecordBatch> = if is_delta {
        let table = reel_warehouse::open_table(source)?;
        vec![table.version(None)?.read(Some(&[EPISODE_ID]))?]
    } else {
        let bytes = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
        if bytes.starts_with(b"PAR1") {
            let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
                bytes::Bytes::from(bytes),
            )
            .map_err(|e| bad(e.to_string()))?;
            let index = reader
                .parquet_schema()
                .columns()
                .iter()
                .position(|c| c.path().string() == EPISODE_ID)
                .ok_or_else(|| bad(format!("it has no {EPISODE_ID} column")))?;
            let mask = parquet::arrow::ProjectionMask::leaves(reader.parquet_schema(), [index]);
            reader
                .with_projection(mask)
                .build()
                .map_err(|e| bad(e.to_string()))?
                .collect::<Result<_, _>>()
                .map_err(|e| bad(e.to_string()))?
        } else if bytes.starts_with(b"ARROW1") {
            arrow_ipc::reader::FileReader::try_new(std::io::Cursor::new(bytes), None)
                .map_err(|e| bad(e.to_string()))?
                .collect::<Result<_, _>>()
                .map_err(|e| bad(e.to_string()))?
        } else {
            arrow_ipc::reader::StreamReader::try_new(std::io::Cursor::new(bytes), None)
                .map_err(|_| bad("neither Parquet nor Arrow IPC, nor a Delta table".into()))?
                .collect::<Result<_, _>>()
                .map_err(|e| bad(e.to_string()))?
        }
    };
    let mut ids = Vec::new();
    for batch in &batches {
        let column = batch
            .column_by_name(EPISODE_ID)
            .ok_or_else(|| bad(format!("it has no {EPISODE_ID} column")))?;
        let column = arrow_cast::cast(column, &arrow_schema::DataType::Utf8)
            .map_err(|e| bad(format!("its {EPISODE_ID} column: {e}")))?;
        let column: Arc<dyn Array> = column;
        let strings = column
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or_else(|| bad(format!("its {EPISODE_ID} column is not text")))?;
        for i in 0..strings.len() {
            if strings.is_null(i) {
                return Err(bad(format!("row {}: {EPISODE_ID} is null", ids.len())));
            }
            ids.push(strings.value(i).to_owned());
        }
    }
    if ids.is_empty() {
        return Err(bad("it lists no episodes".into()));
    }
    Ok(ids)
}
