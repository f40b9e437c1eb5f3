//! Warming a manifest's working set into the node's block cache before training: the one
//! workflow behind `reel-warm` and `reel.warm`, so that both plan, pin, fetch and report
//! alike. The cache knows nothing of manifests; this is where the two meet.

use std::path::PathBuf;

use reel_cache::{
    BlockCache, CacheConfig, CacheMetrics, WarmOptions, WarmPlan, WarmProgress, WarmReport,
};
use reel_io::Store;

use crate::error::{LoaderError, Result, WarmStep};
use crate::spec::SampleSpec;
use crate::working_set::{whole_episodes, working_set};

/// The pin list protecting a warmed set from eviction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum PinChoice {
    /// Named after the manifest: its file name and a hash of its absolute path
    /// ([`reel_cache::default_pin_name`]).
    #[default]
    Default,
    /// This name.
    Named(String),
    /// No pin: the set may be evicted like any other blocks.
    Unpinned,
}

/// What to warm, where from and into which cache.
#[derive(Debug, Clone)]
pub struct WarmRequest {
    /// The manifest naming the episodes: a local path or an object URI, fetched once per
    /// node ([`reel_manifest::open_uri`]).
    pub manifest: String,
    /// The store the manifest's episode paths are relative to.
    pub store: String,
    /// Cache folders (one per disk); every reader of the cache uses the same, in order.
    pub cache_dirs: Vec<PathBuf>,
    /// Bytes the cache may hold; `None`: what it holds now plus 90% of the free space of
    /// the first folder's disk ([`reel_cache::default_capacity`]).
    pub capacity: Option<u64>,
    /// Bytes per block; every reader of the cache uses the same.
    pub block_size: u64,
    /// Requests in flight at once (0 counts as 1).
    pub concurrency: usize,
    /// Check every checksum of the blocks already cached, not just their headers.
    pub verify: bool,
    /// The pin list the set goes in.
    pub pin: PinChoice,
    /// Warm only what a loader with this spec reads; `None`: whole episodes.
    pub spec: Option<SampleSpec>,
}

impl WarmRequest {
    /// Whole episodes of `manifest` from `store` into the cache at `cache_dir`, with the
    /// cache's default block size, 32 requests in flight, pinned under the default name.
    pub fn new(
        manifest: impl Into<String>,
        store: impl Into<String>,
        cache_dir: impl Into<PathBuf>,
    ) -> Self {
        Self {
            manifest: manifest.into(),
            store: store.into(),
            cache_dirs: vec![cache_dir.into()],
            capacity: None,
            block_size: reel_cache::DEFAULT_BLOCK_SIZE,
            concurrency: 32,
            verify: false,
            pin: PinChoice::Default,
            spec: None,
        }
    }

    fn concurrency(&self) -> usize {
        self.concurrency.max(1)
    }

    fn cache_config(&self) -> Result<CacheConfig> {
        let Some(first) = self.cache_dirs.first() else {
            return Err(LoaderError::Cache(reel_cache::Error::Config {
                reason: "no cache folder given".into(),
            }));
        };
        let mut config = CacheConfig::new(first.clone(), 0);
        config.dirs.clone_from(&self.cache_dirs);
        config.block_size = self.block_size;
        config.max_concurrent_fetches = self.concurrency();
        Ok(config)
    }
}

/// An error as having happened at `step`.
fn at<E: Into<LoaderError>>(step: WarmStep) -> impl FnOnce(E) -> LoaderError {
    move |error| LoaderError::Warm {
        step,
        source: Box::new(error.into()),
    }
}

/// A warm opened and planned, not yet fetching: the plan says how much is cached and how
/// much is to fetch, before anything is.
#[derive(Debug)]
pub struct PreparedWarm {
    manifest: String,
    cache: BlockCache,
    plan: WarmPlan,
    options: WarmOptions,
}

impl PreparedWarm {
    /// Opens the manifest, the store and the cache, lists the working set (whole episodes,
    /// or the ranges the spec reads) and plans its warm. Fails before anything is fetched
    /// if the set cannot fit in the cache beside the other pinned sets.
    pub fn prepare(request: &WarmRequest) -> Result<Self> {
        let name = reel_io::redact(&request.manifest).into_owned();
        let manifest =
            reel_manifest::open_uri(&request.manifest, &reel_manifest::node_manifest_dir())
                .map_err(at(WarmStep::OpenManifest(name.clone())))?;
        let store = Store::open_existing(&request.store).map_err(at(WarmStep::OpenStore(
            reel_io::redact(&request.store).into_owned(),
        )))?;
        let items = match &request.spec {
            Some(spec) => working_set(&manifest, spec, &store),
            None => whole_episodes(&manifest).map(|set| set.warm_items()),
        }
        .map_err(at(WarmStep::FindWorkingSet(name.clone())))?;

        let config = request.cache_config()?;
        let step = WarmStep::OpenCache(config.dirs.first().cloned().unwrap_or_default());
        let cache =
            reel_cache::open_with_capacity(config, &store, request.capacity).map_err(at(step))?;
        let options = WarmOptions {
            concurrency: request.concurrency(),
            verify: request.verify,
            pin: match &request.pin {
                PinChoice::Default => Some(reel_cache::default_pin_name(manifest.path())),
                PinChoice::Named(pin) => Some(pin.clone()),
                PinChoice::Unpinned => None,
            },
        };
        let plan = cache
            .plan_warm(&items, &options)
            .map_err(at(WarmStep::Plan(name.clone())))?;
        Ok(Self {
            manifest: name,
            cache,
            plan,
            options,
        })
    }

    /// What is cached and what is still to fetch.
    pub fn plan(&self) -> &WarmPlan {
        &self.plan
    }

    /// The cache being warmed (its settings, its capacity as chosen).
    pub fn cache(&self) -> &BlockCache {
        &self.cache
    }

    /// The pin list the set goes in, if any.
    pub fn pin(&self) -> Option<&str> {
        self.options.pin.as_deref()
    }

    /// Writes the pin list and fetches what is missing, calling `progress` as requests
    /// complete. A failed warm keeps what it fetched: the next one resumes from there.
    pub fn run(self, progress: impl FnMut(&WarmProgress)) -> Result<WarmOutcome> {
        let Self {
            manifest,
            cache,
            plan,
            options,
        } = self;
        let report = cache
            .warm(plan, &options, progress)
            .map_err(at(WarmStep::Fetch(manifest)))?;
        Ok(WarmOutcome {
            pin: options.pin,
            report,
            metrics: cache.metrics(),
        })
    }
}

/// What a warm did.
#[derive(Debug, Clone)]
pub struct WarmOutcome {
    /// The pin list the set went in.
    pub pin: Option<String>,
    /// Bytes and blocks of the set, cached before and fetched now.
    pub report: WarmReport,
    /// The cache's counters over the warm.
    pub metrics: CacheMetrics,
}

impl WarmOutcome {
    /// The JSON object `{"pin", "report", "metrics"}`, the metrics under Alluxio's names:
    /// what `reel.warm` returns, and `reel-warm` prints beside the manifest and store.
    pub fn to_json(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut json = serde_json::Map::new();
        json.insert("pin".into(), self.pin.clone().into());
        json.insert("report".into(), serde_json::json!(self.report));
        json.insert("metrics".into(), self.metrics.to_json());
        json
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use reel_cache::{BlockCache, CacheConfig};
    use reel_io::{ErrorKind, Kinded, Store};
    use reel_manifest::Manifest;

    use super::{PinChoice, PreparedWarm, WarmRequest, WarmStep};
    use crate::LoaderError;
    use crate::test_fixture::{Fixture, fixture};

    const BLOCK: u64 = 64 << 10;

    fn request(fixture: &Fixture, cache: &Path) -> WarmRequest {
        let manifest = fixture.manifest.to_str().expect("utf-8");
        let store = fixture.dir.path().to_str().expect("utf-8");
        let mut request = WarmRequest::new(manifest, store, cache);
        request.block_size = BLOCK;
        request.capacity = Some(1 << 30);
        request
    }

    /// Every block of every episode is on disk: a cache that trusts what it recorded
    /// reads them all without asking the store.
    fn assert_all_cached(fixture: &Fixture, cache_dir: &Path) {
        let store = Store::open(fixture.dir.path().to_str().expect("utf-8")).expect("store");
        let mut config = CacheConfig::new(cache_dir, 1 << 40);
        config.block_size = BLOCK;
        config.trust_cached_metadata = true;
        let cache = BlockCache::for_store(config, &store).expect("cache");
        let manifest = Manifest::open(&fixture.manifest).expect("manifest");
        for episode in manifest.distinct_objects().expect("episodes") {
            let uri = episode.uri().expect("uri");
            let object = cache.object(&uri).expect("object");
            for i in 0..object.num_blocks() {
                assert!(object.is_cached(i, true), "{uri} block {i}");
            }
        }
        assert_eq!(cache.metrics().remote_requests, 0);
    }

    #[test]
    fn warms_a_manifest_then_has_nothing_left_to_fetch() {
        let fixture = fixture(2, 2.0);
        let cache = tempfile::tempdir().expect("tempdir");
        let request = request(&fixture, cache.path());

        let first = PreparedWarm::prepare(&request).expect("plans");
        assert_eq!(first.plan().cached_bytes, 0);
        let missing = first.plan().missing_bytes;
        assert!(missing > 0);
        let mut fetched = 0;
        let outcome = first.run(|p| fetched = p.fetched_bytes).expect("warms");
        assert_eq!(fetched, missing);
        assert_eq!(outcome.report.fetched_bytes, outcome.report.total_bytes);
        assert_eq!(outcome.report.objects, 2);
        let pin = outcome.pin.as_deref().expect("pinned by default");
        assert!(pin.starts_with("manifest-"), "{pin}");
        assert_all_cached(&fixture, cache.path());

        let mut again = request.clone();
        again.verify = true;
        let again = PreparedWarm::prepare(&again).expect("plans");
        assert_eq!(again.plan().missing_bytes, 0);
        let second = again.run(|_| {}).expect("warms");
        assert_eq!(second.report.fetched_bytes, 0);
        assert_eq!(second.report.requests, 0);
        assert_eq!(second.report.cached_bytes, outcome.report.total_bytes);

        let json = second.to_json();
        assert_eq!(json["pin"], pin);
        assert_eq!(json["report"]["fetched_bytes"], 0);
        assert!(json["metrics"]["Client.CacheBytesReadExternal"].is_number());
    }

    #[test]
    fn a_spec_and_a_pin_choice_shape_the_warm() {
        let fixture = fixture(1, 2.0);
        let cache = tempfile::tempdir().expect("tempdir");
        let mut request = request(&fixture, cache.path());
        request.spec = Some(fixture.spec.clone());
        request.pin = PinChoice::Unpinned;
        let outcome = PreparedWarm::prepare(&request)
            .and_then(|warm| warm.run(|_| {}))
            .expect("warms");
        assert_eq!(outcome.pin, None);
        assert!(outcome.report.fetched_bytes > 0);

        request.pin = PinChoice::Named("run-42".into());
        let warm = PreparedWarm::prepare(&request).expect("plans");
        assert_eq!(warm.pin(), Some("run-42"));
        assert_eq!(warm.plan().missing_bytes, 0);
    }

    #[test]
    fn failures_name_their_step_and_keep_their_cause_s_kind() {
        let fixture = fixture(1, 1.0);
        let cache = tempfile::tempdir().expect("tempdir");

        let mut missing = request(&fixture, cache.path());
        missing.manifest = fixture.dir.path().join("nope.arrow").display().to_string();
        let error = PreparedWarm::prepare(&missing).expect_err("no manifest");
        assert!(
            matches!(&error, LoaderError::Warm { step: WarmStep::OpenManifest(m), .. } if m.ends_with("nope.arrow")),
            "{error}"
        );

        let mut small = request(&fixture, cache.path());
        small.capacity = Some(BLOCK);
        let error = PreparedWarm::prepare(&small).expect_err("cannot fit");
        assert!(
            matches!(
                &error,
                LoaderError::Warm {
                    step: WarmStep::Plan(_),
                    ..
                }
            ),
            "{error}"
        );
        assert_eq!(error.kind(), ErrorKind::Environment);
        let cause = std::error::Error::source(&error).map(ToString::to_string);
        let message = format!("{error}: {}", cause.unwrap_or_default());
        assert!(message.contains("manifest.arrow"), "{message}");
        assert!(message.contains("working set needs"), "{message}");
    }
}
