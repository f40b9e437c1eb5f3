//! One libx264 encoder opened with Reel's settings, and the access units taken from it:
//! the step both GOP structures share.

use ffmpeg_next::codec;
use ffmpeg_next::{Dictionary, Packet, Rational, encoder};

use crate::encoder_config::EncoderConfig;
use crate::{Error, Result, ffmpeg_err};

/// One encoded frame: an H.264 access unit in Annex B form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedFrame {
    /// The access unit (start codes included; keyframes carry SPS and PPS).
    pub data: Vec<u8>,
    /// Index of the input frame it encodes (order of [`H264Encoder::push`](crate::H264Encoder::push) calls).
    pub index: u64,
    /// Whether this is an IDR keyframe, where decoding can start.
    pub keyframe: bool,
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
