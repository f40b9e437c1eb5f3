//! The episode reader: summary in at most two ranged reads, then one ranged read per group
//! per sample on canonical files.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::SeekFrom;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use mcap::records::{ChunkIndex, Record};
use mcap::sans_io::linear_reader::{LinearReadEvent, LinearReader, LinearReaderOptions};
use mcap::sans_io::summary_reader::{SummaryReadEvent, SummaryReader, SummaryReaderOptions};
use mcap::{Channel, Summary};
use prost::Message as _;
use reel_io::ByteSource;
use reel_video::{H264Decoder, Picture, RgbImage};

use crate::proto::{CompressedVideo, FloatArray};
use crate::writer::is_idr;
use crate::{Error, Result, keys};

/// Bytes read from the end of the file first: the footer, and on canonical episodes the
/// whole summary and the metadata records in front of it.
const TAIL_READ: u64 = 64 * 1024;
/// Extra bytes read in front of the summary when it did not fit the tail read, to pick up
/// the metadata records a canonical writer places there.
const METADATA_MARGIN: u64 = 64 * 1024;
const MAGIC: &[u8] = b"\x89MCAP0\r\n";
const FOOTER_AND_MAGIC: u64 = 1 + 8 + 8 + 8 + 4 + 8;

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

/// One GOP of one camera, decoded from its keyframe. Pictures stay in the decoder's
/// pixel format until one is asked for ([`rgb_at`](Self::rgb_at)), then the RGB picture
/// is kept: converting costs about as much as decoding, and a GOP decoded whole is often
/// used for a few of its frames only. Safe to share between threads.
#[derive(Debug)]
pub struct DecodedGop {
    /// Log time of the keyframe (ns).
    pub start_ns: u64,
    /// End of the span it is known to cover, exclusive: the next keyframe's log time, or,
    /// when that keyframe was not among the chunks read (or the GOP was decoded only up
    /// to a requested frame), just past the later of its last decoded frame and the
    /// latest requested time it serves.
    pub end_ns: u64,
    /// Log time of every frame decoded, in order: which frame is shown at a time.
    pub times: Vec<u64>,
    /// RGB output size (`None`: the stream's own).
    size: Option<(usize, usize)>,
    /// The pictures kept, by log time, in order: every decoded frame of a whole GOP, or
    /// only the requested ones.
    pictures: Vec<(u64, Picture, OnceLock<RgbImage>)>,
}

impl DecodedGop {
    /// Log time of the frame shown at `t` (the latest at or before it), if this GOP
    /// covers `t` and kept that frame's picture.
    pub fn shown_at(&self, t: u64) -> Option<u64> {
        self.picture_index(t).map(|i| self.pictures[i].0)
    }

    fn picture_index(&self, t: u64) -> Option<usize> {
        if t < self.start_ns || t >= self.end_ns {
            return None;
        }
        let i = self.times.partition_point(|k| *k <= t);
        let shown = *self.times.get(i.checked_sub(1)?)?;
        self.pictures.binary_search_by_key(&shown, |p| p.0).ok()
    }

    /// The frame shown at `t` as RGB, with its log time, if this GOP covers `t` and kept
    /// that frame's picture; converted on first use with `decoder`'s converter.
    pub fn rgb_at(
        &self,
        t: u64,
        decoder: &mut H264Decoder,
    ) -> std::result::Result<Option<(u64, &RgbImage)>, reel_video::Error> {
        match self.picture_index(t) {
            Some(i) => self.rgb(i, decoder).map(Some),
            None => Ok(None),
        }
    }

    /// The keyframe as RGB, if its picture was kept.
    pub fn keyframe_rgb(
        &self,
        decoder: &mut H264Decoder,
    ) -> std::result::Result<Option<(u64, &RgbImage)>, reel_video::Error> {
        if !self.has_keyframe() {
            return Ok(None);
        }
        self.rgb(0, decoder).map(Some)
    }

    /// Whether the keyframe's picture was kept.
    pub fn has_keyframe(&self) -> bool {
        self.pictures.first().is_some_and(|p| p.0 == self.start_ns)
    }

    fn rgb(
        &self,
        i: usize,
        decoder: &mut H264Decoder,
    ) -> std::result::Result<(u64, &RgbImage), reel_video::Error> {
        let (time, picture, rgb) = &self.pictures[i];
        if rgb.get().is_none() {
            // Two threads may both convert; the first one's picture is kept.
            let _ = rgb.set(decoder.to_rgb(picture, self.size)?);
        }
        let image = rgb.get().ok_or_else(|| {
            reel_video::Error::InvalidInput("a converted picture went missing".into())
        })?;
        Ok((*time, image))
    }
}

/// A GOP found by [`EpisodeReader::plan_gops`], ready to decode.
#[derive(Debug, Clone)]
pub struct PlannedGop {
    topic: String,
    start_ns: u64,
    end_ns: u64,
    /// The frames to keep (`None`: all of them, a whole GOP).
    shown: Option<BTreeSet<u64>>,
    /// Access units from the keyframe on, by log time.
    units: Vec<(u64, Vec<u8>)>,
}

impl PlannedGop {
    /// Log time of the keyframe (ns).
    pub fn start_ns(&self) -> u64 {
        self.start_ns
    }

    /// Log times of the frames whose pictures will be kept: the frames shown at the
    /// requested times, or every frame of a whole GOP.
    pub fn kept(&self) -> Vec<u64> {
        match &self.shown {
            Some(shown) => shown.iter().copied().collect(),
            None => self.units.iter().map(|(k, _)| *k).collect(),
        }
    }
}

/// A window of one numeric stream, decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct SignalWindow {
    /// Topic.
    pub topic: String,
    /// Value names (`reel.fields`).
    pub fields: Vec<String>,
    /// Log time of each sample (ns).
    pub log_times: Vec<u64>,
    /// Values, row-major: `log_times.len()` rows of `fields.len()`.
    pub values: Vec<f64>,
}

enum Index {
    /// Chunk indexes from the summary: reads go to the source.
    Summary(Summary),
    /// No summary: the whole file was scanned once and is held in memory.
    Scanned {
        channels: HashMap<u16, Arc<Channel<'static>>>,
        messages: Vec<(u16, RawMessage)>,
    },
}

/// Random access to one episode MCAP over any [`ByteSource`].
///
/// Generic over the source so the same reader runs on a file, a memory map, an S3 object
/// or a cache. Holds no decoder: callers pass their own (one per worker thread).
pub struct EpisodeReader<S> {
    source: S,
    name: String,
    index: Index,
    topics: HashMap<String, u16>,
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

fn le_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

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
        let end = &tail.bytes[tail.bytes.len() - FOOTER_AND_MAGIC as usize..];
        if &end[FOOTER_AND_MAGIC as usize - 8..] != MAGIC || end[0] != 0x02 {
            return Err(Error::Truncated { name, len });
        }
        let summary_start = le_u64(&end[9..17]);
        if summary_start == 0 {
            return Self::open_scanned(source, name);
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
            return Self::open_scanned(source, name);
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
        let topics = summary
            .channels
            .iter()
            .map(|(id, c)| (c.topic.clone(), *id))
            .collect();
        let groups = groups_of(summary.channels.values());
        Ok(Self {
            source,
            name,
            index: Index::Summary(summary),
            topics,
            metadata,
            groups,
            warnings: Vec::new(),
            chunks_read: AtomicU64::new(0),
            frames_decoded: AtomicU64::new(0),
        })
    }

    fn open_scanned(source: S, name: String) -> Result<Self> {
        let len = source.len()?;
        let bytes = source.read_range(0..len)?;
        let mcap_err = |source| Error::Mcap {
            name: name.clone(),
            source,
        };
        let mut channels = HashMap::new();
        let mut messages = Vec::new();
        let mut metadata = BTreeMap::new();
        let mut topics_by_id: HashMap<u16, Arc<str>> = HashMap::new();
        for record in mcap::read::LinearReader::new(&bytes).map_err(mcap_err)? {
            match record.map_err(mcap_err)? {
                Record::Chunk { header, data } => {
                    for inner in mcap::read::ChunkReader::new(header, &data).map_err(mcap_err)? {
                        scan_record(
                            inner.map_err(mcap_err)?,
                            &mut channels,
                            &mut topics_by_id,
                            &mut messages,
                            &mut metadata,
                        );
                    }
                }
                other => scan_record(
                    other,
                    &mut channels,
                    &mut topics_by_id,
                    &mut messages,
                    &mut metadata,
                ),
            }
        }
        messages.sort_by_key(|(_, m)| m.log_time);
        let topics = channels
            .iter()
            .map(|(id, c)| (c.topic.clone(), *id))
            .collect();
        let groups = groups_of(channels.values());
        let warnings = vec![format!(
            "{name}: no summary section; scanned the whole file ({len} bytes) instead"
        )];
        Ok(Self {
            source,
            name,
            index: Index::Scanned { channels, messages },
            topics,
            metadata,
            groups,
            warnings,
            chunks_read: AtomicU64::new(0),
            frames_decoded: AtomicU64::new(0),
        })
    }

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

    /// Decodes one run of access units of `topic` (see [`H264Decoder::decode_run`]).
    fn decode(
        &self,
        decoder: &mut H264Decoder,
        topic: &str,
        units: &[&[u8]],
        wanted: &[usize],
        size: Option<(usize, usize)>,
    ) -> Result<Vec<RgbImage>> {
        decoder
            .decode_run(units, wanted, size)
            .map_err(|source| Error::Video {
                name: self.name.clone(),
                topic: topic.into(),
                source,
            })
    }

    /// Problems that did not stop opening the file (e.g. a missing summary).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Metadata records by name (`episode`, `reel.layout`, `reel.streams`, ...).
    pub fn metadata(&self) -> &BTreeMap<String, BTreeMap<String, String>> {
        &self.metadata
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
        let ids: HashSet<u16> = topics
            .iter()
            .map(|t| self.channel_id(t))
            .collect::<Result<_>>()?;
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
        let chunks: Vec<&ChunkIndex> = summary
            .chunk_indexes
            .iter()
            .filter(|c| c.message_start_time < window.end && c.message_end_time >= window.start)
            .filter(|c| {
                c.message_index_offsets.is_empty()
                    || c.message_index_offsets.keys().any(|id| ids.contains(id))
            })
            .collect();
        let mut out = Vec::new();
        for run in coalesce(&chunks) {
            let keep = |id, log_time| ids.contains(&id) && window.contains(&log_time);
            out.extend(
                self.read_run(summary, &run, keep)?
                    .into_iter()
                    .map(|(_, m)| m),
            );
        }
        out.sort_by_key(|m| m.log_time);
        Ok(out)
    }

    /// Byte ranges of the chunks holding any of `topics` (what reads of those topics
    /// fetch), in file order; the whole file for a file without a summary, which is read
    /// whole.
    pub fn chunk_ranges(&self, topics: &[&str]) -> Result<Vec<Range<u64>>> {
        let ids: HashSet<u16> = topics
            .iter()
            .map(|t| self.channel_id(t))
            .collect::<Result<_>>()?;
        match &self.index {
            Index::Summary(summary) => Ok(summary
                .chunk_indexes
                .iter()
                .filter(|c| {
                    c.message_index_offsets.is_empty()
                        || c.message_index_offsets.keys().any(|id| ids.contains(id))
                })
                .map(|c| c.chunk_start_offset..c.chunk_start_offset + c.chunk_length)
                .collect()),
            Index::Scanned { .. } => Ok(std::iter::once(0..self.source.len()?).collect()),
        }
    }

    /// The messages of one chunk (one ranged read), with their channel ids.
    pub(crate) fn chunk_messages(&self, chunk: &ChunkIndex) -> Result<Vec<(u16, RawMessage)>> {
        match &self.index {
            Index::Summary(summary) => self.read_run(summary, &[chunk], |_, _| true),
            Index::Scanned { .. } => Ok(Vec::new()),
        }
    }

    /// Reads one run of adjacent chunks with a single ranged read and returns the messages
    /// `keep` accepts (by channel id and log time); the others are never copied out of the
    /// decompressed chunk.
    fn read_run(
        &self,
        summary: &Summary,
        run: &[&ChunkIndex],
        keep: impl Fn(u16, u64) -> bool,
    ) -> Result<Vec<(u16, RawMessage)>> {
        let (Some(first), Some(last)) = (run.first(), run.last()) else {
            return Ok(Vec::new());
        };
        let range = first.chunk_start_offset..last.chunk_start_offset + last.chunk_length;
        self.chunks_read
            .fetch_add(run.len() as u64, Ordering::Relaxed);
        let bytes = self.source.read_range(range)?;
        let largest = run
            .iter()
            .map(|c| c.uncompressed_size.max(c.compressed_size))
            .max()
            .unwrap_or(0);
        let mut reader = LinearReader::new_with_options(
            LinearReaderOptions::default()
                .with_skip_start_magic(true)
                .with_skip_end_magic(true)
                .with_validate_chunk_crcs(true)
                .with_record_length_limit(largest as usize + 1024),
        );
        let mcap_err = |source| Error::Mcap {
            name: self.name.clone(),
            source,
        };
        let mut fed = false;
        let mut out = Vec::new();
        while let Some(event) = reader.next_event() {
            match event.map_err(mcap_err)? {
                LinearReadEvent::ReadRequest(need) => {
                    if fed {
                        reader.notify_read(0);
                    } else {
                        // Everything is in memory: hand it all over at once.
                        let n = bytes.len();
                        let _ = need;
                        reader.insert(n).copy_from_slice(&bytes);
                        reader.notify_read(n);
                        fed = true;
                    }
                }
                LinearReadEvent::Record { opcode, data } => {
                    if let Record::Message { header, data } =
                        mcap::parse_record(opcode, data).map_err(mcap_err)?
                    {
                        let channel =
                            summary.channels.get(&header.channel_id).ok_or_else(|| {
                                Error::Corrupt {
                                    name: self.name.clone(),
                                    reason: format!(
                                        "message on unknown channel {}",
                                        header.channel_id
                                    ),
                                }
                            })?;
                        if !keep(header.channel_id, header.log_time) {
                            continue;
                        }
                        let topic = Arc::<str>::from(channel.topic.as_str());
                        out.push((
                            header.channel_id,
                            RawMessage {
                                topic,
                                log_time: header.log_time,
                                publish_time: header.publish_time,
                                data: Bytes::copy_from_slice(&data),
                            },
                        ));
                    }
                }
            }
        }
        Ok(out)
    }

    /// Decoded numeric streams over `window`, all fetched together (one ranged read per
    /// group on a canonical file).
    pub fn signals(&self, topics: &[&str], window: Range<u64>) -> Result<Vec<SignalWindow>> {
        let messages = self.read_topics(topics, window)?;
        let mut out: Vec<SignalWindow> = Vec::with_capacity(topics.len());
        for topic in topics {
            let channel = self.channel(topic)?;
            let fields: Vec<String> = channel
                .metadata
                .get(keys::FIELDS)
                .map(|f| {
                    f.split(',')
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            let mut w = SignalWindow {
                topic: (*topic).to_owned(),
                fields,
                log_times: Vec::new(),
                values: Vec::new(),
            };
            for m in messages.iter().filter(|m| &*m.topic == *topic) {
                let sample =
                    FloatArray::decode(m.data.as_ref()).map_err(|e| Error::BadMessage {
                        name: self.name.clone(),
                        topic: (*topic).to_owned(),
                        log_time: m.log_time,
                        reason: e.to_string(),
                    })?;
                if !w.fields.is_empty() && sample.values.len() != w.fields.len() {
                    return Err(Error::BadMessage {
                        name: self.name.clone(),
                        topic: (*topic).to_owned(),
                        log_time: m.log_time,
                        reason: format!(
                            "{} values for {} fields",
                            sample.values.len(),
                            w.fields.len()
                        ),
                    });
                }
                w.log_times.push(m.log_time);
                w.values.extend_from_slice(&sample.values);
            }
            out.push(w);
        }
        Ok(out)
    }

    /// The frames of one camera shown at each time in `times` (the latest frame at or
    /// before each time; the first frame for earlier times), as RGB at `size` or the
    /// stream's own size.
    pub fn frames_at(
        &self,
        camera: &str,
        times: &[u64],
        decoder: &mut H264Decoder,
        size: Option<(usize, usize)>,
    ) -> Result<Vec<RgbImage>> {
        Ok(self
            .frames(&[(camera, times)], decoder, size)?
            .pop()
            .unwrap_or_default())
    }

    /// The access units (by log time) of each requested camera from every chunk needed to
    /// decode the frames shown at the requested times: back to each GOP's keyframe.
    #[allow(clippy::type_complexity)]
    fn camera_units(
        &self,
        requests: &[(&str, &[u64])],
    ) -> Result<(Vec<u16>, HashMap<u16, BTreeMap<u64, Bytes>>)> {
        let ids: Vec<u16> = requests
            .iter()
            .map(|(t, _)| self.channel_id(t))
            .collect::<Result<_>>()?;
        // Camera messages per channel, by log time, from every chunk fetched so far.
        let mut frames: HashMap<u16, BTreeMap<u64, Bytes>> = HashMap::new();
        let mut fetched: HashSet<u64> = HashSet::new();
        if let Index::Scanned { messages, .. } = &self.index {
            for (id, m) in messages.iter().filter(|(id, _)| ids.contains(id)) {
                frames
                    .entry(*id)
                    .or_default()
                    .insert(m.log_time, m.data.clone());
            }
        }
        if let Index::Summary(summary) = &self.index {
            let holds = |c: &ChunkIndex, id: u16| {
                c.message_index_offsets.is_empty() || c.message_index_offsets.contains_key(&id)
            };
            // First the chunk holding each requested time; then, while a GOP's keyframe or
            // a frame between it and the target is missing, the chunks that hold them.
            let mut wanted: Vec<&ChunkIndex> = Vec::new();
            for (id, (_, times)) in ids.iter().zip(requests) {
                for &t in *times {
                    if let Some(c) = latest_chunk_of(summary, *id, t, &fetched, false) {
                        wanted.push(c);
                    }
                }
            }
            while !wanted.is_empty() {
                wanted.sort_by_key(|c| c.chunk_start_offset);
                wanted.dedup_by_key(|c| c.chunk_start_offset);
                for run in coalesce(&wanted) {
                    for (id, m) in self.read_run(summary, &run, |id, _| ids.contains(&id))? {
                        frames.entry(id).or_default().insert(m.log_time, m.data);
                    }
                    fetched.extend(run.iter().map(|c| c.chunk_start_offset));
                }
                wanted.clear();
                for (id, (_, times)) in ids.iter().zip(requests) {
                    let empty = BTreeMap::new();
                    let stream = frames.get(id).unwrap_or(&empty);
                    for &t in *times {
                        let target = stream.range(..=t).next_back().map(|(k, _)| *k);
                        let key = target.and_then(|target| {
                            stream
                                .range(..=target)
                                .rev()
                                .find(|(_, d)| is_idr(&video_payload(d)))
                                .map(|(k, _)| *k)
                        });
                        match (key, target) {
                            // Chunks of this camera between keyframe and target not yet read.
                            (Some(key), Some(target)) => {
                                wanted.extend(summary.chunk_indexes.iter().filter(|c| {
                                    holds(c, *id)
                                        && !fetched.contains(&c.chunk_start_offset)
                                        && c.message_start_time <= target
                                        && c.message_end_time >= key
                                }))
                            }
                            // No keyframe yet: one chunk further back.
                            _ => wanted.extend(latest_chunk_of(
                                summary,
                                *id,
                                target.unwrap_or(t),
                                &fetched,
                                true,
                            )),
                        }
                    }
                }
            }
        }
        Ok((ids, frames))
    }

    /// Decodes every GOP that holds a frame shown at one of the requested times (`(topic,
    /// times)` pairs, fetched as in [`frames`](Self::frames)): whole, keeping every
    /// picture, or (`whole = false`) from its keyframe through the latest frame requested,
    /// keeping only the requested pictures. Callers that serve many nearby samples keep
    /// whole GOPs and decode each one once; callers with scattered times decode less.
    pub fn gops(
        &self,
        requests: &[(&str, &[u64])],
        decoder: &mut H264Decoder,
        size: Option<(usize, usize)>,
        whole: bool,
    ) -> Result<Vec<Vec<DecodedGop>>> {
        self.plan_gops(requests, whole)?
            .iter()
            .map(|gops| {
                gops.iter()
                    .map(|gop| self.decode_gop(gop, decoder, size))
                    .collect()
            })
            .collect()
    }

    /// The first half of [`gops`](Self::gops): fetches the chunks (one ranged read per
    /// group) and finds the GOPs to decode, with their access units, without decoding.
    /// Callers that share decoded GOPs between threads look at each GOP's keyframe time
    /// before deciding to decode it with [`decode_gop`](Self::decode_gop).
    pub fn plan_gops(
        &self,
        requests: &[(&str, &[u64])],
        whole: bool,
    ) -> Result<Vec<Vec<PlannedGop>>> {
        let (ids, frames) = self.camera_units(requests)?;
        let mut out = Vec::with_capacity(requests.len());
        for ((topic, times), id) in requests.iter().zip(&ids) {
            let empty = BTreeMap::new();
            let stream = frames.get(id).unwrap_or(&empty);
            // Keyframe of each GOP needed, with the latest requested time it serves and
            // the frames shown at the requested times.
            let mut keys: BTreeMap<u64, (u64, BTreeSet<u64>)> = BTreeMap::new();
            for &t in *times {
                let (target, key) = shown_at(stream, t).ok_or_else(|| Error::NoFrame {
                    name: self.name.clone(),
                    topic: (*topic).into(),
                    time: t,
                })?;
                let (served, shown) = keys.entry(key).or_insert((t, BTreeSet::new()));
                *served = (*served).max(t);
                shown.insert(target);
            }
            let mut gops = Vec::with_capacity(keys.len());
            for (key, (latest_served, shown)) in keys {
                let latest_shown = shown.last().copied().unwrap_or(key);
                // The GOP runs to the next keyframe; without one in the fetched chunks it
                // is known to cover only up to its last frame or the latest time it serves.
                let next_key = whole
                    .then(|| {
                        stream
                            .range(key + 1..)
                            .find(|(_, d)| is_idr(&video_payload(d)))
                            .map(|(k, _)| *k)
                    })
                    .flatten();
                let through = if whole {
                    next_key.map_or(u64::MAX, |k| k - 1)
                } else {
                    latest_shown
                };
                let units: Vec<(u64, Vec<u8>)> = stream
                    .range(key..=through)
                    .map(|(k, d)| (*k, video_payload(d)))
                    .collect();
                let last = units.last().map_or(key, |(k, _)| *k);
                gops.push(PlannedGop {
                    topic: (*topic).to_string(),
                    start_ns: key,
                    end_ns: next_key.unwrap_or(last.max(latest_served) + 1),
                    shown: if whole { None } else { Some(shown) },
                    units,
                });
            }
            out.push(gops);
        }
        Ok(out)
    }

    /// Decodes a GOP found by [`plan_gops`](Self::plan_gops); its pictures convert to RGB
    /// at `size` (or the stream's own size) when first asked for.
    pub fn decode_gop(
        &self,
        gop: &PlannedGop,
        decoder: &mut H264Decoder,
        size: Option<(usize, usize)>,
    ) -> Result<DecodedGop> {
        let refs: Vec<&[u8]> = gop.units.iter().map(|(_, u)| u.as_slice()).collect();
        let times: Vec<u64> = gop.units.iter().map(|(k, _)| *k).collect();
        let wanted: Vec<usize> = times
            .iter()
            .enumerate()
            .filter(|(_, k)| gop.shown.as_ref().is_none_or(|s| s.contains(k)))
            .map(|(i, _)| i)
            .collect();
        let pictures = decoder
            .decode_pictures(&refs, &wanted)
            .map_err(|source| Error::Video {
                name: self.name.clone(),
                topic: gop.topic.clone(),
                source,
            })?;
        self.frames_decoded
            .fetch_add(refs.len() as u64, Ordering::Relaxed);
        Ok(DecodedGop {
            start_ns: gop.start_ns,
            end_ns: gop.end_ns,
            size,
            pictures: wanted
                .iter()
                .zip(pictures)
                .map(|(&i, p)| (times[i], p, OnceLock::new()))
                .collect(),
            times,
        })
    }

    /// Frames of several cameras at once (`(topic, times)` pairs). All chunks needed are
    /// planned together, so a canonical file costs one ranged read per camera group. On
    /// layouts whose chunks do not start at keyframes, earlier chunks are fetched until
    /// each GOP's keyframe is found.
    pub fn frames(
        &self,
        requests: &[(&str, &[u64])],
        decoder: &mut H264Decoder,
        size: Option<(usize, usize)>,
    ) -> Result<Vec<Vec<RgbImage>>> {
        let (ids, frames) = self.camera_units(requests)?;
        let mut out = Vec::with_capacity(requests.len());
        for ((topic, times), id) in requests.iter().zip(&ids) {
            let empty = BTreeMap::new();
            let stream = frames.get(id).unwrap_or(&empty);
            let mut pictures: Vec<Option<RgbImage>> = vec![None; times.len()];
            // Group the requested times by the keyframe their frame decodes from.
            let mut runs: BTreeMap<u64, Vec<(usize, u64)>> = BTreeMap::new();
            for (i, &t) in times.iter().enumerate() {
                let (target, key) = shown_at(stream, t).ok_or_else(|| Error::NoFrame {
                    name: self.name.clone(),
                    topic: (*topic).into(),
                    time: t,
                })?;
                runs.entry(key).or_default().push((i, target));
            }
            for (key, members) in runs {
                let last = members.iter().map(|(_, t)| *t).max().unwrap_or(key);
                let units: Vec<Vec<u8>> = stream
                    .range(key..=last)
                    .map(|(_, d)| video_payload(d))
                    .collect();
                let index_of: BTreeMap<u64, usize> = stream
                    .range(key..=last)
                    .enumerate()
                    .map(|(i, (k, _))| (*k, i))
                    .collect();
                let wanted: Vec<usize> = members.iter().map(|(_, t)| index_of[t]).collect();
                let refs: Vec<&[u8]> = units.iter().map(Vec::as_slice).collect();
                let decoded = self.decode(decoder, topic, &refs, &wanted, size)?;
                self.frames_decoded.fetch_add(
                    index_of.get(&last).map_or(0, |i| *i as u64 + 1),
                    Ordering::Relaxed,
                );
                for ((slot, _), picture) in members.iter().zip(decoded) {
                    pictures[*slot] = Some(picture);
                }
            }
            out.push(pictures.into_iter().flatten().collect());
        }
        Ok(out)
    }
}

/// The frame shown at `t` in a camera's units by log time (the latest at or before `t`, the
/// first for earlier times) and the keyframe its GOP starts at, both as log times; `None`
/// if the units hold no such frame or no keyframe before it.
fn shown_at(stream: &BTreeMap<u64, Bytes>, t: u64) -> Option<(u64, u64)> {
    let target = stream
        .range(..=t)
        .next_back()
        .or_else(|| stream.iter().next())
        .map(|(k, _)| *k)?;
    let key = stream
        .range(..=target)
        .rev()
        .find(|(_, d)| is_idr(&video_payload(d)))
        .map(|(k, _)| *k)?;
    Some((target, key))
}

/// The access unit inside a `foxglove.CompressedVideo` message (empty if it does not parse).
fn video_payload(message: &[u8]) -> Vec<u8> {
    CompressedVideo::decode(message)
        .map(|m| m.data)
        .unwrap_or_default()
}

/// The chunk of `channel` with the latest start time at or before `t`, or the first chunk
/// of the channel when none starts before `t`; `None` if that chunk is already fetched.
/// When walking back for a keyframe (`before_fetched`), fetched chunks are passed over.
fn latest_chunk_of<'a>(
    summary: &'a Summary,
    channel: u16,
    t: u64,
    fetched: &HashSet<u64>,
    before_fetched: bool,
) -> Option<&'a ChunkIndex> {
    let has = |c: &&ChunkIndex| {
        (c.message_index_offsets.is_empty() || c.message_index_offsets.contains_key(&channel))
            && !(before_fetched && fetched.contains(&c.chunk_start_offset))
    };
    let candidates = summary.chunk_indexes.iter().filter(has);
    let best = candidates
        .clone()
        .filter(|c| c.message_start_time <= t)
        .max_by_key(|c| (c.message_start_time, c.chunk_start_offset))
        .or_else(|| {
            // Nothing starts before `t`: the channel's first chunk (never when walking back).
            (!before_fetched)
                .then(|| candidates.min_by_key(|c| (c.message_start_time, c.chunk_start_offset)))
                .flatten()
        })?;
    (!fetched.contains(&best.chunk_start_offset)).then_some(best)
}

/// Splits chunks (sorted by offset) into runs that are adjacent in the file: only their
/// message indexes lie between them, so each run is one ranged read.
fn coalesce<'a>(chunks: &[&'a ChunkIndex]) -> Vec<Vec<&'a ChunkIndex>> {
    let mut sorted = chunks.to_vec();
    sorted.sort_by_key(|c| c.chunk_start_offset);
    let mut runs: Vec<Vec<&ChunkIndex>> = Vec::new();
    for c in sorted {
        match runs.last_mut() {
            Some(run)
                if run.last().is_some_and(|p| {
                    p.chunk_start_offset + p.chunk_length + p.message_index_length
                        == c.chunk_start_offset
                }) =>
            {
                run.push(c)
            }
            _ => runs.push(vec![c]),
        }
    }
    runs
}

fn groups_of<'a>(
    channels: impl Iterator<Item = &'a Arc<Channel<'static>>>,
) -> BTreeMap<String, Vec<String>> {
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for c in channels {
        if let Some(g) = c.metadata.get(keys::GROUP) {
            groups.entry(g.clone()).or_default().push(c.topic.clone());
        }
    }
    for topics in groups.values_mut() {
        topics.sort();
    }
    groups
}

fn scan_record(
    record: Record<'_>,
    channels: &mut HashMap<u16, Arc<Channel<'static>>>,
    topics: &mut HashMap<u16, Arc<str>>,
    messages: &mut Vec<(u16, RawMessage)>,
    metadata: &mut BTreeMap<String, BTreeMap<String, String>>,
) {
    match record {
        Record::Channel(c) => {
            topics.insert(c.id, Arc::from(c.topic.as_str()));
            channels.insert(
                c.id,
                Arc::new(Channel {
                    id: c.id,
                    topic: c.topic,
                    schema: None,
                    message_encoding: c.message_encoding,
                    metadata: c.metadata,
                }),
            );
        }
        Record::Message { header, data } => {
            if let Some(topic) = topics.get(&header.channel_id) {
                messages.push((
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
            metadata.insert(m.name, m.metadata);
        }
        _ => {}
    }
}
