//! The names of the cameras and the topics an episode records.

/// Camera names, in the order cameras are added.
pub const CAMERA_NAMES: [&str; 6] = ["high", "left_wrist", "right_wrist", "low", "front", "side"];

/// The image topic of a camera.
pub fn camera_topic(name: &str) -> String {
    format!("/camera/{name}/image_raw/compressed")
}

/// The depth topic of a camera (`16UC1` millimetres).
pub fn depth_topic(name: &str) -> String {
    format!("/camera/{name}/depth/image_raw")
}

/// Joint-state topic.
pub const JOINT_STATES_TOPIC: &str = "/joint_states";
/// Commanded joint positions.
pub const ACTION_TOPIC: &str = "/action";
/// Hand pose topics, left then right.
pub const HAND_TOPICS: [&str; 2] = ["/hand/left/pose", "/hand/right/pose"];
