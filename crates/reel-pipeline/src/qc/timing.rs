//! Checks of when the streams logged: recorder stalls (every stream silent), gaps of single
//! streams, rates short of their target, and streams that start late or end early.

use reel_landing::LandingEpisode;
use reel_mcap::SignalKind;

use super::config::QcConfig;
use super::report::{CheckKind, Finding, QcReport};
use crate::resample::{ResampleConfig, gaps_of, median_period};

/// Spans in which no stream logged anything for longer than the gap bound of the fastest
/// stream: the recorder stalled.
pub(super) fn silences(episode: &LandingEpisode, rates: &ResampleConfig) -> Vec<(u64, u64)> {
    let mut all: Vec<u64> = Vec::new();
    let mut fastest = u64::MAX;
    let mut streams = 0;
    for times in stream_times(episode) {
        let median = median_period(times.iter().copied());
        if median > 0 {
            fastest = fastest.min(median);
        }
        streams += 1;
        all.extend(times);
    }
    if streams < 2 || fastest == u64::MAX {
        return Vec::new();
    }
    all.sort_unstable();
    gaps_of(&all, (fastest as f64 * rates.max_gap_periods) as u64)
}

fn stream_times(episode: &LandingEpisode) -> impl Iterator<Item = Vec<u64>> + '_ {
    episode
        .cameras
        .iter()
        .map(|c| c.frames.iter().map(|f| f.log_time).collect())
        .chain(
            episode
                .signals
                .iter()
                .map(|s| s.samples.iter().map(|s| s.log_time).collect()),
        )
}

/// Streams that start late or end early by more than `coverage_gap_s`: the spans of the
/// episode they leave without data.
pub(super) fn stream_coverage(episode: &LandingEpisode, config: &QcConfig, report: &mut QcReport) {
    let topics = episode
        .cameras
        .iter()
        .map(|c| c.topic.as_str())
        .chain(episode.signals.iter().map(|s| s.topic.as_str()));
    let spans: Vec<(&str, u64, u64)> = topics
        .zip(stream_times(episode))
        .filter_map(|(topic, times)| Some((topic, *times.first()?, *times.last()?)))
        .collect();
    // Streams of one message (a latched `/tf_static`) hold for the whole episode.
    let lasting = spans.iter().filter(|(_, first, last)| last > first);
    let (Some(start), Some(end)) = (
        lasting.clone().map(|s| s.1).min(),
        lasting.map(|s| s.2).max(),
    ) else {
        return;
    };
    let bound = (config.coverage_gap_s * 1e9) as u64;
    for &(topic, first, last) in spans.iter().filter(|(_, first, last)| last > first) {
        for (gap_start, gap_end, detail) in
            [(start, first, "starts late"), (last, end, "ends early")]
        {
            if gap_end - gap_start > bound {
                report.findings.push(Finding {
                    kind: CheckKind::StreamCoverage,
                    topic: topic.to_owned(),
                    start_ns: gap_start,
                    end_ns: gap_end,
                    detail: Some(detail.to_owned()),
                });
            }
        }
    }
}

fn overlaps(a: (u64, u64), b: (u64, u64)) -> bool {
    a.0 <= b.1 && b.0 <= a.1
}

/// Gaps of single streams (those not explained by a recorder stall) and rate shortfalls.
pub(super) fn stream_timing(
    episode: &LandingEpisode,
    rates: &ResampleConfig,
    config: &QcConfig,
    stalls: &[(u64, u64)],
    report: &mut QcReport,
) {
    let streams = episode
        .cameras
        .iter()
        .map(|c| (c.topic.as_str(), None, rates.camera_hz))
        .chain(
            episode
                .signals
                .iter()
                .map(|s| (s.topic.as_str(), Some(s.kind), rates.rate_of(s.kind))),
        );
    for ((topic, kind, target_hz), times) in streams.zip(stream_times(episode)) {
        let median = median_period(times.iter().copied());
        if times.len() < 2 || median == 0 {
            continue;
        }
        let gaps = gaps_of(&times, (median as f64 * rates.max_gap_periods) as u64);
        let mut silent = 0u64;
        for &gap in &gaps {
            silent += gap.1 - gap.0;
            if stalls.iter().any(|&s| overlaps(s, gap)) {
                continue;
            }
            let (kind, detail) = if kind == Some(SignalKind::Pose) {
                (CheckKind::HandPoseDropout, Some("missing".to_owned()))
            } else {
                (CheckKind::TimestampGap, None)
            };
            report.findings.push(Finding {
                kind,
                topic: topic.to_owned(),
                start_ns: gap.0,
                end_ns: gap.1,
                detail,
            });
        }
        let span = (times[times.len() - 1] - times[0]).saturating_sub(silent);
        // Messages other than the first after each flagged silence, over the time left.
        let intervals = (times.len() - 1 - gaps.len()) as f64;
        if span == 0 {
            continue;
        }
        let rate = intervals / (span as f64 / 1e9);
        report.metrics.rates_hz.insert(topic.to_owned(), rate);
        if rate < config.min_rate_ratio * target_hz {
            report.findings.push(Finding {
                kind: CheckKind::RateShortfall,
                topic: topic.to_owned(),
                start_ns: times[0],
                end_ns: times[times.len() - 1],
                detail: Some(format!("{rate:.1} Hz of {target_hz} Hz")),
            });
        }
    }
}
