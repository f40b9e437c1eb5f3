//! Errors of byte sources and stores, each with a [`ErrorKind`] that tells a caller what
//! to do about it (quarantine the input, fail the run, read again, retry).

/// Errors of byte sources and stores. Every variant names the file or object.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A folder where a file or object was expected.
    #[error("{name} is a folder, not a file")]
    NotAFile {
        /// Path or object URI.
        name: String,
    },
    /// A local I/O error.
    #[error("{name}: {source}")]
    Io {
        /// Path of the file.
        name: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// An error from the object store.
    #[error("{name}: {source}")]
    Store {
        /// URI of the object.
        name: String,
        /// The underlying error.
        #[source]
        source: opendal::Error,
    },
    /// The object does not exist.
    #[error("{name}: not found")]
    NotFound {
        /// URI of the object.
        name: String,
    },
    /// A read asked for bytes outside the object.
    #[error("{name}: range {start}..{end} is outside the object of {len} bytes")]
    OutOfBounds {
        /// Name of the object.
        name: String,
        /// Start of the requested range.
        start: u64,
        /// End of the requested range.
        end: u64,
        /// Length of the object.
        len: u64,
    },
    /// The store returned fewer bytes than asked for (object changed or truncated).
    #[error("{name}: expected {expected} bytes, got {got}")]
    ShortRead {
        /// Name of the object.
        name: String,
        /// Bytes requested.
        expected: u64,
        /// Bytes received.
        got: u64,
    },
    /// The object was replaced by another writer while it was being read; open it again.
    #[error("{name}: the object changed while it was being read (another writer replaced it)")]
    Changed {
        /// URI of the object.
        name: String,
    },
    /// An object key that would reach outside its store (`..`, an absolute path, another
    /// store's URI): untrusted input, refused before any I/O.
    #[error("`{key}` is not a key inside the store: {reason}")]
    OutsideStore {
        /// The key as given (credentials redacted).
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A store URI that cannot be understood.
    #[error("invalid store URI `{uri}`: {reason}")]
    InvalidUri {
        /// The URI as given.
        uri: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What kind of failure an error is, which decides what a caller does about it: every
/// Reel crate's error implements [`Kinded`], so ingest quarantines, fails or retries from
/// the kind instead of matching variants of several crates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The input itself is wrong (corrupt, truncated, undecodable, inconsistent): the same
    /// bytes fail the same way everywhere, so set the input aside (quarantine) and go on.
    BadInput,
    /// The machine, its configuration or the store is not as needed (a codec missing, a
    /// permission refused, an object absent, an invalid URI or setting): the input may be
    /// fine, so fail the run loudly; it succeeds once the environment is fixed.
    Environment,
    /// The object was replaced by another writer while it was read: open it again.
    Changed,
    /// A failure that may pass by itself (timeout, throttling, connection reset): retry.
    Transient,
}

/// An error that knows its [`ErrorKind`]. Every Reel crate's errors implement it, and a
/// wrapping error answers its cause's kind, so a caller decides to quarantine, fail, read
/// again or retry from `kind()` alone, whichever crate the error came through, never from
/// a message or the variants of several crates.
pub trait Kinded: std::error::Error {
    /// What kind of failure this is.
    fn kind(&self) -> ErrorKind;
}

impl ErrorKind {
    /// The kind of a local I/O error, for crates whose errors wrap `std::io::Error`.
    pub fn of_io(error: &std::io::Error) -> Self {
        io_kind(error)
    }

    /// Whether the same operation may succeed if tried again as it is.
    pub fn is_retryable(self) -> bool {
        matches!(self, Self::Changed | Self::Transient)
    }

    /// Short name for reports and JSON (`bad_input`, `environment`, `changed`, `transient`).
    pub fn name(self) -> &'static str {
        match self {
            Self::BadInput => "bad_input",
            Self::Environment => "environment",
            Self::Changed => "changed",
            Self::Transient => "transient",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Kinded for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            Self::Io { source, .. } => io_kind(source),
            Self::Store { source, .. } => store_kind(source),
            Self::NotFound { .. } | Self::NotAFile { .. } | Self::InvalidUri { .. } => {
                ErrorKind::Environment
            }
            // An index or length inside the object that points past its end.
            Self::OutOfBounds { .. } | Self::OutsideStore { .. } => ErrorKind::BadInput,
            Self::ShortRead { .. } | Self::Changed { .. } => ErrorKind::Changed,
        }
    }
}

fn io_kind(error: &std::io::Error) -> ErrorKind {
    use std::io::ErrorKind as Io;
    match error.kind() {
        Io::TimedOut
        | Io::Interrupted
        | Io::WouldBlock
        | Io::ConnectionReset
        | Io::ConnectionAborted
        | Io::ConnectionRefused
        | Io::BrokenPipe => ErrorKind::Transient,
        // A file that ends before a range its length promised has shrunk meanwhile.
        Io::UnexpectedEof => ErrorKind::Changed,
        Io::InvalidData => ErrorKind::BadInput,
        _ => ErrorKind::Environment,
    }
}

fn store_kind(error: &opendal::Error) -> ErrorKind {
    match error.kind() {
        opendal::ErrorKind::ConditionNotMatch => ErrorKind::Changed,
        opendal::ErrorKind::RangeNotSatisfied => ErrorKind::BadInput,
        _ if error.is_temporary() => ErrorKind::Transient,
        opendal::ErrorKind::RateLimited => ErrorKind::Transient,
        _ => ErrorKind::Environment,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_follow_what_a_caller_should_do() {
        let io = |kind| Error::Io {
            name: "x".into(),
            source: std::io::Error::from(kind),
        };
        assert_eq!(
            io(std::io::ErrorKind::TimedOut).kind(),
            ErrorKind::Transient
        );
        assert_eq!(
            io(std::io::ErrorKind::PermissionDenied).kind(),
            ErrorKind::Environment
        );
        assert_eq!(
            io(std::io::ErrorKind::UnexpectedEof).kind(),
            ErrorKind::Changed
        );
        assert_eq!(
            io(std::io::ErrorKind::InvalidData).kind(),
            ErrorKind::BadInput
        );
        let store = |kind, temporary: bool| {
            let e = opendal::Error::new(kind, "test");
            Error::Store {
                name: "s3://b/k".into(),
                source: if temporary { e.set_temporary() } else { e },
            }
        };
        assert_eq!(
            store(opendal::ErrorKind::Unexpected, true).kind(),
            ErrorKind::Transient
        );
        assert_eq!(
            store(opendal::ErrorKind::PermissionDenied, false).kind(),
            ErrorKind::Environment
        );
        assert_eq!(
            store(opendal::ErrorKind::ConditionNotMatch, false).kind(),
            ErrorKind::Changed
        );
        assert_eq!(
            Error::Changed { name: "k".into() }.kind(),
            ErrorKind::Changed
        );
        assert!(ErrorKind::Transient.is_retryable());
        assert!(!ErrorKind::BadInput.is_retryable());
        assert_eq!(ErrorKind::BadInput.to_string(), "bad_input");
    }
}
