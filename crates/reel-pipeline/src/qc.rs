//! Step 4b: quality checks. Each check is configurable and yields findings (a kind, a
//! topic and a time span) and metrics; the warehouse keeps a flag per check.
//!
//! Checks run on the landing streams as recorded (timing, values) and on the measurements
//! of every landing frame taken while encoding, not on the resampled grid, so resampling
//! can neither hide nor invent a fault.
//!
//! Files: `config` (the thresholds), `report` (findings, metrics and the warehouse's
//! flags), `timing` (when streams logged: stalls, gaps, rates, coverage), `cameras` (black,
//! frozen and corrupt frames) and `signals` (joint jumps, choppy joints, hand-pose
//! dropouts).

mod cameras;
mod config;
mod report;
mod signals;
mod timing;

use reel_landing::LandingEpisode;
use reel_mcap::SignalKind;

use crate::resample::ResampleConfig;
pub use cameras::CameraStats;
use cameras::check_cameras;
pub use config::QcConfig;
pub use report::{CheckKind, Finding, QcMetrics, QcReport};
use signals::{check_hand, check_joints};
use timing::{silences, stream_coverage, stream_timing};

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

#[cfg(test)]
mod tests {
    use super::*;
    use reel_landing::LandingSignal;
    use reel_mcap::Sample;

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
            problems: vec![reel_landing::StreamProblem {
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
}
