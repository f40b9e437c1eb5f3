//! Checks of the camera frames, from the measurements taken while encoding: blackouts,
//! frozen frames and frames that do not decode.

use super::config::QcConfig;
use super::report::{CheckKind, Finding, QcReport};
use crate::camera::FrameStat;

/// The frame measurements of one camera.
#[derive(Debug, Clone, Copy)]
pub struct CameraStats<'a> {
    /// Topic.
    pub topic: &'a str,
    /// One per landing frame.
    pub stats: &'a [FrameStat],
}

/// Runs of consecutive frames matching `pred` lasting at least `min_ns`, as index spans.
fn runs(
    stats: &[FrameStat],
    pred: impl Fn(&FrameStat) -> bool,
    min_ns: u64,
) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    for i in 0..=stats.len() {
        let on = stats.get(i).is_some_and(&pred);
        match (on, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                // A run of n frames shows the picture for n periods: count to the next frame.
                let end_time = stats.get(i).map_or(stats[i - 1].log_time, |f| f.log_time);
                if end_time - stats[s].log_time >= min_ns {
                    out.push((s, i - 1));
                }
                start = None;
            }
            _ => {}
        }
    }
    out
}

pub(super) fn check_cameras(cameras: &[CameraStats<'_>], config: &QcConfig, report: &mut QcReport) {
    let frozen_mse = config.frozen_max_mse();
    let black_ratio = config.black_frame_ratio as f32;
    let (mut frames, mut dark, mut frozen) = (0u64, 0u64, 0u64);
    for camera in cameras {
        let stats = camera.stats;
        let is_black = |f: &FrameStat| f.decoded && f.black_ratio >= black_ratio;
        // A black frame repeating is a blackout, not a freeze.
        let is_frozen = |f: &FrameStat| {
            f.decoded && !is_black(f) && f.mse_to_previous.is_some_and(|m| m <= frozen_mse)
        };
        frames += stats.len() as u64;
        dark += stats.iter().filter(|f| is_black(f)).count() as u64;
        frozen += stats.iter().filter(|f| is_frozen(f)).count() as u64;
        let mut push = |kind, (a, b): (usize, usize)| {
            report.findings.push(Finding {
                kind,
                topic: camera.topic.to_owned(),
                start_ns: stats[a].log_time,
                end_ns: stats[b].log_time,
                detail: None,
            })
        };
        for run in runs(stats, is_black, (config.min_blackout_s * 1e9) as u64) {
            push(CheckKind::CameraBlackout, run);
        }
        for run in runs(stats, is_frozen, (config.min_frozen_s * 1e9) as u64) {
            push(CheckKind::FrozenFrames, run);
        }
        for run in runs(stats, |f| !f.decoded, 0) {
            report.metrics.corrupt_frames += (run.1 - run.0 + 1) as u64;
            push(CheckKind::CorruptFrame, run);
        }
    }
    report.metrics.frames = frames;
    if frames > 0 {
        report.metrics.dark_frame_ratio = dark as f64 / frames as f64;
        report.metrics.frozen_frame_ratio = frozen as f64 / frames as f64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frozen_runs_need_the_minimum_length_and_black_repeats_are_not_frozen() {
        let frame = |i: u64, black: bool, mse: f32| FrameStat {
            log_time: i * 33_333_333,
            decoded: true,
            mean_luma: if black { 3.0 } else { 120.0 },
            black_ratio: if black { 1.0 } else { 0.0 },
            mse_to_previous: Some(mse),
        };
        // 0.5 s frozen (too short), then 1.5 s black and identical, then 1.2 s frozen.
        let mut stats: Vec<FrameStat> = (0..15).map(|i| frame(i, false, 0.0)).collect();
        stats.extend((15..60).map(|i| frame(i, true, 0.0)));
        stats.extend((60..62).map(|i| frame(i, false, 300.0)));
        stats.extend((62..98).map(|i| frame(i, false, 0.0)));
        stats.extend((98..110).map(|i| frame(i, false, 250.0)));
        let mut report = QcReport::default();
        check_cameras(
            &[CameraStats {
                topic: "/cam",
                stats: &stats,
            }],
            &QcConfig::default(),
            &mut report,
        );
        let kinds: Vec<(CheckKind, u64, u64)> = report
            .findings
            .iter()
            .map(|f| (f.kind, f.start_ns / 33_333_333, f.end_ns / 33_333_333))
            .collect();
        assert_eq!(
            kinds,
            [
                (CheckKind::CameraBlackout, 15, 59),
                (CheckKind::FrozenFrames, 62, 97)
            ]
        );
        assert!((report.metrics.dark_frame_ratio - 45.0 / 110.0).abs() < 1e-9);
    }
}
