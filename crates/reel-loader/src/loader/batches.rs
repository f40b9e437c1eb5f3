//! The consumer's side of an epoch: batches handed over in order, skipped samples
//! tallied against the epoch's budget, and the workers stopped when it is dropped.

use super::*;

/// The batches of one epoch on one rank, in order. Dropping it stops its workers.
#[derive(Debug)]
pub struct Batches {
    pub(super) shared: Arc<Shared>,
    pub(super) epoch: u64,
    /// The rank's spans of this epoch, when it resumed on another world size.
    pub(super) spans: Vec<Span>,
    pub(super) next: u64,
    pub(super) total: u64,
    pub(super) samples_in_epoch: u64,
    /// Skipped samples past which the epoch fails ([`LoaderOptions::max_skipped`]).
    pub(super) max_skipped_samples: u64,
    pub(super) rx: Receiver<(u64, Result<Batch>)>,
    pub(super) pending: BTreeMap<u64, Result<Batch>>,
    pub(super) control: Arc<Control>,
    pub(super) workers: Vec<JoinHandle<()>>,
    pub(super) stats: LoadStats,
    /// The loader's decode and read counters when this epoch started (they are shared by
    /// every epoch of the loader).
    pub(super) counts_at_start: WorkerCounts,
    /// The episodes whose samples were skipped so far, by URI.
    pub(super) skipped: BTreeMap<String, SkippedEpisode>,
    /// Skipped samples of batches left out for being empty, reported with the next batch,
    /// or, when no batch follows, by [`Batches::skipped_after_last_batch`].
    pub(super) carried: Vec<Skipped>,
    /// A worker was lost, or too many samples were skipped: no further batch comes.
    pub(super) ended: bool,
}

impl Batches {
    /// The episodes whose samples were skipped in the batches delivered so far, with how
    /// many and why.
    pub fn skipped_episodes(&self) -> Vec<SkippedEpisode> {
        self.skipped.values().cloned().collect()
    }

    /// The skipped samples that no delivered batch reports: those of the batches after the
    /// last one delivered, which came out empty (every sample skipped), once the iteration
    /// has ended (at the epoch's end, or on an error); empty while it goes on. With the
    /// batches' own `skipped`, every skipped sample of the epoch is reported exactly once.
    pub fn skipped_after_last_batch(&self) -> &[Skipped] {
        if self.ended || self.next >= self.total {
            &self.carried
        } else {
            &[]
        }
    }

    /// Where the run stands after the batches delivered so far.
    pub fn state(&self) -> LoaderState {
        LoaderState {
            epoch: self.epoch,
            batch: self.next,
            spans: self.spans.clone(),
        }
    }

    /// Batches in this epoch on this rank.
    pub fn total_batches(&self) -> u64 {
        self.total
    }

    /// Samples in this epoch on this rank.
    pub fn samples_in_epoch(&self) -> u64 {
        self.samples_in_epoch
    }

    /// What was delivered and done in this epoch so far (decode and read counts include
    /// prefetched work).
    pub fn stats(&self) -> LoadStats {
        let counts = self.shared.counts().since(&self.counts_at_start);
        LoadStats {
            frames_decoded: counts.frames_decoded,
            chunks_read: counts.chunks_read,
            frames_wanted: counts.frames_wanted,
            frames_cached: counts.frames_cached,
            ..self.stats
        }
    }
}

impl Iterator for Batches {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(item) = self.next_within(Duration::from_secs(3600)) {
                return item;
            }
        }
    }
}

impl Batches {
    /// [`Iterator::next`], waiting at most about `timeout` for a batch: `None` when none
    /// came in time (ask again), else what `next` gives. For a consumer that must stay
    /// responsive while it waits (Python's Ctrl-C).
    pub fn next_within(&mut self, timeout: Duration) -> Option<Option<Result<Batch>>> {
        if self.ended || self.next >= self.total {
            return Some(None);
        }
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(result) = self.pending.remove(&self.next) {
                let mut batch = match result {
                    Ok(batch) => batch,
                    // An outage (the store unreachable, a disk full, a failure still
                    // there after the store's retries): the batch was not delivered, so
                    // the state still names it, and the run resumes from there.
                    Err(e) => return Some(Some(Err(self.end(e)))),
                };
                self.next += 1;
                if let Ok(mut delivered) = self.control.delivered.lock() {
                    *delivered = self.next;
                }
                self.control.room.notify_all();
                {
                    self.stats.samples += batch.len() as u64;
                    self.stats.skipped += batch.skipped.len() as u64;
                    for s in &batch.skipped {
                        tally_skipped(&mut self.skipped, &s.uri, 1, || SkippedEpisode {
                            episode_id: s.episode_id.clone(),
                            uri: s.uri.clone(),
                            samples: 0,
                            reason: s.reason.clone(),
                        });
                    }
                    let limit = self.max_skipped_samples;
                    if self.stats.skipped > limit {
                        let first = self
                            .skipped
                            .values()
                            .next()
                            .map(|e| format!("{}: {}", e.uri, e.reason))
                            .unwrap_or_default();
                        let too_many = LoaderError::TooManySkipped {
                            skipped: self.stats.skipped,
                            samples: self.samples_in_epoch,
                            limit,
                            fraction: self.shared.options.max_skipped,
                            first,
                        };
                        return Some(Some(Err(self.end(too_many))));
                    }
                }
                // A batch whose samples were all skipped is never delivered (a trainer
                // would take a loss over nothing): its skipped samples go with the next
                // batch, and resuming passes it the same way.
                if batch.is_empty() {
                    self.carried.append(&mut batch.skipped);
                    if self.next >= self.total {
                        return Some(None);
                    }
                    continue;
                }
                self.stats.batches += 1;
                if !self.carried.is_empty() {
                    self.carried.append(&mut batch.skipped);
                    batch.skipped = std::mem::take(&mut self.carried);
                }
                return Some(Some(Ok(batch)));
            }
            let wait = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(wait) {
                // Surfaces at once, ahead of batches still in order before it: the run
                // is broken, and waiting on them could wait for ever.
                Ok((_, Err(lost @ LoaderError::WorkerLost { .. }))) => {
                    return Some(Some(Err(self.end(lost))));
                }
                Ok((b, result)) => {
                    self.pending.insert(b, result);
                }
                Err(RecvTimeoutError::Timeout) => return None,
                Err(RecvTimeoutError::Disconnected) => {
                    let lost = LoaderError::WorkerLost {
                        batch: self.next,
                        reason: "every worker ended before sending it".to_string(),
                    };
                    return Some(Some(Err(self.end(lost))));
                }
            }
        }
    }
}

impl Batches {
    /// Ends the iteration on a lost worker, an outage or too many skipped samples,
    /// stopping the workers; `state()` still names the first batch not delivered.
    fn end(&mut self, lost: LoaderError) -> LoaderError {
        self.ended = true;
        self.pending.clear();
        self.control.stop_all();
        lost
    }
}

impl Drop for Batches {
    fn drop(&mut self) {
        self.control.stop_all();
        // Workers blocked on sending see the receiver gone; those building finish one batch.
        let (_, rx) = channel();
        drop(std::mem::replace(&mut self.rx, rx));
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}
