//! The floor under the loader's CPU per sample: the bare decode of the frames its
//! samples need, and nothing else. The loader's own sample sequence is replayed against
//! access units already in memory (read and parsed before the clock starts): each frame a
//! sample shows is decoded from its GOP's keyframe through itself (through the GOP's end
//! where the loader decodes whole GOPs), unless a decode kept from an earlier sample (as
//! many as the loader's shared GOP cache holds) already reached it. No container reading,
//! no batch, no numeric streams: FFmpeg's work, once with and once without the RGB
//! conversion of the shown frames. The loader's cache keeps decodes that this simple
//! memory does not, so the replay decodes more frames per sample; the comparison is made
//! per decoded frame, at the loader's own count of frames decoded.

use std::collections::{BTreeMap, VecDeque};
use std::error::Error;

use bytes::Bytes;
use prost::Message;
use reel_io::{MemorySource, Store};
use reel_loader::SampleSpec;
use reel_manifest::Manifest;
use reel_mcap::EpisodeReader;
use reel_mcap::proto::CompressedVideo;
use reel_video::{H264Decoder, RgbConversion, h264};

/// One camera of one episode: its access units and where each one's GOP starts.
struct CameraUnits {
    times: Vec<u64>,
    units: Vec<Bytes>,
    /// For each unit, the index of the latest keyframe at or before it.
    keyframe_of: Vec<usize>,
    /// Half the frame period: a time shows the latest frame at or before it plus this.
    half_ns: u64,
}

impl CameraUnits {
    fn new(messages: Vec<(u64, Bytes)>) -> Result<Self, Box<dyn Error>> {
        let mut times = Vec::with_capacity(messages.len());
        let mut units = Vec::with_capacity(messages.len());
        let mut keyframe_of = Vec::with_capacity(messages.len());
        let mut keyframe = None;
        for (i, (time, data)) in messages.into_iter().enumerate() {
            let unit = CompressedVideo::decode(data)?.data;
            if h264::is_idr(&unit) {
                keyframe = Some(i);
            }
            keyframe_of.push(keyframe.ok_or("the stream does not start with a keyframe")?);
            times.push(time);
            units.push(unit);
        }
        let mut gaps: Vec<u64> = times.windows(2).map(|w| w[1] - w[0]).collect();
        gaps.sort_unstable();
        let half_ns = gaps.get(gaps.len() / 2).copied().unwrap_or(33_333_333) / 2;
        Ok(Self {
            times,
            units,
            keyframe_of,
            half_ns,
        })
    }

    /// The last unit of the GOP holding unit `i`.
    fn gop_end(&self, i: usize) -> usize {
        let keyframe = self.keyframe_of[i];
        i + self.keyframe_of[i..]
            .iter()
            .take_while(|&&k| k == keyframe)
            .count()
            - 1
    }

    /// The unit shown at `t`: the latest at or before `t + half`, else the first.
    fn shown(&self, t: i64) -> usize {
        let q = (t + self.half_ns as i64).max(0) as u64;
        self.times.partition_point(|&k| k <= q).saturating_sub(1)
    }
}

/// What the bare replay cost.
pub struct Floor {
    pub samples: usize,
    pub frames_decoded: u64,
    /// CPU seconds of decoding alone, then of decoding and converting the shown frames.
    pub decode_s: f64,
    pub decode_rgb_s: f64,
}

/// How to replay: like the loader's configuration.
pub struct Replay {
    /// GOP decodes kept, as many as the loader's shared GOP cache holds.
    pub cache: usize,
    /// Decode each GOP through its last frame, as the loader does in its locality order.
    pub whole_gops: bool,
    pub conversion: RgbConversion,
    /// CPU seconds of the process so far.
    pub cpu_seconds: fn() -> f64,
}

/// Replays `samples` ((manifest row, anchor ns), in the loader's order) bare, on one
/// thread.
pub fn replay(
    manifest: &Manifest,
    store: &Store,
    spec: &SampleSpec,
    samples: &[(usize, i64)],
    how: &Replay,
) -> Result<Floor, Box<dyn Error>> {
    let mut cameras: BTreeMap<(usize, usize), CameraUnits> = BTreeMap::new();
    for &(row, _) in samples {
        if cameras.contains_key(&(row, 0)) {
            continue;
        }
        let uri = manifest.episode(row)?.uri()?.to_string();
        let reader = EpisodeReader::open(MemorySource::new(uri.clone(), store.read(&uri)?))?;
        for (ci, camera) in spec.cameras.iter().enumerate() {
            let messages = reader
                .read_topics(&[camera.topic.as_str()], 0..u64::MAX)?
                .into_iter()
                .map(|m| (m.log_time, m.data))
                .collect();
            let units = CameraUnits::new(messages).map_err(|e| format!("{uri}: {e}"))?;
            cameras.insert((row, ci), units);
        }
    }
    let offsets: Vec<Vec<i64>> = spec.cameras.iter().map(|c| c.offsets_ns()).collect();
    let run = |convert: bool| -> Result<(u64, f64), Box<dyn Error>> {
        let mut decoder = H264Decoder::with_conversion(how.conversion)?;
        // (row, camera, keyframe index, last unit decoded), most recent first.
        let mut kept: VecDeque<(usize, usize, usize, usize)> = VecDeque::new();
        let start = (how.cpu_seconds)();
        for &(row, anchor) in samples {
            for (ci, camera_offsets) in offsets.iter().enumerate() {
                let units = &cameras[&(row, ci)];
                for offset in camera_offsets {
                    let shown = units.shown(anchor + offset);
                    let keyframe = units.keyframe_of[shown];
                    if let Some(i) = kept.iter().position(|&(r, c, k, last)| {
                        (r, c, k) == (row, ci, keyframe) && last >= shown
                    }) {
                        let entry = kept.remove(i).ok_or("kept entry vanished")?;
                        kept.push_front(entry);
                        continue;
                    }
                    // Where the loader decodes whole GOPs (its locality order, for the
                    // next samples of a run), so does the floor.
                    let last = if how.whole_gops {
                        units.gop_end(shown)
                    } else {
                        shown
                    };
                    let run: Vec<&[u8]> = units.units[keyframe..=last]
                        .iter()
                        .map(|u| &u[..])
                        .collect();
                    let pictures =
                        decoder.decode_pictures(&run, &[shown - keyframe, last - keyframe])?;
                    if convert {
                        // The shown frame only.
                        for picture in pictures.iter().take(1) {
                            std::hint::black_box(decoder.to_rgb(picture, None)?);
                        }
                    }
                    kept.retain(|&(r, c, k, _)| (r, c, k) != (row, ci, keyframe));
                    kept.push_front((row, ci, keyframe, last));
                    kept.truncate(how.cache.max(1));
                }
            }
        }
        // Units skipped as unwanted non-reference pictures are not counted, as in the
        // loader's own count.
        Ok((decoder.units_decoded(), (how.cpu_seconds)() - start))
    };
    let (frames_decoded, decode_s) = run(false)?;
    let (_, decode_rgb_s) = run(true)?;
    Ok(Floor {
        samples: samples.len(),
        frames_decoded,
        decode_s,
        decode_rgb_s,
    })
}
