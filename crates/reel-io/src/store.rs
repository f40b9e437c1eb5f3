//! Stores addressed by URI (a local folder or an S3 prefix), reached through opendal.

use std::fmt;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use opendal::layers::RetryLayer;
use opendal::{ErrorKind, OperationContext, Operator};

use crate::key::confine_key;
use crate::source::{ByteSource, check_range, temp_suffix};
use crate::{Error, Result};

/// Credentials and overrides that do not belong in a URI.
///
/// Anything left `None` falls back to the usual AWS environment variables
/// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT_URL`).
#[derive(Clone, Default)]
pub struct StoreOptions {
    /// S3 access key id.
    pub access_key_id: Option<String>,
    /// S3 secret access key.
    pub secret_access_key: Option<String>,
    /// Retries of a request that failed transiently (`None`: [`DEFAULT_RETRIES`];
    /// `Some(0)`: none).
    pub retries: Option<usize>,
}

/// Retries of a transiently failed request to an object store, with jittered
/// exponential backoff from 50 ms up to 5 s.
pub const DEFAULT_RETRIES: usize = 4;

/// The folder of a local store where its writes are made before they are renamed into
/// place (hidden, at the store's root, on the same filesystem as every object).
pub const TEMPORARIES: &str = ".reel-tmp";

impl fmt::Debug for StoreOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreOptions")
            .field("access_key_id", &self.access_key_id)
            .field(
                "secret_access_key",
                &self.secret_access_key.as_ref().map(|_| "***"),
            )
            .field("retries", &self.retries)
            .finish()
    }
}

/// A folder of objects: a local directory or an S3 bucket prefix.
///
/// opendal is async; a `Store` owns a small tokio runtime and blocks on it, so callers
/// (decoder threads, CLIs) stay synchronous. Do not call it from inside an async task.
/// Cloning is cheap and shares the runtime.
#[derive(Clone)]
pub struct Store {
    inner: Arc<StoreInner>,
}

struct StoreInner {
    op: Operator,
    runtime: tokio::runtime::Runtime,
    uri: String,
    /// What it was opened with: another client of the same store (the warehouse's Delta
    /// engine) uses the same credentials.
    options: StoreOptions,
    is_local: bool,
    /// The folder, for a local store.
    local_root: Option<std::path::PathBuf>,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("uri", &crate::redact(&self.inner.uri))
            .finish()
    }
}

impl Store {
    /// Opens the store at `uri`: a local path (`/data/eps`, `file:///data/eps`) or
    /// `s3://bucket/prefix?endpoint=http://127.0.0.1:9000&region=us-east-1`.
    pub fn open(uri: &str) -> Result<Self> {
        Self::open_with(uri, &StoreOptions::default())
    }

    /// Opens a store to read from: like [`Store::open`], except that a local folder
    /// that does not exist is [`Error::NotFound`] rather than created empty (a
    /// mistyped `--store` would otherwise serve nothing from a new, empty folder).
    pub fn open_existing(uri: &str) -> Result<Self> {
        Self::open_existing_with(uri, &StoreOptions::default())
    }

    /// [`Store::open_existing`] with explicit options.
    pub fn open_existing_with(uri: &str, options: &StoreOptions) -> Result<Self> {
        if let Some(path) = local_folder(uri) {
            let path = std::path::Path::new(path);
            if !path.exists() {
                return Err(Error::NotFound {
                    name: format!("store folder {}", path.display()),
                });
            }
            if !path.is_dir() {
                return Err(Error::InvalidUri {
                    uri: path.display().to_string(),
                    reason: "a file, where a store folder was expected".to_owned(),
                });
            }
        }
        Self::open_with(uri, options)
    }

    /// Like [`Store::open`] (a local folder is created if missing), with explicit
    /// credentials.
    pub fn open_with(uri: &str, options: &StoreOptions) -> Result<Self> {
        let invalid = |reason: String| Error::InvalidUri {
            uri: crate::redact(uri).into_owned(),
            reason,
        };
        let mut local_root = None;
        let (op, is_local) = if let Some(rest) = uri.strip_prefix("s3://") {
            (s3_operator(rest, options).map_err(invalid)?, false)
        } else {
            let path = local_folder(uri).unwrap_or(".");
            let root = std::path::absolute(path).map_err(|e| invalid(e.to_string()))?;
            let builder = opendal::services::Fs::default().root(&root.to_string_lossy());
            local_root = Some(root.clone());
            (
                Operator::new(builder).map_err(|e| invalid(e.to_string()))?,
                true,
            )
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("reel-io")
            .enable_all()
            .build()
            .map_err(|source| Error::Io {
                name: uri.to_owned(),
                source,
            })?;
        Ok(Self {
            inner: Arc::new(StoreInner {
                op,
                runtime,
                uri: uri.to_owned(),
                options: options.clone(),
                is_local,
                local_root,
            }),
        })
    }

    /// The credentials and retries this store was opened with.
    pub fn options(&self) -> &StoreOptions {
        &self.inner.options
    }

    /// The URI this store was opened with.
    pub fn uri(&self) -> &str {
        &self.inner.uri
    }

    /// The URI of the object `key` in this store, the inverse of [`split_object_uri`]:
    /// `s3://b/eps?region=r` and `x.mcap` give `s3://b/eps/x.mcap?region=r`.
    pub fn object_uri(&self, key: &str) -> String {
        let (location, query) = match self.inner.uri.split_once('?') {
            Some((l, q)) => (l, Some(q)),
            None => (self.inner.uri.as_str(), None),
        };
        let location = format!("{}/{key}", location.trim_end_matches('/'));
        match query {
            Some(q) => format!("{location}?{q}"),
            None => location,
        }
    }

    /// The folder behind a local store (`None` for S3): for engines that map
    /// local files themselves, such as Polars' Parquet scan.
    pub fn local_root(&self) -> Option<&std::path::Path> {
        self.inner.local_root.as_deref()
    }

    /// The underlying async operator, for callers that want opendal directly.
    pub fn operator(&self) -> &Operator {
        &self.inner.op
    }

    fn name_of(&self, key: &str) -> String {
        let uri = self.inner.uri.split('?').next().unwrap_or_default();
        crate::redact(&format!("{}/{key}", uri.trim_end_matches('/'))).into_owned()
    }

    /// Removes the stale temporaries of killed writers of a local store and returns how
    /// many; an S3 store has none (a PUT is atomic). Every temporary of a local store is
    /// written in one folder, [`TEMPORARIES`], and renamed into place from there, so this
    /// reads that folder alone: its cost is the writes in flight, not the objects stored
    /// (a walk of `canonical/` at 43 million episodes would be minutes per ingest batch).
    /// See [`remove_stale_temporaries`](crate::remove_stale_temporaries).
    pub fn remove_stale_temporaries(&self) -> Result<usize> {
        let Some(root) = &self.inner.local_root else {
            return Ok(0);
        };
        let folder = root.join(TEMPORARIES);
        let removed =
            crate::remove_stale_temporaries(&folder, None).map_err(|source| Error::Io {
                name: folder.display().to_string(),
                source,
            })?;
        Ok(removed.len())
    }

    /// The path of object `key` of a local store (`None` for S3), for callers that map
    /// files themselves; the key is confined to the store like every other.
    pub fn local_path(&self, key: &str) -> Result<Option<std::path::PathBuf>> {
        let key = confine_key(key)?;
        Ok(self.inner.local_root.as_ref().map(|root| root.join(key)))
    }

    fn store_err(&self, key: &str, source: opendal::Error) -> Error {
        // opendal's fs service reports a folder read as a file as an unexpected,
        // temporary error; it is neither.
        let is_folder = || {
            let path = self.inner.local_root.as_ref().map(|root| root.join(key));
            path.is_some_and(|p| p.is_dir())
        };
        if source.kind() != ErrorKind::NotFound && is_folder() {
            Error::NotAFile {
                name: self.name_of(key),
            }
        } else if source.kind() == ErrorKind::NotFound {
            Error::NotFound {
                name: self.name_of(key),
            }
        } else {
            Error::Store {
                name: self.name_of(key),
                source,
            }
        }
    }

    fn block_on<F: IntoFuture>(&self, fut: F) -> F::Output {
        self.inner.runtime.block_on(fut.into_future())
    }

    /// Length of object `key`.
    pub fn len_of(&self, key: &str) -> Result<u64> {
        Ok(self.version_of(key)?.len)
    }

    /// When object `key` was last written, in milliseconds since the epoch, where the
    /// store says.
    pub fn modified_ms(&self, key: &str) -> Result<Option<i64>> {
        let key = confine_key(key)?;
        let meta = self
            .block_on(self.inner.op.stat(key))
            .map_err(|e| self.store_err(key, e))?;
        Ok(meta.last_modified().and_then(|t| {
            std::time::SystemTime::from(t)
                .duration_since(std::time::UNIX_EPOCH)
                .ok()
                .map(|d| d.as_millis() as i64)
        }))
    }

    /// Length and version tag (ETag, else modification time) of object `key`.
    fn version_of(&self, key: &str) -> Result<ObjectVersion> {
        let key = confine_key(key)?;
        let meta = self
            .block_on(self.inner.op.stat(key))
            .map_err(|e| self.store_err(key, e))?;
        if meta.is_dir() {
            return Err(Error::NotAFile {
                name: self.name_of(key),
            });
        }
        Ok(ObjectVersion {
            len: meta.content_length(),
            etag: meta.etag().map(str::to_owned),
            modified: meta.last_modified().map(|t| t.to_string()),
        })
    }

    /// Whole object `key`.
    pub fn read(&self, key: &str) -> Result<Bytes> {
        let key = confine_key(key)?;
        let buf = self
            .block_on(self.inner.op.read(key))
            .map_err(|e| self.store_err(key, e))?;
        Ok(buf.to_bytes())
    }

    /// Writes object `key` so that readers see the old object or the whole new one:
    /// temporary name then rename on a local folder, a single PUT on S3 (atomic there).
    pub fn write_atomic(&self, key: &str, data: impl Into<Bytes>) -> Result<()> {
        let key = confine_key(key)?;
        let data: Bytes = data.into();
        let op = &self.inner.op;
        if !self.inner.is_local {
            return self
                .block_on(op.write(key, data))
                .map(|_| ())
                .map_err(|e| self.store_err(key, e));
        }
        let file = key.rsplit_once('/').map_or(key, |(_, file)| file);
        let tmp = format!("{TEMPORARIES}/.{file}.{}", temp_suffix());
        self.block_on(async {
            op.write(&tmp, data).await?;
            if let Err(e) = op.rename(&tmp, key).await {
                let _ = op.delete(&tmp).await;
                return Err(e);
            }
            Ok(())
        })
        .map_err(|e| self.store_err(key, e))
    }

    /// Writes object `key` only if no object has that key yet, whole as with
    /// [`write_atomic`](Self::write_atomic): `Ok(true)` if this call created it,
    /// `Ok(false)` if it already existed (left as it was). Of writers racing for one key,
    /// exactly one creates it — the primitive for claiming a name.
    pub fn create_new(&self, key: &str, data: impl Into<Bytes>) -> Result<bool> {
        let key = confine_key(key)?;
        let data: Bytes = data.into();
        let Some(root) = &self.inner.local_root else {
            // S3: a conditional PUT (If-None-Match: *), atomic on the server.
            return match self.block_on(self.inner.op.write_with(key, data).if_not_exists(true)) {
                Ok(_) => Ok(true),
                Err(e) if e.kind() == ErrorKind::ConditionNotMatch => Ok(false),
                Err(e) => Err(self.store_err(key, e)),
            };
        };
        // A folder: the whole object under a temporary name, then a hard link to `key`,
        // which fails if `key` exists — so nobody ever sees a partial object.
        let path = root.join(key);
        let io_err = |source| Error::Io {
            name: path.display().to_string(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io_err)?;
        }
        let file = path.file_name().map(|f| f.to_string_lossy().into_owned());
        let temporaries = root.join(TEMPORARIES);
        std::fs::create_dir_all(&temporaries).map_err(io_err)?;
        let tmp = temporaries.join(format!(".{}.{}", file.unwrap_or_default(), temp_suffix()));
        std::fs::write(&tmp, &data).map_err(io_err)?;
        let linked = std::fs::hard_link(&tmp, &path);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(io_err(e)),
        }
    }

    /// Removes object `key`; nothing there is fine.
    pub fn remove(&self, key: &str) -> Result<()> {
        let key = confine_key(key)?;
        self.block_on(self.inner.op.delete(key))
            .map_err(|e| self.store_err(key, e))
    }

    /// Removes every object under `prefix` (a folder ending in `/`); nothing there is fine.
    pub fn remove_all(&self, prefix: &str) -> Result<()> {
        let prefix = confine_key(prefix)?;
        self.block_on(self.inner.op.delete_with(prefix).recursive(true))
            .map_err(|e| self.store_err(prefix, e))
    }

    /// Keys of the objects directly under `prefix` (a folder, `""` for the root), sorted.
    pub fn list(&self, prefix: &str) -> Result<Vec<String>> {
        self.list_files(prefix, false)
    }

    /// The folders directly under `prefix` (`""` for the root), each as its key prefix
    /// ending in `/`, sorted: one listing, the objects inside them not walked.
    pub fn list_folders(&self, prefix: &str) -> Result<Vec<String>> {
        let prefix = confine_key(prefix)?;
        let entries = self
            .block_on(self.inner.op.list_with(prefix))
            .map_err(|e| self.store_err(prefix, e))?;
        let mut folders: Vec<String> = entries
            .into_iter()
            .filter(|e| e.metadata().is_dir() && e.path() != prefix)
            .map(|e| e.path().to_owned())
            .collect();
        folders.sort();
        Ok(folders)
    }

    /// Every object key under `prefix`, at any depth (partitioned datasets), sorted.
    pub fn list_recursive(&self, prefix: &str) -> Result<Vec<String>> {
        self.list_files(prefix, true)
    }

    /// Every object under `prefix`, at any depth, with its length, sorted by key: one
    /// listing, no request per object (an S3 listing carries each object's size; a local
    /// folder's sizes are read from its directory entries).
    pub fn list_recursive_sized(&self, prefix: &str) -> Result<Vec<(String, u64)>> {
        let prefix = confine_key(prefix)?;
        let entries = self
            .block_on(self.inner.op.list_with(prefix).recursive(true))
            .map_err(|e| self.store_err(prefix, e))?;
        let root = self.local_root().map(std::path::Path::to_path_buf);
        let mut objects = Vec::with_capacity(entries.len());
        for entry in entries.into_iter().filter(|e| e.metadata().is_file()) {
            let len = match &root {
                // A local listing names files only; a stat of each is a system call, not
                // a request.
                Some(root) => std::fs::metadata(root.join(entry.path()))
                    .map_err(|e| Error::Io {
                        name: self.name_of(entry.path()),
                        source: e,
                    })?
                    .len(),
                None => entry.metadata().content_length(),
            };
            objects.push((entry.path().to_owned(), len));
        }
        objects.sort_unstable();
        Ok(objects)
    }

    fn list_files(&self, prefix: &str, recursive: bool) -> Result<Vec<String>> {
        let prefix = confine_key(prefix)?;
        let entries = self
            .block_on(self.inner.op.list_with(prefix).recursive(recursive))
            .map_err(|e| self.store_err(prefix, e))?;
        let mut keys: Vec<String> = entries
            .into_iter()
            .filter(|e| e.metadata().is_file())
            .map(|e| e.path().to_owned())
            .collect();
        keys.sort();
        Ok(keys)
    }

    /// A ranged byte source over object `key`. Its length and version are fetched once,
    /// lazily; reads of a replaced object fail with [`Error::Changed`].
    pub fn source(&self, key: &str) -> ObjectSource {
        ObjectSource {
            store: self.clone(),
            name: self.name_of(key),
            key: key.to_owned(),
            version: OnceLock::new(),
        }
    }
}

/// Where an `s3://` store lives, as its URI says: `s3://bucket/prefix?endpoint=…&region=…`,
/// with the region falling back to `AWS_REGION`, `AWS_DEFAULT_REGION`, then `us-east-1`.
/// One reading of the URI for every client of the same store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Location {
    pub bucket: String,
    /// The prefix inside the bucket, without leading or trailing `/` (empty: the root).
    pub prefix: String,
    /// An S3-compatible server's address (`http://127.0.0.1:9000`); `None` for AWS.
    pub endpoint: Option<String>,
    pub region: String,
}

impl S3Location {
    /// The location of `uri`, or `None` for a store that is not on S3 (a local folder).
    pub fn of(uri: &str) -> Result<Option<Self>> {
        let Some(rest) = uri.strip_prefix("s3://") else {
            return Ok(None);
        };
        Self::parse(rest)
            .map(Some)
            .map_err(|reason| Error::InvalidUri {
                uri: crate::redact(uri).into_owned(),
                reason,
            })
    }

    fn parse(rest: &str) -> std::result::Result<Self, String> {
        let (location, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (bucket, prefix) = location.split_once('/').unwrap_or((location, ""));
        if bucket.is_empty() {
            return Err("missing bucket name".into());
        }
        if bucket.contains('@') {
            return Err("credentials inside the URI are not read: give them in \
                 AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
                .into());
        }
        let (mut endpoint, mut region) = (None, None);
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            match k {
                "endpoint" => endpoint = Some(v.to_owned()),
                "region" => region = Some(v.to_owned()),
                other => return Err(format!("unknown query parameter `{other}`")),
            }
        }
        // A region is required by the signer; S3-compatible servers accept any.
        let region = region
            .or_else(|| std::env::var("AWS_REGION").ok())
            .or_else(|| std::env::var("AWS_DEFAULT_REGION").ok())
            .unwrap_or_else(|| "us-east-1".to_owned());
        Ok(Self {
            bucket: bucket.to_owned(),
            prefix: prefix.trim_matches('/').to_owned(),
            endpoint,
            region,
        })
    }
}

fn s3_operator(rest: &str, options: &StoreOptions) -> std::result::Result<Operator, String> {
    let location = S3Location::parse(rest)?;
    let mut builder = opendal::services::S3::default()
        .bucket(&location.bucket)
        .root(&format!("/{}", location.prefix));
    if let Some(endpoint) = &location.endpoint {
        builder = builder.endpoint(endpoint);
    }
    let region = location.region;
    builder = builder.region(&region);
    if let Some(key) = &options.access_key_id {
        builder = builder.access_key_id(key);
    }
    if let Some(secret) = &options.secret_access_key {
        builder = builder.secret_access_key(secret);
    }
    let op = Operator::new(builder).map_err(|e| e.to_string())?;
    // The transport is set on this operator only, so Reel installs no process-wide state.
    let transport =
        opendal::HttpTransporter::new(opendal_http_transport_reqwest::ReqwestTransport::default());
    let op = op.with_context(OperationContext::new().with_http_transport(transport));
    // opendal retries only errors its services mark temporary (timeouts, 5xx, throttling,
    // dropped connections) and only requests that are idempotent: reads, stats, lists,
    // whole-object PUTs and deletes. A conditional create that is retried after its first
    // attempt succeeded reports "already exists"; callers of `create_new` check whose
    // object it is.
    let retries = options.retries.unwrap_or(DEFAULT_RETRIES);
    Ok(if retries == 0 {
        op
    } else {
        op.layer(
            RetryLayer::new()
                .with_max_times(retries)
                .with_min_delay(std::time::Duration::from_millis(50))
                .with_max_delay(std::time::Duration::from_secs(5))
                .with_jitter(),
        )
    })
}

/// What identifies one version of an object.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ObjectVersion {
    len: u64,
    etag: Option<String>,
    modified: Option<String>,
}

/// One object of a [`Store`] as a [`ByteSource`]: each `read_range` is one ranged GET.
///
/// The object's length and version (ETag) are taken at the first use. Another writer may
/// replace the object while it is being read (a concurrent ingest of the same episode):
/// where the store supports it every GET is conditional on that ETag, and a failed or
/// short read is checked against the object's current version, so bytes of two versions
/// are never mixed silently: such reads fail with [`Error::Changed`], and the caller
/// opens the object again.
#[derive(Debug)]
pub struct ObjectSource {
    store: Store,
    key: String,
    name: String,
    version: OnceLock<ObjectVersion>,
}

impl ObjectSource {
    /// The object's key inside its store.
    pub fn key(&self) -> &str {
        &self.key
    }

    fn version(&self) -> Result<&ObjectVersion> {
        if let Some(v) = self.version.get() {
            return Ok(v);
        }
        let v = self.store.version_of(&self.key)?;
        Ok(self.version.get_or_init(|| v))
    }

    /// `error`, or [`Error::Changed`] when the object was replaced meanwhile.
    fn explain(&self, error: Error) -> Error {
        match self.has_changed() {
            Ok(true) => Error::Changed {
                name: self.name.clone(),
            },
            _ => error,
        }
    }
}

impl ByteSource for ObjectSource {
    fn len(&self) -> Result<u64> {
        Ok(self.version()?.len)
    }

    /// Whether the object in the store is no longer the version this source read (or
    /// started to read); `false` before the first read. Where the store ignores a read's
    /// If-Match (some S3-compatible servers), a replaced object's bytes come back at the
    /// old offsets; this tells that apart from corruption.
    fn has_changed(&self) -> Result<bool> {
        let Some(seen) = self.version.get() else {
            return Ok(false);
        };
        match self.store.version_of(&self.key) {
            Ok(now) => Ok(now != *seen),
            Err(Error::NotFound { .. }) => Ok(true),
            Err(e) => Err(e),
        }
    }

    fn read_range(&self, range: Range<u64>) -> Result<Bytes> {
        let version = self.version()?;
        check_range(&self.name, &range, version.len)?;
        if range.is_empty() {
            return Ok(Bytes::new());
        }
        let op = &self.store.inner.op;
        let mut read = op.read_with(&self.key).range(range.clone());
        if let Some(etag) = &version.etag
            && op.info().capability().read_with_if_match
        {
            read = read.if_match(etag);
        }
        let buf = match self.store.block_on(read) {
            Ok(buf) => buf,
            Err(e) if e.kind() == ErrorKind::ConditionNotMatch => {
                return Err(Error::Changed {
                    name: self.name.clone(),
                });
            }
            Err(e) => return Err(self.explain(self.store.store_err(&self.key, e))),
        };
        let bytes = buf.to_bytes();
        if bytes.len() as u64 != range.end - range.start {
            return Err(self.explain(Error::ShortRead {
                name: self.name.clone(),
                expected: range.end - range.start,
                got: bytes.len() as u64,
            }));
        }
        Ok(bytes)
    }

    fn name(&self) -> &str {
        &self.name
    }
}

/// Splits an object URI into its store URI and key: `s3://b/eps/x.mcap?region=r` becomes
/// (`s3://b/eps?region=r`, `x.mcap`); `/data/x.mcap` becomes (`/data`, `x.mcap`).
pub fn split_object_uri(uri: &str) -> Result<(String, String)> {
    let (location, query) = match uri.split_once('?') {
        Some((l, q)) => (l, Some(q)),
        None => (uri, None),
    };
    let not_object = || Error::InvalidUri {
        uri: uri.to_owned(),
        reason: "expected a path to an object, not a folder".into(),
    };
    if let Some(rest) = location.strip_prefix("s3://")
        && !rest.contains('/')
    {
        return Err(not_object());
    }
    let Some((parent, key)) = location.rsplit_once('/') else {
        return Ok((".".to_owned(), location.to_owned()));
    };
    if key.is_empty() {
        return Err(not_object());
    }
    let parent = if parent.is_empty() { "/" } else { parent };
    let store = match query {
        Some(q) => format!("{parent}?{q}"),
        None => parent.to_owned(),
    };
    Ok((store, key.to_owned()))
}

/// The folder a local store URI names (`/data/eps`, `file:///data/eps`, empty for the
/// current folder); `None` for an S3 URI.
fn local_folder(uri: &str) -> Option<&str> {
    if uri.starts_with("s3://") {
        return None;
    }
    let path = uri.strip_prefix("file://").unwrap_or(uri);
    Some(if path.is_empty() { "." } else { path })
}

/// Opens the object at `uri` (local path or S3 URI) as a byte source, through opendal.
pub fn open_object(uri: &str, options: &StoreOptions) -> Result<ObjectSource> {
    let (store, key) = split_object_uri(uri)?;
    let store = Store::open_existing_with(&store, options).map_err(|e| match e {
        // The object's folder is missing: the object is.
        Error::NotFound { .. } => Error::NotFound {
            name: crate::redact(uri).into_owned(),
        },
        other => other,
    })?;
    Ok(store.source(&key))
}
