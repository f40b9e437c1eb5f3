//! Errors of change capture, each saying what kind of failure it is and what to fix.

/// What kind of failure an [`Error`] is: what a caller should do about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The database cannot be reached: start it, or fix the host and port.
    Unreachable,
    /// The database refused the credentials: fix the user or password.
    Credentials,
    /// The server's settings do not allow capture (`wal_level`, privileges).
    ServerConfig,
    /// A captured table cannot be followed (no primary key, a column changed type).
    Schema,
    /// The replication slot is missing or belongs to another capture.
    Slot,
    /// The warehouse store failed.
    Store,
    /// Anything else the server or the stream reported.
    Replication,
}

/// Errors of change capture.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error(
        "PostgreSQL at {url} cannot be reached: {reason} (is the server running, and are host and port right?)"
    )]
    Unreachable { url: String, reason: String },
    #[error(
        "PostgreSQL at {url} refused the credentials: {reason} (check the user and password in the URL)"
    )]
    Credentials { url: String, reason: String },
    #[error("PostgreSQL at {url}: {reason}")]
    ServerConfig { url: String, reason: String },
    #[error("table {table}: {reason}")]
    Schema { table: String, reason: String },
    #[error("replication slot {slot}: {reason}")]
    Slot { slot: String, reason: String },
    #[error(transparent)]
    Store(#[from] reel_io::Error),
    #[error("change part {name}: {reason}")]
    Part { name: String, reason: String },
    #[error("PostgreSQL at {url}: {reason}")]
    Replication { url: String, reason: String },
}

impl Error {
    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Unreachable { .. } => ErrorKind::Unreachable,
            Self::Credentials { .. } => ErrorKind::Credentials,
            Self::ServerConfig { .. } => ErrorKind::ServerConfig,
            Self::Schema { .. } => ErrorKind::Schema,
            Self::Slot { .. } => ErrorKind::Slot,
            Self::Store(_) | Self::Part { .. } => ErrorKind::Store,
            Self::Replication { .. } => ErrorKind::Replication,
        }
    }

    /// Classifies an error of the replication library for the database at `url`.
    pub(crate) fn from_pg(url: &str, e: pg_walstream::ReplicationError) -> Self {
        use pg_walstream::ReplicationError as E;
        let url = reel_io::redact(url).into_owned();
        let reason = e.to_string();
        let lower = reason.to_lowercase();
        match e {
            E::Authentication(_) => Self::Credentials { url, reason },
            _ if lower.contains("password authentication failed")
                || lower.contains("no pg_hba.conf entry")
                || lower.contains("authentication") =>
            {
                Self::Credentials { url, reason }
            }
            _ if lower.contains("connection refused")
                || lower.contains("could not connect")
                || lower.contains("timed out")
                || lower.contains("no route to host")
                || lower.contains("name or service not known")
                || lower.contains("failed to lookup address") =>
            {
                Self::Unreachable { url, reason }
            }
            E::TransientConnection(_) | E::PermanentConnection(_) | E::Timeout(_) | E::Io(_) => {
                Self::Unreachable { url, reason }
            }
            _ if lower.contains("logical decoding requires wal_level")
                || lower.contains("wal_level") =>
            {
                Self::ServerConfig {
                    url,
                    reason: format!(
                        "{reason} (set wal_level = logical in postgresql.conf and restart the server)"
                    ),
                }
            }
            _ if lower.contains("permission denied") || lower.contains("must be superuser") => {
                Self::ServerConfig {
                    url,
                    reason: format!(
                        "{reason} (the user needs the REPLICATION attribute and ownership of the captured tables)"
                    ),
                }
            }
            _ => Self::Replication { url, reason },
        }
    }
}

/// Results of change capture.
pub type Result<T, E = Error> = std::result::Result<T, E>;
