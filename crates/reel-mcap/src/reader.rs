//! The episode reader: summary in at most two ranged reads, then one ranged read per group
//! per sample on canonical files.
//!
//! [`EpisodeReader`] is one type whose jobs live in their own files:
//!
//! * `open`: the footer, the summary and the metadata records (or a whole-file scan when
//!   the file has no summary);
//! * `plan`: pure functions over the chunk indexes that say which byte ranges a request
//!   needs: chunks in a window, runs of file-adjacent chunks, the walk back to a GOP's
//!   keyframe, the GOPs that serve requested times. No I/O, so they are tested on
//!   hand-made chunk indexes;
//! * `messages`: fetching planned chunk runs (one ranged read each) and copying out the
//!   messages a read asked for;
//! * `signals`: numeric streams decoded into [`SignalWindow`]s;
//! * `video`: camera access units, [`PlannedGop`], [`DecodedGop`] and RGB frames;
//! * `depth`: depth cameras decoded into [`DepthWindow`]s.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use mcap::{Channel, Summary};

use crate::records::{ChannelInfo, EpisodeRecord, LayoutRecord, RecordError, StreamsRecord};
use crate::{Error, Result};

mod depth;
mod messages;
pub(crate) mod open;
pub(crate) mod plan;
mod signals;
mod video;

pub use depth::DepthWindow;
pub use messages::RawMessage;
pub use signals::SignalWindow;
pub use video::{DecodedGop, PlannedGop};

/// Where the reader finds messages.
enum Index {
    /// Chunk indexes from the summary: reads go to the source.
    Summary(Summary),
    /// No summary: the whole file was scanned once and is held in memory.
    Scanned {
        channels: HashMap<u16, Arc<Channel<'static>>>,
        messages: Vec<(u16, RawMessage)>,
    },
}

/// Random access to one episode MCAP over any [`ByteSource`](reel_io::ByteSource).
///
/// Generic over the source so the same reader runs on a file, a memory map, an S3 object
/// or a cache. Holds no decoder: callers pass their own (one per worker thread).
pub struct EpisodeReader<S> {
    source: S,
    name: String,
    index: Index,
    topics: HashMap<String, u16>,
    /// Each channel's topic, shared by the messages read from it.
    topic_names: HashMap<u16, Arc<str>>,
    metadata: BTreeMap<String, BTreeMap<String, String>>,
    groups: BTreeMap<String, Vec<String>>,
    warnings: Vec<String>,
    chunks_read: AtomicU64,
    frames_decoded: AtomicU64,
}

impl<S> std::fmt::Debug for EpisodeReader<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EpisodeReader")
            .field("name", &self.name)
            .finish()
    }
}

impl<S> EpisodeReader<S> {
    /// The source's name (path or URI).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The underlying source.
    pub fn source(&self) -> &S {
        &self.source
    }

    /// Chunks fetched and decompressed so far (a ranged read may fetch several adjacent
    /// chunks at once; the source counts reads).
    pub fn chunks_read(&self) -> u64 {
        self.chunks_read.load(Ordering::Relaxed)
    }

    /// Video frames decoded so far (every access unit fed to a decoder), for benchmarks.
    pub fn frames_decoded(&self) -> u64 {
        self.frames_decoded.load(Ordering::Relaxed)
    }

    /// Problems that did not stop opening the file (e.g. a missing summary).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Metadata records by name (`episode`, `reel.layout`, `reel.streams`, ...).
    pub fn metadata(&self) -> &BTreeMap<String, BTreeMap<String, String>> {
        &self.metadata
    }

    /// The `episode` record, typed.
    pub fn episode_record(&self) -> Result<EpisodeRecord> {
        self.required_record(EpisodeRecord::NAME, EpisodeRecord::parse)
    }

    /// The `reel.layout` record, typed.
    pub fn layout_record(&self) -> Result<LayoutRecord> {
        self.required_record(LayoutRecord::NAME, LayoutRecord::parse)
    }

    /// The `reel.streams` record, typed; `None` for a file written before it existed.
    pub fn streams_record(&self) -> Result<Option<StreamsRecord>> {
        self.metadata
            .get(StreamsRecord::NAME)
            .map(|record| StreamsRecord::parse(record).map_err(|e| self.bad_record(e)))
            .transpose()
    }

    /// The metadata of the channel on `topic`, typed.
    pub fn channel_info(&self, topic: &str) -> Result<ChannelInfo> {
        let channel = self.channel(topic)?;
        ChannelInfo::parse(topic, &channel.metadata).map_err(|e| self.bad_record(e))
    }

    fn required_record<T>(
        &self,
        name: &str,
        parse: impl FnOnce(&BTreeMap<String, String>) -> Result<T, RecordError>,
    ) -> Result<T> {
        let record = self.metadata.get(name).ok_or_else(|| Error::Corrupt {
            name: self.name.clone(),
            reason: format!("no `{name}` metadata record"),
        })?;
        parse(record).map_err(|e| self.bad_record(e))
    }

    fn bad_record(&self, error: RecordError) -> Error {
        Error::Corrupt {
            name: self.name.clone(),
            reason: error.to_string(),
        }
    }

    /// Topic groups (from the channels' `reel.group`), each with its topics.
    pub fn groups(&self) -> &BTreeMap<String, Vec<String>> {
        &self.groups
    }

    /// The summary (absent when the file had none and was scanned).
    pub fn summary(&self) -> Option<&Summary> {
        match &self.index {
            Index::Summary(s) => Some(s),
            Index::Scanned { .. } => None,
        }
    }

    /// A channel by topic.
    pub fn channel(&self, topic: &str) -> Result<Arc<Channel<'static>>> {
        let id = self.channel_id(topic)?;
        let channel = match &self.index {
            Index::Summary(s) => s.channels.get(&id),
            Index::Scanned { channels, .. } => channels.get(&id),
        };
        channel.cloned().ok_or_else(|| Error::UnknownTopic {
            name: self.name.clone(),
            topic: topic.into(),
        })
    }

    fn channel_id(&self, topic: &str) -> Result<u16> {
        self.topics
            .get(topic)
            .copied()
            .ok_or_else(|| Error::UnknownTopic {
                name: self.name.clone(),
                topic: topic.into(),
            })
    }
}
