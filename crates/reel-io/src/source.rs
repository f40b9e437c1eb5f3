//! The ranged byte-source trait and its local implementations.

use std::fmt::Debug;
use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;

use crate::{Error, Result};

/// Random access to an immutable byte object: a file, a memory map, an object in a store,
/// or a cache in front of any of these.
///
/// Every read names an explicit byte range, so a source never keeps a cursor and can be
/// shared between threads. Implementations return exactly the bytes asked for or an error:
/// a range past the end is [`Error::OutOfBounds`], never a short read.
pub trait ByteSource: Send + Sync + Debug {
    /// Total length of the object in bytes.
    fn len(&self) -> Result<u64>;

    /// Whether the object is empty.
    fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// The bytes in `range` (end exclusive).
    fn read_range(&self, range: Range<u64>) -> Result<Bytes>;

    /// A human-readable name (path or URI) used in error messages.
    fn name(&self) -> &str;

    /// Whether the object is no longer the version this source started to read: a reader
    /// that finds its bytes inconsistent asks, to tell a replaced object (open it again)
    /// from a corrupt one. Sources of immutable bytes say `false`.
    fn has_changed(&self) -> Result<bool> {
        Ok(false)
    }
}

macro_rules! forward_byte_source {
    ($($ty:ty),*) => {$(
        impl<T: ByteSource + ?Sized> ByteSource for $ty {
            fn len(&self) -> Result<u64> { (**self).len() }
            fn read_range(&self, range: Range<u64>) -> Result<Bytes> { (**self).read_range(range) }
            fn name(&self) -> &str { (**self).name() }
            fn has_changed(&self) -> Result<bool> { (**self).has_changed() }
        }
    )*};
}
forward_byte_source!(&T, Box<T>, Arc<T>);

/// Checks `range` against `len`, so every source rejects bad ranges the same way.
pub(crate) fn check_range(name: &str, range: &Range<u64>, len: u64) -> Result<()> {
    if range.start > range.end || range.end > len {
        return Err(Error::OutOfBounds {
            name: name.to_owned(),
            start: range.start,
            end: range.end,
            len,
        });
    }
    Ok(())
}

/// A local file read with positioned reads (`pread`), safe to share between threads.
#[derive(Debug)]
pub struct FileSource {
    file: File,
    len: u64,
    name: String,
}

impl FileSource {
    /// Opens `path` for ranged reads.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let io_err = |source| Error::Io {
            name: path.display().to_string(),
            source,
        };
        let file = File::open(path).map_err(io_err)?;
        let meta = file.metadata().map_err(io_err)?;
        if meta.is_dir() {
            return Err(Error::NotAFile {
                name: path.display().to_string(),
            });
        }
        let len = meta.len();
        Ok(Self {
            file,
            len,
            name: path.display().to_string(),
        })
    }
}

impl ByteSource for FileSource {
    fn len(&self) -> Result<u64> {
        Ok(self.len)
    }

    fn read_range(&self, range: Range<u64>) -> Result<Bytes> {
        check_range(&self.name, &range, self.len)?;
        let mut buf = vec![0u8; (range.end - range.start) as usize];
        self.file
            .read_exact_at(&mut buf, range.start)
            .map_err(|source| Error::Io {
                name: self.name.clone(),
                source,
            })?;
        Ok(Bytes::from(buf))
    }

    fn name(&self) -> &str {
        &self.name
    }
}

/// A memory-mapped local file; reads are zero-copy slices of the map.
#[derive(Debug, Clone)]
pub struct MmapSource {
    map: Arc<memmap2::Mmap>,
    name: String,
}

impl MmapSource {
    /// Maps `path` read-only.
    ///
    /// The file must not be truncated while mapped (the usual mmap caveat); Reel writes
    /// files under a temporary name and renames them, so published files never change.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let file = File::open(path).map_err(|source| Error::Io {
            name: name.clone(),
            source,
        })?;
        if file.metadata().is_ok_and(|m| m.is_dir()) {
            return Err(Error::NotAFile { name });
        }
        // SAFETY: the map is read-only and Reel never modifies published files in place.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|source| Error::Io {
            name: name.clone(),
            source,
        })?;
        Ok(Self {
            map: Arc::new(map),
            name,
        })
    }
}

/// Keeps the map alive for as long as any slice handed out by [`MmapSource`] lives.
struct MmapSlice {
    map: Arc<memmap2::Mmap>,
    start: usize,
    end: usize,
}

impl AsRef<[u8]> for MmapSlice {
    fn as_ref(&self) -> &[u8] {
        &self.map[self.start..self.end]
    }
}

impl ByteSource for MmapSource {
    fn len(&self) -> Result<u64> {
        Ok(self.map.len() as u64)
    }

    fn read_range(&self, range: Range<u64>) -> Result<Bytes> {
        check_range(&self.name, &range, self.map.len() as u64)?;
        Ok(Bytes::from_owner(MmapSlice {
            map: Arc::clone(&self.map),
            start: range.start as usize,
            end: range.end as usize,
        }))
    }

    fn name(&self) -> &str {
        &self.name
    }
}

/// Bytes already in memory, e.g. a freshly written episode or a fuzzer input.
#[derive(Debug, Clone)]
pub struct MemorySource {
    data: Bytes,
    name: String,
}

impl MemorySource {
    /// Wraps `data`, naming it `name` in error messages.
    pub fn new(name: impl Into<String>, data: impl Into<Bytes>) -> Self {
        Self {
            data: data.into(),
            name: name.into(),
        }
    }
}

impl ByteSource for MemorySource {
    fn len(&self) -> Result<u64> {
        Ok(self.data.len() as u64)
    }

    fn read_range(&self, range: Range<u64>) -> Result<Bytes> {
        check_range(&self.name, &range, self.data.len() as u64)?;
        Ok(self.data.slice(range.start as usize..range.end as usize))
    }

    fn name(&self) -> &str {
        &self.name
    }
}

/// Read counts of a [`CountingSource`]: the figures a benchmark compares.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Number of `read_range` calls (ranged requests against the store).
    pub reads: u64,
    /// Total bytes returned.
    pub bytes: u64,
    /// Time spent waiting inside the inner source's reads, in nanoseconds: what the
    /// store costs, apart from the caller's own work on the bytes.
    pub wait_ns: u64,
}

impl std::ops::Sub for ReadStats {
    type Output = ReadStats;
    fn sub(self, rhs: ReadStats) -> ReadStats {
        ReadStats {
            reads: self.reads - rhs.reads,
            bytes: self.bytes - rhs.bytes,
            wait_ns: self.wait_ns - rhs.wait_ns,
        }
    }
}

/// Counts the ranged reads, bytes and waiting time that go through an inner source.
///
/// `len` calls are not counted: every source here knows its length without a request
/// once opened.
#[derive(Debug, Default)]
pub struct CountingSource<S> {
    inner: S,
    reads: AtomicU64,
    bytes: AtomicU64,
    wait_ns: AtomicU64,
}

impl<S: ByteSource> CountingSource<S> {
    /// Wraps `inner` with zeroed counters.
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            reads: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            wait_ns: AtomicU64::new(0),
        }
    }

    /// Counts so far.
    pub fn stats(&self) -> ReadStats {
        ReadStats {
            reads: self.reads.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            wait_ns: self.wait_ns.load(Ordering::Relaxed),
        }
    }

    /// Zeroes the counters.
    pub fn reset(&self) {
        self.reads.store(0, Ordering::Relaxed);
        self.bytes.store(0, Ordering::Relaxed);
        self.wait_ns.store(0, Ordering::Relaxed);
    }

    /// The wrapped source.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

impl<S: ByteSource> ByteSource for CountingSource<S> {
    fn len(&self) -> Result<u64> {
        self.inner.len()
    }

    fn read_range(&self, range: Range<u64>) -> Result<Bytes> {
        let started = std::time::Instant::now();
        let bytes = self.inner.read_range(range)?;
        let waited = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.wait_ns.fetch_add(waited, Ordering::Relaxed);
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        Ok(bytes)
    }

    fn name(&self) -> &str {
        self.inner.name()
    }
}

/// Writes `data` to `path` under a temporary name in the same folder, then renames it,
/// so readers never see a partial file.
pub fn write_file_atomic(path: impl AsRef<Path>, data: &[u8]) -> Result<()> {
    let path = path.as_ref();
    let io_err = |source| Error::Io {
        name: path.display().to_string(),
        source,
    };
    let tmp = temp_sibling(path);
    std::fs::write(&tmp, data).map_err(io_err)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io_err(e)
    })
}

/// `dir/.name.tmp-<pid>-<nanos>`: unique per process and call, hidden from listings.
pub(crate) fn temp_sibling(path: &Path) -> PathBuf {
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{file_name}.{}", temp_suffix()))
}

pub(crate) fn temp_suffix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    // The counter keeps two threads of one process apart within one clock tick.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("tmp-{}-{nanos}-{n}", std::process::id())
}
