//! What can go wrong with a table, by kind (reel_io's [`ErrorKind`]).

use reel_io::{ErrorKind, Kinded};

/// A table operation's failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WarehouseError {
    /// The store the warehouse lives in.
    #[error(transparent)]
    Store(#[from] reel_io::Error),
    /// The Delta log or a data file, as the kernel reported it.
    #[error("table {table}: {source}")]
    Delta {
        table: String,
        #[source]
        source: Box<delta_kernel::KernelError>,
    },
    /// A table that does not exist (yet).
    #[error("table {table} does not exist in {warehouse}")]
    NoTable { table: String, warehouse: String },
    /// A version that is not (or no longer) there to read.
    #[error("table {table} has no version {version}{}", reason_text(.reason))]
    NoVersion {
        table: String,
        version: u64,
        reason: String,
    },
    /// Rows that do not fit the table.
    #[error("table {table}: {reason}")]
    BadRows { table: String, reason: String },
    /// A data file of the table that does not read as Parquet of its schema.
    #[error("table {table}, file {file}: {reason}")]
    BadFile {
        table: String,
        file: String,
        reason: String,
    },
    /// Commits kept losing to other writers.
    #[error("table {table}: {attempts} commits lost to other writers in a row; try again")]
    Contended { table: String, attempts: usize },
}

fn reason_text(reason: &str) -> String {
    if reason.is_empty() {
        String::new()
    } else {
        format!(": {reason}")
    }
}

/// Shorthand.
pub type Result<T, E = WarehouseError> = std::result::Result<T, E>;

impl WarehouseError {
    pub(crate) fn delta(table: &str, source: delta_kernel::KernelError) -> Self {
        Self::Delta {
            table: table.to_owned(),
            source: Box::new(source),
        }
    }
}

impl Kinded for WarehouseError {
    fn kind(&self) -> ErrorKind {
        match self {
            Self::Store(e) => e.kind(),
            Self::Delta { source, .. } => delta_kind(source),
            Self::NoTable { .. } | Self::NoVersion { .. } => ErrorKind::Environment,
            Self::BadRows { .. } | Self::BadFile { .. } => ErrorKind::BadInput,
            Self::Contended { .. } => ErrorKind::Transient,
        }
    }
}

/// An I/O failure of the object store is an outage; anything else the kernel reports
/// about a table (a log it cannot replay, a schema it refuses) is the table's content.
fn delta_kind(error: &delta_kernel::KernelError) -> ErrorKind {
    use delta_kernel::KernelError as E;
    match error {
        E::Backtraced { source, .. } => delta_kind(source),
        E::ObjectStore(_) | E::IOError(_) | E::Reqwest(_) => ErrorKind::Transient,
        E::FileNotFound(_) | E::MissingVersion(_) | E::InvalidTableLocation(_) => {
            ErrorKind::Environment
        }
        _ => ErrorKind::BadInput,
    }
}
