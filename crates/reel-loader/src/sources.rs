//! Where a loader reads episode bytes from: a store, or the node's block cache in front
//! of it.

use std::sync::Arc;

use reel_cache::{BlockCache, CacheConfig};
use reel_io::{ByteSource, MmapSource, Store, StoreOptions};

use crate::error::Result;

/// Where episode bytes come from: the store itself, or the node's block cache in front of it.
#[derive(Debug, Clone)]
pub enum Sources {
    /// Read straight from a store (a local folder is memory-mapped).
    Store(Store),
    /// Read through a block cache (hits from local disk, misses from its remote).
    Cache(Arc<BlockCache>),
}

impl Sources {
    /// The sources of a reader of the store at `uri`: the store itself, or the block cache
    /// `cache` describes in front of it. Without a cache a missing local store folder is an
    /// error; with one, the cache serves what it holds
    /// ([`BlockCache::for_existing_store`]; [`BlockCache::store_missing`] tells).
    pub fn open_store(
        uri: &str,
        options: &StoreOptions,
        cache: Option<CacheConfig>,
    ) -> Result<Self> {
        Ok(match cache {
            Some(config) => Self::Cache(Arc::new(BlockCache::for_existing_store(
                config, uri, options,
            )?)),
            None => Self::Store(Store::open_existing_with(uri, options)?),
        })
    }

    /// The store read, as a saved state records it (no credentials): for a checkpoint's
    /// lineage to find the episodes again.
    pub fn store_uri(&self) -> String {
        match self {
            Self::Store(store) => reel_io::redact(store.uri()).into_owned(),
            Self::Cache(cache) => cache.remote_name().to_owned(),
        }
    }

    /// The block cache, when reads go through one.
    pub fn cache(&self) -> Option<&Arc<BlockCache>> {
        match self {
            Self::Cache(cache) => Some(cache),
            Self::Store(_) => None,
        }
    }

    /// The object at `uri` (a key inside the store) as a byte source: a local file is
    /// memory-mapped.
    pub fn open(&self, uri: &str) -> Result<Box<dyn ByteSource>> {
        Ok(match self {
            Self::Store(store) => match store.local_path(uri)? {
                Some(path) => Box::new(MmapSource::open(path)?),
                None => Box::new(store.source(uri)),
            },
            Self::Cache(cache) => Box::new(cache.object(uri)?),
        })
    }
}
