//! The quality checks against reel-synth's ground truth: every injected fault is found
//! (right kind, topic, joint or mode, overlapping span), nothing else is reported, and clean
//! episodes raise no finding at all.

use reel_pipeline::{CheckKind, Finding, PipelineConfig, process_episode};
use reel_synth::{
    DropoutMode, Fault, FaultKind, FaultRates, Flavor, SynthConfig, generate_episode,
};

fn config(faults: FaultRates, flavor: Flavor) -> SynthConfig {
    SynthConfig {
        seconds: 4.0,
        cameras: 2,
        width: 96,
        height: 72,
        faults,
        flavor,
        ..SynthConfig::default()
    }
}

fn kind_of(kind: FaultKind) -> CheckKind {
    match kind {
        FaultKind::CameraBlackout => CheckKind::CameraBlackout,
        FaultKind::FrozenFrames => CheckKind::FrozenFrames,
        FaultKind::CorruptFrame => CheckKind::CorruptFrame,
        FaultKind::JointJump => CheckKind::JointJump,
        FaultKind::ChoppyJoints => CheckKind::ChoppyJoints,
        FaultKind::HandPoseDropout => CheckKind::HandPoseDropout,
        FaultKind::TimestampGap => CheckKind::TimestampGap,
    }
}

fn matches(fault: &Fault, finding: &Finding) -> bool {
    let detail_ok = match fault.kind {
        FaultKind::JointJump => finding.detail.as_deref() == fault.joint.as_deref(),
        FaultKind::HandPoseDropout => {
            let mode = match fault.mode {
                Some(DropoutMode::Missing) => "missing",
                Some(DropoutMode::Nan) => "nan",
                None => "",
            };
            finding.detail.as_deref() == Some(mode)
        }
        _ => true,
    };
    kind_of(fault.kind) == finding.kind
        && fault.topic == finding.topic
        && finding.start_ns <= fault.end_ns
        && fault.start_ns <= finding.end_ns
        && detail_ok
}

/// Processes episodes `seeds` of `synth` and checks findings against the sidecars.
/// Returns how many faults were injected.
fn check(synth: &SynthConfig, seeds: std::ops::Range<u64>) -> usize {
    reel_video::quiet_ffmpeg_logs();
    let mut injected = 0;
    for index in seeds {
        let episode = generate_episode(synth, index).expect("synth");
        let processed = process_episode(
            &episode.name,
            &episode.name,
            &episode.mcap,
            &PipelineConfig::default(),
        )
        .expect("processes");
        let findings = &processed.summary.qc.findings;
        for fault in &episode.faults.faults {
            assert!(
                findings.iter().any(|f| matches(fault, f)),
                "episode {index}: fault {fault:?} not found; findings: {findings:#?}"
            );
        }
        for finding in findings {
            assert!(
                episode
                    .faults
                    .faults
                    .iter()
                    .any(|fault| matches(fault, finding)),
                "episode {index}: spurious {finding:?}; injected: {:#?}; metrics {:?}",
                episode.faults.faults,
                processed.summary.qc.metrics
            );
        }
        let summary = processed.summary.qc.summary();
        assert_eq!(summary.pass(), episode.faults.faults.is_empty());
        injected += episode.faults.faults.len();
    }
    injected
}

#[test]
fn clean_episodes_raise_nothing() {
    for flavor in [Flavor::Ros2, Flavor::Foxglove] {
        // Transport losses and clock jitter stay on: they are not faults.
        check(&config(FaultRates::none(), flavor), 0..3);
    }
}

#[test]
fn every_kind_of_fault_is_found_exactly() {
    for (i, kind) in FaultKind::ALL.into_iter().enumerate() {
        // One kind at a time, often enough that most episodes get one or two.
        let flavor = if i % 2 == 0 {
            Flavor::Ros2
        } else {
            Flavor::Foxglove
        };
        let injected = check(&config(FaultRates::none().with(kind, 30.0), flavor), 0..3);
        assert!(
            injected >= 2,
            "{kind:?}: only {injected} injected; pick other seeds"
        );
    }
}

#[test]
fn mixed_faults_are_told_apart() {
    let injected = check(&config(FaultRates::uniform(6.0), Flavor::Ros2), 10..14);
    assert!(injected >= 4, "{injected}");
}
