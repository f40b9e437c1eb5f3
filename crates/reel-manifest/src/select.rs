//! Selections (format version 3): a manifest whose rows are positions in base
//! manifests instead of copies of their episodes.
//!
//! A curation of millions of episodes out of a compacted warehouse copies each row's
//! id, times, counts and digest into its manifest (83 bytes a row); a selection writes
//! 16 (the position and the cumulative sample offset), and reads its episodes from the
//! base manifest the compaction wrote once for all curations. Opening one maps the
//! selection and its bases and checks that each base is the one it names (by the
//! content hash in the base's footer) and that every position is inside them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, UInt64Array};
use arrow_schema::{DataType, Field, Schema};
use reel_io::StoreOptions;

use crate::write::{BATCH_ROWS, IpcOut, meta_entries};
use crate::{Manifest, ManifestError, ManifestMeta, SELECTION_VERSION, columns as col, keys};

/// Arrow types of a selection's columns, in file order, with their byte widths.
pub(crate) const SELECTION_LAYOUT: [(DataType, usize); 2] =
    [(DataType::UInt64, 8), (DataType::UInt64, 8)];

/// A base manifest a selection reads its episodes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseRef {
    /// Where it is: a file name beside the selection, a local path, or an object URI
    /// (without credentials: the reader's own are used).
    pub location: String,
    /// Its [`Manifest::content_hash`], checked when the selection is opened.
    pub content_hash: String,
    /// Its rows: a selection's positions run over its bases taken in order.
    pub rows: u64,
}

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

/// The bases as the selection's metadata holds them: a line each, `rows hash location`.
fn bases_text(bases: &[BaseRef]) -> String {
    bases
        .iter()
        .map(|b| format!("{} {} {}", b.rows, b.content_hash, b.location))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A base location a selection may name: ending in `.arrow`, and an `s3://` URI, an
/// absolute path, or a plain name beside the selection. The name has no folder of its
/// own, so no selection can make a reader climb out of its folder by a relative path.
fn valid_location(location: &str) -> bool {
    let path = location.split('?').next().unwrap_or_default();
    path.ends_with(".arrow")
        && (location.starts_with(S3_SCHEME)
            || (!location.contains("://") && Path::new(location).is_absolute())
            || !(location.contains(['/', '\\', ':']) || location.starts_with('.')))
}

/// The one object-store scheme a base may be named by.
const S3_SCHEME: &str = "s3://";

pub(crate) fn parse_bases(path: &Path, text: &str) -> Result<Vec<BaseRef>, ManifestError> {
    text.lines()
        .map(|line| {
            let mut fields = line.splitn(3, ' ');
            let rows = fields.next().and_then(|r| r.parse().ok());
            let hash = fields.next().filter(|h| h.starts_with("xxh3_128:"));
            let location = fields.next().filter(|l| !l.is_empty());
            let location = location.filter(|l| valid_location(l));
            match (rows, hash, location) {
                (Some(rows), Some(hash), Some(location)) => Ok(BaseRef {
                    location: location.to_string(),
                    content_hash: hash.to_string(),
                    rows,
                }),
                _ => Err(ManifestError::corrupt(
                    path,
                    format!(
                        "{} line {line:?} is not `rows hash location` (a location ending in \
                         .arrow: a name beside the selection, an absolute path or an object URI)",
                        keys::BASES
                    ),
                )),
            }
        })
        .collect()
}

/// Where a selection came from: what its bases' relative locations are relative to,
/// and how remote bases are fetched.
#[derive(Debug, Clone)]
pub(crate) enum Origin<'a> {
    /// The local folder the selection is in.
    Local(PathBuf),
    /// The object URI the selection was fetched from, the node's folder for fetched
    /// copies, and the store credentials.
    Store {
        uri: &'a str,
        dir: &'a Path,
        options: &'a StoreOptions,
    },
    /// The file is a selection's base: refused at once if it is a selection itself, so
    /// no selection leads the reader from base to base (or round in a circle).
    Base,
}

/// Opens the base `base` of the selection at `path` and checks it is the one named.
pub(crate) fn open_base(
    path: &Path,
    base: &BaseRef,
    origin: &Origin<'_>,
) -> Result<Manifest, ManifestError> {
    let wrap = |source: ManifestError| ManifestError::Base {
        path: path.to_path_buf(),
        base: base.location.clone(),
        source: Box::new(source),
    };
    let location = base.location.as_str();
    let (dir, options) = match origin {
        Origin::Store { dir, options, .. } => (dir.to_path_buf(), (*options).clone()),
        Origin::Local(_) | Origin::Base => (crate::node_manifest_dir(), StoreOptions::default()),
    };
    let opened = if location.starts_with(S3_SCHEME) {
        crate::fetch::open_uri_as_base(location, &dir, &options)
    } else if Path::new(location).is_absolute() {
        Manifest::open_from(Path::new(location), &Origin::Base)
    } else {
        match origin {
            Origin::Local(folder) => Manifest::open_from(&folder.join(location), &Origin::Base),
            Origin::Store { uri, .. } => {
                crate::fetch::open_uri_as_base(&sibling_uri(uri, location), &dir, &options)
            }
            Origin::Base => Err(ManifestError::corrupt(path, "a base names bases")),
        }
    };
    let opened = opened.map_err(wrap)?;
    let problem = if opened.len() as u64 != base.rows {
        Some(format!(
            "has {} rows, the selection names {}",
            opened.len(),
            base.rows
        ))
    } else if opened.content_hash() != base.content_hash {
        Some(format!(
            "has content hash {}, the selection names {}: it was rewritten since",
            opened.content_hash(),
            base.content_hash
        ))
    } else {
        None
    };
    match problem {
        Some(reason) => Err(wrap(ManifestError::corrupt(opened.path(), reason))),
        None => Ok(opened),
    }
}

/// The object `name` in the same folder as the object `uri` (its query kept).
fn sibling_uri(uri: &str, name: &str) -> String {
    let (location, query) = match uri.split_once('?') {
        Some((l, q)) => (l, Some(q)),
        None => (uri, None),
    };
    let sibling = match location.rsplit_once('/') {
        Some((folder, _)) => format!("{folder}/{name}"),
        // A selection named without a folder: its base is in the same (current) folder.
        None => name.to_string(),
    };
    match query {
        Some(q) => format!("{sibling}?{q}"),
        None => sibling,
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
    check_positions(picks.positions, bases.iter().map(|b| b.rows).sum())?;
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

/// Every position inside `0..total` and none twice: one bit per base row, or, where
/// the bases hold far more rows than are picked, the positions sorted.
fn check_positions(positions: &[u64], total: u64) -> Result<(), ManifestError> {
    if let Some(p) = positions.iter().find(|&&p| p >= total) {
        let row = positions.iter().position(|q| q == p).unwrap_or(0);
        return Err(ManifestError::InvalidRow {
            row,
            reason: format!("position {p} is outside the bases' {total} rows"),
        });
    }
    if total / 64 > positions.len() as u64 * 8 {
        let mut sorted = positions.to_vec();
        sorted.sort_unstable();
        return match sorted.windows(2).find(|w| w[0] == w[1]) {
            None => Ok(()),
            Some(w) => {
                let p = w[0];
                let first = positions.iter().position(|&q| q == p).unwrap_or(0);
                let row = positions.iter().rposition(|&q| q == p).unwrap_or(0);
                Err(picked_twice(p, first, row))
            }
        };
    }
    let mut seen = vec![0u64; total.div_ceil(64) as usize];
    for (row, &p) in positions.iter().enumerate() {
        if p >= total {
            return Err(ManifestError::InvalidRow {
                row,
                reason: format!("position {p} is outside the bases' {total} rows"),
            });
        }
        let (word, bit) = ((p / 64) as usize, 1u64 << (p % 64));
        if seen[word] & bit != 0 {
            let first = positions.iter().position(|&q| q == p).unwrap_or(row);
            return Err(picked_twice(p, first, row));
        }
        seen[word] |= bit;
    }
    Ok(())
}

fn picked_twice(position: u64, first: usize, row: usize) -> ManifestError {
    ManifestError::InvalidRow {
        row,
        reason: format!(
            "position {position} picked twice (first at row {first}): the episode would be \
             sampled twice"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sibling_is_in_the_selection_s_folder_whatever_names_it() {
        assert_eq!(
            sibling_uri("s3://b/runs/s.arrow?region=r", "n.arrow"),
            "s3://b/runs/n.arrow?region=r"
        );
        assert_eq!(
            sibling_uri("/data/runs/s.arrow", "n.arrow"),
            "/data/runs/n.arrow"
        );
        assert_eq!(sibling_uri("runs/s.arrow", "n.arrow"), "runs/n.arrow");
        assert_eq!(sibling_uri("s.arrow", "n.arrow"), "n.arrow");
    }
}
