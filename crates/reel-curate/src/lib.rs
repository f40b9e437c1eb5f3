//! Curation: one SQL query over the warehouse, written as a training manifest.
//!
//! The warehouse's tables (Delta Lake, `reel-warehouse`) are registered with Polars' SQL
//! engine: `episodes` (one row per episode, its latest ingestion), `ingestions` (every
//! ingestion) and the metadata database's captured tables, each as the files of one of
//! its versions. The query's rows become a memory-mapped Arrow manifest
//! (`reel-manifest`) that records the versions it read, so the same curation can be run
//! again at them ([`AsOf`]). [`compact()`] and [`vacuum()`] keep the tables fast and
//! small, as the format does. This is the only Reel crate that links polars; nothing on
//! the loading path depends on it.
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
use std::sync::Arc;

mod as_of;
mod by_position;
pub mod compact;
mod curation;
pub mod db_tables;
mod episodes_schema;
pub mod from_file;
pub mod migrate;
pub mod query_policy;
mod row_lineage;
#[cfg(feature = "test-support")]
pub mod synthetic;

pub use as_of::AsOf;
pub use compact::{
    CompactOptions, CompactionSummary, DEFAULT_RETENTION, VacuumSummary, compact, compact_with,
    vacuum,
};
pub use curation::{CurationOptions, CurationSummary, write_frame};
pub use db_tables::DbTables;
pub use from_file::{curate_from_file, read_episode_ids};
pub use migrate::{MigrationSummary, migrate};
use polars::prelude::*;
use polars::sql::SQLContext;
pub use query_policy::QueryRefusal;
use reel_io::Store;
use reel_manifest::SamplingRule;
use reel_warehouse::episodes::{EPISODES, INGESTIONS};
use reel_warehouse::{TableFile, TableVersion, WarehouseError};

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
    #[error("warehouse {uri} has no episodes table: nothing was ingested into it yet{}", legacy_hint(*.legacy))]
    EmptyWarehouse { uri: String, legacy: bool },
    #[error(transparent)]
    Table(#[from] WarehouseError),
    #[error("migration: {reason}")]
    Migration { reason: String },
    #[error("as of {as_of}: {reason}")]
    AsOf { as_of: String, reason: String },
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
    #[error("compaction {key}: {reason}")]
    BadCompaction { key: String, reason: String },
    #[error("curation file {file}: {reason}")]
    FromFile { file: String, reason: String },
}

fn legacy_hint(legacy: bool) -> &'static str {
    if legacy {
        " (its episodes are in the earlier layout, under episodes/: run `reel-compact --migrate`)"
    } else {
        ""
    }
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
            Self::Table(e) => e.kind(),
            Self::EmptyWarehouse { .. } | Self::AsOf { .. } => ErrorKind::Environment,
            Self::Migration { .. } => ErrorKind::BadInput,
            Self::Query(_)
            | Self::Refused(_)
            | Self::ChangeLog { .. }
            | Self::MissingColumn { .. }
            | Self::ColumnType { .. }
            | Self::Null { .. }
            | Self::NoEpisodes
            | Self::DuplicateEpisode { .. }
            | Self::BadCompaction { .. }
            | Self::FromFile { .. } => ErrorKind::BadInput,
        }
    }
}

/// A warehouse as of one moment: its `episodes` and `ingestions` tables at one version
/// each, and the metadata database's tables captured into it.
#[derive(Debug, Clone)]
pub struct Warehouse {
    tables: reel_warehouse::Warehouse,
    episodes: TableVersion,
    /// `episodes`' data files at that version, sorted by key.
    files: Vec<TableFile>,
    /// `ingestions` at a version, where the table exists.
    ingestions: Option<TableVersion>,
    /// The metadata database's tables captured into this warehouse.
    db: DbTables,
    /// Episodes selected elsewhere, queried as the table `selected` ([`from_file`]).
    selected: Option<Arc<DataFrame>>,
}

impl Warehouse {
    /// The warehouse at `uri` (a local folder or `s3://…`), its tables' latest versions.
    pub fn open(uri: &str) -> Result<Self, CurateError> {
        Self::from_tables(reel_warehouse::Warehouse::open(uri)?, None)
    }

    /// The warehouse at `uri` with its tables at the versions `as_of` names.
    pub fn open_as_of(uri: &str, as_of: &AsOf) -> Result<Self, CurateError> {
        Self::from_tables(reel_warehouse::Warehouse::open(uri)?, Some(as_of))
    }

    /// The warehouse in an already opened store, its tables' latest versions.
    pub fn from_store(store: Store) -> Result<Self, CurateError> {
        Self::from_tables(reel_warehouse::Warehouse::for_store(&store)?, None)
    }

    /// The warehouse's tables, at the versions `as_of` names or their latest.
    pub fn from_tables(
        tables: reel_warehouse::Warehouse,
        as_of: Option<&AsOf>,
    ) -> Result<Self, CurateError> {
        let episodes = tables.table(EPISODES)?;
        if !episodes.exists()? {
            let store = tables.store();
            let legacy = store
                .list(migrate::LEGACY_EPISODES)
                .map_err(|e| store_error(store, e))?;
            return Err(CurateError::EmptyWarehouse {
                uri: reel_io::redact(store.uri()).into_owned(),
                legacy: !legacy.is_empty(),
            });
        }
        let at = |name: &str| as_of.and_then(|a| a.version_of(name));
        let episodes = as_of::version(&episodes, at(EPISODES), as_of)?;
        let ingestions = tables.table(INGESTIONS)?;
        let ingestions = match ingestions.exists()? {
            true => Some(as_of::version(&ingestions, at(INGESTIONS), as_of)?),
            false => None,
        };
        let files = episodes.files()?;
        let db = DbTables::read(&tables, as_of)?;
        Ok(Self {
            tables,
            episodes,
            files,
            ingestions,
            db,
            selected: None,
        })
    }

    /// The store the warehouse lives in.
    pub fn store(&self) -> &Store {
        self.tables.store()
    }

    /// The warehouse's tables.
    pub fn tables(&self) -> &reel_warehouse::Warehouse {
        &self.tables
    }

    /// The metadata database's tables captured into this warehouse (`reel-cdc`).
    pub fn db_tables(&self) -> &DbTables {
        &self.db
    }

    /// The version of `episodes` read.
    pub fn episodes_version(&self) -> &TableVersion {
        &self.episodes
    }

    /// `episodes`' data files at the version read.
    pub fn files(&self) -> &[TableFile] {
        &self.files
    }

    /// The versions this warehouse reads, as a manifest records them.
    pub fn as_of(&self) -> AsOf {
        let mut tables = vec![(EPISODES.to_owned(), self.episodes.number())];
        if let Some(ingestions) = &self.ingestions {
            tables.push((INGESTIONS.to_owned(), ingestions.number()));
        }
        tables.extend(self.db.versions());
        AsOf::new(tables, self.db.lsn())
    }

    /// What a manifest records as its warehouse snapshot: the tables' versions
    /// (`episodes@12 ingestions@12`), and, where the database's tables are captured, the
    /// capture's position (`+db-<LSN>`).
    pub fn snapshot_id(&self) -> String {
        self.as_of().to_string()
    }

    /// The rows of `episodes`' data files `keys`, in the tables' schema, each numbered in
    /// `row_index` (from its offset on) when given.
    pub(crate) fn scan_files<'a>(
        &self,
        keys: impl Iterator<Item = &'a str>,
        row_index: Option<RowIndex>,
    ) -> Result<LazyFrame, CurateError> {
        let schema = episodes_schema::episodes_schema().map_err(CurateError::Query)?;
        self.scan_parts(keys, Some(schema), true, row_index)
    }

    /// The rows of the given Parquet objects, in `schema` or else the first object's; with
    /// `allow_missing_columns`, a column an object lacks reads as null there (a column a
    /// later version added).
    pub(crate) fn scan_parts<'a>(
        &self,
        keys: impl Iterator<Item = &'a str>,
        schema: Option<SchemaRef>,
        allow_missing_columns: bool,
        row_index: Option<RowIndex>,
    ) -> Result<LazyFrame, CurateError> {
        let store = self.store();
        let keys: Vec<&str> = keys.collect();
        if keys.is_empty() {
            // A table with no rows: its columns, no files to scan.
            let schema = match schema {
                Some(schema) => schema,
                None => episodes_schema::episodes_schema().map_err(CurateError::Query)?,
            };
            let mut empty = DataFrame::empty_with_schema(&schema);
            if let Some(index) = row_index {
                empty = empty
                    .with_row_index(index.name, Some(index.offset))
                    .map_err(CurateError::Query)?;
            }
            return Ok(empty.lazy());
        }
        // Hive parsing stays off so local and remote scans see one schema.
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
        let sources = match store.local_root() {
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
                    let bytes = store.read(key).map_err(|e| store_error(store, e))?;
                    buffers.push(polars_buffer_from(bytes.to_vec()));
                }
                ScanSources::Buffers(buffers.into())
            }
        };
        LazyFrame::scan_parquet_sources(sources, args).map_err(CurateError::Query)
    }

    /// The `episodes` table: one row per episode, its latest ingestion.
    pub fn episodes(&self) -> Result<LazyFrame, CurateError> {
        self.scan_files(self.files.iter().map(|f| f.key.as_str()), None)
    }

    /// The `ingestions` table: every ingestion of every episode.
    pub fn ingestions(&self) -> Result<LazyFrame, CurateError> {
        let files = match &self.ingestions {
            Some(version) => version.files()?,
            None => Vec::new(),
        };
        self.scan_files(files.iter().map(|f| f.key.as_str()), None)
    }

    /// Plans `sql` (which reads the table `episodes`) without running it.
    ///
    /// A query that reads anything but the warehouse's tables (a table
    /// function such as `read_parquet`, another table, a second statement)
    /// is refused before it runs: see [`query_policy`].
    pub fn query_lazy(&self, sql: &str) -> Result<LazyFrame, CurateError> {
        self.query_table(sql, self.episodes()?)
    }

    /// Plans `sql` over `episodes` as the table of that name (and the others).
    pub(crate) fn query_table(
        &self,
        sql: &str,
        episodes: LazyFrame,
    ) -> Result<LazyFrame, CurateError> {
        let others = self.tables_of(sql)?;
        query_over(sql, episodes, &others)
    }

    /// The tables besides `episodes` that `sql` reads (`ingestions`, the database's), by
    /// name, after checking that it reads only the warehouse's tables. Only those: each
    /// costs a scan.
    pub(crate) fn tables_of(&self, sql: &str) -> Result<Vec<(String, LazyFrame)>, CurateError> {
        let db_names = self.db.names();
        let mut tables = vec![EPISODES_TABLE, INGESTIONS];
        tables.extend(db_names.iter().map(String::as_str));
        if self.selected.is_some() {
            tables.push(from_file::SELECTED_TABLE);
        }
        let named = query_policy::check_query(sql, &tables)?;
        let reads = |name: &str| named.iter().any(|t| t.eq_ignore_ascii_case(name));
        let mut frames = self.db.frames(self, reads)?;
        if reads(INGESTIONS) {
            frames.push((INGESTIONS.to_owned(), self.ingestions()?));
        }
        if let Some(selected) = &self.selected
            && reads(from_file::SELECTED_TABLE)
        {
            frames.push((
                from_file::SELECTED_TABLE.to_owned(),
                selected.as_ref().clone().lazy(),
            ));
        }
        Ok(frames)
    }

    /// This warehouse with `episodes` (an `episode_id` column) as the table `selected`.
    pub(crate) fn with_selected(self, episodes: DataFrame) -> Self {
        Self {
            selected: Some(Arc::new(episodes)),
            ..self
        }
    }

    /// Runs `sql` (which reads the table `episodes`) and returns its rows.
    pub fn query(&self, sql: &str) -> Result<DataFrame, CurateError> {
        self.query_lazy(sql)?.collect().map_err(CurateError::Query)
    }
}

/// The table a curation query reads.
pub const EPISODES_TABLE: &str = "episodes";

/// Plans `sql` over `episodes` and the database's tables `db` (checked by
/// [`Warehouse::tables_of`]).
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

/// A store failure, naming the warehouse.
pub(crate) fn store_error(store: &Store, source: reel_io::Error) -> CurateError {
    CurateError::Store {
        uri: store.uri().to_string(),
        source: Box::new(source),
    }
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
