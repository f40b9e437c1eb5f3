//! Faults as generation applies them: each planned fault bound to the messages it touched,
//! and the ground-truth record it becomes (a fault that touched nothing did not happen).

use crate::faults::{DropoutMode, Fault, FaultKind, PlannedFault};
use crate::meta::EpisodeMeta;
use crate::stream::Stream;
use crate::topics::{CAMERA_NAMES, HAND_TOPICS, JOINT_STATES_TOPIC, camera_topic};

/// A fault bound to the messages it touched.
#[derive(Debug)]
pub(crate) struct ActiveFault {
    pub(crate) plan: PlannedFault,
    pub(crate) touched: Option<(u64, u64)>,
    /// The frame a frozen camera keeps repeating.
    pub(crate) frozen_jpeg: Option<Vec<u8>>,
}

impl ActiveFault {
    pub(crate) fn touch(&mut self, log_time: u64) {
        self.touched = Some(match self.touched {
            None => (log_time, log_time),
            Some((a, b)) => (a.min(log_time), b.max(log_time)),
        });
    }
}

pub(crate) fn bind_fault(
    f: &ActiveFault,
    meta: &EpisodeMeta,
    streams: &[Stream],
    names: &[String],
) -> Option<Fault> {
    let plan_ns = |t: f64| meta.start_ns + (t * 1e9).round() as u64;
    let (topic, span) = match f.plan.kind {
        FaultKind::TimestampGap => (
            "*".to_string(),
            Some((plan_ns(f.plan.start), plan_ns(f.plan.end))),
        ),
        FaultKind::HandPoseDropout if f.plan.mode == DropoutMode::Missing => (
            HAND_TOPICS[f.plan.hand].to_string(),
            Some((plan_ns(f.plan.start), plan_ns(f.plan.end))),
        ),
        FaultKind::HandPoseDropout => (HAND_TOPICS[f.plan.hand].to_string(), f.touched),
        FaultKind::JointJump | FaultKind::ChoppyJoints => {
            (JOINT_STATES_TOPIC.to_string(), f.touched)
        }
        FaultKind::CameraBlackout | FaultKind::FrozenFrames | FaultKind::CorruptFrame => {
            if !streams.contains(&Stream::Camera(f.plan.camera)) {
                return None;
            }
            (camera_topic(CAMERA_NAMES[f.plan.camera]), f.touched)
        }
    };
    // A fault that touched no message (all of them dropped) did not happen.
    let (start_ns, end_ns) = span?;
    Some(Fault {
        kind: f.plan.kind,
        topic,
        start_ns,
        end_ns,
        joint: (f.plan.kind == FaultKind::JointJump).then(|| names[f.plan.joint].clone()),
        magnitude: (f.plan.kind == FaultKind::JointJump).then_some(f.plan.magnitude),
        mode: (f.plan.kind == FaultKind::HandPoseDropout).then_some(f.plan.mode),
    })
}
