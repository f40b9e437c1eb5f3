//! A loader from URIs, as a trainer or a CLI names its data: each manifest by path or
//! store URI (fetched once per node), its episodes from the store the manifest lives in
//! or a store given, read directly or through the node's block cache.

use std::collections::HashMap;

use reel_cache::CacheConfig;
use reel_io::{StoreOptions, split_object_uri};
use reel_manifest::{node_manifest_dir, open_uri};

use crate::error::{LoaderError, Result};
use crate::loader::Loader;
use crate::mixture::{MixtureEntry, MixtureSource};
use crate::options::LoaderOptions;
use crate::sources::Sources;
use crate::spec::SampleSpec;

/// Where a manifest was opened from, as a saved state records it: a local path made
/// absolute (a lineage may be read from another folder), a store URI without
/// credentials.
fn recorded_location(manifest: &str) -> String {
    if reel_io::is_store_uri(manifest) {
        return reel_io::redact(manifest).into_owned();
    }
    std::path::absolute(manifest)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| manifest.to_string())
}

/// Opens a loader over `entries` (one, or a weighted mixture). An entry without a store
/// reads its episodes from the store its manifest lives in (the manifest's folder or
/// prefix). With `cache`, reads go through that block cache, and a local store folder
/// that is missing still serves what the cache holds; one cache serves one store, so a
/// mixture read through a cache keeps its sources in one store.
pub fn open_loader(
    entries: &[MixtureEntry],
    spec: &SampleSpec,
    cache: Option<CacheConfig>,
    options: LoaderOptions,
) -> Result<Loader> {
    let mut stores: HashMap<String, Sources> = HashMap::new();
    let mut sources = Vec::with_capacity(entries.len());
    for entry in entries {
        let manifest = open_uri(&entry.manifest, &node_manifest_dir())?;
        let store = match &entry.store {
            Some(uri) => uri.clone(),
            None => split_object_uri(&entry.manifest)?.0,
        };
        if cache.is_some()
            && let Some(other) = stores.keys().find(|uri| **uri != store)
        {
            return Err(LoaderError::Mixture {
                reason: format!(
                    "a block cache serves one store, and the sources are in {} and {}: \
                     load them without a cache, or from one store",
                    reel_io::redact(other),
                    reel_io::redact(&store)
                ),
            });
        }
        let opened = match stores.get(&store) {
            Some(opened) => opened.clone(),
            None => {
                let opened = Sources::open_store(&store, &StoreOptions::default(), cache.clone())?;
                stores.insert(store, opened.clone());
                opened
            }
        };
        sources.push(MixtureSource {
            manifest,
            sources: opened,
            weight: entry.weight,
            location: Some(recorded_location(&entry.manifest)),
        });
    }
    Loader::mixture(sources, spec, options)
}
