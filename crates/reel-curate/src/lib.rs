//! Curation: one SQL query over the episode warehouse, written as a training
//! manifest.
//!
//! The warehouse (`episodes/**/*.parquet` in a store, written by ingest) is
//! registered with Polars' SQL engine as the table `episodes`, deduplicated
//! so that a query sees the latest ingestion of each episode. A compaction
//! ([`compact()`]) writes that view out once, sorted for the common filters;
//! queries then scan it plainly and deduplicate only the files ingested
//! since. The query's
//! rows become a memory-mapped Arrow manifest (`reel-manifest`). This is the
//! only Reel crate that links polars; nothing on the loading path depends on
//! it.
//!
//! ```no_run
//! use reel_curate::{Warehouse, curate_to_manifest};
//! use reel_manifest::SamplingRule;
//!
//! let warehouse = Warehouse::open("/data/warehouse")?;
//! let summary = curate_to_manifest(
//!     &warehouse,
//!     "SELECT * FROM episodes WHERE task = 'fold_towel' AND success AND qc_pass",
//!     SamplingRule::at_hz(10.0, 1.0, 1.0),
//!     "manifest.arrow".as_ref(),
//! )?;
//! println!("{} episodes, {} samples", summary.rows, summary.samples);
//! # Ok::<(), reel_curate::CurateError>(())
//! ```

use std::path::Path;

mod by_position;
pub mod compact;
mod curation;
pub mod db_tables;
mod episodes_schema;
pub mod query_policy;
mod row_lineage;
#[cfg(feature = "test-support")]
pub mod synthetic;

pub use compact::{CompactOptions, CompactionState, CompactionSummary, compact, compact_with};
use compact::{Compaction, classify, read_pointer};
pub use curation::{CurationOptions, CurationSummary, write_frame};
pub use db_tables::DbTables;
use polars::prelude::*;
use polars::sql::SQLContext;
pub use query_policy::QueryRefusal;
use reel_io::Store;
use reel_manifest::SamplingRule;
use reel_manifest::warehouse::EPISODES_PREFIX;

/// Errors of curation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CurateError {
    #[error("warehouse {uri}: {source}")]
    Store {
        uri: String,
        #[source]
        source: Box<reel_io::Error>,
    },
    #[error("warehouse {uri} has no episode files under {EPISODES_PREFIX}")]
    EmptyWarehouse { uri: String },
    #[error("query failed: {0}")]
    Query(#[source] PolarsError),
    #[error("query refused: {0}")]
    Refused(#[from] QueryRefusal),
    #[error("change log {name}: {reason}")]
    ChangeLog { name: String, reason: String },
    #[error(
        "the query's result lacks column {column:?}, which the manifest needs (select it, or SELECT *)"
    )]
    MissingColumn { column: &'static str },
    #[error("the query's result has column {column:?} of an unusable type: {source}")]
    ColumnType {
        column: &'static str,
        #[source]
        source: PolarsError,
    },
    #[error("row {row}: {column} is null")]
    Null { row: usize, column: &'static str },
    #[error(transparent)]
    Manifest(#[from] reel_manifest::ManifestError),
    #[error(
        "the query selected no episodes: no manifest written (allow an empty result to write one)"
    )]
    NoEpisodes,
    #[error(
        "the query selected episode {episode_id:?} twice (rows {first_row} and {row}): each episode \
         may appear once in a manifest (a UNION ALL or a join that fans out?)"
    )]
    DuplicateEpisode {
        episode_id: String,
        first_row: usize,
        row: usize,
    },
    #[error("compaction pointer {key}: {reason}")]
    BadCompaction { key: String, reason: String },
}

/// The store's and the manifest's errors keep their kind; a warehouse with no episodes is
/// the environment's (the wrong URI, or nothing ingested yet); the rest is the query or the
/// data it read, bad input.
impl reel_io::Kinded for CurateError {
    fn kind(&self) -> reel_io::ErrorKind {
        use reel_io::ErrorKind;
        match self {
            Self::Store { source, .. } => source.kind(),
            Self::Manifest(e) => e.kind(),
            Self::EmptyWarehouse { .. } => ErrorKind::Environment,
            Self::Query(_)
            | Self::Refused(_)
            | Self::ChangeLog { .. }
            | Self::MissingColumn { .. }
            | Self::ColumnType { .. }
            | Self::Null { .. }
            | Self::NoEpisodes
            | Self::DuplicateEpisode { .. }
            | Self::BadCompaction { .. } => ErrorKind::BadInput,
        }
    }
}

/// A warehouse: the `episodes` Parquet files of a store, as of one moment.
#[derive(Debug, Clone)]
pub struct Warehouse {
    store: Store,
    /// Object keys and sizes, sorted: what this snapshot contains.
    files: Vec<(String, u64)>,
    /// The current compaction and the episode files ingested after it.
    compaction: Option<(Compaction, Vec<String>)>,
    state: CompactionState,
    /// The metadata database's tables captured into this warehouse.
    db: DbTables,
}

impl Warehouse {
    /// Lists the warehouse's episode files (a local folder or `s3://…`).
    pub fn open(uri: &str) -> Result<Self, CurateError> {
        let err = |source| CurateError::Store {
            uri: uri.to_string(),
            source: Box::new(source),
        };
        Self::from_store(Store::open(uri).map_err(err)?)
    }

    /// Lists the warehouse's episode files in an already opened store.
    pub fn from_store(store: Store) -> Result<Self, CurateError> {
        let err = |source| store_error(&store, source);
        let mut files = Vec::new();
        for key in store.list_recursive(EPISODES_PREFIX).map_err(err)? {
            if key.ends_with(".parquet") {
                let size = store.len_of(&key).map_err(err)?;
                files.push((key, size));
            }
        }
        files.sort();
        if files.is_empty() {
            let uri = store.uri().to_string();
            return Err(CurateError::EmptyWarehouse { uri });
        }
        let (compaction, state) = match read_pointer(&store)? {
            None => (None, CompactionState::None),
            Some(pointer) => match classify(&pointer, &files) {
                Ok(delta) => {
                    let state = CompactionState::Current {
                        id: pointer.id.clone(),
                        covered: pointer.covers.len(),
                        delta: delta.len(),
                    };
                    (Some((pointer, delta)), state)
                }
                Err(reason) => {
                    let id = pointer.id;
                    (None, CompactionState::Stale { id, reason })
                }
            },
        };
        let db = DbTables::read(&store)?;
        Ok(Self {
            store,
            files,
            compaction,
            state,
            db,
        })
    }

    /// The store the warehouse lives in.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The metadata database's tables captured into this warehouse (`reel-cdc`).
    pub fn db_tables(&self) -> &DbTables {
        &self.db
    }

    /// Whether queries read a compaction, and how much was ingested since.
    pub fn compaction_state(&self) -> &CompactionState {
        &self.state
    }

    /// The current compaction and the episode files newer than it.
    pub(crate) fn compaction(&self) -> Option<&(Compaction, Vec<String>)> {
        self.compaction.as_ref()
    }

    /// Episode files in this snapshot.
    pub fn files(&self) -> &[(String, u64)] {
        &self.files
    }

    /// An id for exactly what a query reads: appending a file changes it, and
    /// so does reading through a compaction (`…+c-…`), whose rows are the same
    /// but come in its sorted order.
    pub fn snapshot_id(&self) -> String {
        let files = format!(
            "wh-{:016x}-{}",
            file_set_hash(&self.files),
            self.files.len()
        );
        let files = match &self.compaction {
            Some((pointer, _)) => format!("{files}+{}", pointer.id),
            None => files,
        };
        match self.db.lsn() {
            0 => files,
            // The database's tables as of this LSN.
            lsn => format!(
                "{files}{}{}",
                reel_manifest::CDC_POSITION_MARK,
                reel_manifest::changes::lsn_text(lsn)
            ),
        }
    }

    /// Every row of every episode file, before deduplication.
    pub fn scan_all(&self) -> Result<LazyFrame, CurateError> {
        self.scan_log(self.files.iter().map(|(k, _)| k.as_str()))
    }

    /// The rows of the given episode parts, in order, in the current warehouse schema (the
    /// columns an older part lacks read as null).
    pub(crate) fn scan_log<'a>(
        &self,
        keys: impl Iterator<Item = &'a str>,
    ) -> Result<LazyFrame, CurateError> {
        self.scan_log_numbered(keys, None)
    }

    /// [`Warehouse::scan_log`], each row numbered in `row_index` (from its offset on).
    pub(crate) fn scan_log_numbered<'a>(
        &self,
        keys: impl Iterator<Item = &'a str>,
        row_index: Option<RowIndex>,
    ) -> Result<LazyFrame, CurateError> {
        let schema = episodes_schema::episodes_schema().map_err(CurateError::Query)?;
        self.scan_parts(keys, Some(schema), true, row_index)
    }

    /// The rows of the given Parquet objects, in `schema` or else the first object's; with
    /// `allow_missing_columns`, a column an object lacks reads as null there.
    pub(crate) fn scan_parts<'a>(
        &self,
        keys: impl Iterator<Item = &'a str>,
        schema: Option<SchemaRef>,
        allow_missing_columns: bool,
        row_index: Option<RowIndex>,
    ) -> Result<LazyFrame, CurateError> {
        let keys: Vec<&str> = keys.collect();
        // Every column lives in the files; partition folders only spread them
        // out. Hive parsing stays off so local and remote scans see one schema.
        let args = ScanArgsParquet {
            hive_options: HiveOptions {
                enabled: Some(false),
                ..HiveOptions::default()
            },
            schema,
            allow_missing_columns,
            row_index,
            ..ScanArgsParquet::default()
        };
        let sources = match self.store.local_root() {
            // Local: let Polars map the files and push projections down.
            Some(root) => ScanSources::Paths(
                keys.iter()
                    .map(|key| PlRefPath::new(root.join(key).to_string_lossy().as_ref()))
                    .collect(),
            ),
            // Remote: fetch through opendal (one code path for every store).
            None => {
                let mut buffers = Vec::with_capacity(keys.len());
                for key in &keys {
                    let bytes = self
                        .store
                        .read(key)
                        .map_err(|e| store_error(&self.store, e))?;
                    buffers.push(polars_buffer_from(bytes.to_vec()));
                }
                ScanSources::Buffers(buffers.into())
            }
        };
        LazyFrame::scan_parquet_sources(sources, args).map_err(CurateError::Query)
    }

    /// The `episodes` table: the latest ingestion of each episode.
    pub fn episodes(&self) -> Result<LazyFrame, CurateError> {
        Ok(self.episodes_table(false)?.0)
    }

    /// The `episodes` table; `numbered`, each row also carries its
    /// [`by_position::POSITION`]: its place in the compaction's bases, or, past their
    /// rows, in the files ingested since. Only a compaction with bases numbers rows.
    /// True beside it where the whole log is deduplicated at query time.
    pub(crate) fn episodes_table(&self, numbered: bool) -> Result<(LazyFrame, bool), CurateError> {
        let Some((pointer, delta)) = &self.compaction else {
            return Ok((latest_of(self.scan_all()?)?, true));
        };
        let numbering = |offset: u64| {
            numbered.then(|| RowIndex {
                name: by_position::POSITION.into(),
                offset: offset as IdxSize,
            })
        };
        let compacted =
            self.scan_log_numbered(pointer.parts.iter().map(String::as_str), numbering(0))?;
        if delta.is_empty() {
            return Ok((compacted, false));
        }
        let base_rows = pointer.bases.iter().map(|b| b.rows).sum();
        let newer =
            self.scan_log_numbered(delta.iter().map(String::as_str), numbering(base_rows))?;
        // Newer episodes, each with its id beside its integer key, and the
        // oldest of their ingestions: one read of the newer files.
        const NEWER_ID: &str = "__reel_newer_id";
        let seen = newer
            .clone()
            .select([
                col("episode_key"),
                col("episode_id").alias(NEWER_ID),
                col("ingested_at_ns"),
            ])
            .collect()
            .map_err(CurateError::Query)?;
        let oldest = seen
            .column("ingested_at_ns")
            .and_then(|c| c.i64().map(|c| c.min()))
            .map_err(CurateError::Query)?;
        let replaced = seen
            .lazy()
            .select([col("episode_key"), col(NEWER_ID)])
            .unique(None, UniqueKeepStrategy::Any)
            .collect()
            .map_err(CurateError::Query)?;
        let keys = replaced
            .column("episode_key")
            .and_then(|c| c.n_unique())
            .map_err(CurateError::Query)?;
        let all_newer = oldest.is_some_and(|t| t > pointer.newest_ingested_at_ns);
        if !all_newer || keys != replaced.height() {
            // A newer file holds a row older than the compaction's newest (a
            // late upload), or two newer episodes share a key: only a full
            // deduplication is sure to pick the right versions.
            let all = concat([compacted, newer], UnionArgs::default());
            return Ok((latest_of(all.map_err(CurateError::Query)?)?, true));
        }
        // Every newer row is newer than every compacted row: an episode in a
        // newer file replaces its compacted row. A left join on the integer
        // key lets the query's filter still reach the compacted scan; ids are
        // compared only where keys match. (An `is_in` on the key list checks
        // row-group statistics at rows × keys cost: 25 s at 50M rows.)
        let untouched = compacted
            .join(
                replaced.lazy(),
                [col("episode_key")],
                [col("episode_key")],
                JoinArgs::new(JoinType::Left),
            )
            .filter(
                col(NEWER_ID)
                    .is_null()
                    .or(col(NEWER_ID).neq(col("episode_id"))),
            )
            .drop(cols([NEWER_ID]));
        let table = concat([untouched, latest_of(newer)?], UnionArgs::default());
        Ok((table.map_err(CurateError::Query)?, false))
    }

    /// Plans `sql` (which reads the table `episodes`) without running it.
    ///
    /// A query that reads anything but the warehouse's tables (a table
    /// function such as `read_parquet`, another table, a second statement)
    /// is refused before it runs: see [`query_policy`].
    pub fn query_lazy(&self, sql: &str) -> Result<LazyFrame, CurateError> {
        self.query_table(sql, self.episodes()?)
    }

    /// Plans `sql` over `episodes` as the table of that name (and the database's tables).
    pub(crate) fn query_table(
        &self,
        sql: &str,
        episodes: LazyFrame,
    ) -> Result<LazyFrame, CurateError> {
        let db = self.db_tables_of(sql)?;
        query_over(sql, episodes, &db)
    }

    /// The database's tables `sql` reads, by name, after checking that it reads only the
    /// warehouse's tables. Only those: each costs a scan of its change log.
    pub(crate) fn db_tables_of(&self, sql: &str) -> Result<Vec<(String, LazyFrame)>, CurateError> {
        let db_names = self.db.names();
        let mut tables = vec![EPISODES_TABLE];
        tables.extend(db_names.iter().map(String::as_str));
        let named = query_policy::check_query(sql, &tables)?;
        self.db
            .frames(self, |n| named.iter().any(|t| t.eq_ignore_ascii_case(n)))
    }

    /// Runs `sql` (which reads the table `episodes`) and returns its rows.
    pub fn query(&self, sql: &str) -> Result<DataFrame, CurateError> {
        self.query_lazy(sql)?.collect().map_err(CurateError::Query)
    }
}

/// The table a curation query reads.
pub const EPISODES_TABLE: &str = "episodes";

/// Plans `sql` over `episodes` and the database's tables `db` (checked by
/// [`Warehouse::db_tables_of`]).
pub(crate) fn query_over(
    sql: &str,
    episodes: LazyFrame,
    db: &[(String, LazyFrame)],
) -> Result<LazyFrame, CurateError> {
    let mut context = SQLContext::new();
    context.register(EPISODES_TABLE, episodes);
    for (name, frame) in db {
        context.register(name, frame.clone());
    }
    context.execute(sql).map_err(CurateError::Query)
}

/// Keeps the latest ingestion (largest `ingested_at_ns`) of each episode.
pub(crate) fn latest_of(rows: LazyFrame) -> Result<LazyFrame, CurateError> {
    let latest = col("ingested_at_ns")
        .max()
        .over([col("episode_key"), col("episode_id")])
        .map_err(CurateError::Query)?;
    Ok(rows.filter(col("ingested_at_ns").eq(latest)))
}

/// A store failure, naming the warehouse.
pub(crate) fn store_error(store: &Store, source: reel_io::Error) -> CurateError {
    CurateError::Store {
        uri: store.uri().to_string(),
        source: Box::new(source),
    }
}

/// FNV-1a over object names and sizes: stable across runs and platforms.
pub(crate) fn file_set_hash(files: &[(String, u64)]) -> u64 {
    reel_manifest::fnv1a(
        files
            .iter()
            .flat_map(|(key, size)| key.bytes().chain(size.to_le_bytes())),
    )
}

fn polars_buffer_from(bytes: Vec<u8>) -> polars_buffer::Buffer<u8> {
    polars_buffer::Buffer::from(bytes)
}

/// Runs `sql` over `warehouse` and writes the result as a manifest at
/// `output` (atomically), with the query, snapshot id and sampling rule in
/// its metadata. A result with no episodes, or with one episode twice, is
/// an error and nothing is written.
pub fn curate_to_manifest(
    warehouse: &Warehouse,
    sql: &str,
    sampling: SamplingRule,
    output: &Path,
) -> Result<CurationSummary, CurateError> {
    curate_to_manifest_with(warehouse, sql, sampling, output, CurationOptions::default())
}

/// [`curate_to_manifest`], with the treatment of an empty result chosen, and by
/// position where [`CurationOptions::by_position`] asks it and the warehouse and the
/// query allow (a selection of the compaction's bases).
pub fn curate_to_manifest_with(
    warehouse: &Warehouse,
    sql: &str,
    sampling: SamplingRule,
    output: &Path,
    options: CurationOptions,
) -> Result<CurationSummary, CurateError> {
    let declined = if !options.by_position {
        None
    } else if options.uri_column {
        Some("a uri column was asked for (a selection has none)".to_string())
    } else {
        match by_position::curate(warehouse, sql, sampling, output, options)? {
            by_position::ByPosition::Written(summary) => return Ok(summary),
            by_position::ByPosition::Declined(reason) => Some(reason),
        }
    };
    let summary = curation::curate_self_contained(warehouse, sql, sampling, output, options)?;
    Ok(CurationSummary {
        declined,
        ..summary
    })
}
