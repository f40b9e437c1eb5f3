//! Moving a warehouse of the earlier layout into the tables, checked, losing nothing.
//!
//! Before the tables, ingest appended Parquet parts under `episodes/` (schema versions 1
//! to 3: unsigned integers, nanosecond timestamps), the `episodes` table was the latest
//! ingestion of each episode picked at query time, and a compaction wrote that view under
//! `compacted/`. A migration appends every part's rows to `ingestions`, writes the latest
//! row of each episode to `episodes` (one key range at a time, so memory holds one range),
//! checks that the tables hold exactly those rows (counts, ids, ingestion times and
//! canonical digests), and only then removes `episodes/` and `compacted/`. The captured
//! database tables' change logs under `db/` become their tables the same way: each
//! table's current rows, by the earlier layout's rules (the latest change per key in
//! commit order, without deletes and what a truncate removed), committed with the
//! capture's position and checked before `db/` goes. Run again, it finds its commits
//! made and finishes what was left.

use std::collections::BTreeMap;

use arrow_array::RecordBatch;
use polars::prelude::*;
use reel_manifest::changes::{
    CAPTURE_DOMAIN, CAPTURED_TABLE_PROPERTIES, CHANGES_PREFIX, COMMIT_COLUMN, CaptureRecord,
    ChangeProgress, LSN_COLUMN, OP_COLUMN, PROGRESS_KEY, SEQ_COLUMN, capture_app,
    captured_table_name, ops, parse_compacted_key, parse_part_key,
};
use reel_warehouse::episodes::{EPISODES, INGESTIONS, episode_schema, latest_ingestion};
use reel_warehouse::{Change, Table};

use crate::{CurateError, store_error};

/// Where the earlier layout kept its episode parts and its compactions.
pub const LEGACY_EPISODES: &str = "episodes/";
pub const LEGACY_COMPACTED: &str = "compacted/";

/// What a migration did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MigrationSummary {
    /// Parts of the earlier layout read.
    pub parts: usize,
    /// Rows appended to `ingestions` (every row of every part).
    pub ingestions: u64,
    /// Rows written to `episodes` (one per episode).
    pub episodes: u64,
    /// Captured database tables moved into their tables: name and current rows.
    pub db_tables: Vec<(String, u64)>,
    /// Objects of the earlier layout removed once the tables were checked.
    pub removed: usize,
}

/// Episode rows in memory at once while `episodes` is written: one key range of them.
const RANGE_ROWS: u64 = 1 << 21;

/// Migrates the warehouse at `uri` (see the module's documentation). A warehouse with no
/// part of the earlier layout is left as it is.
pub fn migrate(uri: &str) -> Result<MigrationSummary, CurateError> {
    let tables = reel_warehouse::Warehouse::open(uri)?;
    let store = tables.store().clone();
    let parts: Vec<String> = store
        .list_recursive(LEGACY_EPISODES)
        .map_err(|e| store_error(&store, e))?
        .into_iter()
        .filter(|k| k.ends_with(".parquet"))
        .collect();
    let mut summary = MigrationSummary {
        parts: parts.len(),
        ..MigrationSummary::default()
    };
    summary.db_tables = migrate_db(&tables)?;
    if !summary.db_tables.is_empty() {
        summary.removed += remove_prefix(&store, CHANGES_PREFIX)?;
    }
    if parts.is_empty() {
        return Ok(summary);
    }
    let (ingestions, episodes) = tables.episode_tables()?;
    let app = "migrate/legacy-episodes";
    let legacy = LegacyParts {
        store: &store,
        parts: &parts,
    };

    // Every row of every part, a commit per part (made once: the part's place).
    for (i, part) in parts.iter().enumerate() {
        let rows = legacy.rows(legacy.scan(&[part.as_str()])?)?;
        summary.ingestions += rows.num_rows() as u64;
        ingestions.commit(&Change {
            app: Some((app, i as i64 + 1)),
            add: vec![rows],
            ..Change::default()
        })?;
    }

    // The latest ingestion of each episode, one key range at a time.
    let all = legacy.scan(&parts.iter().map(String::as_str).collect::<Vec<_>>())?;
    let total = all
        .clone()
        .select([len()])
        .collect()
        .map_err(CurateError::Query)?
        .column("len")
        .and_then(|c| c.get(0).map(|v| v.extract::<u64>().unwrap_or(0)))
        .map_err(CurateError::Query)?;
    let ranges = total.div_ceil(RANGE_ROWS).max(1);
    for range in 0..ranges {
        let mine = match ranges {
            1 => all.clone(),
            _ => all
                .clone()
                .filter((col("episode_key") % lit(ranges)).eq(lit(range))),
        };
        let latest = latest_of(mine)?;
        let rows = legacy.rows(latest)?;
        summary.episodes += rows.num_rows() as u64;
        // By key, as an ingest commits: a row an ingest made since the upgrade, if newer,
        // stays, and no episode is there twice.
        episodes.commit(&latest_ingestion((app, range as i64 + 1), rows))?;
    }

    check(&legacy, &parts, &ingestions, &episodes, &summary)?;

    // Checked: the earlier layout goes.
    for prefix in [LEGACY_EPISODES, LEGACY_COMPACTED] {
        summary.removed += remove_prefix(&store, prefix)?;
    }
    Ok(summary)
}

/// Removes every object under `prefix`; returns how many there were.
fn remove_prefix(store: &reel_io::Store, prefix: &str) -> Result<usize, CurateError> {
    let keys = store
        .list_recursive(prefix)
        .map_err(|e| store_error(store, e))?;
    store
        .remove_all(prefix)
        .map_err(|e| store_error(store, e))?;
    Ok(keys.len())
}

/// Moves the captured tables' change logs of the earlier layout (`db/`) into their
/// tables, checked; returns each table's name and current rows (none without a change
/// log, or one whose initial snapshot never completed, which a capture takes again).
fn migrate_db(tables: &reel_warehouse::Warehouse) -> Result<Vec<(String, u64)>, CurateError> {
    let store = tables.store();
    let progress: ChangeProgress = match store.read(PROGRESS_KEY) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| CurateError::ChangeLog {
            name: store.object_uri(PROGRESS_KEY),
            reason: e.to_string(),
        })?,
        Err(reel_io::Error::NotFound { .. }) => return Ok(Vec::new()),
        Err(e) => return Err(store_error(store, e)),
    };
    if !progress.snapshot_done {
        return Ok(Vec::new());
    }
    // Each table's newest compaction and the parts after it, at or before the progress.
    let mut logs: BTreeMap<String, TableLog> = progress
        .tables
        .keys()
        .map(|t| (t.clone(), (None, Vec::new())))
        .collect();
    for key in store
        .list_recursive(CHANGES_PREFIX)
        .map_err(|e| store_error(store, e))?
    {
        let (part, compaction) = (parse_part_key(&key), parse_compacted_key(&key));
        let Some((table, lsn)) = part.or(compaction) else {
            continue;
        };
        let Some((compacted, parts)) = logs.get_mut(table).filter(|_| lsn <= progress.lsn) else {
            continue;
        };
        if part.is_some() {
            parts.push((key, lsn));
        } else if compacted.as_ref().is_none_or(|(_, c)| lsn > *c) {
            *compacted = Some((key, lsn));
        }
    }
    let mut migrated = Vec::new();
    for (name, (compacted, mut parts)) in logs {
        let shape = &progress.tables[&name];
        let since = compacted.as_ref().map_or(0, |(_, c)| *c);
        parts.retain(|(_, lsn)| *lsn > since);
        parts.sort_by_key(|(k, lsn)| (*lsn, k.clone()));
        // Newest part first (a column added later is in it), the compaction last.
        let keys: Vec<&str> = parts
            .iter()
            .rev()
            .map(|(k, _)| k.as_str())
            .chain(compacted.iter().map(|(k, _)| k.as_str()))
            .collect();
        // A table whose log holds nothing yet is empty, in its shape's columns.
        let rows = if keys.is_empty() {
            RecordBatch::new_empty(shape.table_schema())
        } else {
            let current = legacy_current_rows(store, &keys, &shape.key)?;
            let mut df = current.collect().map_err(CurateError::Query)?;
            to_record_batch_as_is(&mut df)?
        };
        let table = tables.table(&captured_table_name(&name))?;
        let record = CaptureRecord {
            slot: progress.slot.clone(),
            publication: progress.publication.clone(),
            snapshot_done: true,
            shape: shape.clone(),
        };
        let record = serde_json::to_string(&record).map_err(|e| CurateError::Migration {
            reason: e.to_string(),
        })?;
        let mut properties = CAPTURED_TABLE_PROPERTIES.to_vec();
        if let Some(first) = shape.key.first() {
            properties.push((reel_warehouse::BLOOM_COLUMN_PROPERTY, first.as_str()));
        }
        table.create(&rows.schema(), &properties)?;
        table.commit(&Change {
            app: Some((&capture_app(&progress.slot), progress.lsn as i64)),
            add: vec![rows.clone()],
            domain: Some((CAPTURE_DOMAIN, record)),
            ..Change::default()
        })?;
        let written = table.version(None)?.read(None)?;
        if written.num_rows() != rows.num_rows() {
            return Err(CurateError::Migration {
                reason: format!(
                    "table {name}: {} rows written, {} in the change log",
                    written.num_rows(),
                    rows.num_rows()
                ),
            });
        }
        migrated.push((name, rows.num_rows() as u64));
    }
    Ok(migrated)
}

/// A captured table's current rows by the earlier layout's rules: the latest change of
/// each key in commit order, without deletes and without what a truncate removed; the
/// change's `_lsn` and `_commit_ns` kept (as signed integers), `_op` and `_seq` dropped.
fn legacy_current_rows(
    store: &reel_io::Store,
    keys: &[&str],
    key_columns: &[String],
) -> Result<LazyFrame, CurateError> {
    let log = scan(store, keys, None)?;
    // A truncate and the rows its transaction inserts after it share the commit's LSN,
    // so "after" is by (`_lsn`, `_seq`).
    let truncate = col(OP_COLUMN).eq(lit(ops::TRUNCATE));
    let truncated_lsn = col(LSN_COLUMN).filter(truncate.clone()).max();
    let truncated_seq = col(SEQ_COLUMN)
        .filter(
            truncate
                .clone()
                .and(col(LSN_COLUMN).eq(truncated_lsn.clone())),
        )
        .max();
    let after_truncate = truncated_lsn
        .clone()
        .is_null()
        .or(col(LSN_COLUMN).gt(truncated_lsn.clone()))
        .or(col(LSN_COLUMN)
            .eq(truncated_lsn)
            .and(col(SEQ_COLUMN).gt(truncated_seq)));
    let rows = log.filter(col(OP_COLUMN).neq(lit(ops::TRUNCATE)).and(after_truncate));
    let key: Vec<Expr> = key_columns.iter().map(|k| col(k.as_str())).collect();
    Ok(rows
        .sort_by_exprs(
            [col(LSN_COLUMN), col(SEQ_COLUMN)],
            SortMultipleOptions::default(),
        )
        .unique_stable_generic(Some(key), UniqueKeepStrategy::Last)
        .filter(col(OP_COLUMN).neq(lit(ops::DELETE)))
        .drop(cols([OP_COLUMN, SEQ_COLUMN]))
        .with_columns([col(LSN_COLUMN).cast(DataType::Int64)]))
}

/// The tables hold exactly what the earlier layout did: every ingestion once, and for
/// each episode its latest row (same id, ingestion time and canonical digest).
fn check(
    legacy: &LegacyParts<'_>,
    parts: &[String],
    ingestions: &Table,
    episodes: &Table,
    summary: &MigrationSummary,
) -> Result<(), CurateError> {
    let counted = |table: &Table| -> Result<u64, CurateError> {
        Ok(table
            .version(None)?
            .files()?
            .iter()
            .map(|f| f.rows.unwrap_or(0))
            .sum())
    };
    let differ = |what: String| CurateError::Migration { reason: what };
    if counted(ingestions)? != summary.ingestions {
        return Err(differ(format!(
            "ingestions holds {} rows, the earlier layout {}",
            counted(ingestions)?,
            summary.ingestions
        )));
    }
    let expected = digests(&legacy.rows(latest_of(
        legacy.scan(&parts.iter().map(String::as_str).collect::<Vec<_>>())?,
    )?)?)?;
    let tables =
        crate::Warehouse::from_tables(reel_warehouse::Warehouse::for_store(legacy.store)?, None)?;
    let mut written = tables.episodes()?.collect().map_err(CurateError::Query)?;
    let written = digests(&to_record_batch(&mut written)?)?;
    if written != expected {
        let first = expected
            .iter()
            .find(|(id, v)| written.get(*id) != Some(v))
            .map(|(id, _)| id.clone())
            .or_else(|| {
                written
                    .keys()
                    .find(|id| !expected.contains_key(*id))
                    .cloned()
            });
        return Err(differ(format!(
            "episodes differs from the earlier layout's latest rows ({} against {} episodes; first: {})",
            written.len(),
            expected.len(),
            first.unwrap_or_default()
        )));
    }
    debug_assert_eq!(episodes.name(), EPISODES);
    debug_assert_eq!(ingestions.name(), INGESTIONS);
    Ok(())
}

/// The parts of the earlier layout.
struct LegacyParts<'a> {
    store: &'a reel_io::Store,
    parts: &'a [String],
}

impl LegacyParts<'_> {
    /// The rows of `keys` in the earlier layout's last schema (version 3; the columns an
    /// older part lacks read as null).
    fn scan(&self, keys: &[&str]) -> Result<LazyFrame, CurateError> {
        debug_assert!(!self.parts.is_empty());
        scan(self.store, keys, Some(legacy_schema()))
    }

    /// `rows` in the tables' schema (version 4): 64-bit hashes as the signed integer of
    /// the same bits, counts as 32-bit integers, times in microseconds.
    fn rows(&self, rows: LazyFrame) -> Result<RecordBatch, CurateError> {
        let mut df = rows.collect().map_err(CurateError::Query)?;
        to_record_batch(&mut df)
    }
}

/// The earlier layout's latest ingestion of each episode (largest `ingested_at_ns` per
/// episode key and id), the rule its readers applied.
fn latest_of(rows: LazyFrame) -> Result<LazyFrame, CurateError> {
    let latest = col("ingested_at_ns")
        .max()
        .over([col("episode_key"), col("episode_id")])
        .map_err(CurateError::Query)?;
    // Two ingestions at the same time (a part written twice) are one row.
    Ok(rows.filter(col("ingested_at_ns").eq(latest)).unique_stable(
        Some(cols(["episode_key", "episode_id"])),
        UniqueKeepStrategy::First,
    ))
}

/// Each episode's (ingestion time, canonical digest) in rows of the tables' schema, by id.
fn digests(rows: &RecordBatch) -> Result<BTreeMap<String, (i64, i64)>, CurateError> {
    let bad = |reason: &str| CurateError::Migration {
        reason: reason.to_owned(),
    };
    let column = |name: &str| rows.column_by_name(name).ok_or_else(|| bad(name));
    let ids = column("episode_id")?
        .as_any()
        .downcast_ref::<arrow_array::StringArray>()
        .ok_or_else(|| bad("episode_id is not text"))?;
    let int = |name: &str| -> Result<arrow_array::Int64Array, CurateError> {
        column(name)?
            .as_any()
            .downcast_ref::<arrow_array::Int64Array>()
            .cloned()
            .ok_or_else(|| bad(name))
    };
    let (at, digest) = (int("ingested_at_ns")?, int("canonical_digest")?);
    let mut out = BTreeMap::new();
    for i in 0..rows.num_rows() {
        use arrow_array::Array;
        let value = (
            at.value(i),
            if digest.is_null(i) {
                0
            } else {
                digest.value(i)
            },
        );
        if out.insert(ids.value(i).to_owned(), value).is_some() {
            return Err(bad(&format!("episode {} twice", ids.value(i))));
        }
    }
    Ok(out)
}

/// A Polars frame as one arrow-rs record batch in its own types (through Arrow IPC),
/// text as Arrow's `Utf8` and the change columns not null.
fn to_record_batch_as_is(df: &mut DataFrame) -> Result<RecordBatch, CurateError> {
    let batch = ipc_batch(df)?;
    let bad = |reason: String| CurateError::Migration { reason };
    let mut fields = Vec::new();
    let mut columns = Vec::new();
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        let data_type = match field.data_type() {
            arrow_schema::DataType::LargeUtf8 | arrow_schema::DataType::Utf8View => {
                arrow_schema::DataType::Utf8
            }
            other => other.clone(),
        };
        let nullable = !matches!(field.name().as_str(), LSN_COLUMN | COMMIT_COLUMN);
        columns.push(arrow_cast::cast(column, &data_type).map_err(|e| bad(e.to_string()))?);
        fields.push(arrow_schema::Field::new(field.name(), data_type, nullable));
    }
    RecordBatch::try_new(
        std::sync::Arc::new(arrow_schema::Schema::new(fields)),
        columns,
    )
    .map_err(|e| bad(e.to_string()))
}

/// A Polars frame as one arrow-rs record batch, through Arrow IPC.
fn ipc_batch(df: &mut DataFrame) -> Result<RecordBatch, CurateError> {
    let mut ipc = Vec::new();
    IpcWriter::new(&mut ipc)
        .with_compat_level(CompatLevel::oldest())
        .finish(df)
        .map_err(CurateError::Query)?;
    let bad = |reason: String| CurateError::Migration { reason };
    let reader = arrow_ipc::reader::FileReader::try_new(std::io::Cursor::new(ipc), None)
        .map_err(|e| bad(e.to_string()))?;
    let schema = reader.schema();
    let batches: Vec<RecordBatch> = reader
        .collect::<Result<_, _>>()
        .map_err(|e| bad(e.to_string()))?;
    arrow_select::concat::concat_batches(&schema, &batches).map_err(|e| bad(e.to_string()))
}

/// A Polars frame of the earlier layout's episode rows as one arrow-rs record batch of
/// the episode tables' schema, each column converted to the table's type.
fn to_record_batch(df: &mut DataFrame) -> Result<RecordBatch, CurateError> {
    let batch = ipc_batch(df)?;
    let bad = |reason: String| CurateError::Migration { reason };
    let schema = episode_schema();
    let mut columns = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        let column = batch
            .column_by_name(field.name())
            .ok_or_else(|| bad(format!("no column {}", field.name())))?;
        columns.push(convert(column, field.data_type()).map_err(|e| bad(e.to_string()))?);
    }
    RecordBatch::try_new(schema, columns).map_err(|e| bad(e.to_string()))
}

/// A column in the tables' type: a 64-bit unsigned hash as the signed integer of the same
/// bits (a cast would refuse half of them), anything else cast.
fn convert(
    column: &arrow_array::ArrayRef,
    to: &arrow_schema::DataType,
) -> Result<arrow_array::ArrayRef, arrow_schema::ArrowError> {
    use arrow_array::Array;
    if let (Some(unsigned), arrow_schema::DataType::Int64) = (
        column.as_any().downcast_ref::<arrow_array::UInt64Array>(),
        to,
    ) {
        let signed: arrow_array::Int64Array = (0..unsigned.len())
            .map(|i| (!unsigned.is_null(i)).then(|| unsigned.value(i) as i64))
            .collect();
        return Ok(std::sync::Arc::new(signed));
    }
    arrow_cast::cast(column, to)
}

/// The rows of the Parquet objects `keys` of `store`, in `schema` or the first object's
/// (a column an object lacks reads as null).
fn scan(
    store: &reel_io::Store,
    keys: &[&str],
    schema: Option<SchemaRef>,
) -> Result<LazyFrame, CurateError> {
    debug_assert!(!keys.is_empty());
    let args = ScanArgsParquet {
        hive_options: HiveOptions {
            enabled: Some(false),
            ..HiveOptions::default()
        },
        schema,
        allow_missing_columns: true,
        ..ScanArgsParquet::default()
    };
    let sources = match store.local_root() {
        Some(root) => ScanSources::Paths(
            keys.iter()
                .map(|key| PlRefPath::new(root.join(key).to_string_lossy().as_ref()))
                .collect(),
        ),
        None => {
            let mut buffers = Vec::with_capacity(keys.len());
            for key in keys {
                let bytes = store.read(key).map_err(|e| crate::store_error(store, e))?;
                buffers.push(polars_buffer::Buffer::from(bytes.to_vec()));
            }
            ScanSources::Buffers(buffers.into())
        }
    };
    LazyFrame::scan_parquet_sources(sources, args).map_err(CurateError::Query)
}

/// A captured table's change log in the earlier layout: its newest compaction (key,
/// LSN) and the parts after it.
type TableLog = (Option<(String, u64)>, Vec<(String, u64)>);

/// The earlier layout's last schema (version 3) in Polars' types.
fn legacy_schema() -> SchemaRef {
    use DataType::*;
    let columns: [(&str, DataType); 39] = [
        ("episode_id", String),
        ("episode_key", UInt64),
        ("pipeline_version", String),
        ("schema_version", UInt32),
        ("robot_id", String),
        ("robot_software_version", String),
        ("task", String),
        ("operator", String),
        ("success", Boolean),
        (
            "recorded_at",
            Datetime(TimeUnit::Nanoseconds, Some(TimeZone::UTC)),
        ),
        ("start_ns", Int64),
        ("end_ns", Int64),
        ("duration_s", Float64),
        ("cameras", UInt32),
        ("camera_frames", UInt32),
        ("state_steps", UInt32),
        ("action_steps", UInt32),
        ("hand_steps", UInt32),
        ("bytes", UInt64),
        ("qc_pass", Boolean),
        ("qc_flags", String),
        ("qc_camera_blackout", Boolean),
        ("qc_frozen_frames", Boolean),
        ("qc_corrupt_frames", Boolean),
        ("qc_choppy_joints", Boolean),
        ("qc_hand_dropout", Boolean),
        ("qc_timestamp_gap", Boolean),
        ("qc_rate_shortfall", Boolean),
        ("qc_dark_frame_ratio", Float64),
        ("qc_frozen_frame_ratio", Float64),
        ("qc_max_joint_step_rad", Float64),
        ("uri", String),
        ("ingested_at_ns", Int64),
        ("source_format", String),
        ("source_dataset", String),
        ("source_revision", String),
        ("source_episode_index", Int64),
        ("source_fps", Float64),
        ("canonical_digest", UInt64),
    ];
    Arc::new(
        columns
            .into_iter()
            .map(|(name, dtype)| Field::new(name.into(), dtype))
            .collect(),
    )
}
