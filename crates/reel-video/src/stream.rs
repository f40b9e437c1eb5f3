//! Recorded video decoded front to back: the H.264, H.265 or AV1 a robot or a dataset
//! recorded, one access unit per message, turned back into RGB pictures so it can be re-encoded canonically.

use ffmpeg_next::codec::Id;
use ffmpeg_next::util::frame::Video as Frame;
use ffmpeg_next::{Packet, decoder};

use crate::decode::{is_again, open_decoder};
use crate::picture::Picture;
use crate::scale::Scaler;
use crate::{Error, Result, RgbConversion, RgbImage};

/// The codec of a recorded video stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VideoCodec {
    /// H.264 / AVC.
    H264,
    /// H.265 / HEVC.
    H265,
    /// AV1 (low-overhead OBUs, one temporal unit per message), as LeRobot datasets store
    /// their video by default; decoded by dav1d.
    Av1,
}

impl VideoCodec {
    /// The codec of a `foxglove.CompressedVideo` `format` (`h264`, `h265`, `av1`; `avc`,
    /// `hevc`).
    pub fn from_name(format: &str) -> Option<Self> {
        match format.to_ascii_lowercase().as_str() {
            "h264" | "avc" => Some(Self::H264),
            "h265" | "hevc" => Some(Self::H265),
            "av1" => Some(Self::Av1),
            _ => None,
        }
    }

    /// `h264`, `h265` or `av1`.
    pub fn name(self) -> &'static str {
        match self {
            Self::H264 => "h264",
            Self::H265 => "h265",
            Self::Av1 => "av1",
        }
    }

    fn id(self) -> Id {
        match self {
            Self::H264 => Id::H264,
            Self::H265 => Id::HEVC,
            Self::Av1 => Id::AV1,
        }
    }
}

/// Decodes one recorded stream in order, access unit by access unit, to RGB pictures in
/// presentation order. One per stream; not shared between threads.
pub struct StreamDecoder {
    codec: VideoCodec,
    decoder: decoder::Video,
    scaler: Scaler,
}

impl std::fmt::Debug for StreamDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StreamDecoder({})", self.codec.name())
    }
}

impl StreamDecoder {
    /// Opens FFmpeg's decoder for `codec`, converting to RGB the accurate way.
    pub fn new(codec: VideoCodec) -> Result<Self> {
        Self::with_conversion(codec, RgbConversion::Accurate)
    }

    /// Opens FFmpeg's decoder for `codec`, converting to RGB with `conversion`.
    pub fn with_conversion(codec: VideoCodec, conversion: RgbConversion) -> Result<Self> {
        Ok(Self {
            codec,
            decoder: open_decoder(codec.id(), codec.name())?,
            scaler: Scaler::with_conversion(conversion),
        })
    }

    /// Decodes the next access unit; returns the pictures that became ready (none while
    /// the decoder holds frames back to reorder them). A unit that does not decode is an
    /// error, and the stream goes on with the next one.
    pub fn push(&mut self, unit: &[u8]) -> Result<Vec<RgbImage>> {
        let pictures = self.push_pictures(unit)?;
        self.all_to_rgb(pictures)
    }

    /// The pictures still held back, after the last unit.
    pub fn finish(&mut self) -> Result<Vec<RgbImage>> {
        let pictures = self.finish_pictures()?;
        self.all_to_rgb(pictures)
    }

    /// Like [`push`](Self::push), but the pictures stay in the decoder's pixel format:
    /// for a transcode that encodes them as they are ([`H264Encoder::push_picture`]).
    ///
    /// [`H264Encoder::push_picture`]: crate::H264Encoder::push_picture
    pub fn push_pictures(&mut self, unit: &[u8]) -> Result<Vec<Picture>> {
        self.decoder
            .send_packet(&Packet::copy(unit))
            .map_err(|source| Error::Decode {
                what: "a recorded video access unit",
                source,
            })?;
        self.receive()
    }

    /// Like [`finish`](Self::finish), but the pictures stay in the decoder's pixel format.
    pub fn finish_pictures(&mut self) -> Result<Vec<Picture>> {
        self.decoder.send_eof().map_err(|source| Error::Decode {
            what: "the end of a recorded video",
            source,
        })?;
        self.receive()
    }

    /// Converts a picture to packed RGB at its own size, with this decoder's conversion.
    pub fn to_rgb(&mut self, picture: &Picture) -> Result<RgbImage> {
        self.scaler.convert_to_rgb(&picture.frame, None)
    }

    fn all_to_rgb(&mut self, pictures: Vec<Picture>) -> Result<Vec<RgbImage>> {
        pictures.iter().map(|p| self.to_rgb(p)).collect()
    }

    fn receive(&mut self) -> Result<Vec<Picture>> {
        let mut out = Vec::new();
        loop {
            let mut frame = Frame::empty();
            match self.decoder.receive_frame(&mut frame) {
                Ok(()) => out.push(Picture { frame }),
                Err(ffmpeg_next::Error::Eof) => return Ok(out),
                Err(e) if is_again(&e) => return Ok(out),
                Err(source) => {
                    return Err(Error::Decode {
                        what: "a recorded video picture",
                        source,
                    });
                }
            }
        }
    }
}
