//! Step 4b: quality checks. Each check is configurable and yields findings (a kind, a
//! topic and a time span) and metrics; the warehouse keeps a flag per check.
//!
//! Checks run on the landing streams as recorded (timing, values) and on the measurements
//! of every landing frame taken while encoding, not on the resampled grid, so resampling
//! can neither hide nor invent a fault.

use std::collections::BTreeMap;

use reel_manifest::warehouse::QcSummary;
use reel_mcap::{LandingEpisode, SignalKind};
use serde::{Deserialize, Serialize};

use crate::camera::FrameStat;
use crate::resample::{ResampleConfig, gaps_of, median_period};

/// Thresholds of the checks. Defaults start from FFmpeg's blackdetect/freezedetect and
/// common robotics limits (see `docs/ARCHITECTURE.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QcConfig {
    /// A pixel is black below this luma, as a share of full scale (blackdetect: 0.10).
    pub black_pixel_luma: f64,
    /// A frame is black when at least this share of its pixels is (blackdetect: 0.98).
    pub black_frame_ratio: f64,
    /// Black frames over at least this long make a blackout, seconds.
    pub min_blackout_s: f64,
    /// A frame is frozen when it differs from the previous one by at most this much,
    /// dB below full scale (freezedetect: −60 dB).
    pub frozen_noise_db: f64,
    /// Repeated frames over at least this long make a freeze, seconds (freezedetect uses
    /// 2 s; a 1 s stall already poisons every training sample that spans it).
    pub min_frozen_s: f64,
    /// A joint moving more than this between consecutive samples jumps, radians.
    pub joint_jump_rad: f64,
    /// A joint's second difference (acceleration × landing period²) above this is jerky,
    /// radians.
    pub jerk_rad: f64,
    /// Window in which jerky samples are counted, seconds.
    pub choppy_window_s: f64,
    /// Share of jerky samples in a window that makes the joints choppy.
    pub choppy_ratio: f64,
    /// A stream below this share of its target rate (outside flagged gaps) falls short.
    pub min_rate_ratio: f64,
    /// A stream that starts this much after the episode's first message, or ends this much
    /// before its last, does not cover the episode, seconds.
    pub coverage_gap_s: f64,
}

impl Default for QcConfig {
    fn default() -> Self {
        Self {
            black_pixel_luma: 0.10,
            black_frame_ratio: 0.98,
            min_blackout_s: 0.5,
            frozen_noise_db: -60.0,
            min_frozen_s: 1.0,
            joint_jump_rad: 0.2,
            jerk_rad: 0.01,
            choppy_window_s: 0.25,
            choppy_ratio: 0.3,
            min_rate_ratio: 0.9,
            coverage_gap_s: 0.5,
        }
    }
}

impl QcConfig {
    /// Largest mean squared error (0–255²) of a frozen frame.
    pub fn frozen_max_mse(&self) -> f32 {
        (255.0f64.powi(2) * 10f64.powf(self.frozen_noise_db / 10.0)) as f32
    }

    /// Luma (0–255) below which a pixel counts as black.
    pub fn black_luma(&self) -> f32 {
        (self.black_pixel_luma * 255.0) as f32
    }

    /// Checks ranges.
    pub fn validate(&self) -> crate::Result<()> {
        let unit = [
            self.black_pixel_luma,
            self.black_frame_ratio,
            self.choppy_ratio,
            self.min_rate_ratio,
        ];
        let positive = [
            self.min_blackout_s,
            self.min_frozen_s,
            self.joint_jump_rad,
            self.jerk_rad,
            self.choppy_window_s,
            self.coverage_gap_s,
        ];
        if unit.iter().any(|v| !(0.0..=1.0).contains(v))
            || positive.iter().any(|v| !(v.is_finite() && *v > 0.0))
            || !self.frozen_noise_db.is_finite()
        {
            return Err(crate::Error::Config(
                "qc: ratios must be in [0, 1], durations and thresholds positive".into(),
            ));
        }
        Ok(())
    }
}

/// What a finding is. The names match the fault kinds of `reel-synth`'s sidecar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckKind {
    /// A camera delivered black frames.
    CameraBlackout,
    /// A camera repeated the same frame.
    FrozenFrames,
    /// Frames that do not decode.
    CorruptFrame,
    /// A joint sample jumped and came back.
    JointJump,
    /// Joint positions stair-step and jitter.
    ChoppyJoints,
    /// A hand pose went missing or NaN.
    HandPoseDropout,
    /// A stream (`*`: every stream) fell silent.
    TimestampGap,
    /// A stream ran below its target rate.
    RateShortfall,
    /// A stream started late or ended early: it does not cover the whole episode.
    StreamCoverage,
    /// Landing messages that did not decode (counted per topic; the rest were read).
    UndecodedMessages,
    /// Chunks of the landing file that repeated an earlier one byte for byte (read once).
    DuplicateChunks,
}

impl CheckKind {
    /// The snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            Self::CameraBlackout => "camera_blackout",
            Self::FrozenFrames => "frozen_frames",
            Self::CorruptFrame => "corrupt_frame",
            Self::JointJump => "joint_jump",
            Self::ChoppyJoints => "choppy_joints",
            Self::HandPoseDropout => "hand_pose_dropout",
            Self::TimestampGap => "timestamp_gap",
            Self::RateShortfall => "rate_shortfall",
            Self::StreamCoverage => "stream_coverage",
            Self::UndecodedMessages => "undecoded_messages",
            Self::DuplicateChunks => "duplicate_chunks",
        }
    }
}

/// One problem found: what, where, when (log times, inclusive).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// What.
    pub kind: CheckKind,
    /// Topic, or `*` for every topic.
    pub topic: String,
    /// First affected log time (ns). For silences: the last message before.
    pub start_ns: u64,
    /// Last affected log time (ns). For silences: the first message after.
    pub end_ns: u64,
    /// Joint name, dropout mode (`missing`/`nan`), measured rate…
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Metrics behind the flags.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct QcMetrics {
    /// Landing camera frames, all cameras.
    pub frames: u64,
    /// Share of frames judged black.
    pub dark_frame_ratio: f64,
    /// Share of frames judged repeats of the previous one.
    pub frozen_frame_ratio: f64,
    /// Frames that did not decode.
    pub corrupt_frames: u64,
    /// Largest change of a joint between consecutive samples, radians.
    pub max_joint_step_rad: f64,
    /// Largest joint second difference, radians.
    pub max_joint_jerk_rad: f64,
    /// Hand-pose samples with NaN or infinite values.
    pub nan_hand_samples: u64,
    /// Measured rate of each stream outside flagged gaps, Hz.
    pub rates_hz: BTreeMap<String, f64>,
}

/// The outcome of all checks on one episode.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct QcReport {
    /// Findings in time order.
    pub findings: Vec<Finding>,
    /// Metrics.
    pub metrics: QcMetrics,
}

impl QcReport {
    /// Whether any finding is of `kind`.
    pub fn has(&self, kind: CheckKind) -> bool {
        self.findings.iter().any(|f| f.kind == kind)
    }

    /// The warehouse's flags and metrics.
    pub fn summary(&self) -> QcSummary {
        QcSummary {
            camera_blackout: self.has(CheckKind::CameraBlackout),
            frozen_frames: self.has(CheckKind::FrozenFrames),
            // Messages that do not decode are corrupt input, whatever the topic.
            corrupt_frames: self.has(CheckKind::CorruptFrame)
                || self.has(CheckKind::UndecodedMessages)
                || self.has(CheckKind::DuplicateChunks),
            choppy_joints: self.has(CheckKind::ChoppyJoints) || self.has(CheckKind::JointJump),
            hand_dropout: self.has(CheckKind::HandPoseDropout),
            // A stream silent at the episode's edges is a gap of that stream too.
            timestamp_gap: self.has(CheckKind::TimestampGap) || self.has(CheckKind::StreamCoverage),
            rate_shortfall: self.has(CheckKind::RateShortfall),
            dark_frame_ratio: self.metrics.dark_frame_ratio,
            frozen_frame_ratio: self.metrics.frozen_frame_ratio,
            max_joint_step_rad: self.metrics.max_joint_step_rad,
        }
    }
}

/// The frame measurements of one camera.
#[derive(Debug, Clone, Copy)]
pub struct CameraStats<'a> {
    /// Topic.
    pub topic: &'a str,
    /// One per landing frame.
    pub stats: &'a [FrameStat],
}

/// Runs every check on a landing episode and its cameras' frame measurements.
pub fn quality_check(
    episode: &LandingEpisode,
    cameras: &[CameraStats<'_>],
    rates: &ResampleConfig,
    config: &QcConfig,
) -> QcReport {
    let mut report = QcReport::default();
    let stalls = silences(episode, rates);
    for &(start, end) in &stalls {
        report.findings.push(Finding {
            kind: CheckKind::TimestampGap,
            topic: "*".into(),
            start_ns: start,
            end_ns: end,
            detail: None,
        });
    }
    stream_timing(episode, rates, config, &stalls, &mut report);
    stream_coverage(episode, config, &mut report);
    for problem in &episode.problems {
        report.findings.push(Finding {
            kind: CheckKind::UndecodedMessages,
            topic: problem.topic.clone(),
            start_ns: problem.first_log_time,
            end_ns: problem.first_log_time,
            detail: Some(format!(
                "{} of {} messages did not decode, the first: {}",
                problem.bad_messages, problem.messages, problem.reason
            )),
        });
    }
    if episode.duplicate_chunks > 0 {
        report.findings.push(Finding {
            kind: CheckKind::DuplicateChunks,
            topic: "*".into(),
            start_ns: 0,
            end_ns: 0,
            detail: Some(format!(
                "{} chunks repeated an earlier chunk and were read once",
                episode.duplicate_chunks
            )),
        });
    }
    check_cameras(cameras, config, &mut report);
    for signal in &episode.signals {
        match signal.kind {
            SignalKind::State => check_joints(signal, rates, config, &mut report),
            SignalKind::Pose => check_hand(signal, &mut report),
            _ => {}
        }
    }
    report
        .findings
        .sort_by(|a, b| (a.start_ns, a.kind, &a.topic).cmp(&(b.start_ns, b.kind, &b.topic)));
    report
}

/// Spans in which no stream logged anything for longer than the gap bound of the fastest
/// stream: the recorder stalled.
fn silences(episode: &LandingEpisode, rates: &ResampleConfig) -> Vec<(u64, u64)> {
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
fn stream_coverage(episode: &LandingEpisode, config: &QcConfig, report: &mut QcReport) {
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
fn stream_timing(
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

fn check_cameras(cameras: &[CameraStats<'_>], config: &QcConfig, report: &mut QcReport) {
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

#[allow(clippy::needless_range_loop)] // `i` indexes samples, jerk flags and windows alike
fn check_joints(
    signal: &reel_mcap::LandingSignal,
    rates: &ResampleConfig,
    config: &QcConfig,
    report: &mut QcReport,
) {
    let columns: Vec<(usize, &str)> = signal
        .fields
        .iter()
        .enumerate()
        .filter_map(|(i, f)| f.strip_suffix(".position").map(|name| (i, name)))
        .collect();
    let samples = &signal.samples;
    let median = median_period(samples.iter().map(|s| s.log_time));
    if columns.is_empty() || samples.len() < 3 || median == 0 {
        return;
    }
    let bound = (median as f64 * rates.max_gap_periods) as u64;
    let period = median as f64 / 1e9;
    let dt = |i: usize| (samples[i].log_time - samples[i - 1].log_time) as f64 / 1e9;
    let adjacent = |i: usize| samples[i].log_time - samples[i - 1].log_time <= bound;
    let q = |i: usize, c: usize| samples[i].values.get(c).copied().unwrap_or(f64::NAN);

    // Jerk: second divided difference × landing period², so clock jitter does not count.
    let mut jerky = vec![false; samples.len()];
    for i in 1..samples.len() - 1 {
        if !(adjacent(i) && adjacent(i + 1)) {
            continue;
        }
        let (h0, h1) = (dt(i), dt(i + 1));
        let worst = columns
            .iter()
            .map(|&(c, _)| {
                let acc =
                    2.0 * ((q(i + 1, c) - q(i, c)) / h1 - (q(i, c) - q(i - 1, c)) / h0) / (h0 + h1);
                (acc * period * period).abs()
            })
            .filter(|j| j.is_finite())
            .fold(0.0f64, f64::max);
        report.metrics.max_joint_jerk_rad = report.metrics.max_joint_jerk_rad.max(worst);
        jerky[i] = worst > config.jerk_rad;
    }
    // Choppy: windows where jerky samples are common (a single jump makes only three).
    let window = ((config.choppy_window_s / period).round() as usize).max(3);
    let need = ((config.choppy_ratio * window as f64).ceil() as usize).max(1);
    let mut choppy = vec![false; samples.len()];
    let mut count = 0usize;
    for i in 0..samples.len() {
        count += jerky[i] as usize;
        if i >= window {
            count -= jerky[i - window] as usize;
        }
        if i + 1 >= window && count >= need {
            for (k, flag) in choppy
                .iter_mut()
                .enumerate()
                .take(i + 1)
                .skip(i + 1 - window)
            {
                *flag |= jerky[k];
            }
        }
    }
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for i in (0..samples.len()).filter(|&i| choppy[i]) {
        match spans.last_mut() {
            Some(last) if i - last.1 <= window => last.1 = i,
            _ => spans.push((i, i)),
        }
    }
    for &(a, b) in &spans {
        report.findings.push(Finding {
            kind: CheckKind::ChoppyJoints,
            topic: signal.topic.clone(),
            start_ns: samples[a].log_time,
            end_ns: samples[b].log_time,
            detail: None,
        });
    }
    let in_choppy = |t: u64| {
        spans.iter().any(|&(a, b)| {
            let margin = window as u64 * median;
            samples[a].log_time.saturating_sub(margin) <= t && t <= samples[b].log_time + margin
        })
    };

    // Jumps: a step above the limit, per joint; the spiked samples lie between the step
    // out and the step back.
    for &(c, joint) in &columns {
        let mut open: Option<usize> = None;
        let mut last_big = 0;
        let close = |open: &mut Option<usize>, last_big: usize, report: &mut QcReport| {
            if let Some(first) = open.take() {
                let (a, b) = (first, last_big.saturating_sub(1).max(first));
                if !in_choppy(samples[a].log_time) {
                    report.findings.push(Finding {
                        kind: CheckKind::JointJump,
                        topic: signal.topic.clone(),
                        start_ns: samples[a].log_time,
                        end_ns: samples[b].log_time,
                        detail: Some(joint.to_owned()),
                    });
                }
            }
        };
        for i in 1..samples.len() {
            if !adjacent(i) {
                continue;
            }
            let step = (q(i, c) - q(i - 1, c)).abs();
            if !step.is_finite() {
                continue;
            }
            report.metrics.max_joint_step_rad = report.metrics.max_joint_step_rad.max(step);
            if step > config.joint_jump_rad {
                if open.is_some() && i - last_big > 3 {
                    close(&mut open, last_big, report);
                }
                if open.is_none() {
                    open = Some(i);
                }
                last_big = i;
            }
        }
        close(&mut open, last_big, report);
    }
}

fn check_hand(signal: &reel_mcap::LandingSignal, report: &mut QcReport) {
    let bad = |s: &reel_mcap::Sample| s.values.iter().any(|v| !v.is_finite());
    let mut start: Option<usize> = None;
    let samples = &signal.samples;
    for i in 0..=samples.len() {
        let is_bad = samples.get(i).is_some_and(bad);
        report.metrics.nan_hand_samples += is_bad as u64;
        match (is_bad, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                report.findings.push(Finding {
                    kind: CheckKind::HandPoseDropout,
                    topic: signal.topic.clone(),
                    start_ns: samples[s].log_time,
                    end_ns: samples[i - 1].log_time,
                    detail: Some("nan".into()),
                });
                start = None;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reel_mcap::{LandingSignal, Sample};

    fn joints(hz: f64, seconds: f64) -> LandingSignal {
        let period = (1e9 / hz) as u64;
        LandingSignal {
            topic: "/joint_states".into(),
            schema: "sensor_msgs/msg/JointState".into(),
            kind: SignalKind::State,
            fields: vec!["j.position".into()],
            samples: (0..(hz * seconds) as u64)
                .map(|i| Sample {
                    log_time: i * period,
                    publish_time: i * period,
                    stamp_ns: i * period,
                    values: vec![(i as f64 * 0.01).sin()],
                })
                .collect(),
        }
    }

    #[test]
    fn a_slow_stream_falls_short_and_a_full_rate_one_does_not() {
        let rates = ResampleConfig::default();
        let config = QcConfig::default();
        let run = |hz| {
            let episode = LandingEpisode {
                signals: vec![joints(hz, 2.0)],
                ..Default::default()
            };
            quality_check(&episode, &[], &rates, &config)
        };
        let slow = run(150.0);
        assert_eq!(slow.findings.len(), 1, "{:?}", slow.findings);
        assert_eq!(slow.findings[0].kind, CheckKind::RateShortfall);
        assert!((slow.metrics.rates_hz["/joint_states"] - 150.0).abs() < 1.0);
        let full = run(200.0);
        assert!(full.findings.is_empty(), "{:?}", full.findings);
        assert!(full.summary().pass());
    }

    #[test]
    fn a_stream_that_ends_early_or_starts_late_does_not_cover_the_episode() {
        // Joint states for 10 s; actions from 0.3 s (within the bound) to 4.2 s (5.8 s short).
        let mut actions = joints(200.0, 10.0);
        actions.topic = "/action".into();
        actions.kind = SignalKind::Action;
        actions
            .samples
            .retain(|s| (300_000_000..4_200_000_000).contains(&s.log_time));
        let mut late = joints(200.0, 10.0);
        late.topic = "/late".into();
        late.samples.retain(|s| s.log_time >= 2_000_000_000);
        let episode = LandingEpisode {
            signals: vec![joints(200.0, 10.0), actions, late],
            problems: vec![reel_mcap::StreamProblem {
                topic: "/imu".into(),
                schema: "sensor_msgs/msg/Imu".into(),
                bad_messages: 2,
                messages: 50,
                reason: "message ends early".into(),
                first_log_time: 7,
            }],
            ..Default::default()
        };
        let report = quality_check(
            &episode,
            &[],
            &ResampleConfig::default(),
            &QcConfig::default(),
        );
        let coverage: Vec<(&str, u64, u64, &str)> = report
            .findings
            .iter()
            .filter(|f| f.kind == CheckKind::StreamCoverage)
            .map(|f| {
                (
                    f.topic.as_str(),
                    f.start_ns,
                    f.end_ns,
                    f.detail.as_deref().unwrap_or(""),
                )
            })
            .collect();
        let end = 9_995_000_000;
        assert_eq!(
            coverage,
            [
                ("/late", 0, 2_000_000_000, "starts late"),
                ("/action", 4_195_000_000, end, "ends early")
            ]
        );
        let undecoded = report
            .findings
            .iter()
            .find(|f| f.kind == CheckKind::UndecodedMessages)
            .expect("a finding for the undecoded messages");
        assert_eq!(undecoded.topic, "/imu");
        let detail = undecoded.detail.as_deref().unwrap_or_default();
        assert!(detail.starts_with("2 of 50 messages"), "{detail}");
        let summary = report.summary();
        assert!(summary.timestamp_gap && summary.corrupt_frames && !summary.pass());
    }

    #[test]
    fn repeated_chunks_are_a_finding() {
        let episode = LandingEpisode {
            signals: vec![joints(200.0, 10.0)],
            duplicate_chunks: 2,
            ..Default::default()
        };
        let report = quality_check(
            &episode,
            &[],
            &ResampleConfig::default(),
            &QcConfig::default(),
        );
        let finding = report
            .findings
            .iter()
            .find(|f| f.kind == CheckKind::DuplicateChunks)
            .expect("a finding for the repeated chunks");
        assert_eq!(
            finding.detail.as_deref(),
            Some("2 chunks repeated an earlier chunk and were read once")
        );
        assert!(!report.summary().pass());
    }

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
