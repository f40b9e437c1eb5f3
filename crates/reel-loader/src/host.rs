//! Host memory for batch buffers: ordinary pageable memory, or, with feature `cuda` on a
//! machine with a CUDA driver and device, page-locked (pinned) memory that the GPU copies
//! from asynchronously at full bus speed (what PyTorch's `pin_memory=True` gives).

mod pool;

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

pub(crate) use pool::BufferPool;

/// Where the loader allocates batch buffers.
#[derive(Clone, Default)]
pub enum HostMemory {
    /// Ordinary heap memory.
    #[default]
    Pageable,
    /// Page-locked memory of this CUDA context.
    #[cfg(feature = "cuda")]
    Pinned(std::sync::Arc<cudarc::driver::CudaContext>),
}

impl fmt::Debug for HostMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.is_pinned() {
            "Pinned"
        } else {
            "Pageable"
        })
    }
}

impl HostMemory {
    /// Pinned memory on CUDA device `ordinal` when the driver and the device are there
    /// (feature `cuda`), else pageable memory.
    pub fn pinned_if_available(ordinal: usize) -> Self {
        #[cfg(feature = "cuda")]
        {
            // SAFETY: only checks whether the driver library can be loaded.
            if unsafe { cudarc::driver::sys::is_culib_present() }
                && let Ok(context) = cudarc::driver::CudaContext::new(ordinal)
            {
                return Self::Pinned(context);
            }
        }
        let _ = ordinal;
        Self::Pageable
    }

    /// Whether buffers are page-locked.
    pub fn is_pinned(&self) -> bool {
        match self {
            Self::Pageable => false,
            #[cfg(feature = "cuda")]
            Self::Pinned(_) => true,
        }
    }

    /// A zeroed buffer of `len` elements. Falls back to pageable memory if the pinned
    /// allocation fails (page-locked memory is a limited resource).
    pub(crate) fn zeroed<T: Element>(&self, len: usize) -> HostBuf<T> {
        #[cfg(feature = "cuda")]
        if let Self::Pinned(context) = self
            && let Some(buf) = T::pinned(context, len)
        {
            return buf;
        }
        HostBuf::from(vec![T::default(); len])
    }
}

/// Where a batch buffer comes from: fresh memory, or the pool of a loader's reused
/// buffers.
pub(crate) trait Allocate {
    /// A zeroed buffer of `len` elements.
    fn zeroed<T: Element>(&self, len: usize) -> HostBuf<T>;
}

impl Allocate for HostMemory {
    fn zeroed<T: Element>(&self, len: usize) -> HostBuf<T> {
        HostMemory::zeroed(self, len)
    }
}

impl Allocate for Arc<BufferPool> {
    fn zeroed<T: Element>(&self, len: usize) -> HostBuf<T> {
        BufferPool::zeroed(self, len)
    }
}

/// Element types of batch buffers.
pub trait Element: Copy + Default + PartialEq + fmt::Debug + Send + Sync + 'static {
    #[cfg(feature = "cuda")]
    #[doc(hidden)]
    fn pinned(
        context: &std::sync::Arc<cudarc::driver::CudaContext>,
        len: usize,
    ) -> Option<HostBuf<Self>>;
}

macro_rules! element {
    ($($t:ty),*) => {$(
        impl Element for $t {
            #[cfg(feature = "cuda")]
            fn pinned(
                context: &std::sync::Arc<cudarc::driver::CudaContext>,
                len: usize,
            ) -> Option<HostBuf<Self>> {
                // Portable (usable from every context) and not write-combined: workers
                // write the batch and consumers may read it on the CPU too.
                let flags = cudarc::driver::sys::CU_MEMHOSTALLOC_PORTABLE;
                // SAFETY: the memory is zeroed below before anyone reads it.
                let mut slice =
                    unsafe { context.alloc_pinned_with_flags::<$t>(len.max(1), flags) }.ok()?;
                let ptr = slice.as_mut_ptr().ok()?;
                // SAFETY: `ptr` is the start of `len.max(1)` elements owned by `slice`.
                unsafe { std::ptr::write_bytes(ptr, 0, len.max(1)) };
                Some(HostBuf {
                    storage: Storage::Pinned { slice, ptr },
                    len,
                    pool: None,
                })
            }
        }
    )*};
}
element!(u8, u16, f32, i64);

/// One contiguous buffer of a tensor, in pageable or pinned host memory.
pub struct HostBuf<T: Element> {
    storage: Storage<T>,
    /// Elements in use (a pinned buffer keeps its allocation when a batch is truncated).
    len: usize,
    /// Where the allocation goes when the buffer is dropped, for the next batch.
    pool: Option<Arc<BufferPool>>,
}

enum Storage<T: Element> {
    Heap(Vec<T>),
    #[cfg(feature = "cuda")]
    Pinned {
        slice: cudarc::driver::PinnedHostSlice<T>,
        /// The slice's memory, taken once at allocation: the loader only writes it before
        /// the batch is handed over, so no CUDA event needs waiting on for each access.
        ptr: *mut T,
    },
}

// SAFETY: the pinned pointer is owned by its `PinnedHostSlice` (Send + Sync) and only
// reached through `&self` / `&mut self` like a `Vec`'s.
unsafe impl<T: Element> Send for HostBuf<T> {}
// SAFETY: as above.
unsafe impl<T: Element> Sync for HostBuf<T> {}

impl<T: Element> HostBuf<T> {
    /// Whether the buffer is page-locked.
    pub fn is_pinned(&self) -> bool {
        match self.storage {
            Storage::Heap(_) => false,
            #[cfg(feature = "cuda")]
            Storage::Pinned { .. } => true,
        }
    }

    /// The page-locked allocation, for `CudaStream::memcpy_htod` (it may be longer than
    /// the elements in use).
    #[cfg(feature = "cuda")]
    pub fn pinned(&self) -> Option<&cudarc::driver::PinnedHostSlice<T>> {
        match &self.storage {
            Storage::Pinned { slice, .. } => Some(slice),
            Storage::Heap(_) => None,
        }
    }

    /// The elements as a `Vec`: no copy for pageable memory (the allocation leaves with
    /// the `Vec` instead of going back to its pool).
    pub fn into_vec(mut self) -> Vec<T> {
        match &mut self.storage {
            Storage::Heap(v) => {
                self.pool = None;
                let mut v = std::mem::take(v);
                v.truncate(self.len);
                v
            }
            #[cfg(feature = "cuda")]
            Storage::Pinned { .. } => self.to_vec(),
        }
    }

    /// Elements the allocation holds.
    fn capacity(&self) -> usize {
        match &self.storage {
            Storage::Heap(v) => v.capacity(),
            #[cfg(feature = "cuda")]
            Storage::Pinned { slice, .. } => slice.len(),
        }
    }

    /// Makes the buffer `len` zeroed elements again; `len` is at most its capacity.
    fn rezero(&mut self, len: usize) {
        match &mut self.storage {
            Storage::Heap(v) => {
                v.clear();
                v.resize(len, T::default());
            }
            // SAFETY: `ptr` is the start of at least `len` elements owned by `slice`.
            #[cfg(feature = "cuda")]
            Storage::Pinned { ptr, .. } => unsafe { std::ptr::write_bytes(*ptr, 0, len) },
        }
        self.len = len;
    }

    pub(crate) fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
        match &mut self.storage {
            Storage::Heap(v) => v.truncate(self.len),
            // The allocation stays; only `len` elements are visible.
            #[cfg(feature = "cuda")]
            Storage::Pinned { .. } => {}
        }
    }
}

impl<T: Element> From<Vec<T>> for HostBuf<T> {
    fn from(v: Vec<T>) -> Self {
        Self {
            len: v.len(),
            storage: Storage::Heap(v),
            pool: None,
        }
    }
}

impl<T: Element> Drop for HostBuf<T> {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            let storage = std::mem::replace(&mut self.storage, Storage::Heap(Vec::new()));
            pool.keep(HostBuf {
                storage,
                len: self.len,
                pool: None,
            });
        }
    }
}

impl<T: Element> Deref for HostBuf<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        match &self.storage {
            Storage::Heap(v) => &v[..self.len],
            // SAFETY: `ptr` points at `len` (or more) initialised elements owned by `slice`.
            #[cfg(feature = "cuda")]
            Storage::Pinned { ptr, .. } => unsafe { std::slice::from_raw_parts(*ptr, self.len) },
        }
    }
}

impl<T: Element> DerefMut for HostBuf<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match &mut self.storage {
            Storage::Heap(v) => &mut v[..self.len],
            // SAFETY: as in `deref`, and `&mut self` makes this the only reference.
            #[cfg(feature = "cuda")]
            Storage::Pinned { ptr, .. } => unsafe {
                std::slice::from_raw_parts_mut(*ptr, self.len)
            },
        }
    }
}

impl<T: Element> Clone for HostBuf<T> {
    /// A copy in pageable memory.
    fn clone(&self) -> Self {
        Self::from(self.to_vec())
    }
}

impl<T: Element> PartialEq for HostBuf<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Element> fmt::Debug for HostBuf<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostBuf")
            .field("len", &self.len)
            .field("pinned", &self.is_pinned())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pageable_buffers_behave_like_vecs() {
        let memory = HostMemory::Pageable;
        let mut buf: HostBuf<f32> = memory.zeroed(6);
        assert!(!buf.is_pinned());
        assert_eq!(&*buf, &[0.0; 6]);
        buf[2] = 1.5;
        buf.truncate(4);
        assert_eq!(buf.len(), 4);
        assert_eq!(buf.clone(), HostBuf::from(vec![0.0, 0.0, 1.5, 0.0]));
        assert_eq!(buf.into_vec(), vec![0.0, 0.0, 1.5, 0.0]);
    }

    #[test]
    fn without_a_gpu_pinned_if_available_is_pageable() {
        let memory = HostMemory::pinned_if_available(0);
        // On a machine with CUDA (feature `cuda`) this is pinned; everywhere else it must
        // fall back, never fail.
        if !cfg!(feature = "cuda") {
            assert!(!memory.is_pinned());
        }
        let mut buf: HostBuf<i64> = memory.zeroed(3);
        buf[1] = 7;
        assert_eq!(&*buf, &[0, 7, 0]);
        assert_eq!(buf.is_pinned(), memory.is_pinned());
    }
}
