//! Selections (format version 3): a manifest whose rows are positions in base
//! manifests instead of copies of their episodes.
//!
//! A curation of millions of episodes out of a compacted warehouse copies each row's
//! id, times, counts and digest into its manifest (83 bytes a row); a selection writes
//! 16 (the position and the cumulative sample offset), and reads its episodes from the
//! base manifest the compaction wrote once for all curations. Opening one (`fetch.rs`)
//! maps the selection and its bases and checks that each base is the one it names (by
//! the content hash in the base's footer) and that every position is inside them.

use std::path::Path;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, UInt64Array};
use arrow_schema::{DataType, Field, Schema};

use crate::layout::{BaseRef, bases_text, check_positions, valid_location};
use crate::write::{BATCH_ROWS, IpcOut, meta_entries};
use crate::{Manifest, ManifestError, ManifestMeta, SELECTION_VERSION, columns as col, keys};

impl BaseRef {
    /// A reference to `base`, found at `location`.
    pub fn to(base: &Manifest, location: impl Into<String>) -> Self {
        Self {
            location: location.into(),
            content_hash: base.content_hash().to_string(),
            rows: base.len() as u64,
        }
    }
}

/// The episodes a selection picks: each one's position in the bases taken in order, and
/// its times there (which give its samples under the selection's rule).
#[derive(Debug, Clone, Copy)]
pub struct Picks<'a> {
    pub positions: &'a [u64],
    pub start_ns: &'a [i64],
    pub end_ns: &'a [i64],
}

/// Writes a selection at `path` (atomically): the rows `picks` names, out of `bases`,
/// sampled under `meta.sampling`. A position outside the bases, or picked twice, is
/// refused and nothing is written. Returns the rows and samples written.
pub fn write_selection(
    path: impl AsRef<Path>,
    meta: &ManifestMeta,
    bases: &[BaseRef],
    picks: Picks<'_>,
) -> Result<(usize, u64), ManifestError> {
    let n = picks.positions.len();
    if picks.start_ns.len() != n || picks.end_ns.len() != n {
        return Err(ManifestError::InvalidRow {
            row: 0,
            reason: "positions and times of different lengths".into(),
        });
    }
    if meta.sampling.period_ns == 0 {
        return Err(ManifestError::InvalidRow {
            row: 0,
            reason: "sampling period must be positive".into(),
        });
    }
    if bases.is_empty() {
        return Err(ManifestError::InvalidRow {
            row: 0,
            reason: "a selection needs a base".into(),
        });
    }
    if let Some(bad) = bases.iter().find(|b| !valid_location(&b.location)) {
        return Err(ManifestError::InvalidRow {
            row: 0,
            reason: format!(
                "base location {:?} is not a name beside the selection, an absolute path or \
                 an object URI ending in .arrow",
                bad.location
            ),
        });
    }
    check_positions(&[picks.positions], bases.iter().map(|b| b.rows).sum()).map_err(|bad| {
        ManifestError::InvalidRow {
            row: bad.row(),
            reason: bad.to_string(),
        }
    })?;
    if let Some(bad) = (0..n).find(|&i| picks.end_ns[i] < picks.start_ns[i]) {
        return Err(ManifestError::InvalidRow {
            row: bad,
            reason: format!(
                "end {} before start {}",
                picks.end_ns[bad], picks.start_ns[bad]
            ),
        });
    }
    let mut metadata = meta_entries(meta, SELECTION_VERSION);
    metadata.insert(keys::BASES.to_string(), bases_text(bases));
    let schema = Schema::new_with_metadata(
        vec![
            Field::new(col::ROW, DataType::UInt64, false),
            Field::new(col::SAMPLE_OFFSET, DataType::UInt64, false),
        ],
        metadata,
    );
    let mut out = IpcOut::create(path.as_ref(), schema)?;
    let mut samples = 0u64;
    let mut start = 0;
    // An empty selection still carries one (empty) batch, like an empty manifest.
    while start < n || (n == 0 && start == 0) {
        let end = (start + BATCH_ROWS).min(n);
        let offsets: Vec<u64> = (start..end)
            .map(|i| {
                let offset = samples;
                samples += meta
                    .sampling
                    .num_samples(picks.start_ns[i], picks.end_ns[i]);
                offset
            })
            .collect();
        let arrays: Vec<ArrayRef> = vec![
            Arc::new(UInt64Array::from(picks.positions[start..end].to_vec())),
            Arc::new(UInt64Array::from(offsets)),
        ];
        let batch = RecordBatch::try_new(out.schema().clone(), arrays)
            .map_err(|source| out.arrow_error(source))?;
        out.send(batch)?;
        start = end.max(start + 1);
    }
    out.finish()?;
    Ok((n, samples))
}
