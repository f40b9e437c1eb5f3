//! ROS 2 messages as rosbag2 writes them to MCAP: `cdr` encoding (XCDR1,
//! little endian) with `ros2msg` schema texts that embed their dependencies.

/// The schema encoding rosbag2 uses.
pub const SCHEMA_ENCODING: &str = "ros2msg";
/// The message encoding rosbag2 uses.
pub const MESSAGE_ENCODING: &str = "cdr";

const SEPARATOR: &str =
    "================================================================================";

fn with_dependencies(main: &str, deps: &[(&str, &str)]) -> String {
    let mut text = main.to_string();
    for (name, body) in deps {
        text.push_str(&format!("\n{SEPARATOR}\nMSG: {name}\n{body}"));
    }
    text
}

const TIME: (&str, &str) = ("builtin_interfaces/Time", "int32 sec\nuint32 nanosec\n");
const HEADER: (&str, &str) = (
    "std_msgs/Header",
    "builtin_interfaces/Time stamp\nstring frame_id\n",
);

/// `sensor_msgs/msg/CompressedImage`.
pub fn compressed_image_schema() -> String {
    with_dependencies(
        "std_msgs/Header header\nstring format\nuint8[] data\n",
        &[HEADER, TIME],
    )
}

/// `sensor_msgs/msg/Image`.
pub fn image_schema() -> String {
    with_dependencies(
        "std_msgs/Header header\nuint32 height\nuint32 width\nstring encoding\nuint8 is_bigendian\nuint32 step\nuint8[] data\n",
        &[HEADER, TIME],
    )
}

/// `sensor_msgs/msg/JointState`.
pub fn joint_state_schema() -> String {
    with_dependencies(
        "std_msgs/Header header\nstring[] name\nfloat64[] position\nfloat64[] velocity\nfloat64[] effort\n",
        &[HEADER, TIME],
    )
}

/// `geometry_msgs/msg/PoseStamped`.
pub fn pose_stamped_schema() -> String {
    with_dependencies(
        "std_msgs/Header header\ngeometry_msgs/Pose pose\n",
        &[
            HEADER,
            TIME,
            (
                "geometry_msgs/Pose",
                "geometry_msgs/Point position\ngeometry_msgs/Quaternion orientation\n",
            ),
            ("geometry_msgs/Point", "float64 x\nfloat64 y\nfloat64 z\n"),
            (
                "geometry_msgs/Quaternion",
                "float64 x 0\nfloat64 y 0\nfloat64 z 0\nfloat64 w 1\n",
            ),
        ],
    )
}

/// A little-endian CDR serializer. Alignment is relative to the end of the
/// 4-byte encapsulation header, as XCDR1 requires.
#[derive(Debug)]
pub struct CdrWriter {
    buf: Vec<u8>,
}

impl Default for CdrWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl CdrWriter {
    /// Starts a message with the CDR_LE encapsulation header.
    pub fn new() -> Self {
        Self {
            buf: vec![0x00, 0x01, 0x00, 0x00],
        }
    }

    fn align(&mut self, n: usize) {
        let offset = self.buf.len() - 4;
        let pad = (n - offset % n) % n;
        self.buf.extend(std::iter::repeat_n(0u8, pad));
    }

    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    pub fn u32(&mut self, v: u32) {
        self.align(4);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub fn i32(&mut self, v: i32) {
        self.align(4);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub fn f64(&mut self, v: f64) {
        self.align(8);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub fn string(&mut self, s: &str) {
        self.u32(s.len() as u32 + 1);
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.push(0);
    }

    pub fn bytes(&mut self, b: &[u8]) {
        self.u32(b.len() as u32);
        self.buf.extend_from_slice(b);
    }

    pub fn strings(&mut self, items: &[String]) {
        self.u32(items.len() as u32);
        for s in items {
            self.string(s);
        }
    }

    pub fn f64s(&mut self, items: &[f64]) {
        self.u32(items.len() as u32);
        for v in items {
            self.f64(*v);
        }
    }

    /// `std_msgs/Header` with a nanosecond stamp.
    pub fn header(&mut self, stamp_ns: u64, frame_id: &str) {
        self.i32((stamp_ns / 1_000_000_000) as i32);
        self.u32((stamp_ns % 1_000_000_000) as u32);
        self.string(frame_id);
    }

    pub fn finish(self) -> Vec<u8> {
        self.buf
    }
}

/// Serializes a `sensor_msgs/msg/CompressedImage`.
pub fn compressed_image(stamp_ns: u64, frame_id: &str, format: &str, data: &[u8]) -> Vec<u8> {
    let mut w = CdrWriter::new();
    w.header(stamp_ns, frame_id);
    w.string(format);
    w.bytes(data);
    w.finish()
}

/// Serializes a `sensor_msgs/msg/Image` of `height` rows of `step` bytes.
pub fn image(
    stamp_ns: u64,
    frame_id: &str,
    (width, height, step): (u32, u32, u32),
    encoding: &str,
    data: &[u8],
) -> Vec<u8> {
    let mut w = CdrWriter::new();
    w.header(stamp_ns, frame_id);
    w.u32(height);
    w.u32(width);
    w.string(encoding);
    w.u8(0);
    w.u32(step);
    w.bytes(data);
    w.finish()
}

/// Serializes a `sensor_msgs/msg/JointState`.
pub fn joint_state(
    stamp_ns: u64,
    names: &[String],
    position: &[f64],
    velocity: &[f64],
    effort: &[f64],
) -> Vec<u8> {
    let mut w = CdrWriter::new();
    w.header(stamp_ns, "");
    w.strings(names);
    w.f64s(position);
    w.f64s(velocity);
    w.f64s(effort);
    w.finish()
}

/// Serializes a `geometry_msgs/msg/PoseStamped`.
pub fn pose_stamped(
    stamp_ns: u64,
    frame_id: &str,
    position: [f64; 3],
    orientation: [f64; 4],
) -> Vec<u8> {
    let mut w = CdrWriter::new();
    w.header(stamp_ns, frame_id);
    for v in position.into_iter().chain(orientation) {
        w.f64(v);
    }
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alignment_is_relative_to_the_payload() {
        // Header: sec, nanosec, frame_id "" (len 1 + NUL) = 9 bytes, then a
        // float64 must start at payload offset 16.
        let bytes = pose_stamped(1_500_000_000, "", [1.0, 2.0, 3.0], [0.0, 0.0, 0.0, 1.0]);
        assert_eq!(&bytes[..4], &[0, 1, 0, 0]);
        assert_eq!(&bytes[4..8], &1i32.to_le_bytes());
        assert_eq!(&bytes[8..12], &500_000_000u32.to_le_bytes());
        assert_eq!(&bytes[12..16], &1u32.to_le_bytes());
        assert_eq!(bytes[16], 0);
        assert_eq!(&bytes[20..28], &1.0f64.to_le_bytes());
        assert_eq!(bytes.len(), 4 + 16 + 7 * 8);
    }

    #[test]
    fn schemas_embed_their_dependencies() {
        let s = joint_state_schema();
        assert!(s.starts_with("std_msgs/Header header\n"));
        assert!(s.contains("\nMSG: std_msgs/Header\n"));
        assert!(s.contains("\nMSG: builtin_interfaces/Time\nint32 sec\nuint32 nanosec\n"));
    }
}
