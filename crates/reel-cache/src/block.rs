//! The on-disk block file: a checksummed header, then the block's bytes.
//!
//! ```text
//! magic          8 bytes  "REELBLK2"
//! object         u128 LE  the object's identity (URI, version, block size hashed)
//! block          u64 LE   the block's index in the object
//! payload_len    u64 LE   bytes of object data in this block
//! page_size      u32 LE   bytes covered by each page checksum
//! pages          u32 LE   number of page checksums
//! page checksums pages × u64 LE (xxh3-64 of each page)
//! header check   u64 LE   xxh3-64 of everything above
//! payload        payload_len bytes
//! ```
//!
//! Checksums are per page (64 KiB by default) rather than per block so that a small read
//! in a 4 MiB block verifies only the pages it touches, not the whole block. An open
//! [`BlockFile`] remembers the pages it verified, so rereading them through the same
//! handle costs no hashing (see [`BlockFile::is_current`] for when a handle is retired). A block file
//! is always written whole under a temporary name and renamed into place, so a reader
//! sees either no file or a complete one; the checksums catch what rename cannot: bit rot,
//! a file truncated by a power loss before its data reached the disk, or a stray write.
//! The header names the object and block it holds, so a block file copied or renamed to
//! another block's path (a block of another object of the same size, say) is refused
//! rather than served as that block.

use std::fs::File;
use std::io::Write;
use std::ops::Range;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use twox_hash::XxHash3_64;

/// A block of one object version: (object id, block index). The header of its file
/// records both, so a file at another block's path is refused.
pub(crate) type BlockId = (u128, u64);

const MAGIC: &[u8; 8] = b"REELBLK2";
const FIXED_HEADER: usize = 8 + 16 + 8 + 8 + 4 + 4;
/// Bytes read per `pread` on a hit: small enough to stay in a core's L2 cache until its
/// checksums are checked.
const READ_PIECE: u64 = 256 << 10;

/// Length of the header of a block holding `payload_len` bytes.
pub(crate) fn header_len(payload_len: u64, page_size: u32) -> u64 {
    FIXED_HEADER as u64 + 8 * pages(payload_len, page_size) + 8
}

fn pages(payload_len: u64, page_size: u32) -> u64 {
    payload_len.div_ceil(u64::from(page_size))
}

/// Total file size of a block holding `payload_len` bytes.
pub(crate) fn file_len(payload_len: u64, page_size: u32) -> u64 {
    header_len(payload_len, page_size) + payload_len
}

/// Why a block file cannot be served. Every variant means "drop it and fetch again".
#[derive(Debug, thiserror::Error)]
pub(crate) enum BlockFault {
    #[error("block file is missing")]
    Missing,
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("block file is corrupt: {0}")]
    Corrupt(&'static str),
}

/// The serialized header for `payload`, block `block` (object identity, index).
pub(crate) fn encode_header(payload: &[u8], page_size: u32, block: BlockId) -> Vec<u8> {
    let payload_len = payload.len() as u64;
    let mut header = Vec::with_capacity(header_len(payload_len, page_size) as usize);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&block.0.to_le_bytes());
    header.extend_from_slice(&block.1.to_le_bytes());
    header.extend_from_slice(&payload_len.to_le_bytes());
    header.extend_from_slice(&page_size.to_le_bytes());
    header.extend_from_slice(&(pages(payload_len, page_size) as u32).to_le_bytes());
    for page in payload.chunks(page_size as usize) {
        header.extend_from_slice(&XxHash3_64::oneshot(page).to_le_bytes());
    }
    let check = XxHash3_64::oneshot(&header);
    header.extend_from_slice(&check.to_le_bytes());
    header
}

/// Names for block files while they are written. Every process sharing the folders
/// writes blocks beside their final path, so each name carries a per-process nonce and a
/// counter: two writers of the same block never write to the same file.
#[derive(Debug)]
pub(crate) struct TempNames {
    nonce: u64,
    counter: AtomicU64,
}

impl TempNames {
    pub(crate) fn new() -> Self {
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        Self {
            nonce: XxHash3_64::oneshot(format!("{}-{nanos}", std::process::id()).as_bytes()),
            counter: AtomicU64::new(0),
        }
    }

    /// A fresh hidden name beside `dest`, ending in `.tmp`: what eviction removes as a
    /// crashed writer's leftover once it is old.
    pub(crate) fn beside(&self, dest: &Path) -> PathBuf {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let file = dest
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        dest.with_file_name(format!(
            ".{file}.{:x}-{}-{n}.tmp",
            self.nonce,
            std::process::id()
        ))
    }
}

/// Writes a complete block file to `tmp` (which must not exist yet) and renames it to
/// `dest`. The temporary file is removed on any failure.
pub(crate) fn write_block(
    dest: &Path,
    tmp: &Path,
    payload: &[u8],
    page_size: u32,
    block: BlockId,
) -> std::io::Result<()> {
    let header = encode_header(payload, page_size, block);
    let result = (|| {
        let mut file = File::options().write(true).create_new(true).open(tmp)?;
        file.write_all(&header)?;
        file.write_all(payload)?;
        // No fsync: a block lost or truncated by a power cut fails its checksum and is
        // fetched again, which is cheaper than syncing every block of a cache.
        drop(file);
        std::fs::rename(tmp, dest)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(tmp);
    }
    result
}

/// How long pages verified through one open handle are trusted. After this the handle is
/// reopened and each page is hashed again on its next read, so a page that rots on disk
/// after it was verified is served for at most this long.
pub(crate) const VERIFIED_TRUST: Duration = Duration::from_secs(60);

/// An opened block file whose header has been checked.
///
/// A handle remembers which pages it has verified: block files are immutable once
/// renamed into place, so a page that matched its checksum through this handle is read
/// without hashing it again while [`BlockFile::is_current`] holds and for at most
/// [`VERIFIED_TRUST`].
#[derive(Debug)]
pub(crate) struct BlockFile {
    file: File,
    header: Vec<u8>,
    payload_len: u64,
    page_size: u32,
    /// Bit `p` is set once page `p` has matched its checksum through this handle.
    verified: Box<[AtomicU64]>,
    /// The file's device and inode, to tell it from a file later renamed over its path.
    dev: u64,
    ino: u64,
    /// The file's modification time (nanoseconds since the epoch) as this handle last saw
    /// or set it; it is also the cache's last-use clock.
    mtime_ns: AtomicI64,
    opened: Instant,
}

impl BlockFile {
    /// Opens `path` and checks that it is a complete block of `payload_len` bytes, and
    /// that it is block `block` (object identity, index).
    pub(crate) fn open(
        path: &Path,
        payload_len: u64,
        page_size: u32,
        block: BlockId,
    ) -> Result<Self, BlockFault> {
        let file = match File::open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(BlockFault::Missing),
            Err(e) => return Err(e.into()),
        };
        let meta = file.metadata()?;
        if meta.len() != file_len(payload_len, page_size) {
            return Err(BlockFault::Corrupt("wrong file length"));
        }
        let mut header = vec![0u8; header_len(payload_len, page_size) as usize];
        read_exact_at(&file, &mut header, 0)?;
        let (body, check) = header.split_at(header.len() - 8);
        if &body[..8] != MAGIC {
            return Err(BlockFault::Corrupt("bad magic"));
        }
        if XxHash3_64::oneshot(body).to_le_bytes() != check {
            return Err(BlockFault::Corrupt("header checksum mismatch"));
        }
        if body[8..24] != block.0.to_le_bytes() || body[24..32] != block.1.to_le_bytes() {
            return Err(BlockFault::Corrupt("block of another object or offset"));
        }
        if body[32..40] != payload_len.to_le_bytes() || body[40..44] != page_size.to_le_bytes() {
            return Err(BlockFault::Corrupt("header does not match the object"));
        }
        let words = pages(payload_len, page_size).div_ceil(64) as usize;
        Ok(Self {
            file,
            header,
            payload_len,
            page_size,
            verified: (0..words).map(|_| AtomicU64::new(0)).collect(),
            dev: meta.dev(),
            ino: meta.ino(),
            mtime_ns: AtomicI64::new(mtime_ns(&meta)),
            opened: Instant::now(),
        })
    }

    /// Whether this handle may still serve reads: its pages were verified recently
    /// enough, and its path still names this very file, unmodified. A block evicted,
    /// dropped or replaced by any process was unlinked (a rename over a path unlinks the
    /// file it replaces), so its link count is zero; a write in place changes its
    /// modification time. One `fstat`, no path lookup.
    pub(crate) fn is_current(&self) -> bool {
        if self.opened.elapsed() > VERIFIED_TRUST {
            return false;
        }
        match self.file.metadata() {
            Ok(meta) => {
                meta.nlink() > 0
                    && meta.len() == file_len(self.payload_len, self.page_size)
                    && mtime_ns(&meta) == self.mtime_ns.load(Ordering::Relaxed)
            }
            Err(_) => false,
        }
    }

    /// Whether `path` names this very file (same device and inode).
    pub(crate) fn is_at(&self, path: &Path) -> bool {
        std::fs::metadata(path).is_ok_and(|m| m.dev() == self.dev && m.ino() == self.ino)
    }

    /// Refreshes the block's last-use time if it is older than `interval`: best effort, a
    /// block we cannot touch is merely evicted sooner.
    pub(crate) fn touch_if_older_than(&self, interval: Duration) {
        let now = SystemTime::now();
        let now_ns = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
        let age_ns = now_ns.saturating_sub(self.mtime_ns.load(Ordering::Relaxed));
        if u128::try_from(age_ns).is_ok_and(|age| age <= interval.as_nanos()) {
            return;
        }
        if self.file.set_modified(now).is_ok()
            && let Ok(meta) = self.file.metadata()
        {
            // What the file system stored (it may round), so `is_current` still holds.
            self.mtime_ns.store(mtime_ns(&meta), Ordering::Relaxed);
        }
    }

    /// The payload bytes in `range`, after checking every page the range touches.
    #[cfg(test)]
    pub(crate) fn read(&self, range: Range<u64>) -> Result<bytes::Bytes, BlockFault> {
        let mut out = vec![0u8; (range.end - range.start) as usize];
        self.read_into(range, &mut out)?;
        Ok(bytes::Bytes::from(out))
    }

    /// Reads payload `range` into `out` (of the same length), checking every page the
    /// range touches that this handle has not verified yet.
    ///
    /// When every page is verified the read is one `pread` straight into `out`, exactly
    /// like a plain file read. Otherwise pages wholly inside the range are read straight
    /// into `out` and hashed there; only the partly wanted pages at its ends go through
    /// a scratch buffer, so a read costs one copy plus the checksums.
    pub(crate) fn read_into(&self, range: Range<u64>, out: &mut [u8]) -> Result<(), BlockFault> {
        debug_assert_eq!(out.len() as u64, range.end - range.start);
        if range.start >= range.end {
            return Ok(());
        }
        if range.end > self.payload_len {
            return Err(BlockFault::Corrupt("read past the end of the block"));
        }
        let page = u64::from(self.page_size);
        let last_page = (range.end - 1) / page;
        let first_page = range.start / page;
        let data_offset = self.header.len() as u64;
        if (first_page..=last_page).all(|p| self.is_verified(p)) {
            return read_exact_at(&self.file, out, data_offset + range.start);
        }
        self.read_checked(range, out, false)
    }

    /// Reads `range` into `out` a few pages at a time, hashing each page that is not yet
    /// verified (every page with `recheck`) and marking it verified.
    fn read_checked(
        &self,
        range: Range<u64>,
        out: &mut [u8],
        recheck: bool,
    ) -> Result<(), BlockFault> {
        let page = u64::from(self.page_size);
        let data_offset = self.header.len() as u64;
        let span_of = |p: u64| p * page..((p + 1) * page).min(self.payload_len);
        let last_page = (range.end - 1) / page;
        let mut p = range.start / page;
        while p <= last_page {
            let span = span_of(p);
            if span.start >= range.start && span.end <= range.end {
                let mut q = p;
                while q < last_page && span_of(q + 1).end <= range.end {
                    q += 1;
                }
                // Read a few pages at a time and check them while they are still in the
                // CPU cache: checksumming a 4 MiB buffer after reading it all would fetch
                // it from memory a second time.
                let pages_per_read = (READ_PIECE / page).max(1);
                while p <= q {
                    let last = (p + pages_per_read - 1).min(q);
                    let run = span_of(p).start..span_of(last).end;
                    let dst = &mut out
                        [(run.start - range.start) as usize..(run.end - range.start) as usize];
                    read_exact_at(&self.file, dst, data_offset + run.start)?;
                    for (i, data) in dst.chunks(self.page_size as usize).enumerate() {
                        let index = p + i as u64;
                        if recheck || !self.is_verified(index) {
                            self.check_page(index, data)?;
                        }
                    }
                    p = last + 1;
                }
            } else {
                let (a, b) = (range.start.max(span.start), range.end.min(span.end));
                let dst = &mut out[(a - range.start) as usize..(b - range.start) as usize];
                if !recheck && self.is_verified(p) {
                    read_exact_at(&self.file, dst, data_offset + a)?;
                } else {
                    let mut scratch = vec![0u8; (span.end - span.start) as usize];
                    read_exact_at(&self.file, &mut scratch, data_offset + span.start)?;
                    self.check_page(p, &scratch)?;
                    dst.copy_from_slice(
                        &scratch[(a - span.start) as usize..(b - span.start) as usize],
                    );
                }
                p += 1;
            }
        }
        Ok(())
    }

    fn is_verified(&self, index: u64) -> bool {
        self.verified[(index / 64) as usize].load(Ordering::Relaxed) & (1 << (index % 64)) != 0
    }

    /// Checks page `index` against its checksum and marks it verified.
    fn check_page(&self, index: u64, data: &[u8]) -> Result<(), BlockFault> {
        let at = FIXED_HEADER + 8 * index as usize;
        if self.header[at..at + 8] == XxHash3_64::oneshot(data).to_le_bytes() {
            self.verified[(index / 64) as usize].fetch_or(1 << (index % 64), Ordering::Relaxed);
            Ok(())
        } else {
            Err(BlockFault::Corrupt("page checksum mismatch"))
        }
    }

    /// Reads and checks the whole payload, every page, whatever this handle verified
    /// before (used by `--verify`).
    pub(crate) fn verify_all(&self) -> Result<(), BlockFault> {
        if self.payload_len == 0 {
            return Ok(());
        }
        let mut out = vec![0u8; self.payload_len as usize];
        self.read_checked(0..self.payload_len, &mut out, true)
    }
}

/// A file's modification time in nanoseconds since the epoch.
fn mtime_ns(meta: &std::fs::Metadata) -> i64 {
    meta.mtime()
        .saturating_mul(1_000_000_000)
        .saturating_add(meta.mtime_nsec())
}

fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> Result<(), BlockFault> {
    file.read_exact_at(buf, offset).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            BlockFault::Corrupt("file shorter than its header says")
        } else {
            BlockFault::Io(e)
        }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const KEY: BlockId = (0x0123_4567_89ab_cdef_0011_2233_4455_6677, 3);

    #[test]
    fn round_trip_and_every_flipped_byte_is_caught() {
        let dir = tempfile::tempdir().unwrap();
        let payload: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 253) as u8).collect();
        let path = dir.path().join("0.blk");
        write_block(&path, &dir.path().join(".0.tmp"), &payload, 1024, KEY).unwrap();
        let block = BlockFile::open(&path, payload.len() as u64, 1024, KEY).unwrap();
        assert_eq!(&block.read(1000..5000).unwrap()[..], &payload[1000..5000]);
        assert_eq!(&block.read(9999..10_000).unwrap()[..], &payload[9999..]);
        for (a, b) in [
            (0, 1024),
            (1, 1023),
            (1023, 1025),
            (1024, 4096),
            (500, 9000),
            (0, 10_000),
            (7, 7),
        ] {
            assert_eq!(
                &block.read(a..b).unwrap()[..],
                &payload[a as usize..b as usize],
                "{a}..{b}"
            );
        }
        block.verify_all().unwrap();
        // Wrong expectations about the object are caught by the header.
        assert!(BlockFile::open(&path, 9_999, 1024, KEY).is_err());
        // So is the same bytes taken for another object's block, or another offset.
        for other in [(KEY.0 ^ 1, KEY.1), (KEY.0, KEY.1 + 1)] {
            let fault = BlockFile::open(&path, payload.len() as u64, 1024, other);
            assert!(
                matches!(
                    fault,
                    Err(BlockFault::Corrupt("block of another object or offset"))
                ),
                "{fault:?}"
            );
        }

        let pristine = std::fs::read(&path).unwrap();
        for at in [0, 9, 30, 100, 200, pristine.len() - 1] {
            let mut bad = pristine.clone();
            bad[at] ^= 0x40;
            std::fs::write(&path, &bad).unwrap();
            let fault = BlockFile::open(&path, payload.len() as u64, 1024, KEY)
                .and_then(|b| b.verify_all());
            assert!(matches!(fault, Err(BlockFault::Corrupt(_))), "byte {at}");
        }
        std::fs::write(&path, &pristine[..pristine.len() - 1]).unwrap();
        let fault = BlockFile::open(&path, payload.len() as u64, 1024, KEY);
        assert!(matches!(fault, Err(BlockFault::Corrupt(_))));
    }
}
