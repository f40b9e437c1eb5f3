use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use reel_io::{Store, StoreOptions};

use crate::select::Origin;
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
pub(crate) fn open_uri_as_base(
    uri: &str,
    dir: &Path,
    options: &StoreOptions,
) -> Result<Manifest, ManifestError> {
    let (store_uri, key) = reel_io::split_object_uri(uri)?;
    let store = Store::open_with(&store_uri, options)?;
    if let Some(root) = store.local_root() {
        return Manifest::open_from(&root.join(&key), &Origin::Base);
    }
    let size = store.len_of(&key)?;
    let timeout = Duration::from_secs(600);
    fetch_once_from(
        &store,
        &key,
        &local_copy(dir, uri, size),
        timeout,
        &Origin::Base,
    )
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
