//! `reel.warm`: a manifest's working set into the node's block cache, as `reel-warm`
//! runs it.

use pyo3::prelude::*;
use reel_cache::{CacheConfig, WarmOptions};
use reel_io::Store;

use crate::errors::OrRaise;

/// Fetches what a manifest's episodes need into the block cache at `cache` (whole
/// episodes, or with `spec` only what a loader with that spec reads), pinned against
/// eviction under `pin` (default: named after the manifest; `pin=False` for none).
/// Returns the warm report and the cache's metrics, as `reel-warm` prints them.
#[pyfunction]
#[pyo3(signature = (manifest, store, cache, *, spec=None, capacity=None, concurrency=32,
    verify=false, pin=None))]
#[allow(clippy::too_many_arguments)]
pub fn warm<'py>(
    py: Python<'py>,
    manifest: std::path::PathBuf,
    store: std::path::PathBuf,
    cache: std::path::PathBuf,
    spec: Option<&Bound<'py, PyAny>>,
    capacity: Option<u64>,
    concurrency: usize,
    verify: bool,
    pin: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let manifest = crate::paths::text("manifest", manifest)?;
    let store = crate::paths::text("store", store)?;
    let spec = spec.map(crate::spec::sample_spec).transpose()?;
    let pin: Option<Option<String>> = match pin {
        None => None,
        Some(value) if value.is_instance_of::<pyo3::types::PyBool>() => {
            if value.extract::<bool>()? {
                None
            } else {
                Some(None)
            }
        }
        Some(value) => Some(Some(value.extract()?)),
    };
    let json = py.detach(move || {
        let manifest =
            reel_manifest::open_uri(&manifest, &reel_manifest::node_manifest_dir()).or_raise()?;
        let store = Store::open_existing(&store).or_raise()?;
        let items = match &spec {
            Some(spec) => reel_loader::working_set(&manifest, spec, &store).or_raise()?,
            None => reel_loader::whole_episodes(&manifest)
                .or_raise()?
                .warm_items(),
        };
        let mut config = CacheConfig::new(cache, 0);
        config.max_concurrent_fetches = concurrency.max(1);
        let cache = reel_cache::open_with_capacity(config, &store, capacity).or_raise()?;
        let options = WarmOptions {
            concurrency: concurrency.max(1),
            verify,
            pin: pin.unwrap_or_else(|| Some(reel_cache::default_pin_name(manifest.path()))),
        };
        let plan = cache.plan_warm(&items, &options).or_raise()?;
        let report = cache.warm(plan, &options, |_| {}).or_raise()?;
        let line = serde_json::json!({
            "pin": options.pin,
            "report": report,
            "metrics": cache.metrics().to_json(),
        });
        Ok::<_, PyErr>(line.to_string())
    })?;
    py.import("json")?.call_method1("loads", (json,))
}
