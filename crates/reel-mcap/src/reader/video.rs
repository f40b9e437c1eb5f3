//! Cameras: the access units of `foxglove.CompressedVideo` messages, the GOPs that serve
//! requested times ([`PlannedGop`]), and their decoded pictures ([`DecodedGop`]).
//!
//! Decoding itself is reel-video's ([`H264Decoder`], passed in by the caller); this file
//! only decides which units to hand it.

use std::collections::{BTreeSet, HashMap};
use std::sync::OnceLock;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use prost::Message as _;
use reel_io::ByteSource;
use reel_video::{H264Decoder, Picture, RgbImage};

use super::plan::{self, FrameFetch, GopPlan, GopSpan, Keyframe, Units};
use super::{EpisodeReader, Index, RawMessage};
use crate::proto::CompressedVideo;
use crate::records::{CameraInfo, ChannelContent, ChannelInfo};
use crate::writer::is_idr;
use crate::{Error, Result};

/// One H.264 access unit of a camera, unwrapped from its message once when fetched.
#[derive(Debug, Clone)]
struct AccessUnit {
    /// Whether it holds an IDR picture, where decoding can start.
    keyframe: bool,
    /// Whether later units may predict from it.
    reference: bool,
    /// The Annex B bytes.
    data: Bytes,
}

impl Keyframe for AccessUnit {
    fn is_keyframe(&self) -> bool {
        self.keyframe
    }

    fn is_reference(&self) -> bool {
        self.reference
    }
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
        if t >= self.end_ns {
            return None;
        }
        self.latest_index(t)
    }

    /// The picture of the latest decoded frame at or before `t`, whatever span this GOP is
    /// known to cover.
    fn latest_index(&self, t: u64) -> Option<usize> {
        if t < self.start_ns {
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

    /// The latest frame at or before `t` as RGB, with its log time, if its picture was kept,
    /// even past [`end_ns`](Self::end_ns): for a caller whose own plan found `t` shown by
    /// this GOP (a GOP decoded for another request knows its span only up to that
    /// request's times, so [`rgb_at`](Self::rgb_at) cannot tell).
    pub fn rgb_latest_at(
        &self,
        t: u64,
        decoder: &mut H264Decoder,
    ) -> std::result::Result<Option<(u64, &RgbImage)>, reel_video::Error> {
        match self.latest_index(t) {
            Some(i) => self.rgb(i, decoder).map(Some),
            None => Ok(None),
        }
    }

    /// Size of the RGB frames this GOP converts to (width, height): its output size, or
    /// its pictures' own.
    pub fn rgb_size(&self) -> Option<(usize, usize)> {
        self.size.or_else(|| {
            self.pictures
                .first()
                .map(|(_, picture, _)| (picture.width(), picture.height()))
        })
    }

    /// Like [`rgb_latest_at`](Self::rgb_latest_at), but writes the RGB frame into `dst`
    /// (exactly [`rgb_size`](Self::rgb_size)'s `width * height * 3` bytes) and returns
    /// its log time. A frame not yet converted is converted straight into `dst` and not
    /// kept: for a caller that uses each frame once (a globally shuffled sample), which
    /// then skips an image and its copy.
    pub fn rgb_latest_into(
        &self,
        t: u64,
        decoder: &mut H264Decoder,
        dst: &mut [u8],
    ) -> std::result::Result<Option<u64>, reel_video::Error> {
        let Some(i) = self.latest_index(t) else {
            return Ok(None);
        };
        let (time, picture, rgb) = &self.pictures[i];
        match rgb.get() {
            Some(image) if image.data.len() == dst.len() => dst.copy_from_slice(&image.data),
            Some(image) => {
                return Err(reel_video::Error::InvalidInput(format!(
                    "a {}x{} RGB frame does not fit {} bytes",
                    image.width,
                    image.height,
                    dst.len()
                )));
            }
            None => decoder.to_rgb_into(picture, self.size, dst)?,
        }
        Ok(Some(*time))
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
    units: Vec<(u64, Bytes)>,
}

impl PlannedGop {
    fn new(topic: &str, stream: &Units<AccessUnit>, span: GopSpan, whole: bool) -> Self {
        Self {
            topic: topic.to_owned(),
            start_ns: span.keyframe,
            end_ns: span.end_ns,
            shown: (!whole).then_some(span.shown),
            units: stream
                .range(span.keyframe..=span.through)
                .map(|(k, u)| (*k, u.data.clone()))
                .collect(),
        }
    }

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

    fn unit_refs(&self) -> Vec<&[u8]> {
        self.units.iter().map(|(_, u)| u.as_ref()).collect()
    }

    /// Position of the unit logged at `time` among this GOP's units.
    fn index_of(&self, time: u64) -> Option<usize> {
        self.units.binary_search_by_key(&time, |(k, _)| *k).ok()
    }
}

/// The access units fetched for camera requests, per channel.
struct CameraUnits {
    /// Channel of each request, in request order.
    ids: Vec<u16>,
    units: HashMap<u16, Units<AccessUnit>>,
}

impl CameraUnits {
    /// The units of the `request`th camera requested, by log time.
    fn of_request(&self, request: usize) -> &Units<AccessUnit> {
        static NONE: Units<AccessUnit> = Units::new();
        self.ids
            .get(request)
            .and_then(|id| self.units.get(id))
            .unwrap_or(&NONE)
    }
}

impl<S: ByteSource> EpisodeReader<S> {
    /// Finds the GOPs that hold a frame shown at one of the requested times (`(topic,
    /// times)` pairs), with their access units, without decoding: whole, to keep every
    /// picture, or (`whole = false`) from the keyframe through the latest frame requested,
    /// to keep only the requested pictures. Chunks are fetched as in
    /// [`frames`](Self::frames). Callers that share decoded GOPs between threads look at
    /// each GOP's keyframe time before deciding to decode it with
    /// [`decode_gop`](Self::decode_gop); callers that serve many nearby samples keep whole
    /// GOPs and decode each one once, callers with scattered times decode less.
    pub fn plan_gops(
        &self,
        requests: &[(&str, &[u64])],
        whole: bool,
    ) -> Result<Vec<Vec<PlannedGop>>> {
        let cameras = self.camera_units(requests)?;
        requests
            .iter()
            .enumerate()
            .map(|(request, (topic, times))| {
                let stream = cameras.of_request(request);
                let plan = self.plan_camera(topic, stream, times, whole)?;
                Ok(plan
                    .gops
                    .into_iter()
                    .map(|span| PlannedGop::new(topic, stream, span, whole))
                    .collect())
            })
            .collect()
    }

    /// Decodes a GOP found by [`plan_gops`](Self::plan_gops); its pictures convert to RGB
    /// at `size` (or the stream's own size) when first asked for.
    pub fn decode_gop(
        &self,
        gop: &PlannedGop,
        decoder: &mut H264Decoder,
        size: Option<(usize, usize)>,
    ) -> Result<DecodedGop> {
        let refs = gop.unit_refs();
        let times: Vec<u64> = gop.units.iter().map(|(k, _)| *k).collect();
        let wanted: Vec<usize> = times
            .iter()
            .enumerate()
            .filter(|(_, k)| gop.shown.as_ref().is_none_or(|s| s.contains(k)))
            .map(|(i, _)| i)
            .collect();
        let pictures = self.decode_cropped(&gop.topic, decoder, &refs, &wanted)?;
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
        let cameras = self.camera_units(requests)?;
        let mut out = Vec::with_capacity(requests.len());
        for (request, (topic, times)) in requests.iter().enumerate() {
            let stream = cameras.of_request(request);
            let plan = self.plan_camera(topic, stream, times, false)?;
            let mut pictures: Vec<Option<RgbImage>> = vec![None; times.len()];
            for (index, span) in plan.gops.into_iter().enumerate() {
                let gop = PlannedGop::new(topic, stream, span, false);
                // The requested times this GOP serves: their slots and the units shown.
                let mut slots = Vec::new();
                let mut wanted = Vec::new();
                for (slot, &(gop_index, frame)) in plan.shown.iter().enumerate() {
                    if gop_index != index {
                        continue;
                    }
                    let unit = gop.index_of(frame).ok_or_else(|| Error::NoFrame {
                        name: self.name.clone(),
                        topic: (*topic).into(),
                        time: times[slot],
                    })?;
                    slots.push(slot);
                    wanted.push(unit);
                }
                let decoded = self
                    .decode_cropped(topic, decoder, &gop.unit_refs(), &wanted)?
                    .iter()
                    .map(|picture| decoder.to_rgb(picture, size))
                    .collect::<std::result::Result<Vec<_>, _>>()
                    .map_err(|source| self.video_error(topic, source))?;
                for (slot, picture) in slots.into_iter().zip(decoded) {
                    pictures[slot] = Some(picture);
                }
            }
            out.push(pictures.into_iter().flatten().collect());
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

    /// The GOPs serving `times` among one camera's fetched units.
    fn plan_camera(
        &self,
        topic: &str,
        stream: &Units<AccessUnit>,
        times: &[u64],
        whole: bool,
    ) -> Result<GopPlan> {
        plan::plan_gops(stream, times, whole).map_err(|time| Error::NoFrame {
            name: self.name.clone(),
            topic: topic.into(),
            time,
        })
    }

    /// The access units (by log time) of each requested camera from every chunk needed to
    /// decode the frames shown at the requested times: back to each GOP's keyframe.
    fn camera_units(&self, requests: &[(&str, &[u64])]) -> Result<CameraUnits> {
        let ids: Vec<u16> = requests
            .iter()
            .map(|(t, _)| self.channel_id(t))
            .collect::<Result<_>>()?;
        let mut units: HashMap<u16, Units<AccessUnit>> = HashMap::new();
        match &self.index {
            Index::Scanned { messages, .. } => {
                for (id, m) in messages.iter().filter(|(id, _)| ids.contains(id)) {
                    units
                        .entry(*id)
                        .or_default()
                        .insert(m.log_time, self.access_unit(m)?);
                }
            }
            Index::Summary(summary) => {
                let wanted = ids.iter().copied().zip(requests.iter().map(|r| r.1));
                let mut fetch = FrameFetch::new(&summary.chunk_indexes, wanted.collect());
                loop {
                    let runs = fetch.next_runs(&units);
                    if runs.is_empty() {
                        break;
                    }
                    for run in runs {
                        for (id, m) in self.read_run(&run, |id, _| ids.contains(&id))? {
                            let unit = self.access_unit(&m)?;
                            units.entry(id).or_default().insert(m.log_time, unit);
                        }
                    }
                }
            }
        }
        Ok(CameraUnits { ids, units })
    }

    /// Unwraps a camera message's access unit and notes whether it is a keyframe, once per
    /// fetched message. A message that does not parse is an error: decoding around it
    /// would silently show a stale or missing picture.
    fn access_unit(&self, message: &RawMessage) -> Result<AccessUnit> {
        let video =
            CompressedVideo::decode(message.data.clone()).map_err(|e| Error::BadMessage {
                name: self.name.clone(),
                topic: message.topic.to_string(),
                log_time: message.log_time,
                reason: format!("not a foxglove.CompressedVideo message: {e}"),
            })?;
        let data = video.data;
        Ok(AccessUnit {
            keyframe: is_idr(&data),
            reference: reel_video::h264::is_reference(&data),
            data,
        })
    }

    /// Decodes a run of units, each picture cropped to the camera's size (`reel.width` x
    /// `reel.height`) where it was coded larger (odd sizes are coded one pixel larger).
    fn decode_cropped(
        &self,
        topic: &str,
        decoder: &mut H264Decoder,
        units: &[&[u8]],
        wanted: &[usize],
    ) -> Result<Vec<Picture>> {
        let before = decoder.units_decoded();
        let decoded = decoder.decode_pictures(units, wanted);
        self.frames_decoded
            .fetch_add(decoder.units_decoded() - before, Ordering::Relaxed);
        let mut pictures = decoded.map_err(|source| self.video_error(topic, source))?;
        // Frames coded at a padded size are cropped to the camera's own; a camera without
        // the canonical metadata (a landing log's) is left as decoded.
        if let Ok(ChannelInfo {
            content: ChannelContent::Camera(CameraInfo { width, height, .. }),
            ..
        }) = self.channel_info(topic)
        {
            for picture in &mut pictures {
                let coded = (picture.width(), picture.height());
                if coded != (width, height) && coded == reel_video::coded_size(width, height) {
                    picture
                        .crop(width, height)
                        .map_err(|source| self.video_error(topic, source))?;
                }
            }
        }
        Ok(pictures)
    }

    fn video_error(&self, topic: &str, source: reel_video::Error) -> Error {
        Error::Video {
            name: self.name.clone(),
            topic: topic.into(),
            source,
        }
    }
}
