//! A table of the warehouse, and one version of it: what any Delta reader sees.

use std::sync::Arc;

use arrow_schema::Schema as ArrowSchema;
use delta_kernel::committer::FileSystemCommitter;
use delta_kernel::engine::arrow_conversion::{TryFromArrow, TryIntoArrow};
use delta_kernel::scan::state::ScanFile;
use delta_kernel::schema::StructType;
use delta_kernel::snapshot::SnapshotRef;
use delta_kernel::transaction::CommitResult;
use delta_kernel::transaction::create_table::create_table;
use delta_kernel::{KernelError, Snapshot};
use url::Url;

use crate::location::Location;
use crate::{Result, WarehouseError};

/// The folder of the warehouse's tables, one Delta table in each sub-folder.
pub const TABLES_PREFIX: &str = "tables/";

/// The table property naming the column each data file carries Parquet Bloom filters of
/// (the first key column of the table's commits): a commit probes them before reading a
/// file for the keys it replaces. Other readers ignore it.
pub const BLOOM_COLUMN_PROPERTY: &str = "reel.bloomFilterColumn";

/// Names Reel's writes in each commit's `commitInfo`.
pub(crate) const ENGINE_INFO: &str = concat!("reel/", env!("CARGO_PKG_VERSION"));

/// One table: `tables/<name>/` of the warehouse, its log in `_delta_log/`.
#[derive(Debug, Clone)]
pub struct Table {
    pub(crate) location: Arc<Location>,
    name: String,
    pub(crate) url: Url,
    /// Its folder in the store: `tables/<name>/`, or empty for a table opened at its own
    /// folder ([`crate::open_table`]).
    prefix: String,
}

/// A data file of one version of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableFile {
    /// Its key in the warehouse's store (`tables/<name>/part-….parquet`).
    pub key: String,
    pub size: u64,
    /// Rows it holds, where the log says.
    pub rows: Option<u64>,
}

impl Table {
    pub(crate) fn new(location: Arc<Location>, name: &str) -> Result<Self> {
        let valid = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !valid {
            return Err(WarehouseError::BadRows {
                table: name.to_owned(),
                reason: "a table's name is lower-case letters, digits and `_`".into(),
            });
        }
        let url = location
            .root
            .join(&format!("{TABLES_PREFIX}{name}/"))
            .map_err(|e| WarehouseError::BadRows {
                table: name.to_owned(),
                reason: e.to_string(),
            })?;
        Ok(Self {
            location,
            name: name.to_owned(),
            url,
            prefix: format!("{TABLES_PREFIX}{name}/"),
        })
    }

    /// The table whose folder is `location`'s root (any Delta table, written by anyone).
    pub(crate) fn at_root(location: Arc<Location>) -> Self {
        let url = location.root.clone();
        let name = url
            .path_segments()
            .and_then(|mut s| s.rfind(|s| !s.is_empty()))
            .unwrap_or("table")
            .to_owned();
        Self {
            location,
            name,
            url,
            prefix: String::new(),
        }
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The warehouse's store, where the table's files are keys under [`Table::prefix`].
    pub fn store(&self) -> &reel_io::Store {
        &self.location.store
    }

    /// The table's folder in the warehouse's store, with a trailing `/`.
    pub fn prefix(&self) -> String {
        self.prefix.clone()
    }

    /// Where any Delta reader opens the table: `file:///…/tables/<name>/` or
    /// `s3://bucket/prefix/tables/<name>/`.
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// Whether the table has a log: its first commit, or a checkpoint (after which the
    /// log before it may be cleaned). Two lookups, not a listing of the log.
    pub fn exists(&self) -> Result<bool> {
        let log = format!("{}_delta_log/", self.prefix());
        for key in [
            format!("{log}_last_checkpoint"),
            format!("{log}{:020}.json", 0),
        ] {
            match self.location.store.len_of(&key) {
                Ok(_) => return Ok(true),
                Err(reel_io::Error::NotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(false)
    }

    /// Creates the table with `schema` and `properties` (`delta.*` settings and Reel's own)
    /// unless it exists. Of writers racing to create it, one does; the others find it made.
    /// Returns whether this call created it.
    pub fn create(&self, schema: &ArrowSchema, properties: &[(&str, &str)]) -> Result<bool> {
        if self.exists()? {
            return Ok(false);
        }
        let schema = StructType::try_from_arrow(schema).map_err(|e| self.error(e.into()))?;
        let engine = self.location.engine.as_ref();
        // The kernel writes a local table only into a folder that exists.
        if let Some(root) = self.location.store.local_root() {
            let folder = root.join(self.prefix());
            std::fs::create_dir_all(&folder).map_err(|source| reel_io::Error::Io {
                name: folder.display().to_string(),
                source,
            })?;
        }
        // Reel records what it did beside a commit's data as Delta domain metadata (a
        // compaction's files, a capture's progress): a writer feature, which readers ignore.
        let mut all: Vec<(&str, &str)> = vec![("delta.feature.domainMetadata", "supported")];
        all.extend(properties.iter().copied());
        let txn = create_table(self.url.as_str(), Arc::new(schema), ENGINE_INFO, false)
            .with_table_properties(all)
            .build(engine, Box::new(FileSystemCommitter::new()));
        let txn = match txn {
            Ok(txn) => txn,
            Err(KernelError::TableAlreadyExistsAtPath(_)) => return Ok(false),
            Err(e) => return Err(self.error(e)),
        };
        match txn.commit(engine).map_err(|e| self.error(e))? {
            CommitResult::Committed(_) => Ok(true),
            CommitResult::Conflicted(_) => Ok(false),
            CommitResult::Retryable(r) => Err(self.error(r.error)),
        }
    }

    /// The table at `version`, or its latest version.
    pub fn version(&self, version: Option<u64>) -> Result<TableVersion> {
        let mut builder = Snapshot::builder_for(self.url.as_str());
        if let Some(v) = version {
            builder = builder.at_version(v);
        }
        match builder.build(self.location.engine.as_ref()) {
            Ok(snapshot) => Ok(TableVersion {
                table: self.clone(),
                snapshot,
            }),
            Err(e) => Err(self.open_error(e, version)),
        }
    }

    /// What an open that failed means: no table at all, a version that is not (or no
    /// longer) kept, or the kernel's own error.
    fn open_error(&self, error: KernelError, version: Option<u64>) -> WarehouseError {
        match self.exists() {
            Ok(false) => WarehouseError::NoTable {
                table: self.name.clone(),
                warehouse: reel_io::redact(self.location.store.uri()).into_owned(),
            },
            // Reaching the store failed: an outage, not a version that is gone (vacuum
            // must not take it for one).
            _ if is_outage(&error) => self.error(error),
            _ => match version {
                Some(version) => WarehouseError::NoVersion {
                    table: self.name.clone(),
                    version,
                    reason: error.to_string(),
                },
                None => self.error(error),
            },
        }
    }

    /// Adds `columns` (nullable) to the table's schema where it lacks them, in one commit
    /// that changes no data: rows written before read them as null. Returns the version
    /// it made, if any column was new.
    pub fn add_columns(&self, columns: &[arrow_schema::Field]) -> Result<Option<u64>> {
        let current = self.version(None)?;
        let schema = current.schema()?;
        let new: Vec<&arrow_schema::Field> = columns
            .iter()
            .filter(|f| schema.field_with_name(f.name()).is_err())
            .collect();
        if new.is_empty() {
            return Ok(None);
        }
        let engine = self.location.engine.as_ref();
        let mut builder = current.snapshot.clone().update_table(
            delta_kernel::transaction::UpdateTableOperation::AlterTable,
            ENGINE_INFO,
            false,
        );
        for field in new {
            let data_type = delta_kernel::schema::DataType::try_from_arrow(field.data_type())
                .map_err(|e| self.error(e.into()))?;
            builder = builder.add_column(delta_kernel::schema::StructField::nullable(
                field.name().as_str(),
                data_type,
            ));
        }
        let txn = builder
            .build(engine, Box::new(FileSystemCommitter::new()))
            .map_err(|e| self.error(e))?;
        match txn.commit(engine).map_err(|e| self.error(e))? {
            CommitResult::Committed(done) => Ok(Some(done.commit_version())),
            // Another writer changed the table first: look again.
            CommitResult::Conflicted(_) => self.add_columns(columns),
            CommitResult::Retryable(r) => Err(self.error(r.error)),
        }
    }

    pub(crate) fn error(&self, error: KernelError) -> WarehouseError {
        WarehouseError::delta(&self.name, error)
    }
}

/// One version of a table: a snapshot every reader of that version sees alike.
#[derive(Clone)]
pub struct TableVersion {
    pub(crate) table: Table,
    pub(crate) snapshot: SnapshotRef,
}

impl std::fmt::Debug for TableVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableVersion")
            .field("table", &self.table.name)
            .field("version", &self.snapshot.version())
            .finish()
    }
}

impl TableVersion {
    /// The table.
    pub fn table(&self) -> &Table {
        &self.table
    }

    /// The version's number.
    pub fn number(&self) -> u64 {
        self.snapshot.version()
    }

    /// The table's schema at this version, as Arrow's.
    pub fn schema(&self) -> Result<ArrowSchema> {
        self.snapshot
            .schema()
            .as_ref()
            .try_into_arrow()
            .map_err(|e| self.table.error(e.into()))
    }

    /// When this version was committed, in milliseconds since the epoch.
    pub fn timestamp_ms(&self) -> Result<i64> {
        self.snapshot
            .get_timestamp(self.table.location.engine.as_ref())
            .map_err(|e| self.table.error(e))
    }

    /// The configuration a commit recorded for domain `domain` (Delta's domain metadata),
    /// as of this version.
    pub fn domain(&self, domain: &str) -> Result<Option<String>> {
        self.snapshot
            .get_domain_metadata(domain, self.table.location.engine.as_ref())
            .map_err(|e| self.table.error(e))
    }

    /// The last version that application `app` committed as of this table version.
    pub fn app_version(&self, app: &str) -> Result<Option<i64>> {
        self.snapshot
            .get_app_id_version(app, self.table.location.engine.as_ref())
            .map_err(|e| self.table.error(e))
    }

    /// The column this version's data files carry Bloom filters of, where the table names
    /// one ([`BLOOM_COLUMN_PROPERTY`]).
    pub fn bloom_column(&self) -> Option<String> {
        self.snapshot
            .table_properties()
            .unknown_properties
            .get(BLOOM_COLUMN_PROPERTY)
            .cloned()
    }

    /// The data files of this version, sorted by key.
    pub fn files(&self) -> Result<Vec<TableFile>> {
        let engine = self.table.location.engine.as_ref();
        let scan = self
            .snapshot
            .clone()
            .scan_builder()
            .build()
            .map_err(|e| self.table.error(e))?;
        let mut found: Vec<ScanFile> = Vec::new();
        for metadata in scan
            .scan_metadata(engine)
            .map_err(|e| self.table.error(e))?
        {
            let metadata = metadata.map_err(|e| self.table.error(e))?;
            found = metadata
                .visit_scan_files(found, |files: &mut Vec<ScanFile>, file| files.push(file))
                .map_err(|e| self.table.error(e))?;
        }
        // A deletion vector hides rows of its file from readers that apply it; Reel reads
        // whole files, so a table with one (written by another engine) is refused, not
        // misread.
        if let Some(file) = found.iter().find(|f| f.dv_info.has_vector()) {
            return Err(WarehouseError::BadFile {
                table: self.table.name.clone(),
                file: file.path.clone(),
                reason: "it has a deletion vector, which Reel does not apply: rewrite the \
                         table without them (OPTIMIZE, or REORG TABLE … APPLY (PURGE))"
                    .into(),
            });
        }
        let prefix = self.table.prefix();
        let mut files: Vec<TableFile> = found
            .into_iter()
            .map(|file| TableFile {
                key: format!("{prefix}{}", percent_decode(&file.path)),
                size: file.size.max(0) as u64,
                rows: file.stats.map(|s| s.num_records),
            })
            .collect();
        files.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(files)
    }

    /// The rows of this version, all columns or `columns` only, as one batch (every file
    /// read into memory: for small tables and checks).
    pub fn read(&self, columns: Option<&[&str]>) -> Result<arrow_array::RecordBatch> {
        let schema = std::sync::Arc::new(self.schema()?);
        let schema = match columns {
            Some(columns) => {
                let indices = columns
                    .iter()
                    .map(|c| {
                        schema.index_of(c).map_err(|e| WarehouseError::BadRows {
                            table: self.table.name.clone(),
                            reason: e.to_string(),
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                std::sync::Arc::new(schema.project(&indices).map_err(|e| {
                    WarehouseError::BadRows {
                        table: self.table.name.clone(),
                        reason: e.to_string(),
                    }
                })?)
            }
            None => schema,
        };
        let mut batches = Vec::new();
        for file in self.files()? {
            // In the order asked for, with a column the file was written without as null.
            batches.push(self.table.read_file_as(&file.key, columns, &schema)?);
        }
        delta_kernel::arrow::compute::concat_batches(&schema, &batches).map_err(|e| {
            WarehouseError::BadRows {
                table: self.table.name.clone(),
                reason: e.to_string(),
            }
        })
    }

    pub(crate) fn snapshot(&self) -> &SnapshotRef {
        &self.snapshot
    }
}

/// Whether `error` is the store failing to answer (I/O, network), rather than what it
/// answered (a file or version that is not there).
fn is_outage(error: &KernelError) -> bool {
    match error {
        KernelError::Backtraced { source, .. } => is_outage(source),
        KernelError::ObjectStore(e) => {
            !matches!(e, delta_kernel::object_store::Error::NotFound { .. })
        }
        KernelError::IOError(e) => e.kind() != std::io::ErrorKind::NotFound,
        KernelError::Reqwest(_) | KernelError::JoinFailure(_) => true,
        _ => false,
    }
}

/// A log path as a store key: `%XX` escapes decoded (Reel's own names have none).
pub(crate) fn percent_decode(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (
                bytes.get(i + 1).and_then(|&b| hex(b)),
                bytes.get(i + 2).and_then(|&b| hex(b)),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
