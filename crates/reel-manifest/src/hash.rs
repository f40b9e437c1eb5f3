//! The one stable hash of Reel's ids and digests, and the content hash a manifest carries.

use std::io::Write;

use twox_hash::{XxHash3_64, XxHash3_128};

/// FNV-1a 64 over `bytes`: stable across runs, platforms and Rust versions (unlike
/// `std`'s hashers), cheap, and good enough for ids that are also compared in full.
/// The warehouse's episode keys (`reel_warehouse::episodes::episode_key`) are made with
/// it, so it must never change.
pub fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The digest of a canonical object's bytes (XXH3, 64 bits): written at ingest into its
/// warehouse row and from there into each manifest row, so that what a run read can be
/// told from what a store holds under the same name later. Never 0 (0 means none).
pub fn object_digest(bytes: &[u8]) -> u64 {
    parts_digest([bytes])
}

/// [`object_digest`] of the concatenation of `parts` (the files of one recording, in
/// order), without joining them.
pub fn parts_digest<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> u64 {
    use std::hash::Hasher;
    let mut hasher = XxHash3_64::default();
    for part in parts {
        hasher.write(part);
    }
    hasher.finish().max(1)
}

/// An object digest as text: `xxh3_64:` and 16 hex digits.
pub fn digest_text(digest: u64) -> String {
    format!("xxh3_64:{digest:016x}")
}

/// The content hash of a manifest's bytes as text: `xxh3_128:` and 32 hex digits.
pub(crate) fn content_hash_text(hash: u128) -> String {
    format!("xxh3_128:{hash:032x}")
}

/// The content hash of `bytes`, as [`content_hash_text`] writes it.
pub(crate) fn content_hash_of(bytes: &[u8]) -> String {
    content_hash_text(XxHash3_128::oneshot(bytes))
}

/// Passes writes through to `inner` and hashes every byte on the way: the manifest
/// writer's hash of what it wrote, with no second read of the file.
pub(crate) struct Hashing<W> {
    inner: W,
    hasher: XxHash3_128,
}

impl<W: Write> Hashing<W> {
    pub(crate) fn new(inner: W) -> Self {
        Self {
            inner,
            hasher: XxHash3_128::new(),
        }
    }

    /// The hash of every byte written so far.
    pub(crate) fn hash(&self) -> u128 {
        self.hasher.finish_128()
    }

    pub(crate) fn into_inner(self) -> W {
        self.inner
    }
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.write(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_writer_hashes_what_passes_through_it() {
        let mut w = Hashing::new(Vec::new());
        w.write_all(b"reel ").expect("writes");
        w.write_all(b"manifest").expect("writes");
        assert_eq!(
            content_hash_text(w.hash()),
            content_hash_of(b"reel manifest")
        );
        assert_eq!(w.into_inner(), b"reel manifest");
    }

    #[test]
    fn matches_the_published_fnv1a_vectors() {
        assert_eq!(fnv1a(*b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(*b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(*b"foobar"), 0x8594_4171_f739_67e8);
    }
}
