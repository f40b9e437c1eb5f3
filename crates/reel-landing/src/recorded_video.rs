//! Recorded video kept as recorded: a `foxglove.CompressedVideo` H.264 stream that already
//! meets the canonical rules is stored message for message instead of being decoded and
//! encoded again. Any other recorded video (H.265, B-frames, keyframes that do not start
//! the chunk windows) is transcoded, and the channel says which happened and why.

use reel_mcap::records::median_period_ns;
use reel_mcap::{CameraStream, CameraWindows, VideoFrame, VideoOrigin};
use reel_video::{H264Decoder, VideoCodec, h264};

use crate::episode::{ImageEncoding, LandingCamera};

/// Whether `camera` is recorded video at all.
pub fn is_recorded_video(camera: &LandingCamera) -> bool {
    camera
        .frames
        .first()
        .is_some_and(|f| matches!(f.encoding, ImageEncoding::Video { .. }))
}

/// The recorded videos of an episode that can be kept as recorded, and the chunk windows
/// they set: the first one that meets the canonical rules decides the windows, the others
/// are kept only if their keyframes fit them too. Every other recorded video is
/// transcoded, with the reason; with `keep` off, every one is.
pub fn plan_recorded_videos(
    cameras: &[LandingCamera],
    keep: bool,
) -> (Option<CameraWindows>, Vec<VideoOrigin>) {
    let mut windows = None;
    let origins = cameras
        .iter()
        .map(|camera| {
            if !is_recorded_video(camera) {
                return VideoOrigin::Encoded;
            }
            if !keep {
                return VideoOrigin::Transcoded("encode.keep_recorded_video is off".into());
            }
            match check_recorded_video(camera, windows) {
                Ok(w) => {
                    windows = Some(w);
                    VideoOrigin::Kept
                }
                Err(reason) => VideoOrigin::Transcoded(reason),
            }
        })
        .collect();
    (windows, origins)
}

/// Checks a recorded video against the canonical rules: H.264 in Annex B, no B-frames,
/// SPS and PPS on every keyframe, and a keyframe first in every chunk window — of
/// `windows` when given, else of the windows its own keyframes imply (their median
/// interval, from its first keyframe), which are returned. `Err` says why it must be
/// transcoded. Frames before the first keyframe cannot be decoded and are left out.
pub fn check_recorded_video(
    camera: &LandingCamera,
    windows: Option<CameraWindows>,
) -> Result<CameraWindows, String> {
    let mut keyframes = Vec::new();
    for frame in &camera.frames {
        match frame.encoding {
            ImageEncoding::Video {
                codec: VideoCodec::H264,
            } => {}
            ImageEncoding::Video { codec } => {
                return Err(format!(
                    "recorded as {}: canonical cameras are H.264",
                    codec.name()
                ));
            }
            _ => return Err("not recorded video".into()),
        }
        let info = h264::inspect(&frame.data);
        let at = frame.log_time;
        if !info.annex_b || info.slices == 0 {
            return Err(format!(
                "the message at {at} is not an Annex B access unit holding a picture"
            ));
        }
        if info.b_slice {
            return Err(format!(
                "B-frames (at {at}): decode order differs from presentation order, which Foxglove does not play"
            ));
        }
        if info.idr {
            if !(info.sps && info.pps) {
                return Err(format!("the keyframe at {at} carries no SPS and PPS"));
            }
            keyframes.push(at);
        }
    }
    let Some(&first) = keyframes.first() else {
        return Err("no keyframe".into());
    };
    let windows = windows.unwrap_or_else(|| {
        let last = camera.frames.last().map_or(first, |f| f.log_time);
        CameraWindows {
            origin_ns: first,
            window_ns: median_period_ns(keyframes.iter().copied())
                .unwrap_or(last - first + 1)
                .max(1),
        }
    });
    let mut window = None;
    for frame in camera.frames.iter().filter(|f| f.log_time >= first) {
        let w = windows.of(frame.log_time);
        if window != Some(w) {
            if !h264::inspect(&frame.data).idr {
                return Err(format!(
                    "its keyframes do not start every chunk window ({} ms from {}): the frame at {} starts one",
                    windows.window_ns / 1_000_000,
                    windows.origin_ns,
                    frame.log_time
                ));
            }
            window = Some(w);
        }
    }
    Ok(windows)
}

/// A recorded video that passed [`check_recorded_video`], as a canonical stream: its
/// messages from the first keyframe on, bytes and times as recorded. The picture size is
/// read by decoding the first keyframe (which also proves it decodes).
pub fn keep_recorded_video(
    camera: &LandingCamera,
    group: String,
) -> Result<CameraStream, reel_video::Error> {
    let frames: Vec<VideoFrame> = camera
        .frames
        .iter()
        .skip_while(|f| !h264::inspect(&f.data).idr)
        .map(|f| VideoFrame {
            log_time: f.log_time,
            publish_time: f.publish_time,
            stamp_ns: f.stamp_ns,
            data: f.data.to_vec(),
        })
        .collect();
    let first = frames
        .first()
        .ok_or_else(|| reel_video::Error::NoPicture("no keyframe to keep".into()))?;
    let picture = H264Decoder::new()?
        .decode_pictures(&[first.data.as_slice()], &[0])?
        .pop()
        .ok_or_else(|| reel_video::Error::NoPicture("the first keyframe".into()))?;
    Ok(CameraStream {
        topic: camera.topic.clone(),
        group,
        frame_id: camera.frame_id.clone(),
        width: picture.width(),
        height: picture.height(),
        source_encoding: VideoCodec::H264.name().into(),
        video: VideoOrigin::Kept,
        frames,
    })
}
