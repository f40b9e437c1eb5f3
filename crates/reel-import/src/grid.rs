//! Streams on an episode's fps grid, as the HDF5 and RLDS importers land them: sample `i`
//! at `i * period_ns`, value names numbered.

use reel_mcap::{Sample, SignalKind, SignalStream};

/// The most values a step's tensor may hold to become a signal: larger ones are pictures
/// or maps stored as numbers (some datasets keep depth so), not a signal's values.
pub(crate) const MAX_SIGNAL_VALUES: usize = 4096;

/// A signal stream of `values` (one row a frame) on the grid from 0; `source_schema`
/// names where it came from (`hdf5`, `rlds`).
pub(crate) fn grid_signal(
    topic: &str,
    kind: SignalKind,
    fields: Vec<String>,
    values: Vec<Vec<f64>>,
    period_ns: u64,
    source_schema: &str,
) -> SignalStream {
    SignalStream {
        topic: topic.to_owned(),
        group: String::new(),
        kind,
        fields,
        source_schema: source_schema.into(),
        samples: values
            .into_iter()
            .enumerate()
            .map(|(i, values)| {
                let t = i as u64 * period_ns;
                Sample {
                    log_time: t,
                    publish_time: t,
                    stamp_ns: t,
                    values,
                }
            })
            .collect(),
    }
}

/// Value names `prefix.0`, `prefix.1`…, or `prefix` alone for one value.
pub(crate) fn numbered(prefix: &str, count: usize) -> Vec<String> {
    if count == 1 {
        return vec![prefix.to_owned()];
    }
    (0..count).map(|i| format!("{prefix}.{i}")).collect()
}
