//! A chunk's bytes: decompressed whole and checked against its CRC before any record in
//! it is read, then walked record by record. The readers here borrow from the bytes they
//! are given, so a message read from an uncompressed chunk is a slice of the read that
//! fetched it, never a copy.

use std::borrow::Cow;

use bytes::Bytes;
use mcap::records::{ChunkHeader, Record};

use crate::{Error, Result};

/// The most a chunk may hold uncompressed. A chunk header's claims are checked before
/// anything is allocated for it; real writers make chunks of a few MiB.
pub(crate) const MAX_CHUNK_BYTES: u64 = 1 << 30;

/// Reads the records of an MCAP file's data in order, handing each to `record`: a
/// chunk's records in its place (decompressed whole and checked against its CRC first), a
/// chunk that repeats an earlier one byte for byte (a writer or copy fault) skipped, so
/// its messages are not doubled. Returns how many chunks were skipped. A file that is not
/// MCAP is [`Error::Corrupt`], named by what it is when [`crate::not_mcap`] knows.
pub fn for_each_record(
    name: &str,
    bytes: &[u8],
    mut record: impl FnMut(Record<'_>) -> Result<()>,
) -> Result<u64> {
    let mcap_err = |source| Error::Mcap {
        name: name.to_owned(),
        source,
    };
    if let Some(reason) = crate::sniff::not_mcap(bytes) {
        return Err(Error::Corrupt {
            name: name.to_owned(),
            reason: reason.into(),
        });
    }
    let mut chunks_seen = ChunksSeen::default();
    let mut repeated = 0;
    for next in mcap::read::LinearReader::new(bytes).map_err(mcap_err)? {
        match next.map_err(mcap_err)? {
            Record::Chunk { header, data } => {
                if chunks_seen.repeats(&header, &data) {
                    repeated += 1;
                } else {
                    chunk_records(name, header, &data, &mut record)?;
                }
            }
            other => record(other)?,
        }
    }
    Ok(repeated)
}

/// Chunks already read from one file, so a chunk that repeats an earlier one byte for
/// byte (a writer or copy fault) is read once: its messages would otherwise be doubled.
#[derive(Debug, Default)]
struct ChunksSeen(std::collections::HashSet<(u64, u64, u64, u32, usize, u32)>);

impl ChunksSeen {
    /// Whether this chunk (header and compressed bytes) repeats one seen before; records it.
    fn repeats(&mut self, header: &ChunkHeader, data: &[u8]) -> bool {
        !self.0.insert((
            header.message_start_time,
            header.message_end_time,
            header.uncompressed_size,
            header.uncompressed_crc,
            data.len(),
            crc32fast::hash(data),
        ))
    }
}

/// Hands the records of a chunk to `record`, after [`uncompressed`] has checked it.
fn chunk_records(
    name: &str,
    header: ChunkHeader,
    data: &[u8],
    mut record: impl FnMut(Record<'_>) -> Result<()>,
) -> Result<()> {
    let records = uncompressed(name, &header, data)?;
    for next in mcap::read::LinearReader::sans_magic(&records) {
        record(next.map_err(|source| Error::Mcap {
            name: name.to_owned(),
            source,
        })?)?;
    }
    Ok(())
}

/// A chunk's records, decompressed (borrowed when the chunk is stored uncompressed). mcap's
/// own chunk reader allocates what a damaged header or record claims before it can check
/// the chunk's CRC (an exabyte allocation aborts the process), so the chunk is
/// decompressed whole here, bounded by its claimed size (at most [`MAX_CHUNK_BYTES`]), and
/// its CRC checked before anything reads its records.
pub(crate) fn uncompressed<'a>(
    name: &str,
    header: &ChunkHeader,
    data: &'a [u8],
) -> Result<Cow<'a, [u8]>> {
    let corrupt = |reason: String| Error::Corrupt {
        name: name.to_owned(),
        reason,
    };
    let claimed = header.uncompressed_size;
    if claimed > MAX_CHUNK_BYTES {
        return Err(corrupt(format!(
            "a chunk claims {claimed} bytes uncompressed, more than the {MAX_CHUNK_BYTES} Reel reads"
        )));
    }
    let records: Cow<'_, [u8]> = match header.compression.as_str() {
        "" => Cow::Borrowed(data),
        "zstd" => zstd::bulk::decompress(data, claimed as usize)
            .map_err(|e| corrupt(format!("a zstd chunk does not decompress: {e}")))?
            .into(),
        "lz4" => {
            use std::io::Read;
            let mut out = Vec::new();
            lz4::Decoder::new(data)
                .and_then(|d| d.take(claimed + 1).read_to_end(&mut out))
                .map_err(|e| corrupt(format!("an lz4 chunk does not decompress: {e}")))?;
            out.into()
        }
        other => {
            return Err(corrupt(format!(
                "a chunk compressed with {other:?}, which Reel does not read"
            )));
        }
    };
    if records.len() as u64 != claimed {
        return Err(corrupt(format!(
            "a chunk holds {} bytes uncompressed where its header says {claimed}",
            records.len()
        )));
    }
    if header.uncompressed_crc != 0 && crc32fast::hash(&records) != header.uncompressed_crc {
        return Err(corrupt("a chunk fails its CRC".into()));
    }
    Ok(records)
}

/// [`uncompressed`] as [`Bytes`]: a slice of `bytes` (which holds `data`) when the chunk is
/// stored uncompressed, so the messages read from it share that memory.
pub(crate) fn uncompressed_bytes(
    name: &str,
    header: &ChunkHeader,
    data: &[u8],
    bytes: &Bytes,
) -> Result<Bytes> {
    Ok(match uncompressed(name, header, data)? {
        Cow::Borrowed(records) => bytes.slice_ref(records),
        Cow::Owned(records) => Bytes::from(records),
    })
}

/// The records in `bytes` with opcode `opcode`, parsed by mcap's record parser; the
/// others are stepped over unparsed. Borrowed like [`RecordSlices`].
pub(crate) fn parsed_records<'a>(
    name: &'a str,
    bytes: &'a [u8],
    opcode: u8,
) -> impl Iterator<Item = Result<Record<'a>>> + 'a {
    RecordSlices::new(name, bytes).filter_map(move |record| match record {
        Ok((op, body)) if op == opcode => {
            Some(mcap::parse_record(op, body).map_err(|source| Error::Mcap {
                name: name.to_owned(),
                source,
            }))
        }
        Ok(_) => None,
        Err(err) => Some(Err(err)),
    })
}

/// The records in `bytes` (no magic), each as its opcode and body, borrowed: each record's
/// length is checked against what is left before its body is taken.
pub(crate) struct RecordSlices<'a> {
    name: &'a str,
    rest: &'a [u8],
}

impl<'a> RecordSlices<'a> {
    pub(crate) fn new(name: &'a str, bytes: &'a [u8]) -> Self {
        Self { name, rest: bytes }
    }
}

impl<'a> Iterator for RecordSlices<'a> {
    type Item = Result<(u8, &'a [u8])>;

    fn next(&mut self) -> Option<Self::Item> {
        let (&opcode, after) = self.rest.split_first()?;
        let body = after.get(..8).and_then(|len| {
            let len = u64::from_le_bytes(len.try_into().ok()?);
            let len = usize::try_from(len).ok()?;
            after[8..].get(..len)
        });
        match body {
            Some(body) => {
                self.rest = &after[8 + body.len()..];
                Some(Ok((opcode, body)))
            }
            None => {
                let left = self.rest.len();
                self.rest = &[];
                Some(Err(Error::Corrupt {
                    name: self.name.to_owned(),
                    reason: format!(
                        "a record (opcode {opcode:#04x}) runs past the {left} bytes left of its read"
                    ),
                }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(opcode: u8, body: &[u8]) -> Vec<u8> {
        let mut out = vec![opcode];
        out.extend_from_slice(&(body.len() as u64).to_le_bytes());
        out.extend_from_slice(body);
        out
    }

    #[test]
    fn record_slices_borrow_each_body_and_stop_at_a_record_that_runs_past_the_end() {
        let mut bytes = record(0x05, b"hello");
        bytes.extend(record(0x06, b""));
        let walked: Vec<(u8, &[u8])> = RecordSlices::new("t.mcap", &bytes)
            .collect::<Result<_>>()
            .expect("two whole records");
        assert_eq!(walked, [(0x05, &b"hello"[..]), (0x06, &b""[..])]);
        assert_eq!(walked[0].1.as_ptr(), bytes[9..].as_ptr());

        let mut cut = record(0x05, b"hello");
        cut.truncate(cut.len() - 1);
        let err = RecordSlices::new("t.mcap", &cut)
            .next()
            .expect("one item")
            .expect_err("the body is one byte short");
        assert!(err.to_string().contains("t.mcap"), "{err}");
        // A length too large for memory is the same error, not an allocation.
        let mut huge = vec![0x05];
        huge.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(
            RecordSlices::new("t.mcap", &huge)
                .next()
                .expect("one item")
                .is_err()
        );
        // A lone opcode byte with no length.
        assert!(
            RecordSlices::new("t.mcap", &[0x05])
                .next()
                .expect("one item")
                .is_err()
        );
    }
}
