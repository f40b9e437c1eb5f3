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

mod error;
mod input;
mod key;
mod redact;
mod source;
mod stale;
mod store;
#[cfg(feature = "test-support")]
pub mod test_support;

pub use error::{Error, ErrorKind, Kinded, Result};
pub use input::{InputError, is_store_uri, read_input, read_text_input};
pub use key::confine_key;
pub use redact::{redact, redact_secrets};
pub use source::{
    ByteSource, CountingSource, FileSource, MemorySource, MmapSource, ReadStats, write_file_atomic,
};
pub use stale::{STALE_AFTER_DEATH, STALE_ANYWAY, remove_stale_temporaries, temporary_pid};
pub use store::{
    DEFAULT_RETRIES, ObjectSource, S3Location, Store, StoreOptions, TEMPORARIES, open_object,
    split_object_uri,
};
