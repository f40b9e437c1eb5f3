//! H.264 encoding with libx264.

use ffmpeg_next::codec::{self, Id};
use ffmpeg_next::format::Pixel;
use ffmpeg_next::util::frame::Video as Frame;
use ffmpeg_next::{Dictionary, Packet, Rational, encoder, picture};

use crate::decode::Picture;
use crate::scale::Scaler;
use crate::star::StarCoder;
use crate::{Error, Result, RgbImage, ffmpeg_err};

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
    fn pixel(self) -> Pixel {
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

/// One encoded frame: an H.264 access unit in Annex B form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedFrame {
    /// The access unit (start codes included; keyframes carry SPS and PPS).
    pub data: Vec<u8>,
    /// Index of the input frame it encodes (order of [`H264Encoder::push`] calls).
    pub index: u64,
    /// Whether this is an IDR keyframe, where decoding can start.
    pub keyframe: bool,
}

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

/// The instruction sets x264 may use, where its own choice would make output depend on
/// more than the input. x264's AVX-512 code reads memory it did not write: an encoder
/// opened after others in one process (a second camera, a second episode) coded the same
/// frames to different bytes run to run. Its AVX2 code is byte-reproducible and as fast
/// (docs/BENCHMARKS.md), so CPUs with AVX-512 get AVX2; the others keep x264's choice.
fn x264_cpu_override() -> Option<&'static str> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx2")
    {
        // x264's names are cumulative ("AVX2" includes SSE2 to BMI2); "Cache64" restores
        // the cache-line hint its own detection would set.
        return Some("AVX2,Cache64");
    }
    None
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

/// Opens libx264 (or the configured encoder) for frames of `coded` size, with Reel's
/// settings and `params` for x264.
pub(crate) fn open_libx264(
    config: &EncoderConfig,
    (coded_width, coded_height): (usize, usize),
    params: &str,
) -> Result<encoder::Video> {
    let codec = encoder::find_by_name(&config.encoder)
        .ok_or_else(|| Error::CodecMissing(config.encoder.clone()))?;
    let mut context = codec::context::Context::new_with_codec(codec)
        .encoder()
        .video()
        .map_err(ffmpeg_err("creating the H.264 encoder"))?;
    context.set_width(coded_width as u32);
    context.set_height(coded_height as u32);
    context.set_format(config.chroma.pixel());
    context.set_time_base(Rational::new(1, config.fps as i32));
    context.set_frame_rate(Some(Rational::new(config.fps as i32, 1)));
    context.set_gop(config.gop);
    context.set_max_b_frames(config.b_frames as usize);
    let mut options = Dictionary::new();
    options.set("preset", &config.preset);
    if let Some(tune) = &config.tune {
        options.set("tune", tune);
    }
    options.set("crf", &config.crf.to_string());
    options.set("threads", &config.threads.to_string());
    // A frame flagged as I becomes an IDR, so forced keyframes start closed GOPs.
    options.set("forced-idr", "1");
    // Fixed GOPs (no scene-cut keyframes, in `params`) so camera chunks align with GOP
    // boundaries; headers on every keyframe so any GOP decodes alone.
    options.set(
        "x264-params",
        &format!(
            "{params}{}",
            x264_cpu_override().map_or(String::new(), |cpu| format!(":asm={cpu}")),
        ),
    );
    context
        .open_as_with(codec, options)
        .map_err(ffmpeg_err("opening libx264"))
}

/// The access units `encoder` has ready.
pub(crate) fn drain(encoder: &mut encoder::Video) -> Result<Vec<EncodedFrame>> {
    let mut out = Vec::new();
    let mut packet = Packet::empty();
    loop {
        match encoder.receive_packet(&mut packet) {
            Ok(()) => out.push(EncodedFrame {
                data: packet.data().unwrap_or_default().to_vec(),
                index: packet.pts().unwrap_or(0).max(0) as u64,
                keyframe: packet.is_key(),
            }),
            Err(ffmpeg_next::Error::Eof) => break,
            Err(ffmpeg_next::Error::Other { errno })
                if errno == ffmpeg_next::util::error::EAGAIN =>
            {
                break;
            }
            Err(e) => return Err(ffmpeg_err("receiving a packet from libx264")(e)),
        }
    }
    Ok(out)
}

pub(crate) const H264: Id = Id::H264;
