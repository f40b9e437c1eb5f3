//! `reel.curate`: the curation query into a manifest, as `reel-curate` runs it (feature
//! `curate`, the package's one use of Polars).

use pyo3::prelude::*;
use reel_curate::{AsOf, CurationOptions, Warehouse, curate_to_manifest_with};
use reel_manifest::SamplingRule;

use crate::errors::{OrRaise, bad_input};

/// Runs `sql` over the warehouse at `warehouse` and writes the selected episodes as an
/// Arrow IPC manifest at `output` (atomically); anchors every `1/anchor_hz` s with
/// `before`/`after` seconds of room. A query that selects no episodes raises unless
/// `allow_empty`; one that selects an episode twice, or reads anything but the warehouse's
/// tables, raises. With `by_position`, writes a selection of the compaction's bases
/// (format 3, no copy of the rows) where the warehouse and query allow. With `as_of`
/// (table versions, `"episodes@12 ingestions@12"`, or a manifest whose versions to take),
/// runs at those versions. Returns
/// `{"rows", "samples", "snapshot", "selection", "declined", "output"}` (`declined`: why a
/// curation by position wrote a self-contained manifest, else None).
#[pyfunction]
#[pyo3(signature = (warehouse, sql, output, *, anchor_hz=10.0, before=1.0, after=1.0, allow_empty=false, by_position=false, as_of=None))]
#[allow(clippy::too_many_arguments)]
pub fn curate<'py>(
    py: Python<'py>,
    warehouse: std::path::PathBuf,
    sql: String,
    output: std::path::PathBuf,
    anchor_hz: f64,
    before: f64,
    after: f64,
    allow_empty: bool,
    by_position: bool,
    as_of: Option<std::path::PathBuf>,
) -> PyResult<Bound<'py, PyAny>> {
    if !(anchor_hz.is_finite() && anchor_hz > 0.0) || before < 0.0 || after < 0.0 {
        return Err(bad_input(format!(
            "anchor_hz must be positive and before/after not negative (got {anchor_hz}, {before}, {after})"
        )));
    }
    let warehouse = crate::paths::text("warehouse", warehouse)?;
    let summary = py.detach(|| {
        let warehouse = match as_of {
            None => Warehouse::open(&warehouse).or_raise()?,
            Some(text) => {
                let as_of = AsOf::resolve(&text.to_string_lossy()).or_raise()?;
                Warehouse::open_as_of(&warehouse, &as_of).or_raise()?
            }
        };
        let rule = SamplingRule::at_hz(anchor_hz, before, after);
        let options = if allow_empty {
            CurationOptions::allowing_empty()
        } else {
            CurationOptions::default()
        };
        let options = if by_position {
            options.by_position()
        } else {
            options
        };
        curate_to_manifest_with(&warehouse, &sql, rule, &output, options).or_raise()
    })?;
    let dict = pyo3::types::PyDict::new(py);
    dict.set_item("rows", summary.rows)?;
    dict.set_item("samples", summary.samples)?;
    dict.set_item("snapshot", summary.snapshot)?;
    dict.set_item("selection", summary.selection)?;
    dict.set_item("declined", summary.declined)?;
    dict.set_item("output", output)?;
    Ok(dict.into_any())
}
