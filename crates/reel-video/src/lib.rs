//! Video for Reel: camera frames in, H.264 access units out, and back to RGB.
//!
//! * [`H264Encoder`] turns RGB frames into one H.264 access unit (Annex B) per frame with
//!   libx264: fixed GOP length, CRF rate control, no B-frames and `tune=fastdecode` by
//!   default, SPS/PPS repeated on every keyframe so each GOP decodes on its own.
//! * [`H264Decoder`] decodes a run of access units starting at a keyframe and returns the
//!   frames asked for, as packed RGB at a requested size. Make one per worker thread; it
//!   holds no shared state.
//! * [`ImageDecoder`] decodes landing frames (JPEG, PNG) to RGB; [`raw_to_rgb`] converts
//!   uncompressed ones (RGB/BGR(A), mono, YUV 4:2:2, Bayer) at any row stride.
//! * [`raw_to_depth`] and [`decode_compressed_depth`] read 16-bit depth (`16UC1`, `32FC1`
//!   metres to millimetres by [`metres_to_mm`], `compressedDepth` PNG and [`rvl`]) and
//!   `mono16` losslessly into a [`DepthImage`].
//! * [`StreamDecoder`] decodes a recorded H.264 or H.265 stream front to back, for
//!   transcoding; [`h264`] reads what an access unit holds (keyframe, parameter sets,
//!   B slices) without decoding it.
//! * Odd frame sizes are coded one pixel larger ([`coded_size`]) and cropped back with
//!   [`Picture::crop`].
//! * [`quality`] measures PSNR and SSIM against raw frames, for codec benchmarks.
//!
//! ```
//! use reel_video::{EncoderConfig, H264Decoder, H264Encoder, RgbImage};
//!
//! let (w, h) = (64, 48);
//! let frame = |i: usize| RgbImage::new(w, h, (0..w * h * 3).map(|p| ((p / 3 + i * 4) % 256) as u8).collect());
//! let config = EncoderConfig { gop: 5, ..EncoderConfig::default() };
//! let mut encoder = H264Encoder::new(w, h, &config)?;
//! let mut units = Vec::new();
//! for i in 0..10 {
//!     units.extend(encoder.push(&frame(i))?);
//! }
//! units.extend(encoder.finish()?);
//! assert_eq!(units.len(), 10);
//! assert!(units[5].keyframe && !units[6].keyframe);
//!
//! // Frame 7 decodes from its GOP's keyframe, frame 5.
//! let gop: Vec<&[u8]> = units[5..=7].iter().map(|u| u.data.as_slice()).collect();
//! let mut decoder = H264Decoder::new()?;
//! let decoded = decoder.decode_run(&gop, &[2], None)?;
//! let psnr = reel_video::quality::psnr(&frame(7).data, &decoded[0].data);
//! assert!(psnr > 30.0, "{psnr}");
//! # Ok::<(), reel_video::Error>(())
//! ```

mod container;
mod decode;
mod depth;
mod encode;
mod encoder_config;
pub mod h264;
mod libx264;
mod mp4_writer;
mod picture;
pub mod quality;
mod raw;
mod scale;
mod star;
mod stream;
pub use scale::RgbConversion;

pub use container::{ContainerUnit, VideoSpan, read_video_span};
pub use decode::{H264Decoder, ImageDecoder, ImageFormat};
pub use depth::{
    DepthCodec, DepthImage, DepthLayout, DepthUnit, check_depth, compressed_depth_format,
    decode_compressed_depth, metres_to_mm, mm_to_metres, raw_to_depth, rvl,
};
pub use encode::{H264Encoder, coded_size};
pub use encoder_config::{ChromaFormat, DEFAULT_ENCODER, EncoderConfig, GopStructure};
pub use libx264::EncodedFrame;
pub use mp4_writer::{Mp4Encoding, Mp4Writer};
pub use picture::Picture;
pub use raw::{BayerPattern, PixelLayout, check_raw, raw_to_rgb};
pub use reel_io::{ErrorKind, Kinded};
pub use stream::{StreamDecoder, VideoCodec};

/// Errors of encoding and decoding.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// FFmpeg lacks a codec Reel needs (e.g. built without libx264).
    #[error("codec `{0}` is not available in this FFmpeg build")]
    CodecMissing(String),
    /// A frame or configuration the encoder cannot take.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// Bytes that do not decode (corrupt or truncated image or access unit).
    #[error("cannot decode {what}: {source}")]
    Decode {
        /// What was being decoded.
        what: &'static str,
        /// FFmpeg's error.
        #[source]
        source: ffmpeg_next::Error,
    },
    /// The decoder consumed the input but produced no picture for a requested frame.
    #[error("decoder produced no picture for {0}")]
    NoPicture(String),
    /// The encoder's output is not what Reel can restructure into star GOPs (settings
    /// another encoder or version does not honour), or it was not reproducible.
    #[error("cannot restructure the encoder's output: {0}")]
    Bitstream(String),
    /// A video file that cannot be read (no video stream, truncated, not a container
    /// FFmpeg reads).
    #[error("{path}: {reason}")]
    Container {
        /// The file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Any other FFmpeg failure (opening a codec, scaling).
    #[error("ffmpeg: {context}: {source}")]
    Ffmpeg {
        /// The step that failed.
        context: &'static str,
        /// FFmpeg's error.
        #[source]
        source: ffmpeg_next::Error,
    },
}

/// Bytes that do not decode are bad input; a codec this FFmpeg lacks, or FFmpeg failing
/// on its own, is the environment.
impl Kinded for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            Self::InvalidInput(_)
            | Self::Decode { .. }
            | Self::NoPicture(_)
            | Self::Container { .. } => ErrorKind::BadInput,
            Self::CodecMissing(_) | Self::Ffmpeg { .. } | Self::Bitstream(_) => {
                ErrorKind::Environment
            }
        }
    }
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

pub(crate) fn ffmpeg_err(context: &'static str) -> impl FnOnce(ffmpeg_next::Error) -> Error {
    move |source| Error::Ffmpeg { context, source }
}

/// A packed 8-bit RGB image (`width * height * 3` bytes, rows top to bottom).
#[derive(Clone, PartialEq, Eq)]
pub struct RgbImage {
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// Pixels, `RGBRGB...`.
    pub data: Vec<u8>,
}

impl std::fmt::Debug for RgbImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RgbImage({}x{})", self.width, self.height)
    }
}

impl RgbImage {
    /// Wraps packed RGB pixels. `data.len()` must be `width * height * 3`.
    pub fn new(width: usize, height: usize, data: Vec<u8>) -> Self {
        Self {
            width,
            height,
            data,
        }
    }
}

/// Lowers FFmpeg's log level to errors only. FFmpeg's logger is process-wide, so this is
/// for binaries to call, not libraries; libx264 otherwise prints statistics per encoder.
pub fn quiet_ffmpeg_logs() {
    ffmpeg_next::util::log::set_level(ffmpeg_next::util::log::Level::Error);
}
