//! Opening an episode: the footer and summary from the file's tail, then the metadata
//! records; or, for a file without a summary, one whole-file read and a linear scan.

use std::collections::{BTreeMap, HashMap};
use std::io::SeekFrom;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use bytes::Bytes;
use mcap::Channel;
use mcap::MAGIC;
use mcap::records::Record;
use mcap::sans_io::summary_reader::{SummaryReadEvent, SummaryReader, SummaryReaderOptions};
use reel_io::ByteSource;

use super::{EpisodeReader, Index, RawMessage};
use crate::records::ChannelInfo;
use crate::{Error, Result};

/// Bytes read from the end of the file first: the footer, and on canonical episodes the
/// whole summary and the metadata records in front of it.
const TAIL_READ: u64 = 64 * 1024;
/// Extra bytes read in front of the summary when it did not fit the tail read, to pick up
/// the metadata records a canonical writer places there.
const METADATA_MARGIN: u64 = 64 * 1024;
/// Footer record (opcode, length, summary start, summary offset start, CRC) and end magic.
const FOOTER_AND_MAGIC: u64 = 1 + 8 + 8 + 8 + 4 + 8;

/// A view of the file's tail, serving the summary reader's reads from memory and falling
/// back to the source for anything outside it.
struct Tail<'a, S> {
    source: &'a S,
    start: u64,
    bytes: Bytes,
}

impl<S: ByteSource> Tail<'_, S> {
    fn get(&self, range: Range<u64>) -> Result<Bytes> {
        if range.start >= self.start && range.end <= self.start + self.bytes.len() as u64 {
            let s = (range.start - self.start) as usize;
            let e = (range.end - self.start) as usize;
            Ok(self.bytes.slice(s..e))
        } else {
            Ok(self.source.read_range(range)?)
        }
    }

    /// The whole file, when the tail read already holds it (a small file).
    fn whole(&self, len: u64) -> Option<Bytes> {
        (self.start == 0 && self.bytes.len() as u64 == len).then(|| self.bytes.clone())
    }
}

impl<S: ByteSource> EpisodeReader<S> {
    /// Opens an episode: reads the summary (at most two ranged reads on canonical files),
    /// falling back to one full read and a linear scan, with a warning, when the file has
    /// no summary.
    pub fn open(source: S) -> Result<Self> {
        let name = source.name().to_owned();
        let mcap_err = |source| Error::Mcap {
            name: name.clone(),
            source,
        };
        let len = source.len()?;
        if len < (MAGIC.len() as u64) + FOOTER_AND_MAGIC {
            return Err(Error::Truncated { name, len });
        }
        let tail_start = len.saturating_sub(TAIL_READ);
        let mut tail = Tail {
            source: &source,
            start: tail_start,
            bytes: source.read_range(tail_start..len)?,
        };
        let end = tail
            .bytes
            .len()
            .checked_sub(FOOTER_AND_MAGIC as usize)
            .and_then(|at| tail.bytes.get(at..))
            .ok_or(Error::Truncated {
                name: name.clone(),
                len,
            })?;
        if &end[FOOTER_AND_MAGIC as usize - 8..] != MAGIC || end[0] != 0x02 {
            let head = source.read_range(0..len.min(16))?;
            if let Some(reason) = crate::sniff::not_mcap(&head) {
                return Err(Error::Corrupt {
                    name,
                    reason: reason.into(),
                });
            }
            return Err(Error::Truncated { name, len });
        }
        let summary_start = le_u64(&end[9..17]);
        let summary_crc = u32::from_le_bytes([end[25], end[26], end[27], end[28]]);
        if summary_start == 0 {
            let whole = tail.whole(len);
            return Self::open_scanned(source, name, "no summary section".into(), whole);
        }
        if summary_start >= len {
            return Err(Error::Corrupt {
                name,
                reason: format!("footer points past the end ({summary_start})"),
            });
        }
        if summary_start < tail.start {
            // One more read: the summary, plus the metadata records just in front of it.
            let from = summary_start.saturating_sub(METADATA_MARGIN);
            let front = source.read_range(from..tail.start)?;
            let mut joined = Vec::with_capacity(front.len() + tail.bytes.len());
            joined.extend_from_slice(&front);
            joined.extend_from_slice(&tail.bytes);
            tail = Tail {
                source: &source,
                start: from,
                bytes: Bytes::from(joined),
            };
        }

        // The checks the MCAP format gives: a summary whose CRC does not match, or a file
        // whose leading magic is wrong (checked when its start is in hand), is not trusted;
        // a linear scan reads what the file really holds (and fails on a bad magic).
        let crc_end = len - 12; // up to and including the footer's summary_offset_start
        if summary_crc != 0 {
            let computed = crc32fast::hash(&tail.get(summary_start..crc_end)?);
            if computed != summary_crc {
                let whole = tail.whole(len);
                return Self::open_scanned(
                    source,
                    name,
                    format!("summary CRC {computed:#010x} is not the footer's {summary_crc:#010x}"),
                    whole,
                );
            }
        }
        if tail.start == 0 && tail.bytes.get(..MAGIC.len()) != Some(MAGIC) {
            let whole = tail.whole(len);
            return Self::open_scanned(source, name, "no MCAP magic at the start".into(), whole);
        }

        let mut reader = SummaryReader::new_with_options(
            SummaryReaderOptions::default()
                .with_file_size(len)
                .with_record_length_limit(len as usize),
        );
        let mut pos = 0u64;
        while let Some(event) = reader.next_event() {
            match event.map_err(mcap_err)? {
                SummaryReadEvent::SeekRequest(to) => {
                    pos = match to {
                        SeekFrom::Start(p) => p,
                        SeekFrom::End(d) => len.saturating_add_signed(d),
                        SeekFrom::Current(d) => pos.saturating_add_signed(d),
                    };
                    reader.notify_seeked(pos);
                }
                SummaryReadEvent::ReadRequest(need) => {
                    let end = (pos + need as u64).min(len);
                    let bytes = tail.get(pos..end)?;
                    reader.insert(bytes.len()).copy_from_slice(&bytes);
                    reader.notify_read(bytes.len());
                    pos = end;
                }
            }
        }
        let Some(summary) = reader.finish() else {
            let whole = tail.whole(len);
            return Self::open_scanned(source, name, "no summary section".into(), whole);
        };

        let mut metadata = BTreeMap::new();
        for index in &summary.metadata_indexes {
            let bytes = tail.get(index.offset..index.offset + index.length)?;
            match mcap::parse_record(
                bytes.first().copied().unwrap_or(0),
                bytes.get(9..).unwrap_or_default(),
            ) {
                Ok(Record::Metadata(m)) => {
                    metadata.insert(m.name, m.metadata);
                }
                Ok(_) => {
                    return Err(Error::Corrupt {
                        name,
                        reason: format!("metadata index {} points at another record", index.name),
                    });
                }
                Err(source) => return Err(Error::Mcap { name, source }),
            }
        }
        let (topics, topic_names) = topic_maps(&summary.channels);
        let groups = groups_of(summary.channels.values());
        Ok(Self {
            source,
            name,
            index: Index::Summary(summary),
            topics,
            topic_names,
            metadata,
            groups,
            warnings: Vec::new(),
            chunks_read: AtomicU64::new(0),
            frames_decoded: AtomicU64::new(0),
        })
    }

    /// Reads the whole file (unless `in_hand` is already all of it) and scans it, because its summary is absent or not to be
    /// trusted (`why`, kept as a warning). A chunk that repeats an earlier one byte for
    /// byte is read once.
    fn open_scanned(source: S, name: String, why: String, in_hand: Option<Bytes>) -> Result<Self> {
        let len = source.len()?;
        let bytes = match in_hand {
            Some(bytes) => bytes,
            None => source.read_range(0..len)?,
        };
        let mut scan = Scan::default();
        crate::chunk::for_each_record(&name, &bytes, |record| {
            scan.record(record);
            Ok(())
        })?;
        let Scan {
            channels,
            mut messages,
            metadata,
            ..
        } = scan;
        messages.sort_by_key(|(_, m)| m.log_time);
        let (topics, topic_names) = topic_maps(&channels);
        let groups = groups_of(channels.values());
        let warnings = vec![format!(
            "{name}: {why}; scanned the whole file ({len} bytes) instead"
        )];
        Ok(Self {
            source,
            name,
            index: Index::Scanned { channels, messages },
            topics,
            topic_names,
            metadata,
            groups,
            warnings,
            chunks_read: AtomicU64::new(0),
            frames_decoded: AtomicU64::new(0),
        })
    }
}

/// A little-endian u64 from the first eight bytes (zero-padded if fewer).
pub(crate) fn le_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    let n = b.len().min(8);
    a[..n].copy_from_slice(&b[..n]);
    u64::from_le_bytes(a)
}

/// Channel ids by topic, and each channel's topic as the one string its messages share.
fn topic_maps(
    channels: &HashMap<u16, Arc<Channel<'static>>>,
) -> (HashMap<String, u16>, HashMap<u16, Arc<str>>) {
    let by_topic = channels
        .iter()
        .map(|(id, c)| (c.topic.clone(), *id))
        .collect();
    let names = channels
        .iter()
        .map(|(id, c)| (*id, Arc::from(c.topic.as_str())))
        .collect();
    (by_topic, names)
}

/// Topic groups (from the channels' `reel.group`), each with its topics sorted.
fn groups_of<'a>(
    channels: impl Iterator<Item = &'a Arc<Channel<'static>>>,
) -> BTreeMap<String, Vec<String>> {
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for c in channels {
        if let Some(g) = ChannelInfo::group_of(&c.metadata) {
            groups
                .entry(g.to_owned())
                .or_default()
                .push(c.topic.clone());
        }
    }
    for topics in groups.values_mut() {
        topics.sort();
    }
    groups
}

/// What a linear scan of a file without a summary collects.
#[derive(Default)]
struct Scan {
    schemas: HashMap<u16, Arc<mcap::Schema<'static>>>,
    channels: HashMap<u16, Arc<Channel<'static>>>,
    topics: HashMap<u16, Arc<str>>,
    messages: Vec<(u16, RawMessage)>,
    metadata: BTreeMap<String, BTreeMap<String, String>>,
}

impl Scan {
    fn record(&mut self, record: Record<'_>) {
        match record {
            Record::Schema { header, data } => {
                self.schemas.insert(
                    header.id,
                    Arc::new(mcap::Schema {
                        id: header.id,
                        name: header.name,
                        encoding: header.encoding,
                        data: std::borrow::Cow::Owned(data.into_owned()),
                    }),
                );
            }
            Record::Channel(c) => {
                self.topics.insert(c.id, Arc::from(c.topic.as_str()));
                self.channels.insert(
                    c.id,
                    Arc::new(Channel {
                        id: c.id,
                        topic: c.topic,
                        // A channel names its schema by id; the schema record comes first.
                        schema: self.schemas.get(&c.schema_id).cloned(),
                        message_encoding: c.message_encoding,
                        metadata: c.metadata,
                    }),
                );
            }
            Record::Message { header, data } => {
                // A message before its channel record cannot be attributed; skipped.
                if let Some(topic) = self.topics.get(&header.channel_id) {
                    self.messages.push((
                        header.channel_id,
                        RawMessage {
                            topic: topic.clone(),
                            log_time: header.log_time,
                            publish_time: header.publish_time,
                            data: Bytes::copy_from_slice(&data),
                        },
                    ));
                }
            }
            Record::Metadata(m) => {
                self.metadata.insert(m.name, m.metadata);
            }
            _ => {}
        }
    }
}
