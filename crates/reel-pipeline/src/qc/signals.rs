//! Checks of the signal values: joints that jump and come back, joints that stair-step
//! and jitter (choppy), and hand poses that go NaN.

use super::config::QcConfig;
use super::report::{CheckKind, Finding, QcReport};
use crate::resample::{ResampleConfig, median_period};

#[allow(clippy::needless_range_loop)] // `i` indexes samples, jerk flags and windows alike
pub(super) fn check_joints(
    signal: &reel_landing::LandingSignal,
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

pub(super) fn check_hand(signal: &reel_landing::LandingSignal, report: &mut QcReport) {
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
