//! The per-process table of open block files.
//!
//! Without it every hit opens the block file, reads its header and hashes every page it
//! touches. With it, a hit on a block this process has open costs a table lookup, one
//! `fstat` (is the handle still the file at the block's path?) and the `pread`s, and
//! pages the handle has verified are not hashed again (see [`BlockFile`]).
//!
//! The table is bounded: past [`CacheConfig::open_blocks`](crate::CacheConfig::open_blocks)
//! handles the least recently used one is closed. A handle whose file was unlinked (the
//! block was evicted, dropped or replaced by any process) keeps its disk space allocated
//! until it is closed, so handles found unlinked or past their trust are closed on their
//! next use, after this process's capacity scans, and at most once a second when a new
//! handle is opened.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::block::{BlockFault, BlockFile, BlockId};

/// How often opening a handle also closes the stale ones.
const PRUNE_INTERVAL: Duration = Duration::from_secs(1);

pub(crate) struct OpenBlocks {
    capacity: usize,
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    slots: HashMap<BlockId, Slot>,
    /// Ticks on every lookup; a slot's `last_use` says how recently it was used.
    clock: u64,
    last_prune: Option<Instant>,
}

struct Slot {
    block: Arc<BlockFile>,
    last_use: u64,
}

impl OpenBlocks {
    /// A table of at most `capacity` handles; 0 keeps none (every read opens the file).
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            table: Mutex::new(Table::default()),
        }
    }

    /// The handle of block `id`: the held one if it is still current, else the file at
    /// `path()` opened afresh (and held).
    pub(crate) fn get_or_open(
        &self,
        id: BlockId,
        path: impl FnOnce() -> PathBuf,
        payload_len: u64,
        page_size: u32,
    ) -> Result<Arc<BlockFile>, BlockFault> {
        if let Some(block) = self.lookup(id) {
            // The `fstat` runs outside the lock so that readers of other blocks never wait
            // on it.
            if block.is_current() {
                return Ok(block);
            }
            self.forget_handle(id, &block);
        }
        let block = Arc::new(BlockFile::open(&path(), payload_len, page_size, id)?);
        if self.capacity > 0 {
            if self.prune_due() {
                self.prune();
            }
            self.insert(id, Arc::clone(&block));
        }
        Ok(block)
    }

    fn lookup(&self, id: BlockId) -> Option<Arc<BlockFile>> {
        let mut table = self.lock();
        table.clock += 1;
        let now = table.clock;
        let slot = table.slots.get_mut(&id)?;
        slot.last_use = now;
        Some(Arc::clone(&slot.block))
    }

    /// Whether a second has passed since the last prune; if so, the caller prunes.
    fn prune_due(&self) -> bool {
        let mut table = self.lock();
        let due = table
            .last_prune
            .is_none_or(|t| t.elapsed() > PRUNE_INTERVAL);
        if due {
            table.last_prune = Some(Instant::now());
        }
        due
    }

    fn insert(&self, id: BlockId, block: Arc<BlockFile>) {
        let mut table = self.lock();
        if !table.slots.contains_key(&id) && table.slots.len() >= self.capacity {
            let oldest = table
                .slots
                .iter()
                .min_by_key(|(_, slot)| slot.last_use)
                .map(|(id, _)| *id);
            if let Some(oldest) = oldest {
                table.slots.remove(&oldest);
            }
        }
        table.clock += 1;
        let last_use = table.clock;
        table.slots.insert(id, Slot { block, last_use });
    }

    /// Closes the held handle of `id` if it is `block` (another thread may have put a
    /// fresher one there meanwhile).
    pub(crate) fn forget_handle(&self, id: BlockId, block: &Arc<BlockFile>) {
        let mut table = self.lock();
        if table
            .slots
            .get(&id)
            .is_some_and(|slot| Arc::ptr_eq(&slot.block, block))
        {
            table.slots.remove(&id);
        }
    }

    /// Closes the held handle of `id`, whatever it is.
    pub(crate) fn forget(&self, id: BlockId) {
        self.lock().slots.remove(&id);
    }

    /// Closes every handle that may no longer serve reads (its file unlinked, modified,
    /// or its pages verified too long ago).
    pub(crate) fn prune(&self) {
        // The `fstat`s run outside the lock, so that hits are not held up by them.
        let held: Vec<(BlockId, Arc<BlockFile>)> = {
            let mut table = self.lock();
            table.last_prune = Some(Instant::now());
            table
                .slots
                .iter()
                .map(|(id, slot)| (*id, Arc::clone(&slot.block)))
                .collect()
        };
        for (id, block) in held {
            if !block.is_current() {
                self.forget_handle(id, &block);
            }
        }
    }

    /// Number of handles held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().slots.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::path::Path;

    use super::*;
    use crate::block::write_block;

    const PAGE: u32 = 1024;

    /// Writes block `index` of object 1 as `name`.
    fn write(dir: &Path, name: &str, payload: &[u8], index: u64) -> PathBuf {
        let path = dir.join(name);
        write_block(
            &path,
            &dir.join(format!(".{name}.tmp")),
            payload,
            PAGE,
            (1, index),
        )
        .unwrap();
        path
    }

    #[test]
    fn held_handles_are_reused_bounded_and_closed_once_unlinked() {
        let dir = tempfile::tempdir().unwrap();
        let payload = vec![7u8; 4000];
        let paths: Vec<PathBuf> = (0..3)
            .map(|i| write(dir.path(), &format!("{i}.blk"), &payload, i as u64))
            .collect();
        let table = OpenBlocks::new(2);
        let get = |i: usize| {
            table
                .get_or_open((1, i as u64), || paths[i].clone(), 4000, PAGE)
                .unwrap()
        };
        let first = get(0);
        assert!(Arc::ptr_eq(&first, &get(0)), "a current handle is reused");
        get(1);
        get(0);
        get(2);
        assert_eq!(table.len(), 2, "the least recently used handle was closed");
        assert!(
            Arc::ptr_eq(&first, &get(0)),
            "block 0 was used last but one"
        );

        // Evicted by any process: the held handle no longer serves, the block is missing.
        std::fs::remove_file(&paths[0]).unwrap();
        assert!(!first.is_current());
        let missing = table.get_or_open((1, 0), || paths[0].clone(), 4000, PAGE);
        assert!(matches!(missing, Err(BlockFault::Missing)));
        std::fs::remove_file(&paths[2]).unwrap();
        table.prune();
        assert_eq!(table.len(), 0, "block 1 was pushed out, block 2 unlinked");

        let none = OpenBlocks::new(0);
        let a = none
            .get_or_open((1, 1), || paths[1].clone(), 4000, PAGE)
            .unwrap();
        let b = none
            .get_or_open((1, 1), || paths[1].clone(), 4000, PAGE)
            .unwrap();
        assert!(
            !Arc::ptr_eq(&a, &b) && none.len() == 0,
            "capacity 0 holds nothing"
        );
    }

    #[test]
    fn a_replaced_or_rewritten_file_retires_its_handle() {
        let dir = tempfile::tempdir().unwrap();
        let payload: Vec<u8> = (0..4000u32).map(|i| (i % 251) as u8).collect();
        let path = write(dir.path(), "0.blk", &payload, 0);
        let block = BlockFile::open(&path, 4000, PAGE, (1, 0)).unwrap();
        assert!(block.is_current() && block.is_at(&path));
        // Renamed over, as a process that refetched the block would do.
        write(dir.path(), "0.blk", &payload, 0);
        assert!(!block.is_current() && !block.is_at(&path));

        let block = BlockFile::open(&path, 4000, PAGE, (1, 0)).unwrap();
        // Rewritten in place: a new modification time. File times tick in jiffies, so
        // let one pass.
        std::thread::sleep(Duration::from_millis(30));
        std::fs::write(&path, std::fs::read(&path).unwrap()).unwrap();
        assert!(!block.is_current() && block.is_at(&path));
    }

    #[test]
    fn verified_pages_skip_hashing_but_verify_all_hashes_everything() {
        let dir = tempfile::tempdir().unwrap();
        let payload: Vec<u8> = (0..4000u32).map(|i| (i * 3 % 251) as u8).collect();
        let path = write(dir.path(), "0.blk", &payload, 0);
        let block = BlockFile::open(&path, 4000, PAGE, (1, 0)).unwrap();
        assert_eq!(&block.read(100..3000).unwrap()[..], &payload[100..3000]);
        // Corrupt page 1 below the handle, keeping the file's metadata, as bit rot would.
        let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        let at = bytes.len() - 4000 + 1500;
        bytes[at] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(modified)
            .unwrap();
        assert!(
            block.is_current(),
            "metadata unchanged: the handle cannot tell"
        );
        // Page 3 was never verified through this handle: it is hashed (and fine).
        assert_eq!(&block.read(3500..4000).unwrap()[..], &payload[3500..]);
        // The full check re-hashes page 1 and catches it; so does a fresh handle.
        assert!(matches!(block.verify_all(), Err(BlockFault::Corrupt(_))));
        let fresh = BlockFile::open(&path, 4000, PAGE, (1, 0)).unwrap();
        assert!(matches!(
            fresh.read(1024..2048),
            Err(BlockFault::Corrupt(_))
        ));
    }
}
