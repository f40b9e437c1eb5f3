//! Batch buffers kept for the next batches. A fresh multi-megabyte buffer is new pages
//! that the kernel faults in and clears on first touch: at 320×240 that was a fifth of a
//! sample's CPU. A dropped batch hands its buffers back here instead, and the next batch
//! of the same shape reuses them, zeroed again in place (and a pinned allocation, which
//! costs far more than a heap one, is made once).

use std::any::{Any, TypeId};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::{Element, HostBuf, HostMemory};

/// Buffers of dropped batches, reused by the next ones.
pub struct BufferPool {
    memory: HostMemory,
    /// Buffers kept at most; past that the oldest is freed.
    spare: usize,
    kept: Mutex<VecDeque<Kept>>,
    reused: AtomicU64,
    allocated: AtomicU64,
}

/// A buffer waiting for reuse: a `HostBuf<T>` of element type `element`.
struct Kept {
    element: TypeId,
    capacity: usize,
    buf: Box<dyn Any + Send>,
}

impl BufferPool {
    /// A pool allocating in `memory` that keeps up to `spare` buffers.
    pub fn new(memory: HostMemory, spare: usize) -> Arc<Self> {
        Arc::new(Self {
            memory,
            spare,
            kept: Mutex::new(VecDeque::new()),
            reused: AtomicU64::new(0),
            allocated: AtomicU64::new(0),
        })
    }

    /// Where new buffers are allocated.
    pub fn memory(&self) -> &HostMemory {
        &self.memory
    }

    /// A zeroed buffer of `len` elements: a kept one of that size, else a new one. It
    /// comes back here when dropped.
    pub fn zeroed<T: Element>(self: &Arc<Self>, len: usize) -> HostBuf<T> {
        let mut buf = match self.take::<T>(len) {
            Some(mut buf) => {
                buf.rezero(len);
                self.reused.fetch_add(1, Ordering::Relaxed);
                buf
            }
            None => {
                self.allocated.fetch_add(1, Ordering::Relaxed);
                self.memory.zeroed(len)
            }
        };
        buf.pool = Some(Arc::clone(self));
        buf
    }

    /// Buffers handed out so far: (reused, newly allocated).
    pub fn counts(&self) -> (u64, u64) {
        (
            self.reused.load(Ordering::Relaxed),
            self.allocated.load(Ordering::Relaxed),
        )
    }

    fn take<T: Element>(&self, len: usize) -> Option<HostBuf<T>> {
        let mut kept = self.lock();
        let i = kept
            .iter()
            .position(|k| k.element == TypeId::of::<T>() && k.capacity == len)?;
        let entry = kept.remove(i)?;
        drop(kept);
        entry.buf.downcast::<HostBuf<T>>().ok().map(|b| *b)
    }

    /// Keeps `buf` (detached from any pool) for reuse.
    pub(super) fn keep<T: Element>(&self, buf: HostBuf<T>) {
        let capacity = buf.capacity();
        if capacity == 0 || self.spare == 0 {
            return;
        }
        let evicted = {
            let mut kept = self.lock();
            kept.push_back(Kept {
                element: TypeId::of::<T>(),
                capacity,
                buf: Box::new(buf),
            });
            (kept.len() > self.spare).then(|| kept.pop_front())
        };
        // Freed outside the lock.
        drop(evicted);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Kept>> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl std::fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (reused, allocated) = self.counts();
        f.debug_struct("BufferPool")
            .field("memory", &self.memory)
            .field("spare", &self.spare)
            .field("reused", &reused)
            .field("allocated", &allocated)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_buffer_is_reused_zeroed_by_the_next_of_its_size_and_type() {
        let pool = BufferPool::new(HostMemory::Pageable, 4);
        let mut first: HostBuf<u8> = pool.zeroed(1 << 20);
        first.iter_mut().for_each(|b| *b = 7);
        let address = first.as_ptr();
        drop(first);
        // Another type or size does not take it.
        let other: HostBuf<f32> = pool.zeroed(1 << 18);
        let smaller: HostBuf<u8> = pool.zeroed(1 << 19);
        assert_eq!(pool.counts(), (0, 3));
        let again: HostBuf<u8> = pool.zeroed(1 << 20);
        assert_eq!(again.as_ptr(), address, "the kept allocation is reused");
        assert!(again.iter().all(|&b| b == 0), "and zeroed again");
        assert_eq!(pool.counts(), (1, 3));
        drop((other, smaller));
    }

    #[test]
    fn a_truncated_buffer_comes_back_whole_and_into_vec_takes_it_away() {
        let pool = BufferPool::new(HostMemory::Pageable, 4);
        let mut buf: HostBuf<i64> = pool.zeroed(16);
        buf[3] = 9;
        buf.truncate(4);
        drop(buf);
        let again: HostBuf<i64> = pool.zeroed(16);
        assert_eq!(&*again, &[0; 16]);
        let v = again.into_vec();
        assert_eq!(v.len(), 16);
        let fresh: HostBuf<i64> = pool.zeroed(16);
        assert_eq!(
            pool.counts(),
            (1, 2),
            "the Vec's allocation did not come back"
        );
        drop(fresh);
    }

    #[test]
    fn the_pool_keeps_at_most_spare_buffers() {
        let pool = BufferPool::new(HostMemory::Pageable, 2);
        let bufs: Vec<HostBuf<u16>> = (0..4).map(|_| pool.zeroed(8)).collect();
        drop(bufs);
        assert_eq!(pool.lock().len(), 2);
        let again: Vec<HostBuf<u16>> = (0..4).map(|_| pool.zeroed(8)).collect();
        assert_eq!(pool.counts(), (2, 6));
        drop(again);
    }
}
