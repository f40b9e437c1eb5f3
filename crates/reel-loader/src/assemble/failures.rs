//! What a failure to fill a sample means, by its kind: skip the sample, open a replaced
//! object again, or fail the batch on an outage.

use reel_io::Kinded;

use super::*;

impl Worker {
    /// Fills one sample (`None`), or says why it is skipped, deciding by the error's kind:
    /// - bad input (the episode corrupt, or not what the manifest says): skipped. An
    ///   episode that cannot be opened or checked is remembered as bad; a sample that
    ///   fails in a readable episode costs that sample alone, so which samples are
    ///   delivered never depends on which worker met the damage first;
    /// - changed (the object replaced while it was read, or bytes that no longer parse
    ///   in an object the store says was replaced): opened again, once, then skipped if
    ///   it still fails;
    /// - transient (after the store's own retries) or environment (the store
    ///   unreachable, a permission, a full disk): no verdict on the episode. The batch
    ///   fails with the error, and the run resumes from its state once the store is back.
    pub(super) fn fill_or_reopen(
        &mut self,
        tensors: &mut BatchTensors,
        slot: usize,
        at: Located,
        uri: &str,
    ) -> Result<Option<String>> {
        let row = at.row;
        let mut reopened = false;
        loop {
            let (result, at_open) = match self.episode(row, uri) {
                Err(e) => (Err(e), true),
                Ok(episode) => (self.fill(tensors, slot, at, uri, episode), false),
            };
            let Err(e) = result else { return Ok(None) };
            match e.kind() {
                ErrorKind::Changed if !reopened => {
                    self.close(row);
                    reopened = true;
                }
                ErrorKind::Changed => {
                    self.close(row);
                    return Ok(Some(e.to_string()));
                }
                // Bytes that do not parse in an episode that read well before: where the
                // store ignored the read's If-Match, the object may have been replaced. A
                // store that cannot say (an outage) gives no verdict on the episode.
                ErrorKind::BadInput if !at_open && !reopened && self.replaced(row)? => {
                    self.close(row);
                    reopened = true;
                }
                ErrorKind::BadInput => {
                    let reason = e.to_string();
                    if at_open {
                        self.bad.insert(row, reason.clone());
                    }
                    return Ok(Some(reason));
                }
                // Transient, environment, and any kind added later: not the episode's fault.
                _ => return Err(e),
            }
        }
    }

    /// Whether the object of open episode `row` was replaced since it was opened; an
    /// error when the store cannot say (unreachable after its retries): an outage, not a
    /// verdict on the episode.
    pub(super) fn replaced(&self, row: usize) -> Result<bool> {
        match self.episodes.iter().find(|(r, _)| *r == row) {
            Some((_, e)) => Ok(e.reader.source().has_changed()?),
            None => Ok(false),
        }
    }

    /// Forgets what was read of episode `row` (its open reader and decoded GOPs): the
    /// object changed, and the next sample reads it afresh.
    pub(super) fn close(&mut self, row: usize) {
        if let Some(i) = self.episodes.iter().position(|(r, _)| *r == row)
            && let Some((_, old)) = self.episodes.remove(i)
        {
            self.retire(&old);
        }
        self.signals.retain(|s| s.row != row);
        self.depth_spans.retain(|s| s.row != row);
        self.shared.gops.forget_episode(row);
    }
}
