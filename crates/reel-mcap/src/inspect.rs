//! A description of any MCAP's layout: channels, groups, chunks, GOPs, compression.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use prost::Message as _;
use reel_io::ByteSource;
use serde::Serialize;

use crate::Result;
use crate::proto::CompressedVideo;
use crate::reader::EpisodeReader;
use crate::records::{ChannelInfo, VideoOrigin};
use crate::writer::is_idr;

/// One channel.
#[derive(Debug, Clone, Serialize)]
pub struct ChannelSummary {
    /// Channel id.
    pub id: u16,
    /// Topic.
    pub topic: String,
    /// Schema name.
    pub schema: String,
    /// Message encoding.
    pub encoding: String,
    /// `reel.group`, if any.
    pub group: Option<String>,
    /// `reel.kind`, if any (`camera`, `depth`, `state`…).
    pub kind: Option<String>,
    /// The landing encoding it came from (`reel.source_encoding`), if recorded.
    pub source_encoding: Option<String>,
    /// Cameras: `encoded`, `kept` (recorded H.264 stored as recorded) or `transcoded`
    /// (`reel.video`), with why a recorded video was not kept (`reel.video_reason`).
    pub video: Option<String>,
    /// Why a recorded video was transcoded.
    pub video_reason: Option<String>,
    /// Messages (from the statistics).
    pub messages: u64,
}

/// One chunk.
#[derive(Debug, Clone, Serialize)]
pub struct ChunkSummary {
    /// Offset of the chunk record.
    pub offset: u64,
    /// Compressed size.
    pub compressed_bytes: u64,
    /// Uncompressed size.
    pub uncompressed_bytes: u64,
    /// Earliest log time.
    pub start_ns: u64,
    /// Latest log time.
    pub end_ns: u64,
    /// Topics inside.
    pub topics: Vec<String>,
}

/// The chunks of one group (chunks holding topics of several groups form `(mixed)`).
#[derive(Debug, Clone, Serialize)]
pub struct GroupSummary {
    /// Group name.
    pub group: String,
    /// Topics of the group.
    pub topics: Vec<String>,
    /// Number of chunks.
    pub chunks: usize,
    /// Compressed bytes.
    pub compressed_bytes: u64,
    /// Uncompressed bytes.
    pub uncompressed_bytes: u64,
    /// Smallest and largest compressed chunk.
    pub chunk_bytes_min_max: (u64, u64),
    /// Time covered.
    pub start_ns: u64,
    /// Time covered.
    pub end_ns: u64,
    /// Mean chunk duration, seconds.
    pub mean_chunk_seconds: f64,
    /// Each chunk.
    pub chunk_list: Vec<ChunkSummary>,
}

/// GOP statistics of one H.264 camera.
#[derive(Debug, Clone, Serialize)]
pub struct GopStats {
    /// Topic.
    pub topic: String,
    /// Frames.
    pub frames: u64,
    /// IDR keyframes.
    pub keyframes: u64,
    /// Mean frames per GOP.
    pub mean_gop: f64,
    /// Longest GOP, frames.
    pub max_gop: u64,
    /// Chunks holding this camera whose first frame of it is a keyframe.
    pub chunks_starting_at_keyframe: u64,
    /// Chunks holding this camera.
    pub chunks: u64,
    /// Mean access-unit size, bytes.
    pub mean_frame_bytes: f64,
}

/// What `reel-inspect` prints.
#[derive(Debug, Clone, Serialize)]
pub struct LayoutReport {
    /// File.
    pub name: String,
    /// File size.
    pub bytes: u64,
    /// `reel.format_version`, on canonical files.
    pub format_version: Option<String>,
    /// `reel.layout` layout name, on files written by Reel.
    pub layout: Option<String>,
    /// Channels.
    pub channels: Vec<ChannelSummary>,
    /// Chunks by group.
    pub groups: Vec<GroupSummary>,
    /// Uncompressed / compressed chunk bytes.
    pub compression_ratio: f64,
    /// H.264 cameras.
    pub gops: Vec<GopStats>,
    /// Metadata record names.
    pub metadata: Vec<String>,
    /// Reader warnings (e.g. no summary).
    pub warnings: Vec<String>,
}

/// Describes the layout of the MCAP in `source`. With `gops`, reads every H.264 camera
/// chunk to report GOP statistics.
pub fn inspect<S: ByteSource>(source: S, gops: bool) -> Result<LayoutReport> {
    let bytes = source.len()?;
    let reader = EpisodeReader::open(source)?;
    // Any MCAP is described: records and channels that are not canonical are left out.
    let layout = reader.layout_record().ok();
    let mut report = LayoutReport {
        name: reader.name().to_owned(),
        bytes,
        format_version: layout.as_ref().map(|l| l.format_version.clone()),
        layout: layout.map(|l| l.layout),
        channels: Vec::new(),
        groups: Vec::new(),
        compression_ratio: 0.0,
        gops: Vec::new(),
        metadata: reader.metadata().keys().cloned().collect(),
        warnings: reader.warnings().to_vec(),
    };
    let Some(summary) = reader.summary() else {
        return Ok(report);
    };
    let stats = summary.stats.clone().unwrap_or_default();
    let mut channels: Vec<_> = summary.channels.values().collect();
    channels.sort_by_key(|c| c.id);
    for c in &channels {
        let info = ChannelInfo::parse(&c.topic, &c.metadata).ok();
        let video = info.as_ref().and_then(ChannelInfo::video);
        report.channels.push(ChannelSummary {
            id: c.id,
            topic: c.topic.clone(),
            schema: c
                .schema
                .as_ref()
                .map(|s| s.name.clone())
                .unwrap_or_default(),
            encoding: c.message_encoding.clone(),
            group: ChannelInfo::group_of(&c.metadata).map(str::to_owned),
            kind: info.as_ref().map(|i| i.kind_name().to_owned()),
            source_encoding: info
                .as_ref()
                .and_then(ChannelInfo::source_encoding)
                .map(str::to_owned),
            video: video.map(|v| v.as_str().to_owned()),
            video_reason: match video {
                Some(VideoOrigin::Transcoded(reason)) => Some(reason.clone()),
                _ => None,
            },
            messages: stats
                .channel_message_counts
                .get(&c.id)
                .copied()
                .unwrap_or(0),
        });
    }
    let group_of = |id: &u16| {
        summary
            .channels
            .get(id)
            .map(|c| {
                ChannelInfo::group_of(&c.metadata)
                    .unwrap_or("(none)")
                    .to_owned()
            })
            .unwrap_or_default()
    };
    let mut groups: BTreeMap<String, GroupSummary> = BTreeMap::new();
    let (mut compressed, mut uncompressed) = (0u64, 0u64);
    for chunk in &summary.chunk_indexes {
        let mut names: Vec<String> = chunk.message_index_offsets.keys().map(group_of).collect();
        names.sort();
        names.dedup();
        let group = match names.as_slice() {
            [one] => one.clone(),
            _ => "(mixed)".to_owned(),
        };
        let topics: Vec<String> = chunk
            .message_index_offsets
            .keys()
            .filter_map(|id| summary.channels.get(id).map(|c| c.topic.clone()))
            .collect();
        let g = groups.entry(group.clone()).or_insert_with(|| GroupSummary {
            group,
            topics: Vec::new(),
            chunks: 0,
            compressed_bytes: 0,
            uncompressed_bytes: 0,
            chunk_bytes_min_max: (u64::MAX, 0),
            start_ns: u64::MAX,
            end_ns: 0,
            mean_chunk_seconds: 0.0,
            chunk_list: Vec::new(),
        });
        for t in &topics {
            if !g.topics.contains(t) {
                g.topics.push(t.clone());
            }
        }
        g.chunks += 1;
        g.compressed_bytes += chunk.compressed_size;
        g.uncompressed_bytes += chunk.uncompressed_size;
        g.chunk_bytes_min_max = (
            g.chunk_bytes_min_max.0.min(chunk.compressed_size),
            g.chunk_bytes_min_max.1.max(chunk.compressed_size),
        );
        g.start_ns = g.start_ns.min(chunk.message_start_time);
        g.end_ns = g.end_ns.max(chunk.message_end_time);
        g.mean_chunk_seconds += (chunk.message_end_time - chunk.message_start_time) as f64 / 1e9;
        g.chunk_list.push(ChunkSummary {
            offset: chunk.chunk_start_offset,
            compressed_bytes: chunk.compressed_size,
            uncompressed_bytes: chunk.uncompressed_size,
            start_ns: chunk.message_start_time,
            end_ns: chunk.message_end_time,
            topics,
        });
        compressed += chunk.compressed_size;
        uncompressed += chunk.uncompressed_size;
    }
    for g in groups.values_mut() {
        g.topics.sort();
        g.mean_chunk_seconds /= g.chunks.max(1) as f64;
    }
    report.groups = groups.into_values().collect();
    report.compression_ratio = uncompressed as f64 / compressed.max(1) as f64;

    if gops {
        let cameras: Vec<_> = channels
            .iter()
            .filter(|c| {
                c.schema
                    .as_ref()
                    .is_some_and(|s| s.name == crate::proto::COMPRESSED_VIDEO)
            })
            .collect();
        // Per camera: (log time, is keyframe, bytes) of each frame, chunks starting at a
        // keyframe, chunks.
        type CameraFrames = (Vec<(u64, bool, usize)>, u64, u64);
        let mut per_camera: BTreeMap<u16, CameraFrames> = BTreeMap::new();
        for chunk in &summary.chunk_indexes {
            if !cameras
                .iter()
                .any(|c| chunk.message_index_offsets.contains_key(&c.id))
            {
                continue;
            }
            let mut first_seen: BTreeMap<u16, bool> = BTreeMap::new();
            for (id, m) in reader.chunk_messages(chunk)? {
                if !cameras.iter().any(|c| c.id == id) {
                    continue;
                }
                let unit = CompressedVideo::decode(m.data.as_ref())
                    .map(|v| v.data)
                    .unwrap_or_default();
                let key = is_idr(&unit);
                first_seen.entry(id).or_insert(key);
                per_camera
                    .entry(id)
                    .or_default()
                    .0
                    .push((m.log_time, key, unit.len()));
            }
            for (id, first_is_key) in first_seen {
                let e = per_camera.entry(id).or_default();
                e.2 += 1;
                e.1 += first_is_key as u64;
            }
        }
        for c in cameras {
            let Some((mut frames, aligned, chunks)) = per_camera.remove(&c.id) else {
                continue;
            };
            frames.sort_by_key(|f| f.0);
            let keys: Vec<usize> = frames
                .iter()
                .enumerate()
                .filter(|(_, f)| f.1)
                .map(|(i, _)| i)
                .collect();
            let mut gop_lengths: Vec<u64> = keys.windows(2).map(|w| (w[1] - w[0]) as u64).collect();
            if let Some(&last) = keys.last() {
                gop_lengths.push((frames.len() - last) as u64);
            }
            report.gops.push(GopStats {
                topic: c.topic.clone(),
                frames: frames.len() as u64,
                keyframes: keys.len() as u64,
                mean_gop: frames.len() as f64 / keys.len().max(1) as f64,
                max_gop: gop_lengths.iter().copied().max().unwrap_or(0),
                chunks_starting_at_keyframe: aligned,
                chunks,
                mean_frame_bytes: frames.iter().map(|f| f.2 as f64).sum::<f64>()
                    / frames.len().max(1) as f64,
            });
        }
    }
    Ok(report)
}

impl LayoutReport {
    /// A human-readable table.
    pub fn to_table(&self) -> String {
        let mut s = String::new();
        let mb = |b: u64| b as f64 / 1e6;
        let _ = writeln!(
            s,
            "{}  {:.2} MB  layout: {}  format: {}",
            self.name,
            mb(self.bytes),
            self.layout.as_deref().unwrap_or("-"),
            self.format_version.as_deref().unwrap_or("-")
        );
        for w in &self.warnings {
            let _ = writeln!(s, "warning: {w}");
        }
        let _ = writeln!(
            s,
            "\n{:>4}  {:<44} {:<28} {:<9} {:<10} {:>8}  from",
            "id", "topic", "schema", "encoding", "group", "messages"
        );
        for c in &self.channels {
            // Where a camera's stream came from: `jpeg, encoded`, `h264, kept`,
            // `h265, transcoded (why)`.
            let from = [c.source_encoding.as_deref(), c.video.as_deref()]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(", ");
            let why = c
                .video_reason
                .as_deref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default();
            let _ = writeln!(
                s,
                "{:>4}  {:<44} {:<28} {:<9} {:<10} {:>8}  {}{}",
                c.id,
                c.topic,
                c.schema,
                c.encoding,
                c.group.as_deref().unwrap_or("-"),
                c.messages,
                if from.is_empty() { "-" } else { &from },
                why
            );
        }
        let _ = writeln!(
            s,
            "\n{:<10} {:>6} {:>11} {:>11} {:>8} {:>19} {:>8}  topics",
            "group", "chunks", "compressed", "raw", "ratio", "chunk min/max KB", "chunk s"
        );
        for g in &self.groups {
            let _ = writeln!(
                s,
                "{:<10} {:>6} {:>9.2}MB {:>9.2}MB {:>8.2} {:>9.1}/{:<9.1} {:>8.2}  {}",
                g.group,
                g.chunks,
                mb(g.compressed_bytes),
                mb(g.uncompressed_bytes),
                g.uncompressed_bytes as f64 / g.compressed_bytes.max(1) as f64,
                g.chunk_bytes_min_max.0 as f64 / 1e3,
                g.chunk_bytes_min_max.1 as f64 / 1e3,
                g.mean_chunk_seconds,
                g.topics.join(" ")
            );
        }
        let _ = writeln!(
            s,
            "compression ratio (raw/compressed chunk bytes): {:.2}",
            self.compression_ratio
        );
        if !self.gops.is_empty() {
            let _ = writeln!(
                s,
                "\n{:<44} {:>7} {:>5} {:>8} {:>7} {:>14} {:>10}",
                "camera", "frames", "keys", "mean GOP", "max GOP", "chunks at key", "frame KB"
            );
            for g in &self.gops {
                let _ = writeln!(
                    s,
                    "{:<44} {:>7} {:>5} {:>8.1} {:>7} {:>8}/{:<5} {:>10.1}",
                    g.topic,
                    g.frames,
                    g.keyframes,
                    g.mean_gop,
                    g.max_gop,
                    g.chunks_starting_at_keyframe,
                    g.chunks,
                    g.mean_frame_bytes / 1e3
                );
            }
        }
        let _ = writeln!(s, "\nmetadata records: {}", self.metadata.join(", "));
        s
    }
}
