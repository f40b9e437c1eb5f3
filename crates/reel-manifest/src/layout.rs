//! What a manifest file must look like before its columns are trusted: its schema
//! metadata, each column's type, and each record batch's header checked against the
//! layout, all in O(columns) so that opening stays independent of the row count.

use std::path::Path;

use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::DataType;

use crate::{
    EPISODE_ID_PLACEHOLDER, FORMAT_VERSION, ManifestError, ManifestMeta, READABLE_VERSIONS,
    SamplingRule, UriTemplate, keys,
};

pub(crate) fn column<T: 'static + Clone>(
    path: &Path,
    batch: &RecordBatch,
    name: &'static str,
    want: &DataType,
) -> Result<T, ManifestError> {
    let problem = |problem: String| ManifestError::Column {
        path: path.to_path_buf(),
        column: name,
        problem,
    };
    let array: &ArrayRef = batch
        .column_by_name(name)
        .ok_or_else(|| problem("is missing".into()))?;
    if array.data_type() != want {
        return Err(problem(format!(
            "has type {}, expected {want}",
            array.data_type()
        )));
    }
    if array.null_count() != 0 {
        return Err(problem(format!("has {} nulls", array.null_count())));
    }
    // Structural check only (buffer sizes): O(1), unlike full validation.
    array
        .to_data()
        .validate()
        .map_err(|e| problem(e.to_string()))?;
    array
        .as_any()
        .downcast_ref::<T>()
        .cloned()
        .ok_or_else(|| problem("cannot be read".into()))
}

/// Where `uri` sits in [`LAYOUT`].
pub(crate) const URI_POSITION: usize = 1;

/// Arrow types of the manifest's columns, in file order, with the byte width
/// of their values (0 for strings). `uri` may be left out (a template instead), and
/// `digest` (format version 2 on).
pub(crate) const LAYOUT: [(DataType, usize); 11] = [
    (DataType::Utf8, 0),
    (DataType::Utf8, 0),
    (DataType::Int64, 8),
    (DataType::Int64, 8),
    (DataType::UInt64, 8),
    (DataType::UInt32, 4),
    (DataType::UInt32, 4),
    (DataType::UInt32, 4),
    (DataType::UInt64, 8),
    (DataType::UInt64, 8),
    (DataType::UInt64, 8),
];

/// Checks a record batch's header against the manifest layout before the
/// unvalidated decode: every column's length, no nulls, no compression, and
/// every buffer inside the body and large enough for its values. O(columns).
pub(crate) fn check_batch_header(
    path: &Path,
    data: &[u8],
    meta_len: usize,
    body_len: usize,
    layout: &[(DataType, usize)],
) -> Result<(), ManifestError> {
    let corrupt = |reason: String| ManifestError::corrupt(path, reason);
    if meta_len < 8 || meta_len > data.len() || data.len() - meta_len < body_len {
        return Err(corrupt(format!(
            "record batch header of {meta_len} bytes does not fit its block"
        )));
    }
    let header = &data[..meta_len];
    let flatbuffer = if header[..4] == [0xff; 4] {
        &header[8..]
    } else {
        &header[4..]
    };
    let message = arrow_ipc::root_as_message(flatbuffer)
        .map_err(|e| corrupt(format!("unreadable batch header: {e}")))?;
    let batch = message
        .header_as_record_batch()
        .ok_or_else(|| corrupt("block is not a record batch".into()))?;
    if batch.compression().is_some() {
        return Err(corrupt(
            "compressed record batch: manifests must be uncompressed to be memory-mapped".into(),
        ));
    }
    let rows = usize::try_from(batch.length()).map_err(|_| corrupt("negative row count".into()))?;
    let nodes = batch
        .nodes()
        .ok_or_else(|| corrupt("batch header lists no columns".into()))?;
    let buffers = batch
        .buffers()
        .ok_or_else(|| corrupt("batch header lists no buffers".into()))?;
    if nodes.len() != layout.len() {
        return Err(corrupt(format!(
            "batch has {} columns, expected {}",
            nodes.len(),
            layout.len()
        )));
    }
    let mut next = 0;
    for (node, (data_type, width)) in nodes.iter().zip(layout.iter().cloned()) {
        if node.length() != batch.length() || node.null_count() != 0 {
            return Err(corrupt(format!(
                "a {data_type} column has {} rows ({} null), expected {rows}",
                node.length(),
                node.null_count()
            )));
        }
        // Validity, then offsets and values (strings) or values (primitives).
        let needed: &[usize] = if width == 0 {
            &[0, (rows + 1) * 4, 0]
        } else {
            &[0, rows * width]
        };
        for &need in needed {
            if next >= buffers.len() {
                return Err(corrupt(format!(
                    "batch has {} buffers, expected more",
                    buffers.len()
                )));
            }
            let b = buffers.get(next);
            next += 1;
            let (offset, length) = (b.offset(), b.length());
            let inside = offset >= 0
                && length >= 0
                && (offset as u64).saturating_add(length as u64) <= body_len as u64;
            if !inside || (length as u64) < need as u64 {
                return Err(corrupt(format!(
                    "a {data_type} buffer ({offset}+{length}) is out of the body or too small"
                )));
            }
        }
    }
    if buffers.len() != next {
        return Err(corrupt(format!(
            "batch has {} buffers, expected {next}",
            buffers.len()
        )));
    }
    Ok(())
}

pub(crate) fn parse_meta(
    path: &Path,
    metadata: &arrow_schema::Metadata,
) -> Result<ManifestMeta, ManifestError> {
    let version = metadata.get(keys::VERSION);
    if !version.is_some_and(|v| READABLE_VERSIONS.contains(&v.as_str())) {
        return Err(ManifestError::Version {
            path: path.to_path_buf(),
            found: version.cloned(),
            expected: FORMAT_VERSION,
        });
    }
    let text = |key: &str| metadata.get(key).cloned().unwrap_or_default();
    let number = |key: &str| -> Result<u64, ManifestError> {
        metadata
            .get(key)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| {
                ManifestError::corrupt(
                    path,
                    format!("schema metadata {key} is missing or not a number"),
                )
            })
    };
    let sampling = SamplingRule {
        period_ns: number(keys::PERIOD_NS)?,
        before_ns: number(keys::BEFORE_NS)?,
        after_ns: number(keys::AFTER_NS)?,
    };
    if sampling.period_ns == 0 {
        return Err(ManifestError::corrupt(path, "sampling period is zero"));
    }
    let uri_template = match metadata.get(keys::URI_TEMPLATE) {
        None => None,
        Some(text) => Some(UriTemplate::parse(text).ok_or_else(|| {
            ManifestError::corrupt(
                path,
                format!(
                    "{} {text:?} has no {EPISODE_ID_PLACEHOLDER}",
                    keys::URI_TEMPLATE
                ),
            )
        })?),
    };
    Ok(ManifestMeta {
        query: text(keys::QUERY),
        warehouse_snapshot: text(keys::SNAPSHOT),
        created_at: text(keys::CREATED_AT),
        sampling,
        uri_template,
    })
}

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

/// The bases as the selection's metadata holds them: a line each, `rows hash location`.
pub(crate) fn bases_text(bases: &[BaseRef]) -> String {
    bases
        .iter()
        .map(|b| format!("{} {} {}", b.rows, b.content_hash, b.location))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A base location a selection may name: ending in `.arrow`, and an `s3://` URI, an
/// absolute path, or a plain name beside the selection. The name has no folder of its
/// own, so no selection can make a reader climb out of its folder by a relative path.
pub(crate) fn valid_location(location: &str) -> bool {
    let path = location.split('?').next().unwrap_or_default();
    path.ends_with(".arrow")
        && (location.starts_with(S3_SCHEME)
            || (!location.contains("://") && Path::new(location).is_absolute())
            || !(location.contains(['/', '\\', ':']) || location.starts_with('.')))
}

/// The one object-store scheme a base may be named by.
pub(crate) const S3_SCHEME: &str = "s3://";

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

/// A selection's positions that break its rule: one outside the bases' `total` rows, or
/// one picked twice (the episode would be sampled twice).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BadPosition {
    Outside {
        row: usize,
        position: u64,
        total: u64,
    },
    Twice {
        first: usize,
        row: usize,
        position: u64,
    },
}

impl BadPosition {
    pub(crate) fn row(&self) -> usize {
        match *self {
            Self::Outside { row, .. } | Self::Twice { row, .. } => row,
        }
    }
}

impl std::fmt::Display for BadPosition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Self::Outside {
                position, total, ..
            } => write!(f, "position {position} is outside the bases' {total} rows"),
            Self::Twice {
                first, position, ..
            } => write!(
                f,
                "position {position} picked twice (first at row {first}): the episode would \
                 be sampled twice"
            ),
        }
    }
}

/// Checks a selection's positions, given as consecutive runs (its record batches): every
/// one inside `0..total` and none twice. Positions that only ever increase (a curation
/// in the bases' order) pass in one pass with no memory; others take one bit per base
/// row, or, where the bases hold far more rows than are picked, a sorted copy.
pub(crate) fn check_positions(runs: &[&[u64]], total: u64) -> Result<(), BadPosition> {
    let all = || runs.iter().flat_map(|run| run.iter().copied());
    let mut increasing = true;
    let mut last = None;
    for (row, position) in all().enumerate() {
        if position >= total {
            return Err(BadPosition::Outside {
                row,
                position,
                total,
            });
        }
        increasing &= last.is_none_or(|l| l < position);
        last = Some(position);
    }
    if increasing {
        return Ok(());
    }
    let twice = |row: usize, position: u64| {
        let first = all().position(|q| q == position).unwrap_or(row);
        BadPosition::Twice {
            first,
            row,
            position,
        }
    };
    let picked: usize = runs.iter().map(|run| run.len()).sum();
    if total / 64 > picked as u64 * 8 {
        let mut sorted: Vec<u64> = all().collect();
        sorted.sort_unstable();
        return match sorted.windows(2).find(|w| w[0] == w[1]) {
            None => Ok(()),
            Some(w) => {
                let row = all().enumerate().filter(|&(_, q)| q == w[0]).nth(1);
                Err(twice(row.map_or(0, |(row, _)| row), w[0]))
            }
        };
    }
    let mut seen = vec![0u64; total.div_ceil(64) as usize];
    for (row, position) in all().enumerate() {
        // Every position is inside `0..total` (checked above).
        let (word, bit) = ((position / 64) as usize, 1u64 << (position % 64));
        if seen[word] & bit != 0 {
            return Err(twice(row, position));
        }
        seen[word] |= bit;
    }
    Ok(())
}

#[cfg(test)]
mod position_tests {
    use super::{BadPosition, check_positions};

    #[test]
    fn positions_are_checked_in_order_out_of_order_and_sparse() {
        assert_eq!(check_positions(&[&[0, 2], &[5, 9]], 10), Ok(()));
        assert_eq!(check_positions(&[&[5, 2], &[0, 9]], 10), Ok(()));
        assert_eq!(
            check_positions(&[&[0, 2], &[10]], 10),
            Err(BadPosition::Outside {
                row: 2,
                position: 10,
                total: 10
            })
        );
        let twice = |first, row, position| BadPosition::Twice {
            first,
            row,
            position,
        };
        // Out of order: one bit per base row.
        assert_eq!(
            check_positions(&[&[5, 2], &[7, 2]], 10),
            Err(twice(1, 3, 2))
        );
        // Few picks of many base rows: a sorted copy.
        assert_eq!(
            check_positions(&[&[900_000, 3], &[900_000]], 1_000_000),
            Err(twice(0, 2, 900_000))
        );
        // Repeated in order is not increasing.
        assert_eq!(check_positions(&[&[1, 1]], 10), Err(twice(0, 1, 1)));
    }
}
