//! One worker's side of the loader: opens episodes, reads one window per group, decodes
//! only the frames needed (keeping decoded GOPs for nearby samples), and writes samples
//! straight into the batch's tensors.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use reel_io::{ByteSource, ErrorKind};
use reel_mcap::records::{StreamGrid, StreamsRecord};
use reel_mcap::{DecodedGop, DepthWindow, EpisodeReader, SignalWindow};
use reel_video::H264Decoder;

use crate::batch::{Batch, Skipped, Tensor};
use crate::batch_tensors::{BatchTensors, StreamTensors};
use crate::error::{LoaderError, Result};
use crate::gop_cache::Claim;
use crate::mixture::Located;
use crate::resolve::{CameraPlan, DepthPlan, ProprioPlan};
use crate::row_check::{Reader, check_row};
use crate::shared::{Shared, WorkerCounts};
use crate::spec::{DepthTensorUnit, Layout};

mod depth;
mod failures;
mod proprio;

use proprio::proprio_need;

struct OpenEpisode {
    reader: Reader,
    /// Its `reel.streams` record (empty for a file written before the record existed).
    streams: StreamsRecord,
}

impl OpenEpisode {
    fn period(&self, topic: &str, fallback_ns: i64) -> i64 {
        self.streams
            .grids
            .get(topic)
            .and_then(StreamGrid::period_ns)
            .map_or(fallback_ns, |period| period as i64)
    }
}

/// Decoded numeric streams of one episode over `span`.
struct SignalSpan {
    row: usize,
    span: std::ops::Range<i64>,
    windows: Vec<SignalWindow>,
}

/// Decoded frames of one depth camera of one episode over `span`.
struct DepthSpan {
    row: usize,
    depth: usize,
    span: std::ops::Range<i64>,
    window: DepthWindow,
}

/// A worker's state: its decoder and what it keeps between samples.
pub(crate) struct Worker {
    shared: Arc<Shared>,
    decoder: H264Decoder,
    episodes: VecDeque<(usize, Arc<OpenEpisode>)>,
    signals: VecDeque<SignalSpan>,
    depth_spans: VecDeque<DepthSpan>,
    bad: HashMap<usize, String>,
    pub counts: WorkerCounts,
}

const OPEN_EPISODES: usize = 8;
const SIGNAL_SPANS: usize = 4;
const DEPTH_SPANS: usize = 4;
/// A sample's value is the grid point itself when this close to the requested time; grid
/// periods are whole nanoseconds, so grid times drift from exact multiples by < 1 ns/step.
const ON_GRID_NS: i64 = 100_000;

impl Worker {
    pub(crate) fn new(shared: Arc<Shared>) -> Result<Self> {
        let decoder = H264Decoder::with_conversion(shared.options.rgb).map_err(|source| {
            LoaderError::Episode {
                uri: "H.264 decoder".into(),
                source: Box::new(reel_mcap::Error::Video {
                    name: String::new(),
                    topic: String::new(),
                    source,
                }),
            }
        })?;
        Ok(Self {
            shared,
            decoder,
            episodes: VecDeque::new(),
            signals: VecDeque::new(),
            depth_spans: VecDeque::new(),
            bad: HashMap::new(),
            counts: WorkerCounts::default(),
        })
    }

    /// Builds the batch of `samples` (positions of the epoch, in order).
    pub(crate) fn build(&mut self, epoch: u64, index: u64, samples: &[u64]) -> Result<Batch> {
        let shared = Arc::clone(&self.shared);
        let memory = &shared.buffers;
        let n = samples.len();
        let mut tensors =
            BatchTensors::new(&shared.cameras, &shared.depths, &shared.proprio, n, memory);
        let mut skipped = Vec::new();
        let mut filled = 0;
        for &p in samples {
            let at = shared.catalog.locate(epoch, p)?;
            let (row, anchor) = (at.row, at.anchor_ns);
            let episode = shared.catalog.episode(row)?;
            let uri = episode.uri()?.to_string();
            let reason = match self.bad.get(&row) {
                Some(reason) => reason.clone(),
                None => match self.fill_or_reopen(&mut tensors, filled, at, &uri)? {
                    None => {
                        filled += 1;
                        continue;
                    }
                    Some(reason) => reason,
                },
            };
            skipped.push(Skipped {
                episode_id: episode.episode_id()?.to_string(),
                uri,
                anchor_ns: anchor,
                reason,
            });
        }
        let mut tensors = tensors.into_vec();
        if filled < n {
            for t in &mut tensors {
                t.truncate_samples(filled);
            }
        }
        Ok(Batch {
            epoch,
            index,
            tensors,
            skipped,
        })
    }

    fn episode(&mut self, row: usize, uri: &str) -> Result<Arc<OpenEpisode>> {
        if let Some(i) = self.episodes.iter().position(|(r, _)| *r == row) {
            let entry = self.episodes.remove(i).expect("index from position");
            let open = Arc::clone(&entry.1);
            self.episodes.push_front(entry);
            return Ok(open);
        }
        let source = self.shared.catalog.open(row, uri)?;
        let object_len = source.len()?;
        let reader = EpisodeReader::open(source).map_err(|source| LoaderError::Episode {
            uri: uri.to_string(),
            source: Box::new(source),
        })?;
        let manifest_row = self.shared.catalog.episode(row)?;
        let streams = reader
            .streams_record()
            .map_err(|source| LoaderError::Episode {
                uri: uri.to_string(),
                source: Box::new(source),
            })?;
        check_row(&manifest_row, &reader, streams.as_ref(), object_len).map_err(|reason| {
            let (_, source_row) = self.shared.catalog.source_of(row);
            LoaderError::Mismatch {
                uri: uri.to_string(),
                reason: format!("manifest row {source_row}: {reason}"),
            }
        })?;
        let open = Arc::new(OpenEpisode {
            streams: streams.unwrap_or_default(),
            reader,
        });
        self.episodes.push_front((row, Arc::clone(&open)));
        if self.episodes.len() > OPEN_EPISODES
            && let Some((_, old)) = self.episodes.pop_back()
        {
            self.retire(&old);
        }
        Ok(open)
    }

    /// Keeps what a closed episode's reader read and decoded in the worker's counts.
    fn retire(&mut self, old: &OpenEpisode) {
        self.counts.chunks_read += old.reader.chunks_read();
        self.counts.frames_decoded += old.reader.frames_decoded();
    }

    /// Counts of the episodes still open, added to what closed ones reported.
    pub(crate) fn counts(&self) -> WorkerCounts {
        let mut c = self.counts;
        for (_, e) in &self.episodes {
            c.chunks_read += e.reader.chunks_read();
            c.frames_decoded += e.reader.frames_decoded();
        }
        c
    }

    fn fill(
        &mut self,
        tensors: &mut BatchTensors,
        slot: usize,
        at: Located,
        uri: &str,
        episode: Arc<OpenEpisode>,
    ) -> Result<()> {
        let shared = Arc::clone(&self.shared);
        let (row, anchor) = (at.row, at.anchor_ns);
        write_i64(&mut tensors.anchor_ns, slot, 0, anchor);
        write_i64(&mut tensors.episode_row, slot, 0, at.source_row as i64);
        write_i64(&mut tensors.source, slot, 0, at.source as i64);
        let held = self.sample_gops(&episode, row, anchor, uri)?;
        for (ci, camera) in shared.cameras.iter().enumerate() {
            let gops: Vec<&Arc<DecodedGop>> = held
                .iter()
                .filter(|(c, _)| *c == ci)
                .map(|(_, g)| g)
                .collect();
            self.fill_camera(
                &episode,
                &gops,
                camera,
                anchor,
                uri,
                &mut tensors.cameras[ci],
                slot,
            )?;
        }
        for (di, depth) in shared.depths.iter().enumerate() {
            self.fill_depth(
                &episode,
                row,
                di,
                depth,
                anchor,
                uri,
                &mut tensors.depths[di],
                slot,
            )?;
        }
        // One read of the numeric group serves all of the sample's numeric streams: their
        // windows differ (state before the anchor, actions after it) but lie in the same
        // chunks, which a read per stream would fetch and parse twice.
        let needs = shared
            .proprio
            .iter()
            .filter_map(|p| proprio_need(&episode, p, anchor).map(|(need, _)| need));
        if let Some(need) = needs.reduce(|a, b| a.start.min(b.start)..a.end.max(b.end)) {
            self.signal_span(&episode, row, need, uri)?;
        }
        for (pi, proprio) in shared.proprio.iter().enumerate() {
            self.fill_proprio(
                &episode,
                row,
                proprio,
                anchor,
                uri,
                &mut tensors.proprio[pi],
                slot,
            )?;
        }
        Ok(())
    }

    /// The decoded GOPs holding the sample's frames, by camera index: from the shared
    /// cache, else decoded now. The GOPs of every camera are planned together (one ranged
    /// read of the camera group). The sample holds on to them, so other workers filling
    /// the cache meanwhile cannot take them away before its frames are copied.
    fn sample_gops(
        &mut self,
        episode: &OpenEpisode,
        row: usize,
        anchor: i64,
        uri: &str,
    ) -> Result<Vec<(usize, Arc<DecodedGop>)>> {
        let shared = Arc::clone(&self.shared);
        let mut held: Vec<(usize, Arc<DecodedGop>)> = Vec::new();
        let mut missing: Vec<(usize, Vec<u64>)> = Vec::new();
        for (ci, camera) in shared.cameras.iter().enumerate() {
            let mut times = Vec::new();
            for q in wanted_times(episode, camera, anchor) {
                self.counts.frames_wanted += 1;
                match shared.gops.showing((row, ci), q) {
                    Some(gop) => {
                        self.counts.frames_cached += 1;
                        held.push((ci, gop));
                    }
                    None => times.push(q),
                }
            }
            if !times.is_empty() {
                missing.push((ci, times));
            }
        }
        if missing.is_empty() {
            return Ok(held);
        }
        let episode_error = |source| LoaderError::Episode {
            uri: uri.to_string(),
            source: Box::new(source),
        };
        let requests: Vec<(&str, &[u64])> = missing
            .iter()
            .map(|(ci, times)| (shared.cameras[*ci].topic.as_str(), times.as_slice()))
            .collect();
        let planned = episode
            .reader
            .plan_gops(&requests, shared.whole_gops)
            .map_err(episode_error)?;
        for ((ci, _), gops) in missing.iter().zip(&planned) {
            let key = (row, *ci);
            for gop in gops {
                let claim = match shared.gops.claim(key, gop) {
                    Claim::Decode(claim) => claim,
                    // Another worker decoded it while this one waited.
                    Claim::Decoded(covering) => {
                        held.extend(covering.into_iter().map(|g| (*ci, g)));
                        continue;
                    }
                };
                let decoded = Arc::new(
                    episode
                        .reader
                        .decode_gop(gop, &mut self.decoder, shared.cameras[*ci].resize)
                        .map_err(episode_error)?,
                );
                shared.gops.insert(key, Arc::clone(&decoded), claim);
                held.push((*ci, decoded));
            }
        }
        Ok(held)
    }

    #[allow(clippy::too_many_arguments)]
    fn fill_camera(
        &mut self,
        episode: &OpenEpisode,
        gops: &[&Arc<DecodedGop>],
        camera: &CameraPlan,
        anchor: i64,
        uri: &str,
        out: &mut StreamTensors,
        slot: usize,
    ) -> Result<()> {
        let half = episode.period(&camera.topic, 33_333_333) / 2;
        let wanted = wanted_times(episode, camera, anchor);
        let frame_len = camera.width * camera.height * 3;
        for (j, (&q, offset)) in wanted.iter().zip(&camera.offsets_ns).enumerate() {
            // Before the stream's first frame (edge padding) the first frame stands in,
            // masked: it is what the reader returned for such a time.
            let showing = gops.iter().find(|g| g.shown_at(q).is_some());
            // A GOP decoded for another sample knows its span only up to that sample's
            // times; this sample's plan found its frame in the latest GOP starting at or
            // before `q` (past the stream's last frame, that frame, masked).
            let latest = || {
                gops.iter()
                    .filter(|g| g.start_ns <= q)
                    .max_by_key(|g| g.start_ns)
            };
            // The earliest GOP after `q` that kept its keyframe.
            let after = || {
                gops.iter()
                    .filter(|g| g.start_ns > q && g.has_keyframe())
                    .min_by_key(|g| g.start_ns)
            };
            let gop =
                showing
                    .or_else(latest)
                    .or_else(after)
                    .ok_or_else(|| LoaderError::Mismatch {
                        uri: uri.to_string(),
                        reason: format!("{}: no frame near {}", camera.topic, anchor + offset),
                    })?;
            let size = gop.rgb_size().unwrap_or((camera.width, camera.height));
            if size != (camera.width, camera.height) {
                return Err(LoaderError::Mismatch {
                    uri: uri.to_string(),
                    reason: format!(
                        "{} is {}x{}, the batch is {}x{} (give the camera a size)",
                        camera.topic, size.0, size.1, camera.width, camera.height
                    ),
                });
            }
            let frame_index = slot * camera.offsets_ns.len() + j;
            let frames = frame_index * frame_len..(frame_index + 1) * frame_len;
            let video_err = |source| LoaderError::Episode {
                uri: uri.to_string(),
                source: Box::new(reel_mcap::Error::Video {
                    name: uri.to_string(),
                    topic: camera.topic.clone(),
                    source,
                }),
            };
            // A GOP decoded for this sample alone (not whole, as in locality order) has its
            // frames used once: converted straight into the batch, not kept.
            let straight = !self.shared.whole_gops && camera.layout == Layout::Hwc;
            let time = match (out.data.data_u8_mut(), straight && gop.start_ns <= q) {
                (Some(pixels), true) => gop
                    .rgb_latest_into(q, &mut self.decoder, &mut pixels[frames])
                    .map_err(video_err)?,
                (pixels, _) => {
                    let converted = if gop.start_ns <= q {
                        gop.rgb_latest_at(q, &mut self.decoder)
                    } else {
                        gop.keyframe_rgb(&mut self.decoder)
                    };
                    let Some((time, image)) = converted.map_err(video_err)? else {
                        continue;
                    };
                    if let Some(pixels) = pixels {
                        let dst = &mut pixels[frames];
                        match camera.layout {
                            Layout::Hwc => dst.copy_from_slice(&image.data),
                            Layout::Chw => to_chw(&image.data, dst, camera.width * camera.height),
                        }
                    }
                    Some(time)
                }
            };
            let Some(time) = time else {
                continue;
            };
            let requested = anchor + offset;
            write_i64(&mut out.time_ns, frame_index, 0, time as i64);
            let on_time = (time as i64 - requested).abs() <= half;
            write_u8(&mut out.mask, frame_index, u8::from(on_time));
        }
        Ok(())
    }
}

/// The times whose frames a sample at `anchor` takes from `camera`: for each offset, the
/// frame nearest the requested time (the latest at or before it plus half a period).
fn wanted_times(episode: &OpenEpisode, camera: &CameraPlan, anchor: i64) -> Vec<u64> {
    let half = episode.period(&camera.topic, 33_333_333) / 2;
    camera
        .offsets_ns
        .iter()
        .map(|o| (anchor + o + half).max(0) as u64)
        .collect()
}

fn to_chw(hwc: &[u8], chw: &mut [u8], pixels: usize) {
    let (r, rest) = chw.split_at_mut(pixels);
    let (g, b) = rest.split_at_mut(pixels);
    for (i, px) in hwc.chunks_exact(3).enumerate() {
        r[i] = px[0];
        g[i] = px[1];
        b[i] = px[2];
    }
}

fn write_i64(t: &mut Tensor, element: usize, offset: usize, value: i64) {
    if let Some(v) = t.data_i64_mut() {
        v[element + offset] = value;
    }
}

fn write_u8(t: &mut Tensor, element: usize, value: u8) {
    if let Some(v) = t.data_u8_mut() {
        v[element] = value;
    }
}
