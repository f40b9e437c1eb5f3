//! The change log in the warehouse store: parts first, the progress record last.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use reel_io::Store;
use reel_manifest::changes::{
    CHANGES_PREFIX, ChangeProgress, PROGRESS_KEY, TableShape, lsn_text, parse_part_key, part_key,
};

use crate::table_log::{RowChange, TableLog};
use crate::{Error, Result};

/// What one flush made durable and visible.
#[derive(Debug, Clone, Default)]
pub struct Flush {
    /// Everything committed at or before this LSN is now in the warehouse.
    pub lsn: u64,
    /// Changes written, by table.
    pub changes: BTreeMap<String, usize>,
    /// Commit time of each transaction the flush holds, nanoseconds since the Unix epoch.
    pub commits_ns: Vec<i64>,
    /// When the progress record made them visible, nanoseconds since the Unix epoch.
    pub visible_ns: i64,
    /// Whether these are rows of the initial snapshot.
    pub snapshot: bool,
}

pub(crate) fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// The warehouse side of a capture.
#[derive(Debug)]
pub(crate) struct ChangeLog {
    store: Store,
    progress: ChangeProgress,
    tables: BTreeMap<String, TableLog>,
    /// LSN of the newest commit taken since the last flush.
    pending_lsn: Option<u64>,
    pending_since: Option<Instant>,
    pending_commits: Vec<i64>,
    /// Part number for the next part at the last flush's LSN (snapshot flushes share one).
    next_n: u32,
}

impl ChangeLog {
    /// Opens the log of `slot` in `store`, with the tables and keys captured now. A
    /// progress record of another slot is refused: two captures must not share a log.
    pub fn open(
        store: Store,
        slot: &str,
        publication: &str,
        keys: &BTreeMap<String, Vec<String>>,
    ) -> Result<Self> {
        let recorded: Option<ChangeProgress> = match store.read(PROGRESS_KEY) {
            Ok(bytes) => Some(serde_json::from_slice(&bytes).map_err(|e| Error::Part {
                name: store.object_uri(PROGRESS_KEY),
                reason: format!("unreadable progress record: {e}"),
            })?),
            Err(reel_io::Error::NotFound { .. }) => None,
            Err(e) => return Err(e.into()),
        };
        let mut progress = match recorded {
            Some(p) if p.slot != slot => {
                return Err(Error::Slot {
                    slot: slot.to_owned(),
                    reason: format!(
                        "the warehouse {} holds the change log of slot {:?}; give each capture its own warehouse, or use --slot {}",
                        store.uri(),
                        p.slot,
                        p.slot
                    ),
                });
            }
            Some(p) => p,
            None => ChangeProgress {
                slot: slot.to_owned(),
                ..ChangeProgress::default()
            },
        };
        progress.publication = publication.to_owned();
        let mut tables = BTreeMap::new();
        for (name, key) in keys {
            let mut shape = progress.tables.get(name).cloned().unwrap_or_default();
            shape.key.clone_from(key);
            tables.insert(name.clone(), TableLog::new(name, shape));
        }
        Ok(Self {
            store,
            progress,
            tables,
            pending_lsn: None,
            pending_since: None,
            pending_commits: Vec::new(),
            next_n: 0,
        })
    }

    pub fn lsn(&self) -> u64 {
        self.progress.lsn
    }

    pub fn snapshot_done(&self) -> bool {
        self.progress.snapshot_done
    }

    pub fn table(&mut self, name: &str) -> Option<&mut TableLog> {
        self.tables.get_mut(name)
    }

    pub fn pending_rows(&self) -> usize {
        self.tables.values().map(TableLog::pending).sum()
    }

    pub fn has_pending(&self) -> bool {
        self.pending_lsn.is_some()
    }

    /// How long changes have waited for a flush.
    pub fn pending_for(&self) -> Option<std::time::Duration> {
        self.pending_since.map(|t| t.elapsed())
    }

    /// Forgets everything (parts, compactions, progress): a snapshot that never
    /// finished cannot be resumed.
    pub fn reset(&mut self) -> Result<()> {
        self.store.remove_all(CHANGES_PREFIX)?;
        self.progress.lsn = 0;
        self.progress.snapshot_done = false;
        for table in self.tables.values_mut() {
            table.shape.columns.clear();
        }
        Ok(())
    }

    /// Removes the parts of a killed run that its progress record never covered, and
    /// stale temporaries of killed writes; returns how many parts.
    pub fn remove_uncommitted(&self) -> Result<usize> {
        self.store.remove_stale_temporaries()?;
        let mut removed = 0;
        for key in self.parts()? {
            if parse_part_key(&key).is_some_and(|(_, lsn)| lsn > self.progress.lsn) {
                self.store.remove(&key)?;
                removed += 1;
            }
        }
        Ok(removed)
    }

    fn parts(&self) -> Result<Vec<String>> {
        let keys = self.store.list_recursive(CHANGES_PREFIX)?;
        Ok(keys
            .into_iter()
            .filter(|k| parse_part_key(k).is_some())
            .collect())
    }

    /// Takes a committed transaction's changes (`(table, change)` in order).
    pub fn take_commit(&mut self, lsn: u64, commit_ns: i64, changes: Vec<(Arc<str>, RowChange)>) {
        for (seq, (table, change)) in changes.into_iter().enumerate() {
            if let Some(log) = self.tables.get_mut(table.as_ref()) {
                log.push(lsn, commit_ns, seq as u32, change);
            }
        }
        self.pending_lsn = Some(lsn);
        self.pending_since.get_or_insert_with(Instant::now);
        self.pending_commits.push(commit_ns);
    }

    /// Starts the snapshot taken at consistent point `lsn`: its rows, however many
    /// (none included), become visible together with the flush that marks it done.
    pub fn begin_snapshot(&mut self, lsn: u64) {
        self.pending_lsn = Some(lsn);
        self.pending_since.get_or_insert_with(Instant::now);
    }

    /// Takes one row of the snapshot begun at `lsn`, taken at `taken_ns`.
    pub fn take_snapshot_row(&mut self, lsn: u64, taken_ns: i64, table: &str, change: RowChange) {
        if let Some(log) = self.tables.get_mut(table) {
            let seq = log.pending() as u32;
            log.push(lsn, taken_ns, seq, change);
        }
        self.pending_lsn = Some(lsn);
    }

    /// Writes the pending changes as parts, then the progress record at the newest
    /// pending commit (and `snapshot_done`): after this returns they are durable and
    /// visible, and only then may the server be told.
    pub fn flush(&mut self, snapshot_done: bool) -> Result<Option<Flush>> {
        let Some(lsn) = self.pending_lsn else {
            return Ok(None);
        };
        let mut flush = Flush {
            lsn,
            snapshot: !self.progress.snapshot_done,
            ..Flush::default()
        };
        if lsn != self.progress.lsn {
            self.next_n = 0;
        }
        for (name, table) in &mut self.tables {
            let rows = table.pending();
            let key = part_key(name, lsn, self.next_n);
            if let Some(bytes) = table.take_part(&self.store.object_uri(&key))? {
                self.store.write_atomic(&key, bytes)?;
                flush.changes.insert(name.clone(), rows);
            }
        }
        self.next_n += 1;
        self.progress.lsn = lsn;
        self.progress.lsn_text = lsn_text(lsn);
        self.progress.snapshot_done |= snapshot_done;
        self.progress.tables = (self.tables.iter())
            .map(|(name, t)| (name.clone(), t.shape.clone()))
            .collect::<BTreeMap<String, TableShape>>();
        self.progress.updated_at_ns = now_ns();
        let record = serde_json::to_vec_pretty(&self.progress).map_err(|e| Error::Part {
            name: self.store.object_uri(PROGRESS_KEY),
            reason: e.to_string(),
        })?;
        self.store.write_atomic(PROGRESS_KEY, record)?;
        flush.visible_ns = self.progress.updated_at_ns;
        flush.commits_ns = std::mem::take(&mut self.pending_commits);
        self.pending_lsn = None;
        self.pending_since = None;
        Ok(Some(flush))
    }
}
