use std::path::PathBuf;

/// Errors of reading, writing and fetching manifests. File errors name the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManifestError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not an Arrow IPC file ({reason})")]
    NotArrow { path: PathBuf, reason: String },
    #[error("{path}: manifest format version {found:?}, this reader understands {expected:?}")]
    Version {
        path: PathBuf,
        found: Option<String>,
        expected: &'static str,
    },
    #[error("{path}: column {column:?} {problem}")]
    Column {
        path: PathBuf,
        column: &'static str,
        problem: String,
    },
    #[error("{path}: corrupt manifest: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    #[error("{path}: {source}")]
    Arrow {
        path: PathBuf,
        #[source]
        source: arrow_schema::ArrowError,
    },
    #[error("sample {index} is out of range: the manifest has {total} samples")]
    SampleOutOfRange { index: u64, total: u64 },
    #[error("row {row} is out of range: the manifest has {rows} rows")]
    RowOutOfRange { row: usize, rows: usize },
    #[error("invalid shard: rank {rank} of world size {world}")]
    Shard { rank: usize, world: usize },
    #[error("invalid manifest row {row}: {reason}")]
    InvalidRow { row: usize, reason: String },
    #[error("fetching the manifest: {0}")]
    Store(#[from] reel_io::Error),
    #[error("{path}: waited {seconds} s for another rank to download the manifest")]
    FetchTimeout { path: PathBuf, seconds: u64 },
    /// A selection's base manifest is not there: a warehouse's vacuum removes the bases
    /// of the files no version within its retention reads.
    #[error(
        "{path}: its base {base} is gone (a warehouse's vacuum removes the bases of files \
         older than its retention, 7 days unless told otherwise): curate it again"
    )]
    BaseGone { path: PathBuf, base: String },
    /// A selection's base manifest could not be opened or is not the one it names.
    #[error("{path}: its base {base}: {source}")]
    Base {
        path: PathBuf,
        base: String,
        #[source]
        source: Box<ManifestError>,
    },
}

/// A file that is not a valid manifest is bad input; a request outside it (a sample, a
/// row, a shard) is the caller's; waiting for another rank's download may pass.
impl reel_io::Kinded for ManifestError {
    fn kind(&self) -> reel_io::ErrorKind {
        use reel_io::ErrorKind;
        match self {
            Self::Io { source, .. } => ErrorKind::of_io(source),
            Self::Store(e) => e.kind(),
            Self::NotArrow { .. }
            | Self::Version { .. }
            | Self::Column { .. }
            | Self::Corrupt { .. }
            | Self::Arrow { .. }
            | Self::InvalidRow { .. } => ErrorKind::BadInput,
            Self::SampleOutOfRange { .. } | Self::RowOutOfRange { .. } | Self::Shard { .. } => {
                ErrorKind::Environment
            }
            Self::FetchTimeout { .. } => ErrorKind::Transient,
            Self::Base { source, .. } => source.kind(),
            Self::BaseGone { .. } => ErrorKind::Environment,
        }
    }
}

impl ManifestError {
    pub(crate) fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Self + '_ {
        move |source| Self::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    pub(crate) fn corrupt(path: &std::path::Path, reason: impl Into<String>) -> Self {
        Self::Corrupt {
            path: path.to_path_buf(),
            reason: reason.into(),
        }
    }
}
