//! `reel.warm`: a manifest's working set into the node's block cache, as `reel-warm`
//! runs it ([`reel_loader::PreparedWarm`]).

use pyo3::prelude::*;
use reel_loader::{PinChoice, PreparedWarm, WarmRequest};

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
    let mut request = WarmRequest::new(
        crate::paths::text("manifest", manifest)?,
        crate::paths::text("store", store)?,
        cache,
    );
    request.spec = spec.map(crate::spec::sample_spec).transpose()?;
    request.capacity = capacity;
    request.concurrency = concurrency;
    request.verify = verify;
    request.pin = pin_choice(pin)?;
    let json = py.detach(move || {
        let outcome = PreparedWarm::prepare(&request)
            .and_then(|warm| warm.run(|_| {}))
            .or_raise()?;
        Ok::<_, PyErr>(serde_json::Value::Object(outcome.to_json()).to_string())
    })?;
    py.import("json")?.call_method1("loads", (json,))
}

/// `pin`: None or True for the default name, False for no pin, else the name.
fn pin_choice(pin: Option<&Bound<'_, PyAny>>) -> PyResult<PinChoice> {
    Ok(match pin {
        None => PinChoice::Default,
        Some(value) if value.is_instance_of::<pyo3::types::PyBool>() => {
            if value.extract::<bool>()? {
                PinChoice::Default
            } else {
                PinChoice::Unpinned
            }
        }
        Some(value) => PinChoice::Named(value.extract()?),
    })
}
