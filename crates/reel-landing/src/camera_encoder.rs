//! The one way a landing camera's pictures become a canonical H.264 stream, shared by
//! `reel-pack` and ingest: a keyframe forced at the start of every camera chunk window,
//! a recorded video's decoded pictures encoded as decoded (a round trip through RGB would
//! resample their chroma twice), each frame timed as its caller says.

use reel_mcap::records::CameraWindows;
use reel_mcap::{Error, Result, VideoFrame};
use reel_video::{EncodedFrame, EncoderConfig, H264Encoder};

use crate::frames::DecodedFrame;

/// The times a canonical frame is written with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameTimes {
    /// MCAP log time (ns).
    pub log_time: u64,
    /// MCAP publish time (ns).
    pub publish_time: u64,
    /// Capture stamp (ns).
    pub stamp_ns: u64,
}

impl FrameTimes {
    /// One time for all three: a frame placed on a resampled grid.
    pub fn at(t: u64) -> Self {
        Self {
            log_time: t,
            publish_time: t,
            stamp_ns: t,
        }
    }
}

/// Encodes one camera's frames, in time order, into canonical H.264 access units.
pub struct CameraEncoder<'a> {
    name: &'a str,
    topic: &'a str,
    windows: CameraWindows,
    config: EncoderConfig,
    encoder: Option<H264Encoder>,
    size: Option<(usize, usize)>,
    last_window: Option<u64>,
    times: Vec<FrameTimes>,
    units: Vec<EncodedFrame>,
}

impl std::fmt::Debug for CameraEncoder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CameraEncoder")
            .field("name", &self.name)
            .field("topic", &self.topic)
            .field("size", &self.size)
            .field("frames", &self.times.len())
            .finish()
    }
}

impl<'a> CameraEncoder<'a> {
    /// An encoder for the camera on `topic` of the recording `name` (both for errors),
    /// whose keyframes start every window of `windows`.
    pub fn new(
        name: &'a str,
        topic: &'a str,
        windows: CameraWindows,
        config: EncoderConfig,
    ) -> Self {
        Self {
            name,
            topic,
            windows,
            config,
            encoder: None,
            size: None,
            last_window: None,
            times: Vec::new(),
            units: Vec::new(),
        }
    }

    /// The stream's frame size, set by its first frame.
    pub fn size(&self) -> Option<(usize, usize)> {
        self.size
    }

    /// Encodes `frame` at `times`. A frame of another size than the stream's first is
    /// refused as bad input: a stream has one size.
    pub fn push(&mut self, frame: &DecodedFrame, times: FrameTimes) -> Result<()> {
        let image = &frame.rgb;
        let size = *self.size.get_or_insert((image.width, image.height));
        if size != (image.width, image.height) {
            return Err(Error::BadMessage {
                name: self.name.to_owned(),
                topic: self.topic.to_owned(),
                log_time: times.log_time,
                reason: format!(
                    "frame is {}x{}, the stream started at {}x{}",
                    image.width, image.height, size.0, size.1
                ),
            });
        }
        let encoder = match &mut self.encoder {
            Some(e) => e,
            None => self.encoder.insert(
                H264Encoder::new(size.0, size.1, &self.config).map_err(|e| self.video_error(e))?,
            ),
        };
        let window = self.windows.of(times.log_time);
        let keyframe = self.last_window != Some(window);
        let units = match &frame.picture {
            Some(picture) if encoder.takes_picture(picture) => {
                encoder.push_picture(picture, keyframe)
            }
            _ if keyframe => encoder.push_keyframe(image),
            _ => encoder.push(image),
        };
        let units = units.map_err(|e| self.video_error(e))?;
        self.last_window = Some(window);
        self.times.push(times);
        self.units.extend(units);
        Ok(())
    }

    /// The encoded frames, each with the times its input was pushed with.
    pub fn finish(mut self) -> Result<Vec<VideoFrame>> {
        if let Some(encoder) = self.encoder.take() {
            let rest = encoder.finish().map_err(|e| self.video_error(e))?;
            self.units.extend(rest);
        }
        let times = self.times;
        Ok(self
            .units
            .into_iter()
            .filter_map(|unit| {
                let t = times.get(unit.index as usize)?;
                Some(VideoFrame {
                    log_time: t.log_time,
                    publish_time: t.publish_time,
                    stamp_ns: t.stamp_ns,
                    data: unit.data,
                })
            })
            .collect())
    }

    fn video_error(&self, source: reel_video::Error) -> Error {
        Error::Video {
            name: self.name.to_owned(),
            topic: self.topic.to_owned(),
            source,
        }
    }
}
