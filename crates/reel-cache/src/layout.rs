//! Where the cache keeps what it knows on its folders: the record of each object
//! (`objects/<hash of path>.json`) and the path of each block file, with the object id
//! that names an object version's blocks.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use twox_hash::{XxHash3_64, XxHash3_128};

use crate::{CacheConfig, Error, Result};

/// What the cache records about an object, in `objects/<hash of path>.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ObjectMeta {
    pub(crate) path: String,
    pub(crate) version: String,
    pub(crate) len: u64,
    /// Whether `version` is an ETag the remote accepts in `If-Match`.
    pub(crate) etag: bool,
}

impl ObjectMeta {
    /// The record of object `path` as the remote describes it: its ETag as the version,
    /// else the store's version id, else its length and modification time.
    pub(crate) fn from_stat(path: &str, m: &opendal::Metadata) -> Self {
        let len = m.content_length();
        let (version, etag) = match (m.etag(), m.version()) {
            (Some(tag), _) => (tag.to_owned(), true),
            (None, Some(v)) => (format!("v:{v}"), false),
            (None, None) => {
                let modified = m.last_modified().map(|t| t.to_string()).unwrap_or_default();
                (format!("{len}@{modified}"), false)
            }
        };
        Self {
            path: path.to_owned(),
            version,
            len,
            etag,
        }
    }
}

/// Where the cache records what it knows of object `path`: `<dirs[0]>/objects/<hash>.json`.
fn meta_path(config: &CacheConfig, path: &str) -> PathBuf {
    config.dirs[0].join("objects").join(format!(
        "{:032x}.json",
        XxHash3_128::oneshot(path.as_bytes())
    ))
}

/// The object record for `path`, if the cache has one.
pub(crate) fn read_meta(config: &CacheConfig, path: &str) -> Option<ObjectMeta> {
    let text = std::fs::read(meta_path(config, path)).ok()?;
    let meta: ObjectMeta = serde_json::from_slice(&text).ok()?;
    // A hash collision between two paths would show here; treat it as unknown.
    (meta.path == path).then_some(meta)
}

/// Records `meta`, replacing the object's previous record atomically.
pub(crate) fn write_meta(config: &CacheConfig, meta: &ObjectMeta) -> Result<()> {
    let json = serde_json::to_vec(meta).map_err(|e| Error::Config {
        reason: e.to_string(),
    })?;
    reel_io::write_file_atomic(meta_path(config, &meta.path), &json)?;
    Ok(())
}

/// The file of block `index` of object `id`, in the folder the block hashes to.
pub(crate) fn block_path(config: &CacheConfig, id: u128, index: u64) -> PathBuf {
    let dirs = &config.dirs;
    let mut key = [0u8; 24];
    key[..16].copy_from_slice(&id.to_le_bytes());
    key[16..].copy_from_slice(&index.to_le_bytes());
    let dir = &dirs[(XxHash3_64::oneshot(&key) % dirs.len() as u64) as usize];
    dir.join("blocks")
        .join(format!("{id:032x}"))
        .join(format!("{index}.blk"))
}

/// Object id: the hash of path, version and block size.
pub(crate) fn object_id(path: &str, version: &str, block_size: u64) -> u128 {
    let mut key = Vec::with_capacity(path.len() + version.len() + 10);
    key.extend_from_slice(path.as_bytes());
    key.push(0);
    key.extend_from_slice(version.as_bytes());
    key.push(0);
    key.extend_from_slice(&block_size.to_le_bytes());
    XxHash3_128::oneshot(&key)
}
