//! MP4 files written through FFmpeg's encoders and muxer: RGB frames in at a constant
//! frame rate, one video stream out, as other tools' datasets keep their cameras (LeRobot:
//! SVT-AV1, GOP 2, CRF 30, 4:2:0).

use std::path::{Path, PathBuf};

use ffmpeg_next::format::Pixel;
use ffmpeg_next::util::frame::Video as Frame;
use ffmpeg_next::{Dictionary, Packet, Rational, codec, encoder, format};

use crate::scale::Scaler;
use crate::{Error, Result, RgbImage, ffmpeg_err};

/// How an [`Mp4Writer`] encodes: FFmpeg's encoder and the options every encoder names alike.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mp4Encoding {
    /// FFmpeg's encoder name: `libsvtav1`, `libx264`, `libaom-av1`, `libx265`…
    pub encoder: String,
    /// Frames per GOP (keyframe interval).
    pub gop: u32,
    /// Constant rate factor, in the encoder's own scale.
    pub crf: u32,
    /// The encoder's preset, in its own words (`12` for SVT-AV1, `medium` for x264).
    pub preset: Option<String>,
}

impl Mp4Encoding {
    /// LeRobot's defaults (0.4–0.6): SVT-AV1 at preset 12, GOP 2, CRF 30.
    pub fn lerobot_default() -> Self {
        Self {
            encoder: "libsvtav1".into(),
            gop: 2,
            crf: 30,
            preset: Some("12".into()),
        }
    }

    /// The codec's short name as FFmpeg gives it (`av1`, `h264`, `hevc`): what LeRobot
    /// records as `video.codec`.
    pub fn codec_name(&self) -> Result<String> {
        let codec = encoder::find_by_name(&self.encoder)
            .ok_or_else(|| Error::CodecMissing(self.encoder.clone()))?;
        Ok(codec.id().name().to_owned())
    }

    fn options(&self) -> Dictionary<'static> {
        let mut options = Dictionary::new();
        options.set("crf", &self.crf.to_string());
        if let Some(preset) = &self.preset {
            options.set("preset", preset);
        }
        if self.encoder == "libsvtav1" {
            // As LeRobot passes it, so the two write the same stream.
            options.set("svtav1-params", "fast-decode=0");
        }
        options
    }
}

/// Writes RGB frames of one size into an MP4 file at a constant frame rate: frame `n` is
/// shown at `n / fps` s. Not shared between threads.
pub struct Mp4Writer {
    path: PathBuf,
    output: format::context::Output,
    encoder: encoder::Video,
    scaler: Scaler,
    rgb: Frame,
    yuv: Frame,
    width: usize,
    height: usize,
    encoder_time_base: Rational,
    stream_time_base: Rational,
    frames: i64,
}

impl std::fmt::Debug for Mp4Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Mp4Writer({}, {}x{}, {} frames)",
            self.path.display(),
            self.width,
            self.height,
            self.frames
        )
    }
}

impl Mp4Writer {
    /// Creates `path` for `width` x `height` frames at `fps` frames per second. 4:2:0
    /// video codes even sizes only: an odd size is an error.
    pub fn create(
        path: &Path,
        width: usize,
        height: usize,
        fps: u32,
        encoding: &Mp4Encoding,
    ) -> Result<Self> {
        if width == 0 || height == 0 || width % 2 == 1 || height % 2 == 1 || fps == 0 {
            return Err(Error::InvalidInput(format!(
                "{}: {width}x{height} at {fps} fps (4:2:0 video needs even, non-zero sizes)",
                path.display()
            )));
        }
        if encoding.encoder == "libsvtav1" && (width < 64 || height < 64) {
            // Debian 12's SVT-AV1 (1.4) refuses frames under 64 pixels, and tearing down its
            // failed instance crashed now and then when several opened at once: refused here,
            // before SVT-AV1 is opened. Newer releases (PyPI's PyAV) take them.
            return Err(Error::InvalidInput(format!(
                "{}: libsvtav1 in this FFmpeg codes frames of at least 64x64, not \
                 {width}x{height}: choose another encoder (libaom-av1, libx264)",
                path.display()
            )));
        }
        let container = |e: ffmpeg_next::Error| Error::Container {
            path: path.display().to_string(),
            reason: e.to_string(),
        };
        let mut output = format::output_as(path, "mp4").map_err(container)?;
        let codec = encoder::find_by_name(&encoding.encoder)
            .ok_or_else(|| Error::CodecMissing(encoding.encoder.clone()))?;
        let global_header = output
            .format()
            .flags()
            .contains(format::Flags::GLOBAL_HEADER);
        let time_base = Rational::new(1, fps as i32);
        let mut context = codec::context::Context::new_with_codec(codec)
            .encoder()
            .video()
            .map_err(ffmpeg_err("creating the MP4 video encoder"))?;
        context.set_width(width as u32);
        context.set_height(height as u32);
        context.set_format(Pixel::YUV420P);
        context.set_time_base(time_base);
        context.set_frame_rate(Some(Rational::new(fps as i32, 1)));
        context.set_gop(encoding.gop);
        // No B-frames: decode order is presentation order. With x264's B-frames on short
        // GOPs a frame decodes after the next keyframe, and torchcodec's seeks (LeRobot's
        // reader) then return the neighbouring frame.
        context.set_max_b_frames(0);
        if global_header {
            context.set_flags(codec::Flags::GLOBAL_HEADER);
        }
        let encoder = context
            .open_as_with(codec, encoding.options())
            .map_err(ffmpeg_err("opening the MP4 video encoder"))?;
        {
            let mut stream = output.add_stream(codec).map_err(container)?;
            stream.set_parameters(&encoder);
            stream.set_time_base(time_base);
            stream.set_rate(Rational::new(fps as i32, 1));
            stream.set_avg_frame_rate(Rational::new(fps as i32, 1));
        }
        output.write_header().map_err(container)?;
        let stream_time_base = output
            .stream(0)
            .map_or(time_base, |stream| stream.time_base());
        Ok(Self {
            path: path.to_path_buf(),
            output,
            encoder,
            scaler: Scaler::default(),
            rgb: Frame::new(Pixel::RGB24, width as u32, height as u32),
            yuv: Frame::new(Pixel::YUV420P, width as u32, height as u32),
            width,
            height,
            encoder_time_base: time_base,
            stream_time_base,
            frames: 0,
        })
    }

    /// Encodes the next frame.
    pub fn push(&mut self, frame: &RgbImage) -> Result<()> {
        if frame.width != self.width
            || frame.height != self.height
            || frame.data.len() != self.width * self.height * 3
        {
            return Err(Error::InvalidInput(format!(
                "{}: frame {} is {}x{} with {} bytes, the file is {}x{} RGB",
                self.path.display(),
                self.frames,
                frame.width,
                frame.height,
                frame.data.len(),
                self.width,
                self.height
            )));
        }
        let row = self.width * 3;
        let stride = self.rgb.stride(0);
        let plane = self.rgb.data_mut(0);
        for (y, src) in frame.data.chunks_exact(row).enumerate() {
            plane[y * stride..y * stride + row].copy_from_slice(src);
        }
        self.scaler.run(&self.rgb, &mut self.yuv)?;
        self.yuv.set_pts(Some(self.frames));
        self.frames += 1;
        self.encoder
            .send_frame(&self.yuv)
            .map_err(ffmpeg_err("sending a frame to the MP4 video encoder"))?;
        self.write_ready()
    }

    /// Flushes the encoder and closes the file; returns the frames written.
    pub fn finish(mut self) -> Result<u64> {
        self.encoder
            .send_eof()
            .map_err(ffmpeg_err("flushing the MP4 video encoder"))?;
        self.write_ready()?;
        self.output.write_trailer().map_err(|e| Error::Container {
            path: self.path.display().to_string(),
            reason: e.to_string(),
        })?;
        Ok(self.frames as u64)
    }

    /// Muxes the packets the encoder has ready.
    fn write_ready(&mut self) -> Result<()> {
        let mut packet = Packet::empty();
        loop {
            match self.encoder.receive_packet(&mut packet) {
                Ok(()) => {
                    packet.set_stream(0);
                    packet.rescale_ts(self.encoder_time_base, self.stream_time_base);
                    packet
                        .write_interleaved(&mut self.output)
                        .map_err(|e| Error::Container {
                            path: self.path.display().to_string(),
                            reason: e.to_string(),
                        })?;
                }
                Err(ffmpeg_next::Error::Eof) => return Ok(()),
                Err(ffmpeg_next::Error::Other { errno })
                    if errno == ffmpeg_next::util::error::EAGAIN =>
                {
                    return Ok(());
                }
                Err(e) => return Err(ffmpeg_err("receiving a packet from the MP4 encoder")(e)),
            }
        }
    }
}
