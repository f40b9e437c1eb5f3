//! The read-through block cache and its per-object byte source: opening a cache, and
//! resolving an object path to the version whose blocks serve it. Reads and fills are in
//! `read` and `fill`.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use opendal::Operator;
use opendal::layers::RetryLayer;
use reel_io::{ByteSource, Store};
use tokio::sync::Semaphore;

use crate::block::{BlockFile, TempNames};
use crate::in_flight::Flights;
use crate::layout::{self, ObjectMeta, object_id, read_meta, write_meta};
use crate::metrics::{CacheMetrics, Counters, add};
use crate::open_blocks::OpenBlocks;
use crate::{CacheConfig, Error, Result};

/// How long a block's last-use time may lag: a hit rewrites the block's mtime only when
/// it is older than this, so hot blocks do not cost a metadata write per read.
pub(crate) const TOUCH_INTERVAL: Duration = Duration::from_secs(60);

/// How a store's URI names its objects in errors: without its query (options, secrets).
fn remote_name(uri: &str) -> String {
    uri.split('?').next().unwrap_or_default().to_owned()
}

/// A node-local, read-through block cache in front of one remote store.
///
/// Objects are cut into fixed, aligned blocks; each block lives in its own file,
/// `<dir>/blocks/<object id>/<index>.blk`, where the object id hashes the object's path,
/// its version (ETag, or length and modification time where the store has no ETag) and
/// the block size. A new version of an object therefore never meets blocks of the old one.
///
/// **Sharing without a daemon.** Every process on a node (one per rank) opens the same
/// folders. Blocks are written under a unique temporary name and renamed into place, so a
/// reader sees no block or a whole one; each block carries a checksum per page, and a
/// block that fails one is deleted and fetched again. There is no shared index to keep
/// consistent: the folder *is* the index, which is why a crash at any point leaves a
/// usable cache and a restart needs no recovery.
///
/// **Open blocks.** Each process holds up to [`CacheConfig::open_blocks`] block files open.
/// A page is hashed the first time the process reads it through a handle; later reads of
/// it through the same handle are plain `pread`s. A held handle serves a read only while
/// (checked by one `fstat` per read) its file is still linked (not evicted, dropped or
/// replaced by a rename, in any process), has its length and the modification time the
/// handle last saw (not written in place), and was opened less than a minute ago; else
/// the block is reopened and its pages are hashed again. What this does not catch is a
/// page that changes on disk without its file's metadata changing (bit rot below the file
/// system) after the handle verified it: it is served for at most that minute, until the
/// handle is reopened. [`CachedObject::is_cached`] with `verify` (`reel-warm --verify`)
/// always re-reads and re-hashes every page.
///
/// **Eviction** is least-recently-used by file modification time, which hits refresh at
/// most once a minute ([`TOUCH_INTERVAL`]). A per-process journal or shared LRU list would
/// need locking on the read path and repair after crashes; mtimes are maintained by the
/// kernel, survive restarts and are visible to every process, and their coarseness does
/// not matter for a cache whose unit is megabytes. Only one process scans and evicts at a
/// time (an advisory lock on `evict.lock`); objects named by a pin list are never evicted.
///
/// Within a process, one fetch per block is in flight at a time (later readers wait for
/// it), adjacent missing blocks are coalesced into one ranged GET, at most
/// [`CacheConfig::max_concurrent_fetches`] GETs run at once, and failed requests are
/// retried with exponential backoff (opendal's retry layer).
///
/// The cache owns a small tokio runtime and blocks on it; call it from ordinary threads,
/// not from inside an async task. Cloning is cheap and shares everything.
#[derive(Clone)]
pub struct BlockCache {
    pub(crate) inner: Arc<Inner>,
    // Apart from `inner` so that blocking tasks, which hold only `inner`, never drop the
    // runtime from inside it.
    pub(crate) runtime: Arc<tokio::runtime::Runtime>,
}

pub(crate) struct Inner {
    pub(crate) config: CacheConfig,
    pub(crate) remote: Operator,
    remote_name: String,
    pub(crate) fetch_permits: Semaphore,
    pub(crate) flights: Flights,
    pub(crate) open_blocks: OpenBlocks,
    pub(crate) counters: Counters,
    pub(crate) written_since_scan: AtomicU64,
    /// Set when a scan found the cache full of pinned blocks: misses are then served
    /// without being written until a later scan finds room.
    pub(crate) full: AtomicBool,
    pub(crate) last_scan: Mutex<Option<Instant>>,
    pub(crate) temp_names: TempNames,
    /// The store's folder was missing at opening: only cached objects can be read.
    store_missing: bool,
}

impl fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockCache")
            .field("dirs", &self.inner.config.dirs)
            .field("remote", &self.inner.remote_name)
            .field("block_size", &self.inner.config.block_size)
            .finish()
    }
}

impl BlockCache {
    /// Opens (creating if needed) the cache described by `config` in front of `remote`.
    /// `remote_name` (the store's URI) names objects in error messages.
    pub fn new(
        config: CacheConfig,
        remote: Operator,
        remote_name: impl Into<String>,
    ) -> Result<Self> {
        Self::open(config, remote, remote_name.into(), false)
    }

    fn open(
        config: CacheConfig,
        remote: Operator,
        remote_name: String,
        store_missing: bool,
    ) -> Result<Self> {
        config
            .validate()
            .map_err(|reason| Error::Config { reason })?;
        for (i, dir) in config.dirs.iter().enumerate() {
            let mut sub = vec!["blocks"];
            if i == 0 {
                sub.extend(["objects", "pins"]);
            }
            for name in sub {
                let path = dir.join(name);
                std::fs::create_dir_all(&path).map_err(|source| Error::io(&path, source))?;
            }
        }
        let remote = remote.layer(
            RetryLayer::new()
                .with_max_times(config.retries)
                .with_min_delay(config.retry_min_delay)
                .with_max_delay(config.retry_max_delay)
                .with_jitter(),
        );
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("reel-cache")
            .enable_all()
            .build()
            .map_err(|source| Error::io(&config.dirs[0], source))?;
        Ok(Self {
            runtime: Arc::new(runtime),
            inner: Arc::new(Inner {
                fetch_permits: Semaphore::new(config.max_concurrent_fetches),
                open_blocks: OpenBlocks::new(config.open_blocks),
                config,
                remote,
                remote_name,
                flights: Flights::default(),
                counters: Counters::default(),
                written_since_scan: AtomicU64::new(0),
                full: AtomicBool::new(false),
                last_scan: Mutex::new(None),
                temp_names: TempNames::new(),
                store_missing,
            }),
        })
    }

    /// Opens a cache in front of a [`Store`] (a local folder or an S3 prefix).
    pub fn for_store(config: CacheConfig, store: &Store) -> Result<Self> {
        Self::new(config, store.operator().clone(), remote_name(store.uri()))
    }

    /// Opens a cache in front of the store at `uri` to read from it, as
    /// [`Store::open_existing`] does, except that a local store folder that is missing
    /// (unmounted, removed) is no error: the cache then serves the objects it knows at
    /// their recorded version, a miss is an error naming the object, and
    /// [`BlockCache::store_missing`] is true. An S3 store that cannot be reached is
    /// served the same way by [`BlockCache::object`].
    pub fn for_existing_store(
        mut config: CacheConfig,
        uri: &str,
        options: &reel_io::StoreOptions,
    ) -> Result<Self> {
        match Store::open_existing_with(uri, options) {
            Ok(store) => Self::for_store(config, &store),
            // Only a local folder can be missing (an S3 store is not asked at opening).
            Err(reel_io::Error::NotFound { .. }) => {
                // An always-empty folder stands in for the store (opening a local store
                // creates its folder, which a reader must not); every miss finds nothing.
                let stand_in = config.dirs[0].join("missing-store");
                std::fs::create_dir_all(&stand_in)
                    .map_err(|source| Error::io(&stand_in, source))?;
                let store = Store::open(&stand_in.to_string_lossy())?;
                config.trust_cached_metadata = true;
                Self::open(config, store.operator().clone(), remote_name(uri), true)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The store the cache is in front of, as its errors name it (its URI without the
    /// query).
    pub fn remote_name(&self) -> &str {
        &self.inner.remote_name
    }

    /// Whether the store's folder was missing when the cache was opened
    /// ([`BlockCache::for_existing_store`]), so that only cached objects can be read.
    pub fn store_missing(&self) -> bool {
        self.inner.store_missing
    }

    /// The configuration the cache was opened with.
    pub fn config(&self) -> &CacheConfig {
        &self.inner.config
    }

    /// Counters since this cache was opened in this process.
    pub fn metrics(&self) -> CacheMetrics {
        self.inner.counters.snapshot()
    }

    /// Object `path` of the remote store as a cached [`ByteSource`].
    ///
    /// Asks the remote for the object's version (one `stat`), unless
    /// [`CacheConfig::trust_cached_metadata`] is set and the cache knows the object. If the
    /// remote cannot be reached but the cache knows the object, the cached version is used,
    /// so cached blocks stay readable while the remote is down.
    pub fn object(&self, path: &str) -> Result<CachedObject> {
        self.runtime.block_on(self.object_async(path))
    }

    /// Like [`BlockCache::object`] for many paths at once, with the `stat`s in flight
    /// concurrently (up to [`CacheConfig::max_concurrent_fetches`]). Results are in the
    /// order of `paths`.
    pub fn objects(&self, paths: &[String]) -> Vec<Result<CachedObject>> {
        let limit = self.inner.config.max_concurrent_fetches;
        self.runtime.block_on(async {
            let mut out: Vec<Option<Result<CachedObject>>> = paths.iter().map(|_| None).collect();
            let mut pending = paths.iter().enumerate();
            let mut tasks = tokio::task::JoinSet::new();
            loop {
                while tasks.len() < limit
                    && let Some((i, path)) = pending.next()
                {
                    let cache = self.clone();
                    let path = path.clone();
                    tasks.spawn(async move { (i, cache.object_async(&path).await) });
                }
                match tasks.join_next().await {
                    Some(Ok((i, result))) => out[i] = Some(result),
                    Some(Err(join)) => std::panic::resume_unwind(join.into_panic()),
                    None => break,
                }
            }
            out.into_iter()
                .zip(paths)
                .map(|(r, path)| {
                    r.unwrap_or_else(|| {
                        Err(Error::Config {
                            reason: format!("{path}: not opened"),
                        })
                    })
                })
                .collect()
        })
    }

    async fn object_async(&self, path: &str) -> Result<CachedObject> {
        // Keys come from manifests: never one outside the remote store.
        let path = reel_io::confine_key(path)?;
        let inner = &self.inner;
        let recorded = read_meta(&inner.config, path);
        if inner.config.trust_cached_metadata
            && let Some(meta) = recorded
        {
            return Ok(self.object_from_meta(meta));
        }
        let meta = match inner.remote.stat(path).await {
            Ok(m) => ObjectMeta::from_stat(path, &m),
            Err(e) if e.kind() == opendal::ErrorKind::NotFound => match recorded.clone() {
                // Not found because the whole store is gone (a local folder unmounted
                // or removed): as unreachable as a server that is down.
                Some(meta) if inner.remote_folder_gone() => {
                    add(&inner.counters.get_errors, 1);
                    meta
                }
                _ => {
                    return Err(reel_io::Error::NotFound {
                        name: inner.name_of(path),
                    }
                    .into());
                }
            },
            Err(e) => match recorded.clone() {
                Some(meta) => {
                    add(&inner.counters.get_errors, 1);
                    meta
                }
                None => return Err(inner.remote_err(path, e).into()),
            },
        };
        if recorded.as_ref() != Some(&meta) {
            write_meta(&inner.config, &meta)?;
        }
        Ok(self.object_from_meta(meta))
    }

    fn object_from_meta(&self, meta: ObjectMeta) -> CachedObject {
        let inner = &self.inner;
        let id = object_id(&meta.path, &meta.version, inner.config.block_size);
        let if_match = (meta.etag && inner.remote.info().capability().read_with_if_match)
            .then(|| meta.version.clone());
        CachedObject {
            cache: self.clone(),
            name: inner.name_of(&meta.path),
            id,
            if_match,
            meta,
        }
    }
}

/// One object seen through a [`BlockCache`]: a [`ByteSource`] whose reads are served
/// from local blocks, fetching missing ones from the remote.
#[derive(Clone)]
pub struct CachedObject {
    pub(crate) cache: BlockCache,
    pub(crate) meta: ObjectMeta,
    pub(crate) id: u128,
    pub(crate) name: String,
    /// The version to pin ranged reads to, where the remote honours `If-Match`.
    pub(crate) if_match: Option<String>,
}

impl fmt::Debug for CachedObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedObject")
            .field("name", &self.name)
            .field("version", &self.meta.version)
            .field("len", &self.meta.len)
            .finish()
    }
}

impl CachedObject {
    /// The object's path in the remote store.
    pub fn path(&self) -> &str {
        &self.meta.path
    }

    /// The object version the cached blocks belong to (ETag, or length and modification
    /// time).
    pub fn version(&self) -> &str {
        &self.meta.version
    }

    /// Number of blocks the object spans.
    pub fn num_blocks(&self) -> u64 {
        self.meta.len.div_ceil(self.cache.inner.config.block_size)
    }

    /// Byte range of block `index` within the object.
    pub fn block_range(&self, index: u64) -> Range<u64> {
        let bs = self.cache.inner.config.block_size;
        index * bs..((index + 1) * bs).min(self.meta.len)
    }

    /// Folder name of this object version under `blocks/` (what pin lists name).
    pub fn dir_name(&self) -> String {
        format!("{:032x}", self.id)
    }

    /// Whether block `index` is on disk with a valid header; with `verify`, every page
    /// checksum is checked too, and a block that fails is deleted.
    pub fn is_cached(&self, index: u64, verify: bool) -> bool {
        let inner = &self.cache.inner;
        let path = inner.block_path(self.id, index);
        let len = self.block_range(index);
        // Always the file on disk now, never a held handle: this is the check that
        // re-reads and re-hashes every page.
        let opened = BlockFile::open(
            &path,
            len.end - len.start,
            inner.config.page_size,
            (self.id, index),
        );
        let checked = opened.and_then(|b| if verify { b.verify_all() } else { Ok(()) });
        match checked {
            Ok(()) => true,
            Err(fault) => {
                inner.open_blocks.forget((self.id, index));
                inner.drop_if_corrupt(&path, &fault);
                false
            }
        }
    }
}

impl ByteSource for CachedObject {
    fn len(&self) -> reel_io::Result<u64> {
        Ok(self.meta.len)
    }

    fn read_range(&self, range: Range<u64>) -> reel_io::Result<Bytes> {
        if range.start > range.end || range.end > self.meta.len {
            return Err(reel_io::Error::OutOfBounds {
                name: self.name.clone(),
                start: range.start,
                end: range.end,
                len: self.meta.len,
            });
        }
        if range.is_empty() {
            return Ok(Bytes::new());
        }
        self.cache.inner.read(self, range)
    }

    fn name(&self) -> &str {
        &self.name
    }
}

impl Inner {
    /// Whether the remote is a local folder that is no longer there. (opendal answers a
    /// `stat` of the root itself without asking the service, so ask the file system.)
    fn remote_folder_gone(&self) -> bool {
        let info = self.remote.info();
        info.scheme() == "fs" && !Path::new(&*info.root()).exists()
    }

    pub(crate) fn name_of(&self, path: &str) -> String {
        format!("{}/{path}", self.remote_name.trim_end_matches('/'))
    }

    pub(crate) fn remote_err(&self, path: &str, source: opendal::Error) -> reel_io::Error {
        add(&self.counters.get_errors, 1);
        if source.kind() == opendal::ErrorKind::NotFound {
            reel_io::Error::NotFound {
                name: self.name_of(path),
            }
        } else {
            reel_io::Error::Store {
                name: self.name_of(path),
                source,
            }
        }
    }

    pub(crate) fn block_path(&self, id: u128, index: u64) -> PathBuf {
        layout::block_path(&self.config, id, index)
    }
}
