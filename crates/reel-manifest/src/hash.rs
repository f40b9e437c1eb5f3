//! The one stable hash of Reel's ids and digests.

/// FNV-1a 64 over `bytes`: stable across runs, platforms and Rust versions (unlike
/// `std`'s hashers), cheap, and good enough for ids that are also compared in full.
/// The warehouse stores [`episode_key`](crate::warehouse::episode_key)s made with it, so
/// it must never change.
pub fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::fnv1a;

    #[test]
    fn matches_the_published_fnv1a_vectors() {
        assert_eq!(fnv1a(*b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(*b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(*b"foobar"), 0x8594_4171_f739_67e8);
    }
}
