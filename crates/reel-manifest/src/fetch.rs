use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use reel_io::Store;

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
/// and is taken over.
pub fn fetch_once(
    store: &Store,
    key: &str,
    local: &Path,
    timeout: Duration,
) -> Result<Manifest, ManifestError> {
    let lock = local.with_extension("arrow.lock");
    let started = Instant::now();
    loop {
        if local.exists() {
            return Manifest::open(local);
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
                return Manifest::open(local);
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

fn download(store: &Store, key: &str, local: &Path) -> Result<(), ManifestError> {
    let bytes = store.read(key)?;
    reel_io::write_file_atomic(local, &bytes)?;
    Ok(())
}
