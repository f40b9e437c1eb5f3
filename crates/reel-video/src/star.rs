//! Star GOPs ([`GopStructure::Star`](crate::GopStructure::Star)): every frame after a
//! keyframe is predicted from that keyframe alone, so a random frame decodes from two
//! access units instead of every unit before it in its GOP.
//!
//! libx264 has no such reference structure, so each frame is encoded by a fresh encoder
//! fed the keyframe and then the frame, and the frame's access unit is taken. libx264 is
//! deterministic with lookahead and macroblock-tree rate control off, so the keyframe comes
//! out the same bytes every time (checked: a difference is an error, never a drifting
//! picture). The headers are then rewritten so the units form one stream: the P-frames
//! become non-reference pictures (`nal_ref_idc` 0), and picture order counts travel in
//! each slice (`pic_order_cnt_type` 0), since the type libx264 uses without B-frames
//! cannot number two non-reference frames in a row.

use ffmpeg_next::picture;
use ffmpeg_next::util::frame::Video as Frame;

use crate::encoder_config::EncoderConfig;
use crate::h264::{ParameterSets, Rewrite, rewrite_access_unit};
use crate::libx264::{EncodedFrame, drain, open_libx264};
use crate::{Error, Result, ffmpeg_err};

/// The keyframe of the GOP being encoded.
struct Keyframe {
    /// Its picture, fed to each frame's encoder first.
    yuv: Frame,
    /// libx264's access unit for it, before rewriting: what every later encoder must
    /// reproduce.
    coded: Vec<u8>,
    sets: ParameterSets,
}

pub(crate) struct StarCoder {
    config: EncoderConfig,
    coded_size: (usize, usize),
    params: String,
    keyframe: Option<Keyframe>,
    /// Frames since the keyframe, the keyframe counted.
    since_keyframe: u32,
    gops: u32,
    log2_max_poc_lsb: u32,
}

impl StarCoder {
    pub(crate) fn new(config: &EncoderConfig, coded_size: (usize, usize)) -> Self {
        // Lookahead and macroblock-tree rate control make a frame's coding depend on the
        // frames after it; CAVLC and no weighted prediction keep the header rewrite to the
        // fields it changes. One thread: sliced threads would split frames into slices.
        let params = format!(
            "keyint={0}:min-keyint={0}:scenecut=0:repeat-headers=1:bframes=0:ref=1:\
             rc-lookahead=0:sync-lookahead=0:mbtree=0:weightp=0:cabac=0:sliced-threads=0",
            config.gop
        );
        // A non-reference frame's order count is read against the keyframe's (0): it must
        // stay below half the counter's range (H.264 8.2.1.1), 2 per frame.
        let log2_max_poc_lsb = (u64::from(config.gop) * 4)
            .next_power_of_two()
            .trailing_zeros();
        Self {
            config: EncoderConfig {
                threads: 1,
                ..config.clone()
            },
            coded_size,
            params,
            keyframe: None,
            since_keyframe: 0,
            gops: 0,
            log2_max_poc_lsb: log2_max_poc_lsb.clamp(4, 16),
        }
    }

    /// Encodes `yuv` (its `pts` is the frame's index), as a keyframe when `keyframe` or
    /// when the GOP is full.
    pub(crate) fn push(&mut self, yuv: &mut Frame, keyframe: bool) -> Result<EncodedFrame> {
        let index = yuv.pts().unwrap_or(0).max(0) as u64;
        let gop_full = self.since_keyframe >= self.config.gop;
        let current = match self.keyframe.take() {
            Some(current) if !keyframe && !gop_full => current,
            _ => return self.start_gop(yuv, index),
        };
        let result = self.encode_after(&current, yuv, index);
        self.keyframe = Some(current);
        result
    }

    fn start_gop(&mut self, yuv: &mut Frame, index: u64) -> Result<EncodedFrame> {
        let mut units = self.encode(&mut [yuv])?;
        let coded = units.pop().filter(|_| units.is_empty()).ok_or_else(|| {
            Error::Bitstream("libx264 gave no single access unit for a keyframe".into())
        })?;
        let sets = ParameterSets::from_access_unit(&coded.data).map_err(Error::Bitstream)?;
        let data = rewrite_access_unit(
            &coded.data,
            &sets,
            &Rewrite {
                log2_max_poc_lsb: self.log2_max_poc_lsb,
                poc_lsb: 0,
                idr_pic_id: self.gops % 2,
                non_reference: false,
            },
        )
        .map_err(Error::Bitstream)?;
        self.keyframe = Some(Keyframe {
            yuv: yuv.clone(),
            coded: coded.data,
            sets,
        });
        self.gops = self.gops.wrapping_add(1);
        self.since_keyframe = 1;
        Ok(EncodedFrame {
            data,
            index,
            keyframe: true,
        })
    }

    fn encode_after(
        &mut self,
        keyframe: &Keyframe,
        yuv: &mut Frame,
        index: u64,
    ) -> Result<EncodedFrame> {
        let mut key = keyframe.yuv.clone();
        let units = self.encode(&mut [&mut key, yuv])?;
        let [first, frame] = units.as_slice() else {
            return Err(Error::Bitstream(format!(
                "libx264 gave {} access units for a keyframe and one frame",
                units.len()
            )));
        };
        if first.data != keyframe.coded {
            return Err(Error::Bitstream(
                "libx264 coded the same keyframe to different bytes in two encoders".into(),
            ));
        }
        let data = rewrite_access_unit(
            &frame.data,
            &keyframe.sets,
            &Rewrite {
                log2_max_poc_lsb: self.log2_max_poc_lsb,
                poc_lsb: (2 * self.since_keyframe) % (1 << self.log2_max_poc_lsb),
                idr_pic_id: 0,
                non_reference: true,
            },
        )
        .map_err(Error::Bitstream)?;
        self.since_keyframe += 1;
        Ok(EncodedFrame {
            data,
            index,
            keyframe: false,
        })
    }

    /// Encodes `frames` with a fresh encoder, the first as a keyframe, and flushes it.
    fn encode(&self, frames: &mut [&mut Frame]) -> Result<Vec<EncodedFrame>> {
        let mut encoder = open_libx264(&self.config, self.coded_size, &self.params)?;
        let mut units = Vec::with_capacity(frames.len());
        for (i, frame) in frames.iter_mut().enumerate() {
            let pts = frame.pts();
            frame.set_pts(Some(i as i64));
            frame.set_kind(if i == 0 {
                picture::Type::I
            } else {
                picture::Type::P
            });
            let sent = encoder.send_frame(frame);
            frame.set_pts(pts);
            sent.map_err(ffmpeg_err("sending a frame to libx264"))?;
            units.extend(drain(&mut encoder)?);
        }
        encoder.send_eof().map_err(ffmpeg_err("flushing libx264"))?;
        units.extend(drain(&mut encoder)?);
        Ok(units)
    }
}
