//! Curation by position: the query's episodes written as a selection (manifest format
//! version 3) of the compaction's base manifests, instead of a copy of every row.
//!
//! A compaction writes each `episodes` file's rows once as a manifest beside it (its
//! base). The table then numbers every row of a file with a base by its place in those
//! bases, so a curation needs only the query's filter columns and that number: it writes
//! 16 bytes a selected episode, where a self-contained manifest copies 83. Rows of files
//! without a base (committed since the compaction) are written once more as a small
//! manifest beside the selection, which names it as its last base.

use std::path::{Path, PathBuf};

use polars::prelude::*;
use reel_manifest::{BaseRef, Manifest, ManifestMeta, Picks, SamplingRule, write_selection};

use reel_warehouse::TableFile;

use crate::compact::bases_of;
use crate::curation::{DIGEST, NEEDED, numbers, slice};
use crate::{CurateError, CurationOptions, CurationSummary, Warehouse};

/// The hidden column of the numbered `episodes` table: a row's place in the bases of the
/// table's files, taken in order; past their rows, a row's place in the files without a
/// base, in order.
pub(crate) const POSITION: &str = "__reel_position";

/// What [`curate`] did: wrote a selection, or declined (and wrote nothing), saying why.
pub(crate) enum ByPosition {
    Written(CurationSummary),
    Declined(String),
}

/// Runs `sql` and writes its episodes at `output` as a selection of the bases of
/// `episodes`' files. Declines, writing nothing, where the warehouse cannot address its
/// rows by position (no file with a base, or too many rows to number) or the query may
/// not keep the table's rows whole: its plan drops the position, or does not hand a
/// manifest column through as the table's value of the same row
/// ([`row_lineage`](crate::row_lineage)).
pub(crate) fn curate(
    warehouse: &Warehouse,
    sql: &str,
    sampling: SamplingRule,
    output: &Path,
    options: CurationOptions,
) -> Result<ByPosition, CurateError> {
    let declined = |reason: &str| Ok(ByPosition::Declined(reason.to_string()));
    let based = bases_of(warehouse)?;
    let (with_base, without): (Vec<&TableFile>, Vec<&TableFile>) = warehouse
        .files()
        .iter()
        .partition(|f| based.contains_key(&f.key));
    if with_base.is_empty() {
        return declined("no file of the episodes table has a base manifest (run reel-compact)");
    }
    // The bases, mapped (fetched once per node from a remote warehouse): every selected
    // episode's times come from the rows the selection will point at.
    let store = warehouse.store();
    let mut bases = Vec::with_capacity(with_base.len() + 1);
    let mut refs = Vec::with_capacity(with_base.len() + 1);
    for file in &with_base {
        let key = &based[&file.key];
        let base = reel_manifest::open_in(store, key)?;
        if file.rows.is_some_and(|rows| rows != base.len() as u64) {
            return Err(CurateError::BadCompaction {
                key: store.object_uri(key),
                reason: format!(
                    "the base has {} rows, its file {} has {}",
                    base.len(),
                    file.key,
                    file.rows.unwrap_or(0)
                ),
            });
        }
        let location = match store.local_root() {
            Some(root) => root.join(key).to_string_lossy().into_owned(),
            None => store.object_uri(key),
        };
        refs.push(BaseRef::to(&base, location));
        bases.push(base);
    }
    let compacted_rows: u64 = bases.iter().map(|b| b.len() as u64).sum();
    // Polars numbers rows in its index type (32 bits unless built for more): past it,
    // rows are not numbered, and the manifest is self-contained.
    let all_rows: u64 = warehouse.files().iter().map(|f| f.rows.unwrap_or(0)).sum();
    if all_rows.saturating_mul(2) >= IdxSize::MAX as u64 {
        return declined("the episodes table has more rows than Polars numbers");
    }
    let numbering = |offset: u64| {
        Some(RowIndex {
            name: POSITION.into(),
            offset: offset as IdxSize,
        })
    };
    let newer_keys: Vec<&str> = without.iter().map(|f| f.key.as_str()).collect();
    let table = concat(
        [
            warehouse.scan_files(with_base.iter().map(|f| f.key.as_str()), numbering(0))?,
            warehouse.scan_files(newer_keys.iter().copied(), numbering(compacted_rows))?,
        ],
        UnionArgs::default(),
    )
    .map_err(CurateError::Query)?;
    let db = warehouse.tables_of(sql)?;
    // A selection gives each episode its base row's values: the query must hand every
    // manifest column through as the table's own, judged on its plan over a stand-in.
    let mut tracked = NEEDED.to_vec();
    tracked.extend([DIGEST, POSITION]);
    let schema = table.clone().collect_schema().map_err(CurateError::Query)?;
    let (stand_in, frame) = crate::row_lineage::stand_in(schema);
    let planned = crate::query_over(sql, stand_in, &db)?;
    if let Err(reason) = crate::row_lineage::check(planned, &frame, &tracked) {
        return Ok(ByPosition::Declined(reason));
    }
    let mut lf = crate::query_over(sql, table, &db)?;
    let schema = lf.collect_schema().map_err(CurateError::Query)?;
    // The columns a self-contained manifest takes, as it would ask for them.
    if let Some(column) = NEEDED.into_iter().find(|c| schema.get(c).is_none()) {
        return Err(CurateError::MissingColumn { column });
    }
    if schema.get(POSITION).is_none() {
        return declined("the query's result leaves out the table's row position");
    }
    let picked = lf
        .select([col(POSITION).cast(DataType::UInt64)])
        .collect()
        .map_err(CurateError::Query)?;
    let picked = numbers(POSITION, picked.column(POSITION).and_then(|c| c.u64()))?;
    let picked = slice(POSITION, &picked)?;
    if picked.is_empty() && !options.allow_empty {
        return Err(CurateError::NoEpisodes);
    }
    let delta: Vec<String> = newer_keys.iter().map(|k| (*k).to_owned()).collect();

    // Episodes ingested since: the selected ones, written beside the selection.
    let mut newer_rows: Vec<u64> = picked
        .iter()
        .filter(|&&p| p >= compacted_rows)
        .map(|&p| p - compacted_rows)
        .collect();
    newer_rows.sort_unstable();
    newer_rows.dedup();
    let meta = ManifestMeta::new(sql, warehouse.snapshot_id(), sampling);
    // Removed again, on any failure, unless the selection that names them is written.
    let mut beside = Beside::default();
    if !newer_rows.is_empty() {
        let path = write_newer(warehouse, &delta, &newer_rows, &meta, output, &mut beside)?;
        let newer = Manifest::open(&path)?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        refs.push(BaseRef::to(&newer, name));
        bases.push(newer);
    }
    let (rows, samples) = select_and_write(SelectionInput {
        picked,
        compacted_rows,
        newer_rows: &newer_rows,
        bases: &bases,
        refs: &refs,
        // The table holds one row per episode: only a query can repeat an episode, and
        // then it repeats its position, which the selection refuses; newer rows are
        // checked all the same, as a self-contained curation checks every row.
        check_all_ids: false,
        meta: &meta,
        output,
    })?;
    Ok(ByPosition::Written(CurationSummary {
        rows,
        samples,
        snapshot: meta.warehouse_snapshot,
        selection: true,
        declined: None,
        beside: beside.keep(),
        listed_twice: 0,
    }))
}

/// Files a curation wrote beside its selection: removed when dropped, unless kept (the
/// selection naming them was written). A file that was there before is never removed:
/// named by its content, it may be another selection's.
#[derive(Debug, Default)]
struct Beside {
    files: Vec<PathBuf>,
    created: Vec<PathBuf>,
}

impl Beside {
    /// `path`, written by this curation; `created` when nothing was there before.
    fn add(&mut self, path: PathBuf, created: bool) {
        if created {
            self.created.push(path.clone());
        }
        self.files.push(path);
    }

    /// A temporary file of this curation's, removed unless renamed (then [`Beside::forget`]).
    fn temporary(&mut self, path: PathBuf) {
        self.created.push(path);
    }

    fn forget(&mut self, path: &Path) {
        self.created.retain(|p| p != path);
    }

    /// The files, which stay.
    fn keep(mut self) -> Vec<PathBuf> {
        self.created.clear();
        std::mem::take(&mut self.files)
    }
}

impl Drop for Beside {
    fn drop(&mut self) {
        for file in &self.created {
            let _ = std::fs::remove_file(file);
        }
    }
}

/// What [`select_and_write`] needs.
struct SelectionInput<'a> {
    /// The query's rows: places in the compaction's bases, or past their rows in the
    /// files ingested since.
    picked: &'a [u64],
    compacted_rows: u64,
    /// The places in the files ingested since of the rows written beside, ascending.
    newer_rows: &'a [u64],
    bases: &'a [Manifest],
    refs: &'a [BaseRef],
    check_all_ids: bool,
    meta: &'a ManifestMeta,
    output: &'a Path,
}

/// Turns the query's rows into positions in the bases (the newer rows' in the last),
/// refuses an episode picked twice, and writes the selection.
fn select_and_write(input: SelectionInput<'_>) -> Result<(usize, u64), CurateError> {
    let SelectionInput {
        picked,
        compacted_rows,
        newer_rows,
        bases,
        refs,
        check_all_ids,
        meta,
        output,
    } = input;

    // Every base batch's times, with the position of its first row: picks come mostly in
    // the bases' order, so each is found in the batch of the one before, not searched.
    let mut chunks: Vec<(u64, &[i64], &[i64])> = Vec::new();
    let mut first_of_base = 0u64;
    for (base, base_ref) in bases.iter().zip(refs) {
        for (first, start_ns, end_ns) in base.time_columns() {
            chunks.push((first_of_base + first as u64, start_ns, end_ns));
        }
        first_of_base += base_ref.rows;
    }
    let mut positions = Vec::with_capacity(picked.len());
    let (mut starts, mut ends) = (
        Vec::with_capacity(picked.len()),
        Vec::with_capacity(picked.len()),
    );
    let mut chunk = 0;
    for &p in picked {
        let position = if p < compacted_rows {
            p
        } else {
            // Its place among the newer rows written beside.
            let j = newer_rows.partition_point(|&r| r < p - compacted_rows) as u64;
            compacted_rows + j
        };
        let inside =
            |c: &(u64, &[i64], &[i64])| position >= c.0 && position - c.0 < c.1.len() as u64;
        if !chunks.get(chunk).is_some_and(inside) {
            chunk = chunks
                .partition_point(|c| c.0 <= position)
                .saturating_sub(1);
        }
        let Some(&(first, start_ns, end_ns)) = chunks.get(chunk).filter(|c| inside(c)) else {
            return Err(CurateError::BadCompaction {
                key: refs.last().map(|r| r.location.clone()).unwrap_or_default(),
                reason: format!("position {position} is outside the compaction's bases"),
            });
        };
        let at = (position - first) as usize;
        positions.push(position);
        starts.push(start_ns[at]);
        ends.push(end_ns[at]);
    }
    refuse_duplicate_ids(bases, &positions, compacted_rows, check_all_ids)?;
    let picks = Picks {
        positions: &positions,
        start_ns: &starts,
        end_ns: &ends,
    };
    Ok(write_selection(output, meta, refs, picks)?)
}

/// Refuses an episode id picked twice, as a self-contained curation does: among every
/// pick with `all`, else among the picks past the compaction's rows (the only ones that
/// can repeat an id there: compacted rows are one per episode, and a newer row replaces
/// its compacted one).
fn refuse_duplicate_ids(
    bases: &[Manifest],
    positions: &[u64],
    compacted_rows: u64,
    all: bool,
) -> Result<(), CurateError> {
    let checked: Vec<u64> = positions
        .iter()
        .copied()
        .filter(|&p| all || p >= compacted_rows)
        .collect();
    if checked.len() < 2 {
        return Ok(());
    }
    let mut starts = vec![0u64];
    for base in bases {
        starts.push(starts.last().copied().unwrap_or(0) + base.len() as u64);
    }
    let mut ids = Vec::with_capacity(checked.len());
    for p in checked {
        let b = starts.partition_point(|&s| s <= p).saturating_sub(1);
        let base = bases
            .get(b)
            .ok_or(reel_manifest::ManifestError::RowOutOfRange {
                row: p as usize,
                rows: *starts.last().unwrap_or(&0) as usize,
            })?;
        ids.push(base.episode((p - starts[b]) as usize)?.episode_id()?);
    }
    let ids = StringChunked::from_slice(POSITION.into(), &ids);
    crate::curation::refuse_duplicates(&ids)
}

/// Writes the rows `rows` (places in the files ingested since the compaction, ascending)
/// as a manifest beside `output`, named by its content: `<stem>.newer-<hash>.arrow`.
fn write_newer(
    warehouse: &Warehouse,
    delta: &[String],
    rows: &[u64],
    meta: &ManifestMeta,
    output: &Path,
    beside: &mut Beside,
) -> Result<PathBuf, CurateError> {
    let mut columns: Vec<Expr> = NEEDED.map(col).to_vec();
    let newer = warehouse.scan_files(delta.iter().map(String::as_str), None)?;
    if newer
        .clone()
        .collect_schema()
        .map_err(CurateError::Query)?
        .get(DIGEST)
        .is_some()
    {
        columns.push(col(DIGEST));
    }
    let all = newer
        .select(columns)
        .collect()
        .map_err(CurateError::Query)?;
    let take: Vec<IdxSize> = rows.iter().map(|&r| r as IdxSize).collect();
    let picked = all
        .take(&IdxCa::from_vec(POSITION.into(), take))
        .map_err(CurateError::Query)?;
    // A name beside the selection may not start with a dot (docs/FORMAT.md).
    let stem = output
        .file_stem()
        .map(|s| s.to_string_lossy().trim_start_matches('.').to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "manifest".into());
    let unnamed = output.with_file_name(format!("{stem}.newer.arrow"));
    beside.temporary(unnamed.clone());
    crate::write_frame(&picked, meta, &unnamed, CurationOptions::default())?;
    let hash = Manifest::open(&unnamed)?.content_hash().to_string();
    let digits = hash.trim_start_matches("xxh3_128:");
    let short = digits.get(..16).unwrap_or(digits);
    let named = output.with_file_name(format!("{stem}.newer-{short}.arrow"));
    let existed = named.exists();
    std::fs::rename(&unnamed, &named).map_err(|source| reel_manifest::ManifestError::Io {
        path: named.clone(),
        source,
    })?;
    beside.forget(&unnamed);
    beside.add(named.clone(), !existed);
    Ok(named)
}

#[cfg(test)]
mod tests {
    use super::Beside;

    /// Whatever step fails after a file beside is written (writing it, opening it,
    /// renaming it, writing the selection), the guard is dropped unkept: what this
    /// curation created is removed, what was there before stays, and a kept guard
    /// removes nothing.
    #[test]
    fn files_beside_are_removed_unless_kept_and_earlier_ones_stay() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = |name: &str| dir.path().join(name);
        for name in ["temporary", "created", "earlier"] {
            std::fs::write(path(name), name).expect("writes");
        }
        {
            let mut beside = Beside::default();
            beside.temporary(path("temporary"));
            beside.add(path("created"), true);
            beside.add(path("earlier"), false);
        }
        assert!(!path("temporary").exists() && !path("created").exists());
        assert!(path("earlier").exists(), "another selection's file stays");

        std::fs::write(path("renamed"), "x").expect("writes");
        std::fs::write(path("kept"), "x").expect("writes");
        let mut beside = Beside::default();
        beside.temporary(path("renamed"));
        beside.forget(&path("renamed"));
        beside.add(path("kept"), true);
        assert_eq!(beside.keep(), vec![path("kept")]);
        assert!(path("renamed").exists() && path("kept").exists());
    }
}
