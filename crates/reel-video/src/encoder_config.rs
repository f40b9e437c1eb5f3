//! Encoder settings: Reel's canonical camera settings and what may be changed.

use ffmpeg_next::format::Pixel;

/// Chroma subsampling of the encoded stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ChromaFormat {
    /// 4:2:0, what every hardware and browser decoder plays (Foxglove included).
    #[default]
    Yuv420,
    /// 4:4:4 (High 4:4:4 profile): sharper colour edges, larger, not playable everywhere.
    Yuv444,
}

impl ChromaFormat {
    pub(crate) fn pixel(self) -> Pixel {
        match self {
            Self::Yuv420 => Pixel::YUV420P,
            Self::Yuv444 => Pixel::YUV444P,
        }
    }
}

/// How the frames of a GOP predict from each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GopStructure {
    /// Each frame predicts from the one before it (libx264's own P chain): the smallest
    /// files; a frame `k` frames into its GOP decodes from `k + 1` access units.
    #[default]
    Chain,
    /// Each frame after the keyframe predicts from the keyframe alone and is not a
    /// reference picture: any frame decodes from at most two access units, its keyframe
    /// and itself, and a decoder skips the units in between. Plain H.264 (no B-frames,
    /// decode order = presentation order), so Foxglove plays it. Costs about four times
    /// the encoding time (a libx264 per frame) and larger P-frames the further they are
    /// from their keyframe.
    Star,
}

/// The H.264 encoder Reel uses unless told otherwise.
pub const DEFAULT_ENCODER: &str = "libx264";

/// Encoder settings. The defaults are Reel's canonical camera settings.
#[derive(Debug, Clone, PartialEq)]
pub struct EncoderConfig {
    /// FFmpeg's name of the H.264 encoder. The settings below (preset, tune, x264 params)
    /// are libx264's: another encoder must accept them and keep the GOP rules.
    pub encoder: String,
    /// Frames per GOP; every GOP starts with an IDR keyframe and stands alone.
    pub gop: u32,
    /// Constant rate factor (0 lossless … 51 worst).
    pub crf: f32,
    /// libx264 preset (`ultrafast` … `veryslow`).
    pub preset: String,
    /// libx264 tune; `fastdecode` disables CABAC and in-loop deblocking costs for cheap decodes.
    pub tune: Option<String>,
    /// B-frames between references; 0 keeps decode order equal to presentation order.
    /// Must be 0 with [`GopStructure::Star`].
    pub b_frames: u32,
    /// How frames of a GOP predict from each other.
    pub structure: GopStructure,
    /// Chroma subsampling.
    pub chroma: ChromaFormat,
    /// Nominal frame rate, used by rate control only (timestamps travel outside the stream).
    pub fps: u32,
    /// libx264 threads; 0 lets x264 decide. Use 1 when encoding many streams in parallel.
    pub threads: u32,
}

impl Default for EncoderConfig {
    fn default() -> Self {
        Self {
            encoder: DEFAULT_ENCODER.into(),
            gop: 30,
            crf: 23.0,
            preset: "medium".into(),
            tune: Some("fastdecode".into()),
            b_frames: 0,
            structure: GopStructure::Chain,
            chroma: ChromaFormat::Yuv420,
            fps: 30,
            threads: 0,
        }
    }
}
