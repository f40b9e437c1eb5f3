//! Fetching: each planned run of chunks is one ranged read; each chunk in it is checked
//! (size, CRC) and its records parsed with mcap's record parser; the messages a read asked
//! for are handed out as slices of the bytes read, never copied.

use std::borrow::Cow;
use std::collections::HashSet;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use mcap::records::{ChunkIndex, Record, op};
use reel_io::ByteSource;

use super::plan::{self, ChunkRun};
use super::{EpisodeReader, Index};
use crate::chunk;
use crate::{Error, Result};

/// A message read from an episode.
#[derive(Debug, Clone)]
pub struct RawMessage {
    /// Channel topic.
    pub topic: Arc<str>,
    /// MCAP log time (ns).
    pub log_time: u64,
    /// MCAP publish time (ns).
    pub publish_time: u64,
    /// Serialized message.
    pub data: Bytes,
}

impl<S: ByteSource> EpisodeReader<S> {
    /// Messages of `group` with log time in `window`, in log-time order: one ranged read on
    /// a canonical file.
    pub fn read_window(&self, group: &str, window: Range<u64>) -> Result<Vec<RawMessage>> {
        let topics = self.groups.get(group).ok_or_else(|| Error::UnknownGroup {
            name: self.name.clone(),
            group: group.into(),
        })?;
        let topics: Vec<&str> = topics.iter().map(String::as_str).collect();
        self.read_topics(&topics, window)
    }

    /// Messages of `topics` with log time in `window`, in log-time order. Chunks adjacent in
    /// the file are fetched with one ranged read.
    pub fn read_topics(&self, topics: &[&str], window: Range<u64>) -> Result<Vec<RawMessage>> {
        let ids = self.channel_ids(topics)?;
        let summary = match &self.index {
            Index::Summary(s) => s,
            Index::Scanned { messages, .. } => {
                return Ok(messages
                    .iter()
                    .filter(|(id, m)| ids.contains(id) && window.contains(&m.log_time))
                    .map(|(_, m)| m.clone())
                    .collect());
            }
        };
        let mut out = Vec::new();
        for run in plan::window_runs(&summary.chunk_indexes, &ids, &window) {
            let keep = |id, log_time| ids.contains(&id) && window.contains(&log_time);
            out.extend(self.read_run(&run, keep)?.into_iter().map(|(_, m)| m));
        }
        out.sort_by_key(|m| m.log_time);
        Ok(out)
    }

    /// Byte ranges of the chunks holding any of `topics` (what reads of those topics
    /// fetch), in file order; the whole file for a file without a summary, which is read
    /// whole.
    pub fn chunk_ranges(&self, topics: &[&str]) -> Result<Vec<Range<u64>>> {
        let ids = self.channel_ids(topics)?;
        match &self.index {
            Index::Summary(summary) => Ok(plan::chunk_ranges(&summary.chunk_indexes, &ids)),
            Index::Scanned { .. } => Ok(std::iter::once(0..self.source.len()?).collect()),
        }
    }

    /// The messages of one chunk (one ranged read), with their channel ids.
    pub(crate) fn chunk_messages(&self, chunk: &ChunkIndex) -> Result<Vec<(u16, RawMessage)>> {
        match &self.index {
            Index::Summary(_) => {
                let run = ChunkRun {
                    chunks: vec![chunk],
                };
                self.read_run(&run, |_, _| true)
            }
            Index::Scanned { .. } => Ok(Vec::new()),
        }
    }

    fn channel_ids(&self, topics: &[&str]) -> Result<HashSet<u16>> {
        topics.iter().map(|t| self.channel_id(t)).collect()
    }

    /// Reads one run of adjacent chunks with a single ranged read and returns the messages
    /// `keep` accepts (by channel id and log time). Each chunk is checked whole (size, CRC)
    /// before its records are read; a kept message's data is a slice of the read (or of
    /// its decompressed chunk), not a copy.
    pub(super) fn read_run(
        &self,
        run: &ChunkRun<'_>,
        keep: impl Fn(u16, u64) -> bool,
    ) -> Result<Vec<(u16, RawMessage)>> {
        if run.chunks.is_empty() {
            return Ok(Vec::new());
        }
        self.chunks_read
            .fetch_add(run.chunks.len() as u64, Ordering::Relaxed);
        let bytes = self.source.read_range(run.byte_range())?;
        let mut out = Vec::new();
        // The run holds its chunks and the message indexes between them.
        for chunk in chunk::parsed_records(&self.name, &bytes, op::CHUNK) {
            let Record::Chunk { header, data } = chunk? else {
                continue;
            };
            let records = chunk::uncompressed_bytes(&self.name, &header, &data, &bytes)?;
            for message in chunk::parsed_records(&self.name, &records, op::MESSAGE) {
                let Record::Message { header, data } = message? else {
                    continue;
                };
                let topic =
                    self.topic_names
                        .get(&header.channel_id)
                        .ok_or_else(|| Error::Corrupt {
                            name: self.name.clone(),
                            reason: format!("message on unknown channel {}", header.channel_id),
                        })?;
                if !keep(header.channel_id, header.log_time) {
                    continue;
                }
                let data = match data {
                    Cow::Borrowed(data) => records.slice_ref(data),
                    Cow::Owned(data) => Bytes::from(data),
                };
                out.push((
                    header.channel_id,
                    RawMessage {
                        topic: Arc::clone(topic),
                        log_time: header.log_time,
                        publish_time: header.publish_time,
                        data,
                    },
                ));
            }
        }
        Ok(out)
    }
}
