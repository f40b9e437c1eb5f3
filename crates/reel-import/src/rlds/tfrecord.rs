//! TFRecord framing, as TensorFlow writes it: each record is its length (`u64`, little
//! endian), the masked CRC-32C of those eight bytes, the record's bytes, and their masked
//! CRC-32C. Both checksums are checked; a shard that ends inside a record is an error
//! naming the shard and the record's offset, never a shorter dataset.

use bytes::Bytes;
use reel_io::{ByteSource, ErrorKind, Kinded};

use crate::{Error, Result};

/// Length, its checksum; the record's checksum follows the record.
const HEADER: u64 = 12;
const FOOTER: u64 = 4;
/// The largest record read: TFDS writes an episode per record (DROID's longest, three
/// cameras of JPEG pictures, are tens of MB); a length past this is a damaged header that
/// its checksum happened to pass, or a file that is not TFRecord at all.
const MAX_RECORD: u64 = 1 << 32;

const CRC32C: crc::Crc<u32, crc::Table<16>> =
    crc::Crc::<u32, crc::Table<16>>::new(&crc::CRC_32_ISCSI);

/// TFRecord's masked CRC-32C (rotated and offset, so a checksum of checksums is not zero).
pub(crate) fn masked_crc(data: &[u8]) -> u32 {
    let crc = CRC32C.checksum(data);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// Frames `data` as one TFRecord record, as TensorFlow's writer does.
#[cfg(test)]
fn frame(data: &[u8]) -> Vec<u8> {
    let length = (data.len() as u64).to_le_bytes();
    let mut out = Vec::with_capacity(data.len() + 16);
    out.extend_from_slice(&length);
    out.extend_from_slice(&masked_crc(&length).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&masked_crc(data).to_le_bytes());
    out
}

/// Where each record of a shard starts, found by stepping from header to header (each
/// length's checksum checked, the records' bytes not read): a shard's index, so that any
/// record is one read away.
#[derive(Debug, Default)]
pub(crate) struct ShardIndex {
    /// Offsets of the records before any damage.
    pub offsets: Vec<u64>,
    /// Their lengths, checked against their checksums.
    pub lengths: Vec<u64>,
    /// What stopped the walk early: the records after it cannot be found.
    pub damage: Option<Error>,
}

/// Walks the shard's headers. Store failures are errors; damage ends the walk and is kept
/// in [`ShardIndex::damage`], so the records before it still read.
pub(crate) fn record_offsets(source: &dyn ByteSource) -> Result<ShardIndex> {
    let len = source.len()?;
    let mut index = ShardIndex::default();
    let mut offset = 0;
    while offset < len {
        match record_length(source, offset, index.offsets.len(), len) {
            Ok(length) => {
                index.offsets.push(offset);
                index.lengths.push(length);
                offset += HEADER + length + FOOTER;
            }
            Err(e) if e.kind() == ErrorKind::BadInput => {
                index.damage = Some(e);
                break;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(index)
}

/// The record at `offset` of `length` bytes, as the shard's [`ShardIndex`] found it (the
/// `index`-th of its shard, for errors): one read, its checksum checked.
pub(crate) fn read_record(
    source: &dyn ByteSource,
    offset: u64,
    length: u64,
    index: usize,
) -> Result<Bytes> {
    let start = offset + HEADER;
    let framed = source.read_range(start..start + length + FOOTER)?;
    let (data, crc) = framed.split_at(length as usize);
    let crc = u32::from_le_bytes(crc.try_into().unwrap_or_default());
    if masked_crc(data) != crc {
        return Err(damaged(
            source,
            index,
            offset,
            "its checksum does not match (damaged)",
        ));
    }
    Ok(framed.slice(..length as usize))
}

fn damaged(source: &dyn ByteSource, index: usize, offset: u64, what: &str) -> Error {
    Error::dataset(
        source.name(),
        format!("record {index} at byte {offset}: {what}"),
    )
}

/// The length of the record at `offset`, its checksum checked and the record inside the
/// shard's `len` bytes.
fn record_length(source: &dyn ByteSource, offset: u64, index: usize, len: u64) -> Result<u64> {
    if len - offset < HEADER {
        return Err(damaged(
            source,
            index,
            offset,
            &format!(
                "the shard ends {} bytes into a record's header (truncated)",
                len - offset
            ),
        ));
    }
    let header = source.read_range(offset..offset + HEADER)?;
    let length = u64::from_le_bytes(header[..8].try_into().unwrap_or_default());
    let crc = u32::from_le_bytes(header[8..12].try_into().unwrap_or_default());
    if masked_crc(&header[..8]) != crc {
        return Err(damaged(
            source,
            index,
            offset,
            "its length's checksum does not match (not a TFRecord file, or damaged)",
        ));
    }
    if length > MAX_RECORD {
        return Err(damaged(
            source,
            index,
            offset,
            &format!("a record of {length} bytes"),
        ));
    }
    let after_header = len - offset - HEADER;
    if length + FOOTER > after_header {
        return Err(damaged(
            source,
            index,
            offset,
            &format!(
                "a record of {length} bytes, but the shard ends {after_header} bytes after its header (truncated)"
            ),
        ));
    }
    Ok(length)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reel_io::MemorySource;

    fn shard(records: &[&[u8]]) -> Vec<u8> {
        records.iter().flat_map(|r| frame(r)).collect()
    }

    fn read_all(bytes: Vec<u8>) -> Result<Vec<Bytes>> {
        let source = MemorySource::new("shard.tfrecord", bytes);
        let index = record_offsets(&source)?;
        if let Some(damage) = index.damage {
            return Err(damage);
        }
        index
            .offsets
            .iter()
            .zip(&index.lengths)
            .enumerate()
            .map(|(i, (&at, &length))| read_record(&source, at, length, i))
            .collect()
    }

    #[test]
    fn tensorflow_s_checksum_of_a_known_record() {
        // The bytes TensorFlow's TFRecordWriter writes for the record b"hello".
        let framed = frame(b"hello");
        assert_eq!(
            framed,
            [
                5, 0, 0, 0, 0, 0, 0, 0, 234, 178, 4, 62, b'h', b'e', b'l', b'l', b'o', 187, 31, 28,
                25
            ]
        );
    }

    #[test]
    fn records_read_back_in_order() {
        let big = vec![7u8; 3 << 20];
        let bytes = shard(&[b"one", &big, b"", b"three"]);
        let source = MemorySource::new("s", bytes.clone());
        assert_eq!(
            record_offsets(&source).expect("walks").offsets,
            [0, 19, 19 + 16 + (3 << 20), 19 + 16 + (3 << 20) + 16]
        );
        let got = read_all(bytes).expect("reads");
        assert_eq!(got.len(), 4);
        assert_eq!(&got[0][..], b"one");
        assert_eq!(got[1].len(), big.len());
        assert!(got[2].is_empty());
        assert_eq!(&got[3][..], b"three");
    }

    #[test]
    fn damage_is_an_error_naming_the_shard_and_record() {
        let good = shard(&[b"one", b"two"]);
        let truncated = good[..good.len() - 2].to_vec();
        let err = read_all(truncated).expect_err("truncated").to_string();
        assert!(
            err.contains("shard.tfrecord: record 1 at byte 19") && err.contains("truncated"),
            "{err}"
        );
        let mut flipped = good.clone();
        flipped[13] ^= 1;
        let err = read_all(flipped).expect_err("bad checksum").to_string();
        assert!(err.contains("record 0 at byte 0: its checksum"), "{err}");
        let mut length = good;
        length[0] ^= 1;
        let err = read_all(length).expect_err("bad length").to_string();
        assert!(err.contains("length's checksum"), "{err}");
        let err = read_all(b"not a tfrecord file at all".to_vec())
            .expect_err("not tfrecord")
            .to_string();
        assert!(err.contains("length's checksum"), "{err}");
    }
}
