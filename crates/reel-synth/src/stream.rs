//! The streams an episode records (cameras, joints, actions, hands, depth cameras), their
//! topics, and the messages scheduled on them.

use crate::topics::{
    ACTION_TOPIC, CAMERA_NAMES, HAND_TOPICS, JOINT_STATES_TOPIC, camera_topic, depth_topic,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    Camera(usize),
    Joints,
    Action,
    Hand(usize),
    Depth(usize),
}

/// One message to be written: when, and on which stream.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tick {
    pub(crate) t: f64,
    pub(crate) log_time: u64,
    pub(crate) stream: usize,
}

pub(crate) fn topic_of(stream: Stream) -> String {
    match stream {
        Stream::Camera(c) => camera_topic(CAMERA_NAMES[c]),
        Stream::Joints => JOINT_STATES_TOPIC.into(),
        Stream::Action => ACTION_TOPIC.into(),
        Stream::Hand(h) => HAND_TOPICS[h].into(),
        Stream::Depth(c) => depth_topic(CAMERA_NAMES[c]),
    }
}
