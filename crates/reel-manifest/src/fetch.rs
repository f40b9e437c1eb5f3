//! Where a manifest is opened from: mapped where it is, or fetched once per node from
//! an object store; and, for a selection, its bases found beside it, by path or by URI.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use reel_io::{Store, StoreOptions};

use crate::layout::{BaseRef, S3_SCHEME};
use crate::{Manifest, ManifestError};

/// A lock whose holder has not finished within this time is presumed dead
/// (its process crashed mid-download) and is broken by the next waiter.
const STALE_LOCK: Duration = Duration::from_secs(600);

/// Downloads `key` from `store` to `local` once per node, then maps it.
///
/// Every rank of a node calls this with the same `local` path. The first to
/// create `<local>.lock` downloads to a temporary name and renames it into
/// place; the others wait for the file to appear and map it, so all ranks
/// share one page-cache copy. The rename is the completion marker: `local`
/// never exists half-written. A lock left by a crashed downloader goes stale
/// and is taken over. A selection fetched this way looks for the bases it names beside
/// it in `local`'s folder; [`open_uri_with`] finds them beside it in the store.
pub fn fetch_once(
    store: &Store,
    key: &str,
    local: &Path,
    timeout: Duration,
) -> Result<Manifest, ManifestError> {
    let origin = Origin::Local(local.parent().unwrap_or(Path::new("")).to_path_buf());
    fetch_once_from(store, key, local, timeout, &origin)
}

/// [`fetch_once`], with a selection's bases found from `origin`.
fn fetch_once_from(
    store: &Store,
    key: &str,
    local: &Path,
    timeout: Duration,
    origin: &Origin<'_>,
) -> Result<Manifest, ManifestError> {
    let lock = local.with_extension("arrow.lock");
    let started = Instant::now();
    loop {
        if local.exists() {
            return Manifest::open_from(local, origin);
        }
        if let Some(parent) = local.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(ManifestError::io(parent))?;
        }
        match OpenOptions::new().write(true).create_new(true).open(&lock) {
            Ok(mut file) => {
                // Holder's pid, for whoever inspects a stuck node.
                let _ = writeln!(file, "{}", std::process::id());
                let result = download(store, key, local);
                let _ = std::fs::remove_file(&lock);
                result?;
                return Manifest::open_from(local, origin);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let age = std::fs::metadata(&lock)
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| SystemTime::now().duration_since(t).ok());
                if age.is_some_and(|age| age > STALE_LOCK) {
                    let _ = std::fs::remove_file(&lock);
                    continue;
                }
                if started.elapsed() > timeout {
                    return Err(ManifestError::FetchTimeout {
                        path: local.to_path_buf(),
                        seconds: timeout.as_secs(),
                    });
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(source) => return Err(ManifestError::Io { path: lock, source }),
        }
    }
}

/// Opens the manifest at `uri`: a local path is mapped where it is; an object in a
/// store (`s3://bucket/runs/42/train.arrow?region=…`) is fetched once per node into
/// `dir` with [`fetch_once`] and mapped from there. Every process that passes the same
/// URI and folder shares one local copy, named from a hash of the URI and the object's
/// size: manifests are written once under a new name per curation, never rewritten.
/// Waits up to ten minutes for another process's download.
pub fn open_uri(uri: &str, dir: &Path) -> Result<Manifest, ManifestError> {
    open_uri_with(uri, dir, &StoreOptions::default())
}

/// Like [`open_uri`], with explicit store credentials.
pub fn open_uri_with(
    uri: &str,
    dir: &Path,
    options: &StoreOptions,
) -> Result<Manifest, ManifestError> {
    let (store_uri, key) = reel_io::split_object_uri(uri)?;
    let store = Store::open_with(&store_uri, options)?;
    // A selection's bases named beside it are beside it in the store too, and remote
    // ones are fetched with the same credentials.
    let origin = Origin::Store { uri, dir, options };
    if let Some(root) = store.local_root() {
        return Manifest::open_from(&root.join(&key), &origin);
    }
    let size = store.len_of(&key)?;
    let timeout = Duration::from_secs(600);
    fetch_once_from(&store, &key, &local_copy(dir, uri, size), timeout, &origin)
}

/// Opens the base manifest at `uri` (fetched once per node into `dir`), refusing it at
/// once if it is a selection itself.
fn open_uri_as_base(
    uri: &str,
    dir: &Path,
    options: &StoreOptions,
) -> Result<Manifest, ManifestError> {
    let (store_uri, key) = reel_io::split_object_uri(uri)?;
    let store = Store::open_with(&store_uri, options)?;
    open_in_store(&store, &key, uri, dir)
}

/// The base `key` of `store` (at `uri`): mapped in place in a local store, else fetched
/// once per node into `dir`.
fn open_in_store(
    store: &Store,
    key: &str,
    uri: &str,
    dir: &Path,
) -> Result<Manifest, ManifestError> {
    if let Some(root) = store.local_root() {
        return Manifest::open_from(&root.join(key), &Origin::Base);
    }
    let size = store.len_of(key)?;
    let timeout = Duration::from_secs(600);
    fetch_once_from(
        store,
        key,
        &local_copy(dir, uri, size),
        timeout,
        &Origin::Base,
    )
}

/// Opens the manifest that is object `key` of `store`, mapped in place in a local store,
/// fetched once per node into [`node_manifest_dir`] from a remote one: a base a writer of
/// selections names by what it finds.
pub fn open_in(store: &Store, key: &str) -> Result<Manifest, ManifestError> {
    let uri = store.object_uri(key);
    open_in_store(store, key, &uri, &node_manifest_dir())
}

/// Opens `base`, the object `key` of `store` (fetched once per node into
/// [`node_manifest_dir`] from a remote store), and checks it is the manifest `base`
/// names: its rows and content hash. What a writer of selections reads its bases by.
pub fn open_base_in(store: &Store, key: &str, base: &BaseRef) -> Result<Manifest, ManifestError> {
    let opened = open_in_store(store, key, &base.location, &node_manifest_dir())?;
    checked(opened, base)
}

/// The folder the CLIs give [`open_uri`]: `reel-manifests` in the system's temporary
/// folder, the same for every process on the node.
pub fn node_manifest_dir() -> PathBuf {
    std::env::temp_dir().join("reel-manifests")
}

/// Where [`open_uri`] keeps the node's copy of a remote manifest.
pub fn local_copy(dir: &Path, uri: &str, size: u64) -> PathBuf {
    let hash = twox_hash::XxHash3_64::oneshot(uri.as_bytes());
    let name = uri
        .split('?')
        .next()
        .and_then(|location| location.rsplit('/').next())
        .filter(|name| !name.is_empty())
        .unwrap_or("manifest.arrow");
    dir.join(format!("{hash:016x}-{size}-{name}"))
}

fn download(store: &Store, key: &str, local: &Path) -> Result<(), ManifestError> {
    let bytes = store.read(key)?;
    reel_io::write_file_atomic(local, &bytes)?;
    Ok(())
}

impl Manifest {
    /// Maps the manifest at `path` and checks its format version and schema. A
    /// selection's bases are opened too: a name beside it or a local path where they
    /// are, an object URI fetched once per node into [`node_manifest_dir`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self, ManifestError> {
        let path = path.as_ref();
        let origin = Origin::Local(path.parent().unwrap_or(Path::new("")).to_path_buf());
        Self::open_from(path, &origin)
    }

    /// [`Manifest::open`], with a selection's bases found from `origin`.
    pub(crate) fn open_from(path: &Path, origin: &Origin<'_>) -> Result<Self, ManifestError> {
        let a_base = matches!(origin, Origin::Base);
        Self::map(path, a_base, &|base: &BaseRef| {
            open_base(path, base, origin)
        })
    }
}

/// Where a selection came from: what its bases' relative locations are relative to,
/// and how remote bases are fetched.
#[derive(Debug, Clone)]
pub(crate) enum Origin<'a> {
    /// The local folder the selection is in.
    Local(PathBuf),
    /// The object URI the selection was fetched from, the node's folder for fetched
    /// copies, and the store credentials.
    Store {
        uri: &'a str,
        dir: &'a Path,
        options: &'a StoreOptions,
    },
    /// The file is a selection's base: refused at once if it is a selection itself, so
    /// no selection leads the reader from base to base (or round in a circle).
    Base,
}

/// Opens the base `base` of the selection at `path` and checks it is the one named.
fn open_base(path: &Path, base: &BaseRef, origin: &Origin<'_>) -> Result<Manifest, ManifestError> {
    let wrap = |source: ManifestError| ManifestError::Base {
        path: path.to_path_buf(),
        base: base.location.clone(),
        source: Box::new(source),
    };
    let location = base.location.as_str();
    let (dir, options) = match origin {
        Origin::Store { dir, options, .. } => (dir.to_path_buf(), (*options).clone()),
        Origin::Local(_) | Origin::Base => (node_manifest_dir(), StoreOptions::default()),
    };
    let opened = if location.starts_with(S3_SCHEME) {
        open_uri_as_base(location, &dir, &options)
    } else if Path::new(location).is_absolute() {
        Manifest::open_from(Path::new(location), &Origin::Base)
    } else {
        match origin {
            Origin::Local(folder) => Manifest::open_from(&folder.join(location), &Origin::Base),
            Origin::Store { uri, .. } => {
                open_uri_as_base(&sibling_uri(uri, location), &dir, &options)
            }
            Origin::Base => Err(ManifestError::corrupt(path, "a base names bases")),
        }
    };
    let opened = opened.map_err(|e| {
        let gone = match &e {
            ManifestError::Io { source, .. } => source.kind() == std::io::ErrorKind::NotFound,
            ManifestError::Store(e) => matches!(e, reel_io::Error::NotFound { .. }),
            _ => false,
        };
        if gone {
            ManifestError::BaseGone {
                path: path.to_path_buf(),
                base: base.location.clone(),
            }
        } else {
            wrap(e)
        }
    })?;
    checked(opened, base).map_err(wrap)
}

/// `opened`, if it has the rows and the content hash `base` names.
fn checked(opened: Manifest, base: &BaseRef) -> Result<Manifest, ManifestError> {
    let problem = if opened.len() as u64 != base.rows {
        format!(
            "has {} rows, the selection names {}",
            opened.len(),
            base.rows
        )
    } else if opened.content_hash() != base.content_hash {
        format!(
            "has content hash {}, the selection names {}: it was rewritten since",
            opened.content_hash(),
            base.content_hash
        )
    } else {
        return Ok(opened);
    };
    Err(ManifestError::corrupt(opened.path(), problem))
}

/// The object `name` in the same folder as the object `uri` (its query kept).
fn sibling_uri(uri: &str, name: &str) -> String {
    let (location, query) = match uri.split_once('?') {
        Some((l, q)) => (l, Some(q)),
        None => (uri, None),
    };
    let sibling = match location.rsplit_once('/') {
        Some((folder, _)) => format!("{folder}/{name}"),
        // A selection named without a folder: its base is in the same (current) folder.
        None => name.to_string(),
    };
    match query {
        Some(q) => format!("{sibling}?{q}"),
        None => sibling,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sibling_is_in_the_selection_s_folder_whatever_names_it() {
        assert_eq!(
            sibling_uri("s3://b/runs/s.arrow?region=r", "n.arrow"),
            "s3://b/runs/n.arrow?region=r"
        );
        assert_eq!(
            sibling_uri("/data/runs/s.arrow", "n.arrow"),
            "/data/runs/n.arrow"
        );
        assert_eq!(sibling_uri("runs/s.arrow", "n.arrow"), "runs/n.arrow");
        assert_eq!(sibling_uri("s.arrow", "n.arrow"), "n.arrow");
    }
}
