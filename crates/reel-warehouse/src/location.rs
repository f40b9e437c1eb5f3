//! Where a warehouse lives: its store (Reel's, for the data files) and a Delta engine over
//! the same bytes (the kernel's, for the log), both from one store URI.

use std::sync::Arc;

use delta_kernel::object_store::ObjectStore;
use delta_kernel::object_store::RetryConfig;
use delta_kernel::object_store::aws::AmazonS3Builder;
use delta_kernel_default_engine::executor::tokio::TokioMultiThreadExecutor;
use delta_kernel_default_engine::{DefaultEngine, DefaultEngineBuilder};
use reel_io::{S3Location, Store, StoreOptions};
use url::Url;

use crate::local_folder::LocalFolder;
use crate::{Result, WarehouseError};

/// The kernel's engine as Reel runs it: its I/O on a runtime of its own (two threads), so
/// that Reel's synchronous callers may call it from any thread.
pub(crate) type Engine = DefaultEngine<TokioMultiThreadExecutor>;

/// A warehouse's store and engine.
pub(crate) struct Location {
    pub(crate) store: Store,
    /// The warehouse's root as the engine addresses it: `file:///…/` or `s3://bucket/prefix/`.
    pub(crate) root: Url,
    pub(crate) engine: Arc<Engine>,
}

impl std::fmt::Debug for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Location")
            .field("store", &self.store)
            .field("root", &self.root.as_str())
            .finish_non_exhaustive()
    }
}

/// Requests the engine's object store retries before an outage is reported: as many as
/// Reel's own store makes, within a minute.
fn retry_config(options: &StoreOptions) -> RetryConfig {
    RetryConfig {
        max_retries: options.retries.unwrap_or(reel_io::DEFAULT_RETRIES),
        retry_timeout: std::time::Duration::from_secs(60),
        ..RetryConfig::default()
    }
}

impl Location {
    /// The warehouse at `uri` (a local folder, created if missing, or `s3://bucket/prefix?…`).
    pub(crate) fn open(uri: &str, options: &StoreOptions) -> Result<Self> {
        let store = Store::open_with(uri, options)?;
        let (object_store, root): (Arc<dyn ObjectStore>, Url) = match S3Location::of(uri)? {
            None => {
                let folder = store
                    .local_root()
                    .ok_or_else(|| reel_io::Error::InvalidUri {
                        uri: reel_io::redact(uri).into_owned(),
                        reason: "neither a local folder nor an s3:// URI".into(),
                    })?;
                let folder = folder.canonicalize().map_err(|source| reel_io::Error::Io {
                    name: folder.display().to_string(),
                    source,
                })?;
                let root =
                    Url::from_directory_path(&folder).map_err(|()| reel_io::Error::InvalidUri {
                        uri: folder.display().to_string(),
                        reason: "not an absolute path".into(),
                    })?;
                (Arc::new(LocalFolder::default()), root)
            }
            Some(s3) => {
                let mut builder = AmazonS3Builder::new()
                    .with_bucket_name(&s3.bucket)
                    .with_region(&s3.region)
                    .with_retry(retry_config(options));
                if let Some(endpoint) = &s3.endpoint {
                    builder = builder
                        .with_endpoint(endpoint)
                        .with_allow_http(endpoint.starts_with("http://"));
                }
                let key = options
                    .access_key_id
                    .clone()
                    .or_else(|| std::env::var("AWS_ACCESS_KEY_ID").ok());
                let secret = options
                    .secret_access_key
                    .clone()
                    .or_else(|| std::env::var("AWS_SECRET_ACCESS_KEY").ok());
                if let (Some(key), Some(secret)) = (key, secret) {
                    builder = builder
                        .with_access_key_id(key)
                        .with_secret_access_key(secret);
                }
                let object_store = builder.build().map_err(|e| reel_io::Error::InvalidUri {
                    uri: reel_io::redact(uri).into_owned(),
                    reason: e.to_string(),
                })?;
                let path = match s3.prefix.as_str() {
                    "" => String::new(),
                    prefix => format!("{prefix}/"),
                };
                let root = Url::parse(&format!("s3://{}/{path}", s3.bucket)).map_err(|e| {
                    reel_io::Error::InvalidUri {
                        uri: reel_io::redact(uri).into_owned(),
                        reason: e.to_string(),
                    }
                })?;
                (Arc::new(object_store), root)
            }
        };
        let executor = TokioMultiThreadExecutor::new_owned_runtime(Some(2), None)
            .map_err(|e| WarehouseError::delta("(engine)", e))?;
        let engine = DefaultEngineBuilder::new(object_store)
            .with_task_executor(Arc::new(executor))
            .build();
        Ok(Self {
            store,
            root,
            engine: Arc::new(engine),
        })
    }
}
