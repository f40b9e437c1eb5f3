//! Ranged byte access for Reel.
//!
//! Everything Reel reads is an immutable object read by byte range: an MCAP episode, a
//! manifest, a cached block. [`ByteSource`] is that one operation; it is implemented for
//! a local file ([`FileSource`], positioned reads), a memory map ([`MmapSource`]), bytes in
//! memory ([`MemorySource`]) and an object in a [`Store`] ([`ObjectSource`], one ranged GET
//! per read through opendal). Wrappers such as [`CountingSource`] (and Reel's block cache)
//! are sources themselves, so readers never know what sits underneath.
//!
//! A [`Store`] is opened from a URI — a local folder or
//! `s3://bucket/prefix?endpoint=http://127.0.0.1:9000&region=us-east-1` — so every tool
//! works the same on a laptop folder and on S3.
//!
//! ```
//! use reel_io::{ByteSource, CountingSource, Store};
//!
//! let dir = tempfile::tempdir()?;
//! let store = Store::open(dir.path().to_str().unwrap())?;
//! store.write_atomic("episode.bin", b"hello, reel".to_vec())?;
//!
//! let source = CountingSource::new(store.source("episode.bin"));
//! assert_eq!(source.len()?, 11);
//! assert_eq!(&source.read_range(7..11)?[..], b"reel");
//! assert_eq!(source.stats().reads, 1);
//! assert_eq!(source.stats().bytes, 4);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod source;
mod store;
#[cfg(feature = "test-support")]
pub mod test_support;

pub use source::{
    ByteSource, CountingSource, FileSource, MemorySource, MmapSource, ReadStats, write_file_atomic,
};
pub use store::{ObjectSource, Store, StoreOptions, open_object, split_object_uri};

/// Errors of byte sources and stores. Every variant names the file or object.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
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
