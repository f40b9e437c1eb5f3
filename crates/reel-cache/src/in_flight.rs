//! The per-process table of block fetches in flight: one fetch per block at a time, and
//! the threads that miss the same block meanwhile wait for its bytes.

use std::collections::HashMap;
use std::sync::Mutex;

use bytes::Bytes;
use tokio::sync::watch;

use crate::block::BlockId;

/// `None` while the fetch runs; then the block's bytes, or `None` if the fetch failed.
pub(crate) type FlightState = Option<Option<Bytes>>;

/// The blocks being fetched, each with the channel its fetch reports on.
#[derive(Default)]
pub(crate) struct Flights {
    table: Mutex<HashMap<BlockId, watch::Receiver<FlightState>>>,
}

pub(crate) enum Claim<'a> {
    /// No fetch of the block was in flight: the caller fetches it.
    Owner(Flight<'a>),
    /// Another fetch of the block is in flight: the caller waits for its state.
    Wait(watch::Receiver<FlightState>),
}

impl Flights {
    /// Claims the fetch of block `id`, or the channel of the fetch already claimed.
    pub(crate) fn claim(&self, id: BlockId) -> Claim<'_> {
        let mut table = self.lock();
        if let Some(rx) = table.get(&id) {
            return Claim::Wait(rx.clone());
        }
        let (tx, rx) = watch::channel(None);
        table.insert(id, rx);
        Claim::Owner(Flight {
            flights: self,
            id,
            tx,
            done: false,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<BlockId, watch::Receiver<FlightState>>> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The right and duty to fetch one block; on drop (finished, failed or cancelled) the
/// block leaves the in-flight table and waiters are woken.
pub(crate) struct Flight<'a> {
    flights: &'a Flights,
    id: BlockId,
    tx: watch::Sender<FlightState>,
    done: bool,
}

impl Flight<'_> {
    pub(crate) fn finish(&mut self, bytes: Bytes) {
        self.tx.send_replace(Some(Some(bytes)));
        self.done = true;
    }
}

impl Drop for Flight<'_> {
    fn drop(&mut self) {
        self.flights.lock().remove(&self.id);
        if !self.done {
            self.tx.send_replace(Some(None));
        }
    }
}
