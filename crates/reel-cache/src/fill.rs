//! Filling the cache on a miss: missing blocks are claimed so that one fetch per block is
//! in flight, adjacent ones are coalesced into ranged GETs under the fetch permits, and
//! each fetched block is written to its file, then capacity is checked.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use crate::block;
use crate::cache::{CachedObject, Inner};
use crate::in_flight::{Claim, Flight};
use crate::metrics::add;

impl CachedObject {
    /// Fetches the missing blocks among `blocks` (sorted, in range) into the cache.
    pub(crate) async fn fetch_blocks(
        &self,
        blocks: &[u64],
    ) -> reel_io::Result<HashMap<u64, Bytes>> {
        self.cache.inner.fetch_blocks(self, blocks).await
    }
}

impl Inner {
    /// Fetches `blocks` (sorted) of `object`: blocks another thread is already fetching
    /// are awaited, the rest are fetched in coalesced runs of adjacent blocks.
    pub(crate) async fn fetch_blocks(
        &self,
        object: &CachedObject,
        blocks: &[u64],
    ) -> reel_io::Result<HashMap<u64, Bytes>> {
        let mut owned: Vec<(u64, Flight<'_>)> = Vec::new();
        let mut awaited = Vec::new();
        let mut out = HashMap::with_capacity(blocks.len());
        for &index in blocks {
            match self.flights.claim((object.id, index)) {
                Claim::Owner(mut flight) => {
                    // Another thread may have written the block between our miss and our
                    // claim (its fetch ends before its claim does): look once more.
                    let whole = object.block_range(index);
                    match self.read_cached(object, index, 0..whole.end - whole.start) {
                        Some(bytes) => {
                            flight.finish(bytes.clone());
                            out.insert(index, bytes);
                        }
                        None => owned.push((index, flight)),
                    }
                }
                Claim::Wait(rx) => awaited.push((index, rx)),
            }
        }
        let max_run = (self.config.max_request_bytes / self.config.block_size).max(1);
        let mut rest = &mut owned[..];
        while !rest.is_empty() {
            let mut n = 1;
            while n < rest.len() && n < max_run as usize && rest[n].0 == rest[n - 1].0 + 1 {
                n += 1;
            }
            let (run, tail) = rest.split_at_mut(n);
            rest = tail;
            let first = run[0].0;
            let data = self.fetch_run(object, first..first + n as u64).await?;
            for ((index, flight), bytes) in run.iter_mut().zip(data) {
                flight.finish(bytes.clone());
                out.insert(*index, bytes);
            }
        }
        for (index, mut rx) in awaited {
            let shared = match rx.wait_for(Option::is_some).await {
                Ok(state) => state.clone().flatten(),
                Err(_) => None,
            };
            let bytes = match shared {
                Some(bytes) => bytes,
                // The other fetch failed: try once more ourselves, for our own error.
                None => self
                    .fetch_run(object, index..index + 1)
                    .await?
                    .pop()
                    .unwrap_or_default(),
            };
            out.insert(index, bytes);
        }
        Ok(out)
    }

    /// One ranged GET for blocks `blocks` of `object`, written to disk as blocks.
    async fn fetch_run(
        &self,
        object: &CachedObject,
        blocks: Range<u64>,
    ) -> reel_io::Result<Vec<Bytes>> {
        let start = object.block_range(blocks.start).start;
        let end = object.block_range(blocks.end - 1).end;
        let bytes = {
            let _permit = self
                .fetch_permits
                .acquire()
                .await
                .map_err(|e| reel_io::Error::Io {
                    name: object.name.clone(),
                    source: std::io::Error::other(e),
                })?;
            add(&self.counters.remote_requests, 1);
            let mut request = self.remote.read_with(&object.meta.path).range(start..end);
            if let Some(tag) = &object.if_match {
                request = request.if_match(tag);
            }
            request
                .await
                .map_err(|e| self.remote_err(&object.meta.path, e))?
                .to_bytes()
        };
        if bytes.len() as u64 != end - start {
            add(&self.counters.get_errors, 1);
            return Err(reel_io::Error::ShortRead {
                name: object.name.clone(),
                expected: end - start,
                got: bytes.len() as u64,
            });
        }
        add(&self.counters.bytes_read_external, bytes.len() as u64);
        let parts: Vec<(u64, Bytes)> = blocks
            .map(|index| {
                let r = object.block_range(index);
                (
                    index,
                    bytes.slice((r.start - start) as usize..(r.end - start) as usize),
                )
            })
            .collect();
        let inner = Arc::clone(&object.cache.inner);
        let id = object.id;
        let to_write = parts.clone();
        // Disk writes block; keep them off the async workers.
        let _ = tokio::task::spawn_blocking(move || {
            for (index, data) in &to_write {
                inner.store_block(id, *index, data);
            }
            inner.maybe_evict();
        })
        .await;
        Ok(parts.into_iter().map(|(_, b)| b).collect())
    }

    /// Writes one block file; failures are counted, not returned (the read still succeeds).
    fn store_block(&self, id: u128, index: u64, data: &[u8]) {
        if self.full.load(Ordering::Relaxed) {
            add(&self.counters.put_skipped_full, 1);
            return;
        }
        let dest = self.block_path(id, index);
        let mut result = Err(std::io::Error::other("not attempted"));
        // Two attempts: an evicting process may remove the (empty) folder between our
        // `create_dir_all` and the write.
        for _ in 0..2 {
            if let Some(parent) = dest.parent()
                && let Err(e) = std::fs::create_dir_all(parent)
            {
                result = Err(e);
                continue;
            }
            result = block::write_block(
                &dest,
                &self.temp_names.beside(&dest),
                data,
                self.config.page_size,
                (id, index),
            );
            if result.is_ok() {
                break;
            }
        }
        match result {
            Ok(()) => {
                add(&self.counters.bytes_written_cache, data.len() as u64);
                self.written_since_scan.fetch_add(
                    block::file_len(data.len() as u64, self.config.page_size),
                    Ordering::Relaxed,
                );
            }
            Err(_) => add(&self.counters.put_errors, 1),
        }
    }
}
