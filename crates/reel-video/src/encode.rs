//! The H.264 encoder: RGB frames (or decoded pictures, for a transcode) in, one access unit
//! per frame out, as a chain of libx264 frames or as star GOPs.

use ffmpeg_next::format::Pixel;
use ffmpeg_next::util::frame::Video as Frame;
use ffmpeg_next::{encoder, picture};

use crate::encoder_config::{EncoderConfig, GopStructure};
use crate::libx264::{EncodedFrame, drain, open_libx264};
use crate::picture::Picture;
use crate::scale::Scaler;
use crate::star::StarCoder;
use crate::{Error, Result, RgbImage, ffmpeg_err};

/// Encodes RGB frames of one camera to H.264. One per stream; not shared between threads.
///
/// Frames of any size are taken. 4:2:0 H.264 codes even sizes only (its cropping works in
/// 2-pixel steps), so an odd width or height is coded one pixel larger, the last column or
/// row repeated; [`Picture::crop`](crate::Picture::crop) gives the frame back.
pub struct H264Encoder {
    coder: Coder,
    scaler: Scaler,
    rgb: Frame,
    yuv: Frame,
    width: usize,
    height: usize,
    next_index: i64,
}

/// The size a frame of `width` x `height` is coded at: the next even size.
pub fn coded_size(width: usize, height: usize) -> (usize, usize) {
    (width + width % 2, height + height % 2)
}

/// What turns YUV frames into access units.
enum Coder {
    /// One libx264 encoder for the whole stream.
    Chain(encoder::Video),
    /// A libx264 encoder per frame, its output restructured (see [`GopStructure::Star`]).
    Star(StarCoder),
}

impl std::fmt::Debug for H264Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "H264Encoder({}x{}, {} frames)",
            self.width, self.height, self.next_index
        )
    }
}

impl H264Encoder {
    /// Opens the H.264 encoder (libx264 unless configured otherwise) for `width` x `height` frames.
    pub fn new(width: usize, height: usize, config: &EncoderConfig) -> Result<Self> {
        if width == 0 || height == 0 {
            return Err(Error::InvalidInput(format!(
                "frame size {width}x{height}: H.264 needs non-zero dimensions"
            )));
        }
        let (coded_width, coded_height) = coded_size(width, height);
        if config.gop == 0 || config.fps == 0 {
            return Err(Error::InvalidInput("gop and fps must be at least 1".into()));
        }
        let coder = match config.structure {
            GopStructure::Chain => Coder::Chain(open_libx264(
                config,
                (coded_width, coded_height),
                &format!(
                    "keyint={0}:min-keyint={0}:scenecut=0:repeat-headers=1:bframes={1}",
                    config.gop, config.b_frames
                ),
            )?),
            GopStructure::Star => {
                if config.b_frames != 0 {
                    return Err(Error::InvalidInput(
                        "star GOPs have no B-frames: set b_frames to 0".into(),
                    ));
                }
                Coder::Star(StarCoder::new(config, (coded_width, coded_height)))
            }
        };
        Ok(Self {
            coder,
            scaler: Scaler::default(),
            rgb: Frame::new(Pixel::RGB24, coded_width as u32, coded_height as u32),
            yuv: Frame::new(
                config.chroma.pixel(),
                coded_width as u32,
                coded_height as u32,
            ),
            width,
            height,
            next_index: 0,
        })
    }

    /// Encodes one frame; returns the access units that became ready (possibly none yet,
    /// libx264 looks ahead).
    pub fn push(&mut self, frame: &RgbImage) -> Result<Vec<EncodedFrame>> {
        self.push_frame(frame, false)
    }

    /// Encodes one frame as an IDR keyframe, starting a new GOP here (e.g. at the start of
    /// a time window, so chunks of several cameras align on keyframes).
    pub fn push_keyframe(&mut self, frame: &RgbImage) -> Result<Vec<EncodedFrame>> {
        self.push_frame(frame, true)
    }

    fn push_frame(&mut self, frame: &RgbImage, keyframe: bool) -> Result<Vec<EncodedFrame>> {
        if frame.width != self.width
            || frame.height != self.height
            || frame.data.len() != self.width * self.height * 3
        {
            return Err(Error::InvalidInput(format!(
                "frame {} is {}x{} with {} bytes, the encoder takes {}x{} RGB",
                self.next_index,
                frame.width,
                frame.height,
                frame.data.len(),
                self.width,
                self.height
            )));
        }
        let row = self.width * 3;
        let (coded_width, coded_height) = coded_size(self.width, self.height);
        let stride = self.rgb.stride(0);
        let plane = self.rgb.data_mut(0);
        for (y, src) in frame.data.chunks_exact(row).enumerate() {
            let line = &mut plane[y * stride..y * stride + coded_width * 3];
            line[..row].copy_from_slice(src);
            if coded_width > self.width {
                line.copy_within(row - 3..row, row);
            }
        }
        if coded_height > self.height {
            let last = (self.height - 1) * stride;
            plane.copy_within(last..last + coded_width * 3, self.height * stride);
        }
        self.scaler.run(&self.rgb, &mut self.yuv)?;
        self.send(keyframe)
    }

    /// Whether [`push_picture`](Self::push_picture) takes `picture`: a decoded picture of
    /// this encoder's coded size.
    pub fn takes_picture(&self, picture: &Picture) -> bool {
        (picture.width(), picture.height()) == coded_size(self.width, self.height)
    }

    /// Encodes a decoded picture of another stream (a transcode) as it is, never through
    /// RGB: a YUV 4:2:0 picture is copied plane by plane, so the transcode loses only what
    /// the encoder does, not a chroma resampling each way. `keyframe` as in
    /// [`push_keyframe`](Self::push_keyframe).
    pub fn push_picture(&mut self, picture: &Picture, keyframe: bool) -> Result<Vec<EncodedFrame>> {
        if !self.takes_picture(picture) {
            return Err(Error::InvalidInput(format!(
                "a {}x{} picture for an encoder of {}x{} (coded {:?})",
                picture.width(),
                picture.height(),
                self.width,
                self.height,
                coded_size(self.width, self.height)
            )));
        }
        self.scaler.run(&picture.frame, &mut self.yuv)?;
        self.send(keyframe)
    }

    /// Sends the picture in `yuv` to the encoder.
    fn send(&mut self, keyframe: bool) -> Result<Vec<EncodedFrame>> {
        self.yuv.set_pts(Some(self.next_index));
        self.yuv.set_kind(if keyframe {
            picture::Type::I
        } else {
            picture::Type::None
        });
        self.next_index += 1;
        match &mut self.coder {
            Coder::Chain(encoder) => {
                encoder
                    .send_frame(&self.yuv)
                    .map_err(ffmpeg_err("sending a frame to libx264"))?;
                drain(encoder)
            }
            Coder::Star(star) => star.push(&mut self.yuv, keyframe).map(|unit| vec![unit]),
        }
    }

    /// Flushes the encoder and returns the remaining access units.
    pub fn finish(self) -> Result<Vec<EncodedFrame>> {
        match self.coder {
            Coder::Chain(mut encoder) => {
                encoder.send_eof().map_err(ffmpeg_err("flushing libx264"))?;
                drain(&mut encoder)
            }
            // Each frame came out when it went in.
            Coder::Star(_) => Ok(Vec::new()),
        }
    }
}
