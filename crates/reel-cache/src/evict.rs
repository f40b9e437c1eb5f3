//! Capacity scans, least-recently-used eviction, and pin lists.
//!
//! A pin list (`pins/<name>.json`, written atomically) names the object versions of a
//! warmed working set. Eviction never deletes their blocks, so a training job cannot
//! evict its own data however it reads; only blocks outside every pin list compete for
//! the remaining space.

use std::collections::{BinaryHeap, HashSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

use crate::block;
use crate::cache::{BlockCache, CachedObject, Inner};
use crate::metrics::add;
use crate::{Error, Result};

/// Temporary block files older than this were left by a crashed writer and are removed.
const STALE_TEMP: Duration = Duration::from_secs(600);
/// While the cache is full of pinned blocks, rescan at most this often.
const FULL_RESCAN: Duration = Duration::from_secs(10);
/// A usage record older than this is not trusted: the next due check scans (other
/// writers, deletions by hand and killed processes drift it).
const RESCAN_AFTER: Duration = Duration::from_secs(600);

/// One object version in a pin list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinnedObject {
    /// Path in the remote store.
    pub path: String,
    /// Version whose blocks are pinned.
    pub version: String,
    /// Object length in bytes.
    pub len: u64,
    /// Folder of the object version under `blocks/`.
    pub dir: String,
    /// Bytes its blocks occupy on disk when all are cached, headers included.
    pub disk_bytes: u64,
}

/// A named set of pinned object versions (a warmed working set).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinList {
    /// Name of the list (`[A-Za-z0-9._-]+`).
    pub name: String,
    /// The pinned objects.
    pub objects: Vec<PinnedObject>,
}

impl PinList {
    /// Bytes the pinned objects occupy on disk when fully cached.
    pub fn disk_bytes(&self) -> u64 {
        self.objects.iter().map(|o| o.disk_bytes).sum()
    }
}

/// What a capacity scan found and did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ScanReport {
    /// Block files found.
    pub blocks: u64,
    /// Bytes of block files before eviction.
    pub used_bytes: u64,
    /// Bytes of pinned block files.
    pub pinned_bytes: u64,
    /// Blocks deleted.
    pub evicted_blocks: u64,
    /// Bytes deleted.
    pub evicted_bytes: u64,
    /// Stale temporary files of crashed writers deleted.
    pub stale_temps_removed: u64,
}

impl BlockCache {
    /// Bytes a fully cached `object` occupies on disk, headers included.
    pub fn disk_bytes(&self, object: &CachedObject) -> u64 {
        (0..object.num_blocks())
            .map(|i| {
                let r = object.block_range(i);
                block::file_len(r.end - r.start, self.config().page_size)
            })
            .sum()
    }

    /// Writes (or replaces) pin list `name` naming `objects`.
    pub fn pin(&self, name: &str, objects: &[CachedObject]) -> Result<PinList> {
        let path = self.pin_path(name)?;
        let list = PinList {
            name: name.to_owned(),
            objects: objects
                .iter()
                .map(|o| PinnedObject {
                    path: o.path().to_owned(),
                    version: o.version().to_owned(),
                    len: o.meta.len,
                    dir: o.dir_name(),
                    disk_bytes: self.disk_bytes(o),
                })
                .collect(),
        };
        let json = serde_json::to_vec(&list).map_err(|e| Error::Config {
            reason: e.to_string(),
        })?;
        reel_io::write_file_atomic(&path, &json)?;
        Ok(list)
    }

    /// Removes pin list `name` (its blocks become evictable). Missing lists are fine.
    pub fn unpin(&self, name: &str) -> Result<()> {
        let path = self.pin_path(name)?;
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(&path, e)),
            _ => Ok(()),
        }
    }

    /// Every pin list in the cache. A list that cannot be parsed is an error naming it:
    /// silently ignoring it would let eviction delete a working set.
    pub fn pins(&self) -> Result<Vec<PinList>> {
        self.inner.pins()
    }

    /// Scans the cache folders and, if they hold more than the capacity, deletes the
    /// least recently used unpinned blocks until there is room for another
    /// [`CacheConfig::eviction_slack`](crate::CacheConfig::eviction_slack). Returns `None`
    /// when another process is scanning right now.
    pub fn evict(&self) -> Result<Option<ScanReport>> {
        self.inner.evict()
    }

    /// Scans the cache folders without evicting anything: what they hold now. Memory
    /// stays constant whatever the number of blocks.
    pub fn usage(&self) -> Result<ScanReport> {
        let pinned = self.inner.pinned_dirs()?;
        self.inner.totals(&pinned, false)
    }

    fn pin_path(&self, name: &str) -> Result<PathBuf> {
        let valid = !name.is_empty()
            && !name.starts_with('.')
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
        if !valid {
            return Err(Error::Config {
                reason: format!(
                    "pin list name `{name}` must be [A-Za-z0-9._-]+, not starting with '.'"
                ),
            });
        }
        Ok(self.config().dirs[0]
            .join("pins")
            .join(format!("{name}.json")))
    }
}

impl Inner {
    /// Every pin list in the cache. A list that cannot be parsed is an error naming it:
    /// silently ignoring it would let eviction delete a working set.
    pub(crate) fn pins(&self) -> Result<Vec<PinList>> {
        let dir = self.config.dirs[0].join("pins");
        let entries = std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))?;
        let mut lists = Vec::new();
        for entry in entries {
            let path = entry.map_err(|e| Error::io(&dir, e))?.path();
            if path.extension().is_none_or(|e| e != "json")
                || path
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.'))
            {
                continue;
            }
            let text = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
            let list = serde_json::from_slice(&text).map_err(|e| Error::BadPinList {
                path: path.clone(),
                reason: e.to_string(),
            })?;
            lists.push(list);
        }
        lists.sort_by(|a: &PinList, b| a.name.cmp(&b.name));
        Ok(lists)
    }

    /// Scans the cache folders and, if they hold more than the capacity, deletes the
    /// least recently used unpinned blocks until there is room for another
    /// [`CacheConfig::eviction_slack`](crate::CacheConfig::eviction_slack). Returns `None`
    /// when another process is scanning right now.
    fn pinned_dirs(&self) -> Result<HashSet<String>> {
        Ok(self
            .pins()?
            .into_iter()
            .flat_map(|l| l.objects.into_iter().map(|o| o.dir))
            .collect())
    }

    /// What the cache folders hold (blocks, bytes, pinned bytes), counted in constant
    /// memory; with `clean`, stale temporaries are removed on the way and counted.
    fn totals(&self, pinned: &HashSet<String>, clean: bool) -> Result<ScanReport> {
        let mut report = ScanReport::default();
        for dir in &self.config.dirs {
            report.stale_temps_removed += scan_blocks(&dir.join("blocks"), clean, |e| {
                report.blocks += 1;
                report.used_bytes += e.bytes;
                if pinned.contains(e.dir) {
                    report.pinned_bytes += e.bytes;
                }
            })?;
        }
        Ok(report)
    }

    pub(crate) fn evict(&self) -> Result<Option<ScanReport>> {
        let inner = self;
        let Some(_lock) = self.scan_lock()? else {
            return Ok(None);
        };
        *inner.last_scan.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        inner.written_since_scan.store(0, Ordering::Relaxed);

        let pinned = self.pinned_dirs()?;
        // First pass: totals only, in constant memory.
        let mut report = self.totals(&pinned, true)?;
        let capacity = self.config.capacity;
        let mut used = report.used_bytes;
        if used > capacity {
            // Second pass: the least recently used unpinned blocks that free enough, and
            // no more of them (a heap of the oldest, newest on top).
            let to_free = used - capacity.saturating_sub(self.config.slack());
            let mut oldest: BinaryHeap<Victim> = BinaryHeap::new();
            let mut held = 0u64;
            for dir in &self.config.dirs {
                scan_blocks(&dir.join("blocks"), false, |e| {
                    if pinned.contains(e.dir) {
                        return;
                    }
                    oldest.push(Victim {
                        mtime: e.mtime,
                        bytes: e.bytes,
                        path: e.path.to_path_buf(),
                    });
                    held += e.bytes;
                    while oldest
                        .peek()
                        .is_some_and(|newest| held - newest.bytes >= to_free)
                    {
                        held -= oldest.pop().map_or(0, |v| v.bytes);
                    }
                })?;
            }
            let mut emptied = HashSet::new();
            for victim in oldest.into_sorted_vec() {
                match std::fs::remove_file(&victim.path) {
                    Ok(()) => {
                        report.evicted_blocks += 1;
                        report.evicted_bytes += victim.bytes;
                    }
                    // Evicted by a scan in another process that raced us before the lock.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(Error::io(&victim.path, e)),
                }
                used = used.saturating_sub(victim.bytes);
                if let Some(parent) = victim.path.parent() {
                    emptied.insert(parent.to_owned());
                }
            }
            for dir in emptied {
                // Fails, harmlessly, unless the folder is empty.
                let _ = std::fs::remove_dir(dir);
            }
        }
        UsageRecord {
            used_bytes: used,
            scanned_at_s: unix_seconds(),
        }
        .write(&self.config.dirs[0]);
        // Close the handles of what was just evicted, here or by another process's scan,
        // so that their disk space is freed now.
        inner.open_blocks.prune();
        add(&inner.counters.pages_evicted, report.evicted_blocks);
        add(&inner.counters.bytes_evicted, report.evicted_bytes);
        inner.full.store(used > capacity, Ordering::Relaxed);
        Ok(Some(report))
    }

    /// Runs [`BlockCache::evict`] when this process has written its slack since the last
    /// scan, or the cache was full at the last scan and a while has passed; a scan is
    /// skipped while the usage record (the last scan's total plus what every process
    /// wrote since) leaves room, so filling a large cache costs no scan per slack.
    pub(crate) fn maybe_evict(&self) {
        let inner = self;
        let written = inner.written_since_scan.load(Ordering::Relaxed);
        let due = written >= self.config.slack()
            || (inner.full.load(Ordering::Relaxed)
                && inner
                    .last_scan
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .is_none_or(|t| t.elapsed() > FULL_RESCAN));
        if !due {
            return;
        }
        match self.count_written(written) {
            Ok(true) => return,
            Ok(false) => {}
            Err(_) => add(&inner.counters.put_errors, 1),
        }
        if self.evict().is_err() {
            add(&inner.counters.put_errors, 1);
        }
    }

    /// The scan lock of the cache's folders (one scan or record update at a time across
    /// processes), or `None` while another process holds it; released when dropped.
    fn scan_lock(&self) -> Result<Option<File>> {
        let path = self.config.dirs[0].join("evict.lock");
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        match lock.try_lock() {
            Ok(()) => Ok(Some(lock)),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => Err(Error::io(&path, e)),
        }
    }

    /// Adds `written` bytes to the usage record when it is recent and leaves room for
    /// them (true: no scan needed), under the scan lock; false when a scan is due.
    fn count_written(&self, written: u64) -> Result<bool> {
        if self.full.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let root = &self.config.dirs[0];
        let Some(_lock) = self.scan_lock()? else {
            // A scan is running: it counts what is on disk, these bytes included.
            self.written_since_scan.store(0, Ordering::Relaxed);
            return Ok(true);
        };
        let Some(mut record) = UsageRecord::read(root) else {
            return Ok(false);
        };
        let fresh = unix_seconds().saturating_sub(record.scanned_at_s) < RESCAN_AFTER.as_secs();
        let after = record.used_bytes.saturating_add(written);
        if !fresh || after > self.config.capacity {
            return Ok(false);
        }
        record.used_bytes = after;
        record.write(root);
        self.written_since_scan.store(0, Ordering::Relaxed);
        Ok(true)
    }
}

/// What the last scan found, plus what processes wrote since: `usage.json` beside the
/// scan lock. Lost or damaged, it only costs a scan.
#[derive(Debug, Serialize, Deserialize)]
struct UsageRecord {
    used_bytes: u64,
    scanned_at_s: u64,
}

impl UsageRecord {
    fn read(root: &Path) -> Option<Self> {
        serde_json::from_slice(&std::fs::read(root.join("usage.json")).ok()?).ok()
    }

    fn write(&self, root: &Path) {
        if let Ok(json) = serde_json::to_vec(self) {
            // A record not written means a scan next time, nothing worse.
            let _ = reel_io::write_file_atomic(root.join("usage.json"), &json);
        }
    }
}

fn unix_seconds() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A block to delete: ordered by last use, newest greatest (the top of the heap).
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Victim {
    mtime: SystemTime,
    bytes: u64,
    path: PathBuf,
}

/// A block file seen by a scan.
struct BlockEntry<'a> {
    path: &'a Path,
    /// Its object version's folder.
    dir: &'a str,
    bytes: u64,
    mtime: SystemTime,
}

/// Shows each block file under `blocks` to `visit` (nothing is kept) and, with `clean`,
/// removes stale temporary files; returns how many temporary files were removed.
fn scan_blocks(blocks: &Path, clean: bool, mut visit: impl FnMut(BlockEntry<'_>)) -> Result<u64> {
    let mut removed = 0;
    let objects = match std::fs::read_dir(blocks) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(Error::io(blocks, e)),
    };
    let now = SystemTime::now();
    for object in objects.flatten() {
        let dir = object.file_name().to_string_lossy().into_owned();
        // Files vanish under us when other processes evict or rename: skip, do not fail.
        let Ok(files) = std::fs::read_dir(object.path()) else {
            continue;
        };
        for file in files.flatten() {
            let name = file.file_name();
            let name = name.to_string_lossy();
            let Ok(meta) = file.metadata() else { continue };
            let mtime = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            if name.starts_with('.') && name.ends_with(".tmp") {
                let stale = now.duration_since(mtime).is_ok_and(|age| age > STALE_TEMP);
                if clean && stale && std::fs::remove_file(file.path()).is_ok() {
                    removed += 1;
                }
            } else if name.ends_with(".blk") {
                visit(BlockEntry {
                    path: &file.path(),
                    dir: &dir,
                    bytes: meta.len(),
                    mtime,
                });
            }
        }
    }
    Ok(removed)
}
