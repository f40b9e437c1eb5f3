//! The folder of checkpoints: saving one atomically, finding the newest that verifies,
//! loading one with every file checked, and pruning old and unfinished ones.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use twox_hash::XxHash3_128;

use super::durable::{remove_dir, sync_dir, write_synced};
use super::error::{CheckpointError, Problem};
use super::marker::{Depth, FORMAT, FileEntry, Marker, check_name, hex128, read_marker, verify};
use super::names::{MARKER, STEP_PREFIX, TEMP_PREFIX, parse_step, step_dir_name};

/// A complete, verified checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointInfo {
    /// The step it holds.
    pub step: u64,
    /// Its directory.
    pub path: PathBuf,
    /// Its marker.
    pub marker: Marker,
}

impl CheckpointInfo {
    /// Total bytes of its files.
    pub fn bytes(&self) -> u64 {
        self.marker.files.iter().map(|f| f.bytes).sum()
    }
}

/// A checkpoint read back: its files in marker order, each verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The step it holds.
    pub step: u64,
    /// `(name, content)` for every file.
    pub files: Vec<(String, Vec<u8>)>,
}

impl Checkpoint {
    /// The content of file `name`, if the checkpoint has it.
    pub fn file(&self, name: &str) -> Option<&[u8]> {
        self.files
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, data)| data.as_slice())
    }
}

/// A checkpoint directory [`CheckpointDir::latest`] passed over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// The directory.
    pub path: PathBuf,
    /// Its step, when the name tells it.
    pub step: Option<u64>,
    /// Why it was skipped.
    pub problem: Problem,
}

/// What [`CheckpointDir::latest`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Latest {
    /// The newest complete, verified checkpoint, if any.
    pub checkpoint: Option<CheckpointInfo>,
    /// Checkpoints newer than it (or all, if none verified) that were passed over, newest
    /// first, and every partial (temporary) directory.
    pub skipped: Vec<Skipped>,
}

/// What [`CheckpointDir::prune`] removed and kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PruneReport {
    /// Steps of the checkpoints kept, newest first.
    pub kept: Vec<u64>,
    /// Directories removed.
    pub removed: Vec<PathBuf>,
}

/// A folder of checkpoints, one `step-<NNNNNNNNNN>` directory each.
///
/// One process saves into a folder at a time (the trainer's rank 0, say); any number may
/// read it. Nothing is cached in memory: every call looks at the folder.
#[derive(Debug, Clone)]
pub struct CheckpointDir {
    root: PathBuf,
}

impl CheckpointDir {
    /// Opens `root`, creating it if needed.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, CheckpointError> {
        let root = root.into();
        std::fs::create_dir_all(&root).map_err(|e| CheckpointError::io(&root, e))?;
        Ok(Self { root })
    }

    /// The folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where the checkpoint of `step` lives (whether or not it exists).
    pub fn step_path(&self, step: u64) -> PathBuf {
        self.root.join(step_dir_name(step))
    }

    /// Saves `files` as the checkpoint of `step`, atomically: the directory appears whole
    /// or not at all. A checkpoint of the same step already there (say, a damaged one a
    /// resumed run saves again) is replaced.
    pub fn save(
        &self,
        step: u64,
        files: &[(&str, &[u8])],
    ) -> Result<CheckpointInfo, CheckpointError> {
        let mut names = BTreeSet::new();
        for (name, _) in files {
            check_name(name)?;
            if !names.insert(*name) {
                return Err(CheckpointError::InvalidName {
                    name: (*name).to_owned(),
                    reason: "given twice",
                });
            }
        }

        let temp = self.root.join(format!(
            "{TEMP_PREFIX}{step:010}.tmp-{}-{}",
            std::process::id(),
            unix_nanos()
        ));
        std::fs::create_dir(&temp).map_err(|e| CheckpointError::io(&temp, e))?;
        let result = self.fill_and_publish(step, files, &temp);
        if result.is_err() {
            // Best effort: a leftover temporary directory is ignored by readers anyway.
            let _ = std::fs::remove_dir_all(&temp);
        }
        result
    }

    fn fill_and_publish(
        &self,
        step: u64,
        files: &[(&str, &[u8])],
        temp: &Path,
    ) -> Result<CheckpointInfo, CheckpointError> {
        let mut entries = Vec::with_capacity(files.len());
        for (name, data) in files {
            write_synced(&temp.join(name), data)?;
            entries.push(FileEntry {
                name: (*name).to_owned(),
                bytes: data.len() as u64,
                xxh3_128: hex128(XxHash3_128::oneshot(data)),
            });
        }
        let marker = Marker {
            format: FORMAT.to_owned(),
            step,
            saved_at_unix_s: unix_nanos() / 1_000_000_000,
            files: entries,
        };
        let json = serde_json::to_vec_pretty(&marker)
            .map_err(|e| CheckpointError::io(&temp.join(MARKER), std::io::Error::other(e)))?;
        write_synced(&temp.join(MARKER), &json)?;
        sync_dir(temp)?;

        let dest = self.step_path(step);
        if dest.exists() {
            // `rename` cannot replace a non-empty directory: move the old one aside first.
            // Until the new one lands, readers fall back to an older step, never to a
            // partial one.
            let aside = self.root.join(format!(
                "{TEMP_PREFIX}{step:010}.old-{}-{}",
                std::process::id(),
                unix_nanos()
            ));
            std::fs::rename(&dest, &aside).map_err(|e| CheckpointError::io(&dest, e))?;
            std::fs::rename(temp, &dest).map_err(|e| CheckpointError::io(&dest, e))?;
            let _ = std::fs::remove_dir_all(&aside);
        } else {
            std::fs::rename(temp, &dest).map_err(|e| CheckpointError::io(&dest, e))?;
        }
        sync_dir(&self.root)?;
        Ok(CheckpointInfo {
            step,
            path: dest,
            marker,
        })
    }

    /// The newest checkpoint whose marker is present and whose files all match it
    /// (sizes and checksums, so this reads every file of the checkpoints it examines),
    /// and the ones passed over on the way.
    pub fn latest(&self) -> Result<Latest, CheckpointError> {
        let listing = self.list()?;
        let mut latest = Latest {
            checkpoint: None,
            skipped: listing
                .partial
                .into_iter()
                .map(|(path, step)| Skipped {
                    path,
                    step,
                    problem: Problem::Partial,
                })
                .collect(),
        };
        for (step, path) in listing.steps.into_iter().rev() {
            match verify(&path, step, Depth::Checksums) {
                Ok(marker) => {
                    latest.checkpoint = Some(CheckpointInfo { step, path, marker });
                    break;
                }
                Err(problem) => latest.skipped.push(Skipped {
                    path,
                    step: Some(step),
                    problem,
                }),
            }
        }
        Ok(latest)
    }

    /// Steps of every `step-…` directory, complete or not, oldest first (no checks).
    pub fn steps(&self) -> Result<Vec<u64>, CheckpointError> {
        Ok(self.list()?.steps.into_iter().map(|(s, _)| s).collect())
    }

    /// Reads the checkpoint of `step`, checking every file against the marker.
    pub fn load(&self, step: u64) -> Result<Checkpoint, CheckpointError> {
        let path = self.step_path(step);
        if !path.is_dir() {
            return Err(CheckpointError::NotFound { path, step });
        }
        let marker = read_marker(&path, step).map_err(|problem| CheckpointError::Invalid {
            path: path.clone(),
            problem,
        })?;
        let mut files = Vec::with_capacity(marker.files.len());
        for entry in &marker.files {
            let file_path = path.join(&entry.name);
            let data = std::fs::read(&file_path).map_err(|e| CheckpointError::Invalid {
                path: path.clone(),
                problem: Problem::Unreadable {
                    file: entry.name.clone(),
                    reason: e.to_string(),
                },
            })?;
            if data.len() as u64 != entry.bytes {
                return Err(CheckpointError::Invalid {
                    path,
                    problem: Problem::SizeMismatch {
                        file: entry.name.clone(),
                        expected: entry.bytes,
                        actual: data.len() as u64,
                    },
                });
            }
            if hex128(XxHash3_128::oneshot(&data)) != entry.xxh3_128 {
                return Err(CheckpointError::Invalid {
                    path,
                    problem: Problem::ChecksumMismatch {
                        file: entry.name.clone(),
                    },
                });
            }
            files.push((entry.name.clone(), data));
        }
        Ok(Checkpoint { step, files })
    }

    /// Keeps the newest `keep` complete checkpoints and removes the rest: older ones,
    /// incomplete ones, and temporary directories left by other processes' unfinished
    /// saves (this process's own are left alone). "Complete" here means the marker
    /// parses and every file has its recorded size; checksums are left to
    /// [`CheckpointDir::latest`] and [`CheckpointDir::load`], so pruning after each save
    /// does not reread the checkpoints.
    pub fn prune(&self, keep: usize) -> Result<PruneReport, CheckpointError> {
        if keep == 0 {
            return Err(CheckpointError::KeepNone);
        }
        let listing = self.list()?;
        let mut report = PruneReport::default();
        let own = format!(".tmp-{}-", std::process::id());
        for (path, _) in listing.partial {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            if name.is_some_and(|n| n.contains(&own)) {
                continue;
            }
            remove_dir(&path)?;
            report.removed.push(path);
        }
        for (step, path) in listing.steps.into_iter().rev() {
            let complete = verify(&path, step, Depth::Sizes).is_ok();
            if complete && report.kept.len() < keep {
                report.kept.push(step);
            } else {
                remove_dir(&path)?;
                report.removed.push(path);
            }
        }
        if !report.removed.is_empty() {
            sync_dir(&self.root)?;
        }
        Ok(report)
    }

    fn list(&self) -> Result<Listing, CheckpointError> {
        let mut listing = Listing::default();
        let entries =
            std::fs::read_dir(&self.root).map_err(|e| CheckpointError::io(&self.root, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| CheckpointError::io(&self.root, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if let Some(digits) = name.strip_prefix(STEP_PREFIX) {
                if let Some(step) = parse_step(digits) {
                    listing.steps.push((step, entry.path()));
                }
            } else if let Some(rest) = name.strip_prefix(TEMP_PREFIX) {
                let step = rest.split('.').next().and_then(parse_step);
                listing.partial.push((entry.path(), step));
            }
        }
        listing.steps.sort();
        listing.partial.sort();
        Ok(listing)
    }
}

/// [`CheckpointDir::latest`] on `root` (which must exist; nothing is created).
pub fn latest_complete(root: impl AsRef<Path>) -> Result<Latest, CheckpointError> {
    let root = root.as_ref();
    if !root.is_dir() {
        return Err(CheckpointError::io(
            root,
            std::io::Error::new(std::io::ErrorKind::NotFound, "checkpoint folder not found"),
        ));
    }
    CheckpointDir {
        root: root.to_owned(),
    }
    .latest()
}

#[derive(Debug, Default)]
struct Listing {
    /// `(step, path)` of `step-…` directories, sorted by step.
    steps: Vec<(u64, PathBuf)>,
    /// Temporary directories and the step their name tells, if any.
    partial: Vec<(PathBuf, Option<u64>)>,
}

fn unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests fail loudly by design.

    use super::*;

    fn save(dir: &CheckpointDir, step: u64) -> CheckpointInfo {
        let weights = format!("weights at {step}").into_bytes();
        let loader = step.to_le_bytes();
        dir.save(step, &[("weights", &weights), ("loader", &loader)])
            .unwrap()
    }

    #[test]
    fn save_then_load_round_trips_and_latest_is_the_newest() {
        let root = tempfile::tempdir().unwrap();
        let dir = CheckpointDir::open(root.path()).unwrap();
        assert_eq!(dir.latest().unwrap(), Latest::default());
        save(&dir, 10);
        save(&dir, 20);
        let latest = dir.latest().unwrap();
        assert_eq!(latest.checkpoint.as_ref().map(|c| c.step), Some(20));
        assert!(latest.skipped.is_empty());
        let loaded = dir.load(20).unwrap();
        assert_eq!(loaded.file("weights"), Some(&b"weights at 20"[..]));
        assert_eq!(loaded.file("loader"), Some(&20u64.to_le_bytes()[..]));
        assert_eq!(dir.steps().unwrap(), vec![10, 20]);
        // Nothing but the two step directories is left behind.
        let names: Vec<_> = std::fs::read_dir(root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        assert_eq!(names, ["step-0000000010", "step-0000000020"]);
    }

    #[test]
    fn a_flipped_byte_falls_back_to_the_previous_checkpoint() {
        let root = tempfile::tempdir().unwrap();
        let dir = CheckpointDir::open(root.path()).unwrap();
        save(&dir, 10);
        let newest = save(&dir, 20);
        let weights = newest.path.join("weights");
        let mut bytes = std::fs::read(&weights).unwrap();
        bytes[3] ^= 0x01;
        std::fs::write(&weights, &bytes).unwrap();

        let latest = latest_complete(root.path()).unwrap();
        assert_eq!(latest.checkpoint.map(|c| c.step), Some(10));
        assert_eq!(latest.skipped.len(), 1);
        assert_eq!(latest.skipped[0].step, Some(20));
        assert_eq!(
            latest.skipped[0].problem,
            Problem::ChecksumMismatch {
                file: "weights".into()
            }
        );
        assert!(matches!(
            dir.load(20),
            Err(CheckpointError::Invalid {
                problem: Problem::ChecksumMismatch { .. },
                ..
            })
        ));
    }

    #[test]
    fn a_deleted_marker_or_truncated_file_falls_back() {
        let root = tempfile::tempdir().unwrap();
        let dir = CheckpointDir::open(root.path()).unwrap();
        save(&dir, 1);
        let second = save(&dir, 2);
        let third = save(&dir, 3);
        std::fs::remove_file(third.path.join(MARKER)).unwrap();
        std::fs::write(second.path.join("loader"), b"short").unwrap();

        let latest = dir.latest().unwrap();
        assert_eq!(latest.checkpoint.map(|c| c.step), Some(1));
        let problems: Vec<_> = latest.skipped.iter().map(|s| &s.problem).collect();
        assert_eq!(
            problems,
            [
                &Problem::NoMarker,
                &Problem::SizeMismatch {
                    file: "loader".into(),
                    expected: 8,
                    actual: 5
                }
            ]
        );
    }

    #[test]
    fn a_partial_directory_left_by_a_kill_is_ignored_and_reported() {
        let root = tempfile::tempdir().unwrap();
        let dir = CheckpointDir::open(root.path()).unwrap();
        save(&dir, 5);
        // What a save killed before its rename leaves: files, maybe even a marker.
        let partial = root.path().join(".step-0000000006.tmp-999999-1");
        std::fs::create_dir(&partial).unwrap();
        std::fs::write(partial.join("weights"), b"half").unwrap();

        let latest = dir.latest().unwrap();
        assert_eq!(latest.checkpoint.map(|c| c.step), Some(5));
        assert_eq!(
            latest.skipped,
            [Skipped {
                path: partial.clone(),
                step: Some(6),
                problem: Problem::Partial
            }]
        );
        // Pruning removes it (it belongs to no live save of this process).
        let report = dir.prune(3).unwrap();
        assert_eq!(report.removed, std::slice::from_ref(&partial));
        assert!(!partial.exists());
    }

    #[test]
    fn saving_a_step_again_replaces_it() {
        let root = tempfile::tempdir().unwrap();
        let dir = CheckpointDir::open(root.path()).unwrap();
        let first = save(&dir, 7);
        std::fs::remove_file(first.path.join(MARKER)).unwrap();
        dir.save(7, &[("weights", b"again")]).unwrap();
        let loaded = dir.load(7).unwrap();
        assert_eq!(loaded.files, [("weights".to_owned(), b"again".to_vec())]);
        assert_eq!(dir.steps().unwrap(), [7]);
    }

    #[test]
    fn prune_keeps_the_newest_complete_ones() {
        let root = tempfile::tempdir().unwrap();
        let dir = CheckpointDir::open(root.path()).unwrap();
        for step in [10, 20, 30, 40, 50] {
            save(&dir, step);
        }
        // The newest is incomplete: it does not count towards the kept ones.
        std::fs::remove_file(dir.step_path(50).join(MARKER)).unwrap();
        let report = dir.prune(2).unwrap();
        assert_eq!(report.kept, [40, 30]);
        assert_eq!(dir.steps().unwrap(), [30, 40]);
        assert_eq!(report.removed.len(), 3);
        assert!(matches!(dir.prune(0), Err(CheckpointError::KeepNone)));
    }

    #[test]
    fn bad_names_are_refused_before_anything_is_written() {
        let root = tempfile::tempdir().unwrap();
        let dir = CheckpointDir::open(root.path()).unwrap();
        for name in ["", MARKER, ".hidden", "a/b"] {
            assert!(matches!(
                dir.save(1, &[(name, b"x")]),
                Err(CheckpointError::InvalidName { .. })
            ));
        }
        assert!(matches!(
            dir.save(1, &[("a", b"x"), ("a", b"y")]),
            Err(CheckpointError::InvalidName { .. })
        ));
        assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0);
    }
}
