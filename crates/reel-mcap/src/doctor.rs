//! Validating a file against the MCAP specification and the canonical episode rules of
//! `docs/FORMAT.md`, naming every problem found instead of stopping at the first.
//!
//! The checks, in order (later ones need what earlier ones found):
//!
//! * `magic`, `footer`: the start and end magic, the footer record and where it points;
//! * `records`: every top-level record parses, with the data and summary section CRCs;
//! * `summary`: the summary parses and holds statistics and chunk indexes;
//! * `chunk`: every indexed chunk lies inside the file, decompresses, matches its CRC,
//!   holds messages in log-time order inside the indexed time range;
//! * canonical only: `metadata` (`episode`, `reel.layout`, `reel.streams`, format
//!   version), `channels` (groups, schemas and channel metadata by kind), `topic_groups`
//!   (a chunk holds one group; each group's chunks are contiguous and in time order),
//!   `compression` (zstd), `gop_alignment` (every camera's first frame in each camera
//!   chunk is an IDR keyframe) and `camera_windows` (a camera chunk stays inside one GOP
//!   window).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use bytes::Bytes;
use mcap::MAGIC;
use mcap::records::{ChunkIndex, Record};
use mcap::sans_io::linear_reader::{LinearReadEvent, LinearReader, LinearReaderOptions};
use prost::Message as _;
use reel_io::{ByteSource, MemorySource};
use serde::Serialize;

use crate::proto::{
    COMPRESSED_VIDEO, CompressedVideo, FLOAT_ARRAY, FloatArray, RAW_IMAGE, RawImage,
};
use crate::reader::EpisodeReader;
use crate::reader::open::le_u64;
use crate::records::{
    CameraWindows, ChannelContent, ChannelInfo, EpisodeRecord, LayoutRecord, RecordError,
    StreamsRecord,
};
use crate::writer::is_idr;
use crate::{FORMAT_VERSION, READABLE_FORMAT_VERSIONS, Result, keys};

/// Footer record: opcode, length, summary start, summary offset start, summary CRC.
const FOOTER_RECORD: usize = 1 + 8 + 8 + 8 + 4;
const FOOTER_OPCODE: u8 = 0x02;

/// What [`doctor`] checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DoctorOptions {
    /// Also check the canonical episode rules (off: the MCAP specification only, for
    /// landing logs and other MCAPs).
    pub canonical: bool,
}

impl Default for DoctorOptions {
    fn default() -> Self {
        Self { canonical: true }
    }
}

/// One thing wrong with a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The check that found it (`magic`, `footer`, `records`, `summary`, `chunk`,
    /// `metadata`, `channels`, `topic_groups`, `compression`, `gop_alignment`,
    /// `camera_windows`).
    pub check: &'static str,
    /// What is wrong, and where.
    pub detail: String,
}

/// What [`doctor`] found.
#[derive(Debug, Clone, Serialize)]
pub struct DoctorReport {
    /// The file.
    pub name: String,
    /// Its size.
    pub bytes: u64,
    /// The checks that ran (a broken footer leaves no summary to check, for instance).
    pub checks: Vec<&'static str>,
    /// Chunks checked.
    pub chunks: usize,
    /// Everything wrong, in the order found; empty for a good file.
    pub problems: Vec<Problem>,
}

impl DoctorReport {
    /// Whether no check found a problem.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }

    /// Lines for people: a verdict, then one line per problem.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        if self.is_ok() {
            let _ = writeln!(
                s,
                "{}: OK ({} chunks; checked {})",
                self.name,
                self.chunks,
                self.checks.join(", ")
            );
        } else {
            let _ = writeln!(s, "{}: {} problem(s)", self.name, self.problems.len());
            for p in &self.problems {
                let _ = writeln!(s, "  {}: {}", p.check, p.detail);
            }
        }
        s
    }
}

/// Checks the MCAP in `source` (read whole, once) and reports every problem found. Only a
/// failed read is an error; whatever is wrong with the bytes is a [`Problem`].
pub fn doctor<S: ByteSource>(source: S, options: DoctorOptions) -> Result<DoctorReport> {
    let len = source.len()?;
    let name = source.name().to_owned();
    let bytes = source.read_range(0..len)?;
    let mut doctor = Doctor {
        report: DoctorReport {
            name: name.clone(),
            bytes: len,
            checks: Vec::new(),
            chunks: 0,
            problems: Vec::new(),
        },
    };
    if !doctor.framing(&bytes) {
        return Ok(doctor.report);
    }
    doctor.records(&bytes);
    let Some(reader) = doctor.summary(MemorySource::new(&name, bytes.clone())) else {
        return Ok(doctor.report);
    };
    let Some(summary) = reader.summary() else {
        return Ok(doctor.report);
    };
    let chunks = doctor.chunks(&bytes, &summary.chunk_indexes);
    if options.canonical {
        doctor.canonical(&reader, summary, &chunks);
    }
    Ok(doctor.report)
}

/// The messages of one chunk that decoded: (channel id, log time, payload).
type ChunkMessages = Vec<(u16, u64, Bytes)>;

struct Doctor {
    report: DoctorReport,
}

impl Doctor {
    fn problem(&mut self, check: &'static str, detail: impl Into<String>) {
        self.report.problems.push(Problem {
            check,
            detail: detail.into(),
        });
    }

    fn ran(&mut self, check: &'static str) {
        if !self.report.checks.contains(&check) {
            self.report.checks.push(check);
        }
    }

    /// Magic at both ends and a footer that points inside the file. Without them nothing
    /// else can be found, so `false` ends the examination.
    fn framing(&mut self, bytes: &[u8]) -> bool {
        self.ran("magic");
        if bytes.len() < 2 * MAGIC.len() + FOOTER_RECORD {
            self.problem(
                "magic",
                format!(
                    "{} bytes: too short for an MCAP file (magic, footer, magic)",
                    bytes.len()
                ),
            );
            return false;
        }
        let mut framed = true;
        if &bytes[..MAGIC.len()] != MAGIC {
            self.problem("magic", "the file does not start with the MCAP magic");
            framed = false;
        }
        if &bytes[bytes.len() - MAGIC.len()..] != MAGIC {
            self.problem(
                "magic",
                "the file does not end with the MCAP magic (truncated or still being written?)",
            );
            return false;
        }
        self.ran("footer");
        let footer_at = bytes.len() - MAGIC.len() - FOOTER_RECORD;
        let footer = &bytes[footer_at..bytes.len() - MAGIC.len()];
        if footer[0] != FOOTER_OPCODE || le_u64(&footer[1..9]) != 20 {
            self.problem(
                "footer",
                format!("no footer record at offset {footer_at} before the end magic"),
            );
            return false;
        }
        let summary_start = le_u64(&footer[9..17]);
        let summary_offset_start = le_u64(&footer[17..25]);
        for (field, offset) in [
            ("summary_start", summary_start),
            ("summary_offset_start", summary_offset_start),
        ] {
            if offset > footer_at as u64 {
                self.problem(
                    "footer",
                    format!("{field} {offset} points past the footer at {footer_at}"),
                );
                framed = false;
            }
        }
        if summary_start == 0 {
            self.problem(
                "footer",
                "no summary section (summary_start is 0): readers must scan the whole file",
            );
        }
        framed
    }

    /// Every top-level record in order, with the data and summary section CRCs; chunks are
    /// left whole here and opened one by one in [`Doctor::chunks`].
    fn records(&mut self, bytes: &[u8]) {
        self.ran("records");
        let mut reader = LinearReader::new_with_options(
            LinearReaderOptions::default()
                .with_emit_chunks(true)
                .with_validate_data_section_crc(true)
                .with_validate_summary_section_crc(true)
                .with_record_length_limit(bytes.len()),
        );
        let mut fed = false;
        while let Some(event) = reader.next_event() {
            match event {
                Ok(LinearReadEvent::ReadRequest(_)) => {
                    let n = if fed { 0 } else { bytes.len() };
                    reader.insert(n).copy_from_slice(&bytes[..n]);
                    reader.notify_read(n);
                    fed = true;
                }
                Ok(LinearReadEvent::Record { .. }) => {}
                Err(e) => {
                    self.problem("records", e.to_string());
                    return;
                }
            }
        }
    }

    fn summary(&mut self, source: MemorySource) -> Option<EpisodeReader<MemorySource>> {
        self.ran("summary");
        let reader = match EpisodeReader::open(source) {
            Ok(reader) => reader,
            Err(e) => {
                self.problem("summary", e.to_string());
                return None;
            }
        };
        match reader.summary() {
            None => self.problem("summary", "no summary: the file was read by scanning it"),
            Some(summary) => {
                if summary.stats.is_none() {
                    self.problem("summary", "no statistics record");
                }
                if summary.chunk_indexes.is_empty() && !summary.channels.is_empty() {
                    self.problem("summary", "no chunk indexes");
                }
            }
        }
        Some(reader)
    }

    /// Opens every indexed chunk; returns the messages of each one that decoded (`None`
    /// for the others), in chunk-index order.
    fn chunks(&mut self, bytes: &[u8], indexes: &[ChunkIndex]) -> Vec<Option<ChunkMessages>> {
        self.ran("chunk");
        self.report.chunks = indexes.len();
        let mut out = Vec::with_capacity(indexes.len());
        for (number, index) in indexes.iter().enumerate() {
            let at = index.chunk_start_offset;
            let place = format!("chunk {number} at offset {at}");
            let Some(record) = at
                .checked_add(index.chunk_length)
                .and_then(|end| bytes.get(at as usize..end as usize))
            else {
                self.problem(
                    "chunk",
                    format!(
                        "{place}: {} bytes long, past the end of the file",
                        index.chunk_length
                    ),
                );
                out.push(None);
                continue;
            };
            match chunk_messages(record) {
                Err(reason) => {
                    self.problem("chunk", format!("{place}: {reason}"));
                    out.push(None);
                }
                Ok(messages) => {
                    self.chunk_contents(&place, index, &messages);
                    out.push(Some(messages));
                }
            }
        }
        out
    }

    fn chunk_contents(&mut self, place: &str, index: &ChunkIndex, messages: &ChunkMessages) {
        if messages.windows(2).any(|w| w[1].1 < w[0].1) {
            self.problem("chunk", format!("{place}: messages out of log-time order"));
        }
        if let (Some(first), Some(last)) = (
            messages.iter().map(|m| m.1).min(),
            messages.iter().map(|m| m.1).max(),
        ) && (first < index.message_start_time || last > index.message_end_time)
        {
            self.problem(
                "chunk",
                format!(
                    "{place}: messages from {first} to {last} ns, outside the indexed {}..={} ns",
                    index.message_start_time, index.message_end_time
                ),
            );
        }
        let channels: BTreeSet<u16> = messages.iter().map(|m| m.0).collect();
        let indexed: BTreeSet<u16> = index.message_index_offsets.keys().copied().collect();
        if channels != indexed {
            self.problem(
                "chunk",
                format!("{place}: holds channels {channels:?}, its index lists {indexed:?}"),
            );
        }
    }

    fn canonical(
        &mut self,
        reader: &EpisodeReader<MemorySource>,
        summary: &mcap::Summary,
        chunks: &[Option<ChunkMessages>],
    ) {
        let layout = self.metadata(reader);
        let infos = self.channels(summary);
        self.topic_groups(summary);
        self.ran("compression");
        for (number, index) in summary.chunk_indexes.iter().enumerate() {
            if index.compression != "zstd" {
                let compression = if index.compression.is_empty() {
                    "none"
                } else {
                    index.compression.as_str()
                };
                self.problem(
                    "compression",
                    format!(
                        "chunk {number} at offset {} is {compression}, not zstd",
                        index.chunk_start_offset
                    ),
                );
            }
        }
        self.cameras(summary, &infos, chunks, layout.as_ref());
    }

    /// The metadata records, each parsed as the readers parse it; returns the camera
    /// windows of `reel.layout`.
    fn metadata(&mut self, reader: &EpisodeReader<MemorySource>) -> Option<CameraWindows> {
        self.ran("metadata");
        let records = reader.metadata();
        fn parsed<T>(
            records: &BTreeMap<String, BTreeMap<String, String>>,
            name: &str,
            parse: fn(&BTreeMap<String, String>) -> std::result::Result<T, RecordError>,
        ) -> std::result::Result<T, String> {
            let record = records
                .get(name)
                .ok_or_else(|| format!("no `{name}` metadata record"))?;
            parse(record).map_err(|e| e.to_string())
        }
        match parsed(records, EpisodeRecord::NAME, EpisodeRecord::parse) {
            Ok(episode) if READABLE_FORMAT_VERSIONS.contains(&episode.format_version.as_str()) => {}
            Ok(episode) => self.problem(
                "metadata",
                format!(
                    "`episode` says format version {}, expected one of {} (this reel-mcap writes {FORMAT_VERSION})",
                    episode.format_version,
                    READABLE_FORMAT_VERSIONS.join(", ")
                ),
            ),
            Err(problem) => self.problem("metadata", problem),
        }
        if let Err(problem) = parsed(records, StreamsRecord::NAME, StreamsRecord::parse) {
            self.problem("metadata", problem);
        }
        match parsed(records, LayoutRecord::NAME, LayoutRecord::parse) {
            Ok(layout) => Some(layout.camera_windows()),
            Err(problem) => {
                self.problem("metadata", problem);
                None
            }
        }
    }

    /// Checks each channel's metadata and schema; returns the channels whose metadata
    /// parses, by id.
    fn channels(&mut self, summary: &mcap::Summary) -> BTreeMap<u16, ChannelInfo> {
        self.ran("channels");
        let mut infos = BTreeMap::new();
        let mut channels: Vec<_> = summary.channels.values().collect();
        channels.sort_by_key(|c| c.id);
        for c in channels {
            let topic = &c.topic;
            let schema = c.schema.as_ref().map(|s| s.name.as_str()).unwrap_or("");
            let info = match ChannelInfo::parse(topic, &c.metadata) {
                Ok(info) => info,
                Err(e) => {
                    self.problem("channels", e.to_string());
                    continue;
                }
            };
            let expected_schema = match info.content {
                // Kept as recorded: its own schema and encoding, whatever they are.
                ChannelContent::Recorded { .. } => None,
                ChannelContent::Camera(_) => Some(COMPRESSED_VIDEO),
                ChannelContent::Depth(_) => Some(RAW_IMAGE),
                ChannelContent::Signal(_) => Some(FLOAT_ARRAY),
            };
            infos.insert(c.id, info);
            let Some(expected_schema) = expected_schema else {
                continue;
            };
            if schema != expected_schema || c.message_encoding != "protobuf" {
                self.problem(
                    "channels",
                    format!(
                        "{topic}: schema `{schema}` ({}), expected `{expected_schema}` (protobuf)",
                        c.message_encoding
                    ),
                );
            }
        }
        infos
    }

    fn topic_groups(&mut self, summary: &mcap::Summary) {
        self.ran("topic_groups");
        let group_of = |id: &u16| {
            summary
                .channels
                .get(id)
                .and_then(|c| ChannelInfo::group_of(&c.metadata))
                .unwrap_or_default()
                .to_owned()
        };
        let mut in_file_order: Vec<(usize, &ChunkIndex)> =
            summary.chunk_indexes.iter().enumerate().collect();
        in_file_order.sort_by_key(|(_, c)| c.chunk_start_offset);
        // Group of each chunk in file order; `None` for a chunk mixing groups.
        let mut finished: BTreeSet<String> = BTreeSet::new();
        let mut current: Option<(String, u64)> = None;
        for (number, chunk) in in_file_order {
            let groups: BTreeSet<String> =
                chunk.message_index_offsets.keys().map(group_of).collect();
            let at = chunk.chunk_start_offset;
            let group = match groups.len() {
                0 => continue,
                1 => groups.into_iter().next().unwrap_or_default(),
                _ => {
                    self.problem(
                        "topic_groups",
                        format!("chunk {number} at offset {at} mixes groups {groups:?}"),
                    );
                    continue;
                }
            };
            match &current {
                Some((g, last_start)) if *g == group => {
                    if chunk.message_start_time < *last_start {
                        self.problem(
                            "topic_groups",
                            format!(
                                "chunk {number} at offset {at} of group `{group}` starts before the chunk in front of it (not time-major)"
                            ),
                        );
                    }
                }
                _ => {
                    if let Some((previous, _)) = current.take() {
                        finished.insert(previous);
                    }
                    if finished.contains(&group) {
                        self.problem(
                            "topic_groups",
                            format!(
                                "chunk {number} at offset {at}: group `{group}` resumes after another group (its chunks are not contiguous)"
                            ),
                        );
                    }
                }
            }
            current = Some((group, chunk.message_start_time));
        }
    }

    fn cameras(
        &mut self,
        summary: &mcap::Summary,
        infos: &BTreeMap<u16, ChannelInfo>,
        chunks: &[Option<ChunkMessages>],
        layout: Option<&CameraWindows>,
    ) {
        let cameras: BTreeMap<u16, &str> = summary
            .channels
            .values()
            .filter(|c| {
                c.schema
                    .as_ref()
                    .is_some_and(|s| s.name == COMPRESSED_VIDEO)
            })
            .map(|c| (c.id, c.topic.as_str()))
            .collect();
        let signals: BTreeMap<u16, usize> = summary
            .channels
            .values()
            .filter(|c| c.schema.as_ref().is_some_and(|s| s.name == FLOAT_ARRAY))
            .filter_map(|c| {
                // A channel without value names has nothing to count against (the
                // reader does not check it either).
                let fields = keys::fields(c).len();
                (fields > 0).then_some((c.id, fields))
            })
            .collect();
        let depths: BTreeMap<u16, (usize, usize)> = summary
            .channels
            .values()
            .filter(|c| c.schema.as_ref().is_some_and(|s| s.name == RAW_IMAGE))
            .filter_map(|c| match &infos.get(&c.id)?.content {
                // `channels` reported a depth channel whose metadata does not parse.
                ChannelContent::Depth(depth) => Some((c.id, (depth.width, depth.height))),
                _ => None,
            })
            .collect();
        self.ran("gop_alignment");
        if layout.is_some() {
            self.ran("camera_windows");
        }
        for ((number, index), messages) in summary.chunk_indexes.iter().enumerate().zip(chunks) {
            let Some(messages) = messages else { continue };
            let at = index.chunk_start_offset;
            let mut first_frame_seen: BTreeSet<u16> = BTreeSet::new();
            for (channel, log_time, data) in messages {
                if let Some(&fields) = signals.get(channel) {
                    match FloatArray::decode(data.as_ref()) {
                        Ok(m) if m.values.len() == fields => {}
                        Ok(m) => self.problem(
                            "channels",
                            format!(
                                "chunk {number} at offset {at}: a message at {log_time} ns has {} values for {fields} fields",
                                m.values.len()
                            ),
                        ),
                        Err(e) => self.problem(
                            "channels",
                            format!("chunk {number} at offset {at}: a message at {log_time} ns does not decode: {e}"),
                        ),
                    }
                }
                if let Some(&(width, height)) = depths.get(channel) {
                    match RawImage::decode(data.as_ref()) {
                        Ok(m) if m.width as usize == width
                            && m.height as usize == height
                            && m.step as usize == 2 * width
                            && m.data.len() == 2 * width * height => {}
                        Ok(m) => self.problem(
                            "channels",
                            format!(
                                "chunk {number} at offset {at}: a depth frame at {log_time} ns is {}x{} with step {} and {} bytes, its channel {width}x{height}",
                                m.width, m.height, m.step, m.data.len()
                            ),
                        ),
                        Err(e) => self.problem(
                            "channels",
                            format!("chunk {number} at offset {at}: a message at {log_time} ns does not decode: {e}"),
                        ),
                    }
                }
                let Some(topic) = cameras.get(channel) else {
                    continue;
                };
                if !first_frame_seen.insert(*channel) {
                    continue;
                }
                let keyframe = CompressedVideo::decode(data.as_ref())
                    .map(|v| is_idr(&v.data))
                    .unwrap_or(false);
                if !keyframe {
                    self.problem(
                        "gop_alignment",
                        format!(
                            "chunk {number} at offset {at}: the first frame of {topic} (at {log_time} ns) is not an IDR keyframe, so the chunk does not decode on its own"
                        ),
                    );
                }
            }
            if let Some(windows) = layout
                && !first_frame_seen.is_empty()
                && windows.of(index.message_start_time) != windows.of(index.message_end_time)
            {
                {
                    self.problem(
                        "camera_windows",
                        format!(
                            "chunk {number} at offset {at} spans {}..={} ns, more than one {} ns GOP window",
                            index.message_start_time, index.message_end_time, windows.window_ns
                        ),
                    );
                }
            }
        }
    }
}

/// The messages of one chunk record (decompressed, its CRC checked).
fn chunk_messages(record: &[u8]) -> std::result::Result<ChunkMessages, String> {
    let mut reader = LinearReader::new_with_options(
        LinearReaderOptions::default()
            .with_skip_start_magic(true)
            .with_skip_end_magic(true)
            .with_validate_chunk_crcs(true)
            .with_record_length_limit(record.len() + 1024),
    );
    let mut fed = false;
    let mut out = Vec::new();
    while let Some(event) = reader.next_event() {
        match event.map_err(|e| e.to_string())? {
            LinearReadEvent::ReadRequest(_) => {
                let n = if fed { 0 } else { record.len() };
                reader.insert(n).copy_from_slice(&record[..n]);
                reader.notify_read(n);
                fed = true;
            }
            LinearReadEvent::Record { opcode, data } => {
                match mcap::parse_record(opcode, data).map_err(|e| e.to_string())? {
                    Record::Message { header, data } => out.push((
                        header.channel_id,
                        header.log_time,
                        Bytes::copy_from_slice(&data),
                    )),
                    // The specification lets chunks carry the schemas and channels
                    // their messages use.
                    Record::Schema { .. } | Record::Channel(_) => {}
                    other => {
                        return Err(format!(
                            "a {} record where a chunk was indexed",
                            record_name(&other)
                        ));
                    }
                }
            }
        }
    }
    if !fed {
        return Err("empty chunk record".into());
    }
    Ok(out)
}

fn record_name(record: &Record<'_>) -> &'static str {
    match record {
        Record::Header(_) => "header",
        Record::Footer(_) => "footer",
        Record::Schema { .. } => "schema",
        Record::Channel(_) => "channel",
        Record::Attachment { .. } => "attachment",
        Record::Metadata(_) => "metadata",
        _ => "non-chunk",
    }
}
