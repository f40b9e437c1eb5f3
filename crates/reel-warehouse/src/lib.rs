//! Reel's warehouse: Delta Lake tables that any engine reads as they are (Spark, Trino,
//! DuckDB, Polars, pandas through `deltalake`), written through the Delta project's own
//! kernel.
//!
//! A warehouse is a store (a local folder or an S3 prefix) with one Delta table per
//! folder under `tables/`. Every change is one atomic commit of the table's log: its
//! rows are there for every reader at once, or not at all. A commit names its writer and
//! how far that writer has come (an application id and version, Delta's `txn` action), so
//! one made again after a crash adds nothing; writers that commit at once all land, each
//! retried from the newest version when another got there first. Rows are replaced and
//! deleted by key when they are written (a file holding a replaced row is rewritten
//! without it), so a table's current version holds what it says, with no rule for a
//! reader to apply; earlier versions stay readable (time travel) until the retention
//! removes their files.
//!
//! ```
//! use std::sync::Arc;
//! use arrow_array::{Int64Array, RecordBatch, StringArray};
//! use arrow_schema::{DataType, Field, Schema};
//! use reel_warehouse::{Change, Warehouse};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let warehouse = Warehouse::open(dir.path().to_str().unwrap())?;
//! let schema = Arc::new(Schema::new(vec![
//!     Field::new("id", DataType::Utf8, false),
//!     Field::new("score", DataType::Int64, false),
//! ]));
//! let reviews = warehouse.table("reviews")?;
//! reviews.create(&schema, &[])?;
//! let rows = |ids: Vec<&str>, scores: Vec<i64>| {
//!     RecordBatch::try_new(schema.clone(), vec![
//!         Arc::new(StringArray::from(ids)),
//!         Arc::new(Int64Array::from(scores)),
//!     ])
//! };
//! let first = Change { app: Some(("reviewer", 1)), add: vec![rows(vec!["a", "b"], vec![1, 2])?], key: vec!["id"], ..Change::default() };
//! assert_eq!(reviews.commit(&first)?.rows_added, 2);
//! assert!(reviews.commit(&first)?.already, "made once");
//! let second = Change { app: Some(("reviewer", 2)), add: vec![rows(vec!["b"], vec![5])?], key: vec!["id"], ..Change::default() };
//! let done = reviews.commit(&second)?;
//! assert_eq!((done.rows_added, done.rows_removed), (1, 1));
//! let latest = reviews.version(None)?;
//! assert_eq!(latest.files()?.iter().map(|f| f.rows.unwrap_or(0)).sum::<u64>(), 2);
//! // The first commit's version still reads as it was.
//! assert_eq!(reviews.version(Some(1))?.files()?.len(), 1);
//! # Ok(())
//! # }
//! ```

mod commit;
mod data_file;
pub mod episodes;
mod error;
mod local_folder;
mod location;
mod maintain;
mod probe;
mod rewrite;
mod table;

use std::sync::Arc;

pub use commit::{CHECKPOINT_INTERVAL, Change, Committed, Operation};
pub use data_file::{BLOOM_FPP, Compression, ROW_GROUP_ROWS};
pub use error::{Result, WarehouseError};
pub use maintain::{Compacted, Layout, SMALL_FILE_ROWS, TIER_FILES, Vacuumed};
pub use table::{BLOOM_COLUMN_PROPERTY, TABLES_PREFIX, Table, TableFile, TableVersion};

use location::Location;
use reel_io::{Store, StoreOptions};

/// The Delta table at `uri` (its folder: local, or `s3://bucket/prefix?…`), whoever wrote
/// it: for reading a table made elsewhere (a curation computed in Spark, say).
pub fn open_table(uri: &str) -> Result<Table> {
    let location = Location::open(uri, &StoreOptions::default())?;
    Ok(Table::at_root(Arc::new(location)))
}

/// A warehouse: its store and its tables. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Warehouse {
    location: Arc<Location>,
}

impl Warehouse {
    /// The warehouse at `uri`: a local folder (created if missing) or
    /// `s3://bucket/prefix?endpoint=…&region=…`, credentials from the environment.
    pub fn open(uri: &str) -> Result<Self> {
        Self::open_with(uri, &StoreOptions::default())
    }

    /// [`Warehouse::open`] with explicit credentials and retries.
    pub fn open_with(uri: &str, options: &StoreOptions) -> Result<Self> {
        Ok(Self {
            location: Arc::new(Location::open(uri, options)?),
        })
    }

    /// The warehouse in `store` (its URI and credentials).
    pub fn for_store(store: &Store) -> Result<Self> {
        Self::open_with(store.uri(), store.options())
    }

    /// Table `name` (lower-case letters, digits and `_`), whether it exists or not.
    pub fn table(&self, name: &str) -> Result<Table> {
        Table::new(self.location.clone(), name)
    }

    /// The warehouse's store.
    pub fn store(&self) -> &Store {
        &self.location.store
    }

    /// The names of the tables that exist: one listing of `tables/`'s folders (not of
    /// their files), then each folder's log looked for.
    pub fn tables(&self) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for folder in self.location.store.list_folders(TABLES_PREFIX)? {
            let Some(name) = folder
                .strip_prefix(TABLES_PREFIX)
                .map(|n| n.trim_end_matches('/'))
                .filter(|n| !n.is_empty())
            else {
                continue;
            };
            if self.table(name)?.exists()? {
                names.push(name.to_owned());
            }
        }
        Ok(names)
    }
}
