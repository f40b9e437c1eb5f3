//! Serving a read: each block from its file on disk through this process's table of open
//! handles, the missing ones from the remote (see `fill`), a faulty block dropped so that
//! the next read fetches it again.

use std::ops::Range;
use std::path::Path;

use bytes::Bytes;

use crate::block::BlockFault;
use crate::cache::{CachedObject, Inner, TOUCH_INTERVAL};
use crate::metrics::add;

impl Inner {
    /// Deletes a block that failed its checks so that the next read fetches it again.
    pub(crate) fn drop_if_corrupt(&self, path: &Path, fault: &BlockFault) {
        match fault {
            BlockFault::Missing => {}
            BlockFault::Corrupt(_) => {
                add(&self.counters.corrupt_blocks, 1);
                let _ = std::fs::remove_file(path);
            }
            BlockFault::Io(_) => add(&self.counters.get_errors, 1),
        }
    }

    /// `range` within block `index` of `object`, from disk, or `None` on a miss.
    pub(crate) fn read_cached(
        &self,
        object: &CachedObject,
        index: u64,
        range: Range<u64>,
    ) -> Option<Bytes> {
        let mut out = vec![0u8; (range.end - range.start) as usize];
        self.read_cached_into(object, index, range, &mut out)
            .then(|| Bytes::from(out))
    }

    /// Reads `range` within block `index` of `object` from disk into `out`; false on a
    /// miss (missing or corrupt block, which is then dropped).
    ///
    /// The block is read through this process's handle table: a held handle that is
    /// still the file at the block's path serves the read, pages it verified before are
    /// not hashed again.
    fn read_cached_into(
        &self,
        object: &CachedObject,
        index: u64,
        range: Range<u64>,
        out: &mut [u8],
    ) -> bool {
        let id = (object.id, index);
        let path = || self.block_path(object.id, index);
        let block_range = object.block_range(index);
        let payload_len = block_range.end - block_range.start;
        let block = match self
            .open_blocks
            .get_or_open(id, path, payload_len, self.config.page_size)
        {
            Ok(block) => block,
            Err(fault) => {
                self.drop_if_corrupt(&path(), &fault);
                return false;
            }
        };
        match block.read_into(range, out) {
            Ok(()) => {
                block.touch_if_older_than(TOUCH_INTERVAL);
                true
            }
            Err(fault) => {
                self.open_blocks.forget_handle(id, &block);
                let path = path();
                // Only if the path still names the file that failed: another process may
                // have dropped it and fetched a good one meanwhile.
                if block.is_at(&path) {
                    self.drop_if_corrupt(&path, &fault);
                } else if matches!(fault, BlockFault::Io(_)) {
                    add(&self.counters.get_errors, 1);
                }
                false
            }
        }
    }

    pub(crate) fn read(&self, object: &CachedObject, range: Range<u64>) -> reel_io::Result<Bytes> {
        let bs = self.config.block_size;
        let first = range.start / bs;
        let last = (range.end - 1) / bs;
        // `range` within block `index`, and where that lands in the output.
        let within = |index: u64| {
            let block = object.block_range(index);
            let (a, b) = (range.start.max(block.start), range.end.min(block.end));
            (
                a - block.start..b - block.start,
                (a - range.start) as usize..(b - range.start) as usize,
            )
        };
        let mut out = vec![0u8; (range.end - range.start) as usize];
        let mut missing = Vec::new();
        for index in first..=last {
            let (sub, at) = within(index);
            if self.read_cached_into(object, index, sub.clone(), &mut out[at]) {
                add(&self.counters.hits, 1);
                add(&self.counters.bytes_read_cache, sub.end - sub.start);
            } else {
                add(&self.counters.misses, 1);
                add(&self.counters.bytes_requested_external, sub.end - sub.start);
                missing.push(index);
            }
        }
        if !missing.is_empty() {
            let fetched = object
                .cache
                .runtime
                .block_on(self.fetch_blocks(object, &missing))?;
            for index in missing {
                let (sub, at) = within(index);
                let block = fetched.get(&index).filter(|b| b.len() as u64 >= sub.end);
                let Some(block) = block else {
                    return Err(reel_io::Error::ShortRead {
                        name: object.name.clone(),
                        expected: sub.end - sub.start,
                        got: 0,
                    });
                };
                out[at].copy_from_slice(&block[sub.start as usize..sub.end as usize]);
            }
        }
        Ok(Bytes::from(out))
    }
}
