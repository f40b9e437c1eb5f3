//! Errors of change capture, each saying what kind of failure it is and what to fix.

use reel_io::Kinded;

/// Which part of change capture failed, finer than Reel's [`reel_io::ErrorKind`]: what to
/// fix.
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
    #[error(transparent)]
    Table(#[from] reel_warehouse::WarehouseError),
    #[error("captured table {name}: {reason}")]
    Part { name: String, reason: String },
    #[error("PostgreSQL at {url}: {reason}")]
    Replication { url: String, reason: String },
}

/// Reel's kind, which decides what a caller does: a database that cannot be reached may be
/// back soon (retry); credentials, server settings, slots and tables that capture cannot
/// follow fail the run until they are fixed; a change part or progress record that does
/// not read is bad input; the store's errors keep their kind.
impl Kinded for Error {
    fn kind(&self) -> reel_io::ErrorKind {
        use reel_io::ErrorKind as Reel;
        match self {
            Self::Unreachable { .. } => Reel::Transient,
            Self::Credentials { .. }
            | Self::ServerConfig { .. }
            | Self::Schema { .. }
            | Self::Slot { .. }
            | Self::Replication { .. } => Reel::Environment,
            Self::Part { .. } => Reel::BadInput,
            Self::Store(e) => e.kind(),
            Self::Table(e) => e.kind(),
        }
    }
}

impl Error {
    /// Which part of change capture failed.
    pub fn capture_kind(&self) -> ErrorKind {
        match self {
            Self::Unreachable { .. } => ErrorKind::Unreachable,
            Self::Credentials { .. } => ErrorKind::Credentials,
            Self::ServerConfig { .. } => ErrorKind::ServerConfig,
            Self::Schema { .. } => ErrorKind::Schema,
            Self::Slot { .. } => ErrorKind::Slot,
            Self::Store(_) | Self::Table(_) | Self::Part { .. } => ErrorKind::Store,
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

#[cfg(test)]
mod tests {
    use super::*;
    use reel_io::ErrorKind as Reel;

    #[test]
    fn capture_kinds_map_onto_reel_s() {
        let url = || "postgres://db".to_owned();
        let reason = || "x".to_owned();
        let down = Error::Unreachable {
            url: url(),
            reason: reason(),
        };
        assert_eq!(down.capture_kind(), ErrorKind::Unreachable);
        assert_eq!(down.kind(), Reel::Transient);
        let refused = Error::Credentials {
            url: url(),
            reason: reason(),
        };
        assert_eq!(refused.kind(), Reel::Environment);
        let part = Error::Part {
            name: "changes/progress.json".into(),
            reason: reason(),
        };
        assert_eq!(part.capture_kind(), ErrorKind::Store);
        assert_eq!(part.kind(), Reel::BadInput);
        let replaced = Error::Store(reel_io::Error::Changed {
            name: "changes/progress.json".into(),
        });
        assert_eq!(replaced.kind(), Reel::Changed);
    }
}
