//! A landing camera's frames as RGB pictures, in order: pictures decode one by one, a
//! recorded video decodes in sequence. Both canonical encoders (`reel-pack` and ingest)
//! read cameras through it.

use std::collections::VecDeque;

use reel_video::{ImageDecoder, Picture, RgbImage, StreamDecoder};

use crate::episode::{ImageEncoding, LandingCamera};

/// Decodes the frames of one landing camera front to back.
#[derive(Debug)]
pub struct CameraFrames<'a> {
    camera: &'a LandingCamera,
    images: ImageDecoder,
    video: Option<StreamDecoder>,
    /// Pictures a recorded video has output and not yet handed out.
    ready: VecDeque<Picture>,
    /// Units a recorded video has been fed.
    fed: usize,
    finished: bool,
    next: usize,
}

impl<'a> CameraFrames<'a> {
    /// Starts at the camera's first frame.
    pub fn new(camera: &'a LandingCamera) -> Self {
        Self {
            camera,
            images: ImageDecoder::new(),
            video: None,
            ready: VecDeque::new(),
            fed: 0,
            finished: false,
            next: 0,
        }
    }

    /// The next frame: its index in the camera's frames and its picture, or why it has
    /// none. Every frame is handed out once, in order.
    ///
    /// A recorded video's pictures come out of its decoder in presentation order and are
    /// handed to the frames in message order: the n-th picture is the n-th message's.
    /// Frames left without a picture at the end (units that did not decode) are errors.
    pub fn next_frame(&mut self) -> Option<(usize, Result<RgbImage, reel_video::Error>)> {
        self.next_decoded()
            .map(|(index, decoded)| (index, decoded.map(|d| d.rgb)))
    }

    /// Like [`next_frame`](Self::next_frame), with a recorded video's decoded picture
    /// beside its RGB, for an encoder that takes it as it is.
    pub fn next_decoded(&mut self) -> Option<(usize, Result<DecodedFrame, reel_video::Error>)> {
        let index = self.next;
        let frame = self.camera.frames.get(index)?;
        self.next += 1;
        let decoded = match frame.encoding {
            ImageEncoding::Video { codec } => self.next_picture(codec),
            _ => frame
                .encoding
                .to_rgb(&mut self.images, &frame.data)
                .map(|rgb| DecodedFrame { rgb, picture: None }),
        };
        Some((index, decoded))
    }

    fn next_picture(
        &mut self,
        codec: reel_video::VideoCodec,
    ) -> Result<DecodedFrame, reel_video::Error> {
        let mut failure = None;
        let decoder = match &mut self.video {
            Some(d) => d,
            // The fast conversion: the RGB is for measurements; the encoder takes the
            // picture itself.
            None => self.video.insert(StreamDecoder::with_conversion(
                codec,
                reel_video::RgbConversion::Fast,
            )?),
        };
        while self.ready.is_empty() && !self.finished {
            let pictures = match self.camera.frames.get(self.fed) {
                Some(unit) => {
                    self.fed += 1;
                    decoder.push_pictures(&unit.data)
                }
                None => {
                    self.finished = true;
                    decoder.finish_pictures()
                }
            };
            match pictures {
                Ok(pictures) => self.ready.extend(pictures),
                // The stream goes on; the failure is this frame's if no picture follows.
                Err(e) => failure = Some(e),
            }
        }
        let picture = self.ready.pop_front().ok_or_else(|| {
            failure.unwrap_or_else(|| {
                reel_video::Error::NoPicture("the recorded video ended first".into())
            })
        })?;
        Ok(DecodedFrame {
            rgb: decoder.to_rgb(&picture)?,
            picture: Some(picture),
        })
    }
}

/// A landing frame decoded: its RGB picture and, for recorded video, the decoder's own
/// picture (YUV), which a transcode encodes without going through RGB.
#[derive(Debug)]
pub struct DecodedFrame {
    /// The frame as RGB.
    pub rgb: RgbImage,
    /// The decoded picture of a recorded video.
    pub picture: Option<Picture>,
}

impl Iterator for CameraFrames<'_> {
    type Item = (usize, Result<RgbImage, reel_video::Error>);

    fn next(&mut self) -> Option<Self::Item> {
        self.next_frame()
    }
}
