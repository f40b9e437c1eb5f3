//! The read-through block cache and its per-object byte source.

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use opendal::Operator;
use opendal::layers::RetryLayer;
use reel_io::{ByteSource, Store};
use serde::{Deserialize, Serialize};
use tokio::sync::{Semaphore, watch};
use twox_hash::{XxHash3_64, XxHash3_128};

use crate::block::{self, BlockFault, BlockFile};
use crate::metrics::{CacheMetrics, Counters, add};
use crate::open_blocks::{BlockId, OpenBlocks};
use crate::{CacheConfig, Error, Result};

/// How long a block's last-use time may lag: a hit rewrites the block's mtime only when
/// it is older than this, so hot blocks do not cost a metadata write per read.
/// How a store's URI names its objects in errors: without its query (options, secrets).
fn remote_name(uri: &str) -> String {
    uri.split('?').next().unwrap_or_default().to_owned()
}

const TOUCH_INTERVAL: Duration = Duration::from_secs(60);

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
    fetch_permits: Semaphore,
    flights: Mutex<HashMap<BlockId, watch::Receiver<FlightState>>>,
    pub(crate) open_blocks: OpenBlocks,
    pub(crate) counters: Counters,
    pub(crate) written_since_scan: AtomicU64,
    /// Set when a scan found the cache full of pinned blocks: misses are then served
    /// without being written until a later scan finds room.
    pub(crate) full: AtomicBool,
    pub(crate) last_scan: Mutex<Option<Instant>>,
    temp_nonce: u64,
    temp_counter: AtomicU64,
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

/// `None` while the fetch runs; then the block's bytes, or `None` if the fetch failed.
type FlightState = Option<Option<Bytes>>;

/// What the cache records about an object, in `objects/<hash of path>.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ObjectMeta {
    pub(crate) path: String,
    pub(crate) version: String,
    pub(crate) len: u64,
    /// Whether `version` is an ETag the remote accepts in `If-Match`.
    pub(crate) etag: bool,
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
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let temp_nonce = XxHash3_64::oneshot(format!("{}-{nanos}", std::process::id()).as_bytes());
        Ok(Self {
            runtime: Arc::new(runtime),
            inner: Arc::new(Inner {
                fetch_permits: Semaphore::new(config.max_concurrent_fetches),
                open_blocks: OpenBlocks::new(config.open_blocks),
                config,
                remote,
                remote_name,
                flights: Mutex::new(HashMap::new()),
                counters: Counters::default(),
                written_since_scan: AtomicU64::new(0),
                full: AtomicBool::new(false),
                last_scan: Mutex::new(None),
                temp_nonce,
                temp_counter: AtomicU64::new(0),
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
        let recorded = inner.read_meta(path);
        if inner.config.trust_cached_metadata
            && let Some(meta) = recorded
        {
            return Ok(self.object_from_meta(meta));
        }
        let meta = match inner.remote.stat(path).await {
            Ok(m) => inner.meta_from_stat(path, &m),
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
            inner.write_meta(&meta)?;
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
    name: String,
    if_match: Option<String>,
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

    /// Fetches the missing blocks among `blocks` (sorted, in range) into the cache.
    pub(crate) async fn fetch_blocks(
        &self,
        blocks: &[u64],
    ) -> reel_io::Result<HashMap<u64, Bytes>> {
        self.cache.inner.fetch_blocks(self, blocks).await
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

    fn remote_err(&self, path: &str, source: opendal::Error) -> reel_io::Error {
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

    fn meta_path(&self, path: &str) -> PathBuf {
        meta_path(&self.config, path)
    }

    fn read_meta(&self, path: &str) -> Option<ObjectMeta> {
        read_meta(&self.config, path)
    }

    fn write_meta(&self, meta: &ObjectMeta) -> Result<()> {
        let json = serde_json::to_vec(meta).map_err(|e| Error::Config {
            reason: e.to_string(),
        })?;
        reel_io::write_file_atomic(self.meta_path(&meta.path), &json)?;
        Ok(())
    }

    fn meta_from_stat(&self, path: &str, m: &opendal::Metadata) -> ObjectMeta {
        let len = m.content_length();
        let (version, etag) = match (m.etag(), m.version()) {
            (Some(tag), _) => (tag.to_owned(), true),
            (None, Some(v)) => (format!("v:{v}"), false),
            (None, None) => {
                let modified = m.last_modified().map(|t| t.to_string()).unwrap_or_default();
                (format!("{len}@{modified}"), false)
            }
        };
        ObjectMeta {
            path: path.to_owned(),
            version,
            len,
            etag,
        }
    }

    pub(crate) fn block_path(&self, id: u128, index: u64) -> PathBuf {
        block_path(&self.config, id, index)
    }

    fn temp_path(&self, dest: &Path) -> PathBuf {
        let n = self.temp_counter.fetch_add(1, Ordering::Relaxed);
        let file = dest
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        dest.with_file_name(format!(
            ".{file}.{:x}-{}-{n}.tmp",
            self.temp_nonce,
            std::process::id()
        ))
    }

    /// Deletes a block that failed its checks so that the next read fetches it again.
    pub(crate) fn drop_if_corrupt(&self, path: &Path, fault: &BlockFault) {
        match fault {
            BlockFault::Missing => {}
            BlockFault::Corrupt(_) => {
                add(&self.counters.corrupt_blocks, 1);
                let _ = std::fs::remove_file(path);
            }
            BlockFault::Io(_) => add(&self.counters.get_errors, 1),
        }
    }

    /// `range` within block `index` of `object`, from disk, or `None` on a miss.
    fn read_cached(&self, object: &CachedObject, index: u64, range: Range<u64>) -> Option<Bytes> {
        let mut out = vec![0u8; (range.end - range.start) as usize];
        self.read_cached_into(object, index, range, &mut out)
            .then(|| Bytes::from(out))
    }

    /// Reads `range` within block `index` of `object` from disk into `out`; false on a
    /// miss (missing or corrupt block, which is then dropped).
    ///
    /// The block is read through this process's handle table: a held handle that is
    /// still the file at the block's path serves the read, pages it verified before are
    /// not hashed again.
    fn read_cached_into(
        &self,
        object: &CachedObject,
        index: u64,
        range: Range<u64>,
        out: &mut [u8],
    ) -> bool {
        let id = (object.id, index);
        let path = || self.block_path(object.id, index);
        let block_range = object.block_range(index);
        let payload_len = block_range.end - block_range.start;
        let block = match self
            .open_blocks
            .get_or_open(id, path, payload_len, self.config.page_size)
        {
            Ok(block) => block,
            Err(fault) => {
                self.drop_if_corrupt(&path(), &fault);
                return false;
            }
        };
        match block.read_into(range, out) {
            Ok(()) => {
                block.touch_if_older_than(TOUCH_INTERVAL);
                true
            }
            Err(fault) => {
                self.open_blocks.forget_handle(id, &block);
                let path = path();
                // Only if the path still names the file that failed: another process may
                // have dropped it and fetched a good one meanwhile.
                if block.is_at(&path) {
                    self.drop_if_corrupt(&path, &fault);
                } else if matches!(fault, BlockFault::Io(_)) {
                    add(&self.counters.get_errors, 1);
                }
                false
            }
        }
    }

    fn read(&self, object: &CachedObject, range: Range<u64>) -> reel_io::Result<Bytes> {
        let bs = self.config.block_size;
        let first = range.start / bs;
        let last = (range.end - 1) / bs;
        // `range` within block `index`, and where that lands in the output.
        let within = |index: u64| {
            let block = object.block_range(index);
            let (a, b) = (range.start.max(block.start), range.end.min(block.end));
            (
                a - block.start..b - block.start,
                (a - range.start) as usize..(b - range.start) as usize,
            )
        };
        let mut out = vec![0u8; (range.end - range.start) as usize];
        let mut missing = Vec::new();
        for index in first..=last {
            let (sub, at) = within(index);
            if self.read_cached_into(object, index, sub.clone(), &mut out[at]) {
                add(&self.counters.hits, 1);
                add(&self.counters.bytes_read_cache, sub.end - sub.start);
            } else {
                add(&self.counters.misses, 1);
                add(&self.counters.bytes_requested_external, sub.end - sub.start);
                missing.push(index);
            }
        }
        if !missing.is_empty() {
            let fetched = object
                .cache
                .runtime
                .block_on(self.fetch_blocks(object, &missing))?;
            for index in missing {
                let (sub, at) = within(index);
                let block = fetched.get(&index).filter(|b| b.len() as u64 >= sub.end);
                let Some(block) = block else {
                    return Err(reel_io::Error::ShortRead {
                        name: object.name.clone(),
                        expected: sub.end - sub.start,
                        got: 0,
                    });
                };
                out[at].copy_from_slice(&block[sub.start as usize..sub.end as usize]);
            }
        }
        Ok(Bytes::from(out))
    }

    /// Fetches `blocks` (sorted) of `object`: blocks another thread is already fetching
    /// are awaited, the rest are fetched in coalesced runs of adjacent blocks.
    async fn fetch_blocks(
        &self,
        object: &CachedObject,
        blocks: &[u64],
    ) -> reel_io::Result<HashMap<u64, Bytes>> {
        let mut owned: Vec<(u64, Flight<'_>)> = Vec::new();
        let mut awaited = Vec::new();
        let mut out = HashMap::with_capacity(blocks.len());
        for &index in blocks {
            match self.claim((object.id, index)) {
                Claim::Owner(mut flight) => {
                    // Another thread may have written the block between our miss and our
                    // claim (its fetch ends before its claim does): look once more.
                    let whole = object.block_range(index);
                    match self.read_cached(object, index, 0..whole.end - whole.start) {
                        Some(bytes) => {
                            flight.finish(bytes.clone());
                            out.insert(index, bytes);
                        }
                        None => owned.push((index, flight)),
                    }
                }
                Claim::Wait(rx) => awaited.push((index, rx)),
            }
        }
        let max_run = (self.config.max_request_bytes / self.config.block_size).max(1);
        let mut rest = &mut owned[..];
        while !rest.is_empty() {
            let mut n = 1;
            while n < rest.len() && n < max_run as usize && rest[n].0 == rest[n - 1].0 + 1 {
                n += 1;
            }
            let (run, tail) = rest.split_at_mut(n);
            rest = tail;
            let first = run[0].0;
            let data = self.fetch_run(object, first..first + n as u64).await?;
            for ((index, flight), bytes) in run.iter_mut().zip(data) {
                flight.finish(bytes.clone());
                out.insert(*index, bytes);
            }
        }
        for (index, mut rx) in awaited {
            let shared = match rx.wait_for(Option::is_some).await {
                Ok(state) => state.clone().flatten(),
                Err(_) => None,
            };
            let bytes = match shared {
                Some(bytes) => bytes,
                // The other fetch failed: try once more ourselves, for our own error.
                None => self
                    .fetch_run(object, index..index + 1)
                    .await?
                    .pop()
                    .unwrap_or_default(),
            };
            out.insert(index, bytes);
        }
        Ok(out)
    }

    fn claim(&self, id: BlockId) -> Claim<'_> {
        let mut flights = self.flights.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(rx) = flights.get(&id) {
            return Claim::Wait(rx.clone());
        }
        let (tx, rx) = watch::channel(None);
        flights.insert(id, rx);
        Claim::Owner(Flight {
            inner: self,
            id,
            tx,
            done: false,
        })
    }

    /// One ranged GET for blocks `blocks` of `object`, written to disk as blocks.
    async fn fetch_run(
        &self,
        object: &CachedObject,
        blocks: Range<u64>,
    ) -> reel_io::Result<Vec<Bytes>> {
        let start = object.block_range(blocks.start).start;
        let end = object.block_range(blocks.end - 1).end;
        let bytes = {
            let _permit = self
                .fetch_permits
                .acquire()
                .await
                .map_err(|e| reel_io::Error::Io {
                    name: object.name.clone(),
                    source: std::io::Error::other(e),
                })?;
            add(&self.counters.remote_requests, 1);
            let mut request = self.remote.read_with(&object.meta.path).range(start..end);
            if let Some(tag) = &object.if_match {
                request = request.if_match(tag);
            }
            request
                .await
                .map_err(|e| self.remote_err(&object.meta.path, e))?
                .to_bytes()
        };
        if bytes.len() as u64 != end - start {
            add(&self.counters.get_errors, 1);
            return Err(reel_io::Error::ShortRead {
                name: object.name.clone(),
                expected: end - start,
                got: bytes.len() as u64,
            });
        }
        add(&self.counters.bytes_read_external, bytes.len() as u64);
        let parts: Vec<(u64, Bytes)> = blocks
            .map(|index| {
                let r = object.block_range(index);
                (
                    index,
                    bytes.slice((r.start - start) as usize..(r.end - start) as usize),
                )
            })
            .collect();
        let inner = Arc::clone(&object.cache.inner);
        let id = object.id;
        let to_write = parts.clone();
        // Disk writes block; keep them off the async workers.
        let _ = tokio::task::spawn_blocking(move || {
            for (index, data) in &to_write {
                inner.store_block(id, *index, data);
            }
            inner.maybe_evict();
        })
        .await;
        Ok(parts.into_iter().map(|(_, b)| b).collect())
    }

    /// Writes one block file; failures are counted, not returned (the read still succeeds).
    fn store_block(&self, id: u128, index: u64, data: &[u8]) {
        if self.full.load(Ordering::Relaxed) {
            add(&self.counters.put_skipped_full, 1);
            return;
        }
        let dest = self.block_path(id, index);
        let mut result = Err(std::io::Error::other("not attempted"));
        // Two attempts: an evicting process may remove the (empty) folder between our
        // `create_dir_all` and the write.
        for _ in 0..2 {
            if let Some(parent) = dest.parent()
                && let Err(e) = std::fs::create_dir_all(parent)
            {
                result = Err(e);
                continue;
            }
            result = block::write_block(
                &dest,
                &self.temp_path(&dest),
                data,
                self.config.page_size,
                (id, index),
            );
            if result.is_ok() {
                break;
            }
        }
        match result {
            Ok(()) => {
                add(&self.counters.bytes_written_cache, data.len() as u64);
                self.written_since_scan.fetch_add(
                    block::file_len(data.len() as u64, self.config.page_size),
                    Ordering::Relaxed,
                );
            }
            Err(_) => add(&self.counters.put_errors, 1),
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

enum Claim<'a> {
    Owner(Flight<'a>),
    Wait(watch::Receiver<FlightState>),
}

/// The right and duty to fetch one block; on drop (finished, failed or cancelled) the
/// block leaves the in-flight table and waiters are woken.
struct Flight<'a> {
    inner: &'a Inner,
    id: BlockId,
    tx: watch::Sender<FlightState>,
    done: bool,
}

impl Flight<'_> {
    fn finish(&mut self, bytes: Bytes) {
        self.tx.send_replace(Some(Some(bytes)));
        self.done = true;
    }
}

impl Drop for Flight<'_> {
    fn drop(&mut self) {
        let mut flights = self.inner.flights.lock().unwrap_or_else(|p| p.into_inner());
        flights.remove(&self.id);
        drop(flights);
        if !self.done {
            self.tx.send_replace(Some(None));
        }
    }
}
