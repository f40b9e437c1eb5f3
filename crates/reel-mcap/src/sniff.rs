//! What a file that is not MCAP is instead, when its first bytes say so: an error that
//! names the format is worth more than "bad magic".

/// The header every SQLite database starts with (a rosbag2 `.db3` file).
const SQLITE_HEADER: &[u8] = b"SQLite format 3\0";

/// Why bytes starting with `head` are not MCAP, when they are a format Reel knows of.
pub fn not_mcap(head: &[u8]) -> Option<&'static str> {
    head.starts_with(SQLITE_HEADER).then_some(
        "an SQLite database (a rosbag2 .db3 file), not MCAP: name the bag's folder, its \
         metadata.yaml or one of its .db3 files with the metadata.yaml beside it",
    )
}

#[cfg(test)]
mod tests {
    use super::not_mcap;

    #[test]
    fn sqlite_is_named_and_mcap_is_not_flagged() {
        assert!(not_mcap(b"SQLite format 3\0\x10\x00").is_some());
        assert!(not_mcap(b"\x89MCAP0\r\n").is_none());
        assert!(not_mcap(b"").is_none());
    }
}
