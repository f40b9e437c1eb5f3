//! Landing recordings written by an independent writer (`rosbags`): rosbag2 sqlite3 split
//! in two files, rosbag2 MCAP, and big-endian CDR. Every image encoding and numeric message
//! type is read from the schema the log carries; topics nothing reads are kept as recorded,
//! and bad messages cost themselves alone.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use reel_io::{MemorySource, Store};
use reel_landing::{LandingEpisode, PackConfig, pack, read_landing, read_landing_object};
use reel_mcap::{DoctorOptions, EpisodeReader, doctor, keys};
use reel_video::ImageDecoder;
use serde_json::Value;

/// The recordings, written once per test binary.
fn recordings() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap().keep();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/write_rosbags.py");
        let status = Command::new(reel_io::test_support::python().unwrap())
            .arg(script)
            .arg(&dir)
            .status()
            .unwrap();
        assert!(status.success(), "write_rosbags.py failed");
        dir
    })
}

fn expected() -> Value {
    serde_json::from_slice(&std::fs::read(recordings().join("expected.json")).unwrap()).unwrap()
}

fn frames_recorded() -> u64 {
    expected()["frames"].as_u64().unwrap()
}

fn read_db3() -> LandingEpisode {
    let store = Store::open(recordings().to_str().unwrap()).unwrap();
    read_landing_object(&store, "split/metadata.yaml", &|_| false)
        .unwrap()
        .0
}

fn read_mcap(name: &str) -> LandingEpisode {
    let path = recordings().join(name).join(format!("{name}.mcap"));
    read_landing(name, &std::fs::read(path).unwrap(), &|_| false).unwrap()
}

fn camera<'a>(episode: &'a LandingEpisode, topic: &str) -> &'a reel_landing::LandingCamera {
    episode
        .cameras
        .iter()
        .find(|c| c.topic == topic)
        .unwrap_or_else(|| panic!("no camera {topic}: {:?}", episode.other))
}

fn signal<'a>(episode: &'a LandingEpisode, topic: &str) -> &'a reel_landing::LandingSignal {
    episode
        .signals
        .iter()
        .find(|s| s.topic == topic)
        .unwrap_or_else(|| panic!("no signal {topic}: {:?}", episode.other))
}

/// Frame `frame` of a camera, decoded as the encoders do: every frame before it through
/// the same decoder (state leaking from one image into the next shows here).
fn rgb(episode: &LandingEpisode, topic: &str, frame: usize) -> Vec<u8> {
    reel_landing::CameraFrames::new(camera(episode, topic))
        .nth(frame)
        .unwrap()
        .1
        .unwrap()
        .data
}

fn bytes_of(v: &Value) -> Vec<u8> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_u64().unwrap() as u8)
        .collect()
}

fn check(episode: &LandingEpisode) {
    let exp = expected();
    let frames = exp["frames"].as_u64().unwrap() as usize;
    let frame0 = bytes_of(&exp["rgb_frame0"]);
    let frame7 = bytes_of(&exp["rgb_frame7"]);

    // Lossless image paths come back pixel for pixel, padding and all.
    assert_eq!(rgb(episode, "/camera/rgb", 0), frame0);
    assert_eq!(rgb(episode, "/camera/png", 7), frame7);
    let bgra = rgb(episode, "/camera/bgra", 7);
    assert_eq!(bgra, frame7);
    let mono = rgb(episode, "/camera/mono", 0);
    let red: Vec<u8> = frame0.chunks(3).flat_map(|p| [p[0]; 3]).collect();
    assert_eq!(mono, red);
    assert!(rgb(episode, "/camera/yuyv", 3).iter().all(|&v| v == 128));
    let colour = bytes_of(&exp["bayer_colour"]);
    assert_eq!(
        rgb(episode, "/camera/bayer", 2),
        colour.repeat(frame0.len() / 3)
    );
    let jpeg = rgb(episode, "/camera/jpeg", 0);
    let psnr = reel_video::quality::psnr(&frame0, &jpeg);
    assert!(psnr > 30.0, "JPEG at quality 95: PSNR {psnr:.1} dB");
    for topic in [
        "/camera/bgra",
        "/camera/mono",
        "/camera/yuyv",
        "/camera/bayer",
        "/camera/jpeg",
        "/camera/png",
    ] {
        assert_eq!(camera(episode, topic).frames.len(), frames, "{topic}");
    }
    // One message whose step does not fit its bytes costs that message.
    assert_eq!(camera(episode, "/camera/rgb").frames.len(), frames);
    let rgb_problem = episode
        .problems
        .iter()
        .find(|p| p.topic == "/camera/rgb")
        .unwrap();
    assert_eq!(
        (rgb_problem.bad_messages, rgb_problem.messages),
        (1, frames as u64 + 1)
    );
    assert!(rgb_problem.reason.contains("step 33"), "{rgb_problem:?}");

    // Numeric streams, by the names a user would query.
    let joints = signal(episode, "/joint_states");
    assert_eq!(joints.kind, reel_mcap::SignalKind::State);
    assert_eq!(
        joints.fields,
        [
            "shoulder.position",
            "elbow.position",
            "shoulder.velocity",
            "elbow.velocity"
        ]
    );
    assert_eq!(joints.samples.len(), frames);
    assert_eq!(joints.samples[3].values, [3.0, -3.0, 0.5, 0.25]);
    let start = exp["start_ns"].as_u64().unwrap();
    let period = exp["period_ns"].as_u64().unwrap();
    assert_eq!(joints.samples[3].stamp_ns, start + 3 * period);
    let joint_problem = episode
        .problems
        .iter()
        .find(|p| p.topic == "/joint_states")
        .unwrap();
    assert_eq!(joint_problem.bad_messages, 1);
    assert!(
        joint_problem.reason.contains("ends early"),
        "{joint_problem:?}"
    );

    for (topic, child_x) in [("/tf/base_link", 4.0), ("/tf/gripper", 8.0)] {
        let tf = signal(episode, topic);
        assert_eq!(tf.kind, reel_mcap::SignalKind::Pose);
        assert_eq!(tf.fields[0], "position.x");
        assert_eq!(
            tf.samples[4].values,
            [child_x, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0],
            "{topic}"
        );
    }
    assert_eq!(
        signal(episode, "/tf_static/camera_link").samples[0].values[0],
        0.25
    );
    let imu = signal(episode, "/imu");
    assert_eq!(imu.fields.len(), 10);
    assert_eq!(imu.fields[6], "angular_velocity.z");
    assert_eq!(imu.samples[2].values[6], 2.0);
    let wrench = signal(episode, "/wrench");
    assert_eq!(
        wrench.fields,
        [
            "force.x", "force.y", "force.z", "torque.x", "torque.y", "torque.z"
        ]
    );
    assert_eq!(wrench.samples[1].values, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let cmd = signal(episode, "/cmd_vel");
    assert_eq!(cmd.kind, reel_mcap::SignalKind::Action);
    assert_eq!(cmd.samples[2].values, [2.0, 0.0, 0.0, 0.0, 0.0, 0.5]);
    assert_eq!(signal(episode, "/twist").samples[2].values[3], 2.0);
    assert_eq!(
        signal(episode, "/array64").samples[2].values,
        [2.0, 1.5, -2.0]
    );
    assert_eq!(signal(episode, "/array32").samples[2].values, [2.0, 0.5]);
    assert_eq!(
        signal(episode, "/pose").samples[2].values,
        [2.0, 1.0, 2.0, 0.0, 0.0, 0.0, 1.0]
    );
    let battery = signal(episode, "/battery");
    let voltage = battery.fields.iter().position(|f| f == "voltage").unwrap();
    assert!((battery.samples[2].values[voltage] - 11.8).abs() < 1e-5);
    assert!(
        battery.fields.contains(&"cell_voltage[1]".to_owned()),
        "{:?}",
        battery.fields
    );

    // Depth cameras: every 16-bit path lossless, 32FC1 metres to millimetres by one rule.
    let depth3 = &exp["depth_frame3"];
    for topic in DEPTH_TOPICS {
        let camera = episode
            .depths
            .iter()
            .find(|c| c.topic == topic)
            .unwrap_or_else(|| panic!("no depth camera {topic}: {:?}", episode.other));
        assert_eq!(camera.frames.len(), frames, "{topic}");
        // One decoder for frames 0 to 3, as conversion uses it.
        let mut decoder = ImageDecoder::new();
        let image = camera.frames[..4]
            .iter()
            .map(|f| f.encoding.to_depth(&mut decoder, &f.data).unwrap())
            .collect::<Vec<_>>()
            .pop()
            .unwrap();
        assert_eq!((image.width, image.height), (8, 6), "{topic}");
        let want: Vec<u16> = depth3[topic]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u16)
            .collect();
        assert_eq!(image.data, want, "{topic}");
        let unit = if topic == "/depth/mono16" {
            reel_video::DepthUnit::Raw
        } else {
            reel_video::DepthUnit::Millimetres
        };
        assert_eq!(image.unit, unit, "{topic}");
    }

    // Topics nothing reads are kept as recorded, with why.
    let other: Vec<(&str, &str)> = episode
        .other
        .iter()
        .map(|o| (o.topic.as_str(), o.reason.as_str()))
        .collect();
    assert_eq!(other, [("/chatter", "no images or numeric fields")]);
    assert_eq!(episode.other[0].messages.len(), frames);
}

/// The depth topics `write_rosbags.py` records, one per landing depth encoding.
const DEPTH_TOPICS: [&str; 6] = [
    "/camera/depth",
    "/depth/inverse",
    "/depth/metres",
    "/depth/mono16",
    "/depth/png",
    "/depth/rvl",
];

fn expected_depth(topic: &str) -> Vec<u16> {
    expected()["depth_frame3"][topic]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as u16)
        .collect()
}

#[test]
fn rosbag2_sqlite3_split_in_two_files_reads_as_one_episode() {
    let episode = read_db3();
    check(&episode);
    let exp = expected();
    assert_eq!(
        signal(&episode, "/joint_states").samples.len() as u64 + 1,
        exp["counts"]["/joint_states"].as_u64().unwrap()
    );
}

/// A bag named as ROS 2 names it (the folder `ros2 bag play` takes, with or without a
/// trailing slash, or either of its split `.db3` files) is the one episode its
/// `metadata.yaml` describes; an SQLite file given as MCAP is named for what it is.
#[test]
fn a_bag_is_one_episode_whether_named_by_its_folder_its_yaml_or_a_db3_file() {
    let store = Store::open(recordings().to_str().unwrap()).unwrap();
    let whole = read_db3();
    for key in ["split", "split/", "split/split_0.db3", "split/split_1.db3"] {
        assert_eq!(
            reel_landing::recording_key(&store, key).unwrap(),
            "split/metadata.yaml",
            "{key}"
        );
        let episode = read_landing_object(&store, key, &|_| false).unwrap().0;
        assert_eq!(
            signal(&episode, "/joint_states").samples.len(),
            signal(&whole, "/joint_states").samples.len(),
            "{key}"
        );
        assert_eq!(reel_landing::recording_stem(key), "split", "{key}");
    }
    // A .db3 away from its metadata.yaml: the error says what is missing.
    let alone = tempfile::tempdir().unwrap();
    std::fs::copy(
        recordings().join("split/split_0.db3"),
        alone.path().join("run.db3"),
    )
    .unwrap();
    std::fs::copy(
        recordings().join("split/split_0.db3"),
        alone.path().join("run.mcap"),
    )
    .unwrap();
    let lonely = Store::open(alone.path().to_str().unwrap()).unwrap();
    let err = read_landing_object(&lonely, "run.db3", &|_| false)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("metadata.yaml") && err.contains("run.db3"),
        "{err}"
    );
    // Named .mcap, but SQLite: never "bad magic".
    let err = read_landing_object(&lonely, "run.mcap", &|_| false)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("SQLite") && !err.to_lowercase().contains("magic"),
        "{err}"
    );
    let source = reel_io::FileSource::open(alone.path().join("run.mcap")).unwrap();
    let err = reel_mcap::EpisodeReader::open(source)
        .unwrap_err()
        .to_string();
    assert!(err.contains("SQLite"), "{err}");
}

#[test]
fn rosbag2_mcap_reads_the_same_in_both_byte_orders() {
    check(&read_mcap("mcap"));
    check(&read_mcap("mcap_be"));
}

#[test]
fn a_packed_rosbag_keeps_what_reel_does_not_read_and_passes_the_doctor() {
    let out = tempfile::tempdir().unwrap();
    let input = recordings().join("split/metadata.yaml");
    let output = out.path().join("episode.mcap");
    let report = pack(
        input.to_str().unwrap(),
        output.to_str().unwrap(),
        &PackConfig::default(),
        &Default::default(),
    )
    .unwrap();
    assert_eq!(report.cameras, 7);
    assert_eq!(report.depth_cameras, DEPTH_TOPICS.len());
    assert_eq!(
        report.recorded_topics.len(),
        1,
        "{:?}",
        report.recorded_topics
    );
    // /camera/rgb and /joint_states (one bad message each).
    assert_eq!(report.problems.len(), 2, "{:?}", report.problems);
    let bytes = std::fs::read(&output).unwrap();
    let verdict = doctor(
        MemorySource::new("episode.mcap", bytes.clone()),
        DoctorOptions::default(),
    )
    .unwrap();
    assert!(verdict.problems.is_empty(), "{:?}", verdict.problems);
    let reader = EpisodeReader::open(MemorySource::new("episode.mcap", bytes)).unwrap();
    assert_eq!(reader.groups()[keys::OTHER_GROUP], ["/chatter"]);
    // Depth frames come back from the canonical file exactly as decoded from the landing
    // messages, in the camera group's chunks.
    for topic in DEPTH_TOPICS {
        assert!(
            reader.groups()["cameras"].iter().any(|t| t == topic),
            "{topic}"
        );
        let window = reader.depth(topic, 0..u64::MAX).unwrap();
        assert_eq!(window.log_times.len() as u64, frames_recorded(), "{topic}");
        assert_eq!(window.frame(3), expected_depth(topic), "{topic}");
        let channel = reader.channel(topic).unwrap();
        assert_eq!(channel.metadata[keys::KIND], keys::DEPTH_KIND);
    }
    assert_eq!(
        reader.channel("/depth/rvl").unwrap().metadata[keys::SOURCE_ENCODING],
        "16UC1; compressedDepth rvl"
    );
    assert_eq!(
        reader.channel("/depth/mono16").unwrap().metadata[keys::UNIT],
        "raw"
    );
    let chatter = reader.read_topics(&["/chatter"], 0..u64::MAX).unwrap();
    let landing = read_db3();
    let recorded = &landing
        .other
        .iter()
        .find(|o| o.topic == "/chatter")
        .unwrap()
        .messages;
    assert_eq!(chatter.len(), recorded.len());
    assert!(
        chatter
            .iter()
            .zip(recorded)
            .all(|(a, b)| a.data == b.data && a.log_time == b.log_time)
    );
    let channel = reader.channel("/chatter").unwrap();
    assert_eq!(channel.message_encoding, "cdr");
    assert_eq!(channel.schema.as_ref().unwrap().encoding, "ros2msg");

    // Independent readers: the kept topic decodes as the ROS 2 message it was, and the
    // cameras follow Foxglove's CompressedVideo rules.
    let frames = expected()["frames"].as_u64().unwrap();
    let expected_json = out.path().join("expected.json");
    let cameras = [
        "/camera/bayer",
        "/camera/bgra",
        "/camera/jpeg",
        "/camera/mono",
        "/camera/png",
        "/camera/rgb",
        "/camera/yuyv",
    ];
    let chatter: Vec<String> = (0..frames).map(|i| format!("hello {i}")).collect();
    let depth: serde_json::Map<String, Value> = DEPTH_TOPICS
        .iter()
        .map(|t| (t.to_string(), serde_json::json!(expected_depth(t))))
        .collect();
    std::fs::write(
        &expected_json,
        serde_json::json!({"chatter": chatter, "cameras": cameras, "depth_frame3": depth})
            .to_string(),
    )
    .unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/check_recorded.py"
    );
    let result = Command::new(reel_io::test_support::python().unwrap())
        .args([
            script,
            output.to_str().unwrap(),
            expected_json.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        result.status.success(),
        "{}",
        String::from_utf8_lossy(&result.stderr)
    );
}

#[test]
fn a_truncated_db3_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let bag = dir.path().join("bag");
    std::fs::create_dir(&bag).unwrap();
    for file in ["metadata.yaml", "split_0.db3", "split_1.db3"] {
        std::fs::copy(recordings().join("split").join(file), bag.join(file)).unwrap();
    }
    let db = std::fs::read(bag.join("split_1.db3")).unwrap();
    std::fs::write(bag.join("split_1.db3"), &db[..db.len() / 3]).unwrap();
    let store = Store::open(dir.path().to_str().unwrap()).unwrap();
    let err = read_landing_object(&store, "bag/metadata.yaml", &|_| false).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("split_1.db3"), "{text}");
    assert!(text.contains("rosbag2"), "{text}");

    std::fs::write(
        bag.join("metadata.yaml"),
        "rosbag2_bagfile_information:\n  version: 9\n",
    )
    .unwrap();
    let err = read_landing_object(&store, "bag/metadata.yaml", &|_| false).unwrap_err();
    assert!(err.to_string().contains("relative_file_paths"), "{err}");
}

#[test]
fn a_foxglove_sdk_recording_reads_from_its_embedded_descriptors() {
    let dir = tempfile::tempdir().unwrap();
    let (mcap, expected) = (dir.path().join("fox.mcap"), dir.path().join("fox.json"));
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/write_foxglove.py"
    );
    let status = Command::new(reel_io::test_support::python().unwrap())
        .args([script, mcap.to_str().unwrap(), expected.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(status.success(), "write_foxglove.py failed");
    let exp: Value = serde_json::from_slice(&std::fs::read(expected).unwrap()).unwrap();
    let episode = read_landing("fox.mcap", &std::fs::read(mcap).unwrap(), &|_| false).unwrap();
    let frames = exp["frames"].as_u64().unwrap() as usize;

    assert_eq!(rgb(&episode, "/fox/raw", 3), bytes_of(&exp["rgb_frame3"]));
    assert!(rgb(&episode, "/fox/uyvy", 0).iter().all(|&v| v == 128));
    let psnr = reel_video::quality::psnr(
        &bytes_of(&exp["rgb_frame3"]),
        &rgb(&episode, "/fox/jpeg", 3),
    );
    assert!(psnr > 30.0, "{psnr}");
    let start = exp["start_ns"].as_u64().unwrap();
    let period = exp["period_ns"].as_u64().unwrap();
    assert_eq!(
        camera(&episode, "/fox/raw").frames[3].stamp_ns,
        start + 3 * period
    );
    assert_eq!(camera(&episode, "/fox/raw").frame_id, "cam");

    assert_eq!(
        signal(&episode, "/fox/tf/tool").samples[3].values,
        [6.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    );
    assert_eq!(
        signal(&episode, "/fox/pose").samples[3].values[..3],
        [3.0, 1.0, 2.0]
    );
    let joints = signal(&episode, "/fox/joints");
    assert_eq!(
        joints.fields,
        [
            "wrist.position",
            "finger.position",
            "wrist.velocity",
            "finger.velocity",
            "wrist.effort",
            "finger.effort"
        ]
    );
    assert_eq!(joints.samples[3].values, [3.0, -3.0, 0.5, 0.25, 1.5, 2.5]);
    assert_eq!(joints.samples.len(), frames);
    let json = signal(&episode, "/fox/json_joints");
    assert_eq!(
        json.fields,
        ["a.position", "b.position", "a.velocity", "b.velocity"]
    );
    assert_eq!(json.samples[3].values, [3.0, 6.0, 0.0, 1.0]);
    assert_eq!(json.samples[3].stamp_ns, start + 3 * period);

    // A schema that does not parse: reported, kept as recorded, the rest read.
    let broken = episode
        .other
        .iter()
        .find(|o| o.topic == "/fox/broken")
        .unwrap();
    assert!(
        broken.reason.contains("FileDescriptorSet"),
        "{}",
        broken.reason
    );
    assert_eq!(broken.messages.len(), frames);
    let problem = episode
        .problems
        .iter()
        .find(|p| p.topic == "/fox/broken")
        .unwrap();
    assert_eq!(problem.bad_messages, frames as u64);

    // An odd-sized camera packs (coded one pixel larger) and reads back at its own size.
    let output = dir.path().join("fox-canonical.mcap");
    pack(
        dir.path().join("fox.mcap").to_str().unwrap(),
        output.to_str().unwrap(),
        &PackConfig::default(),
        &Default::default(),
    )
    .unwrap();
    let reader = EpisodeReader::open(MemorySource::new(
        "fox-canonical.mcap",
        std::fs::read(&output).unwrap(),
    ))
    .unwrap();
    let channel = reader.channel("/fox/odd").unwrap();
    assert_eq!(
        (
            &channel.metadata[keys::WIDTH],
            &channel.metadata[keys::HEIGHT]
        ),
        (&"33".to_owned(), &"25".to_owned())
    );
    let mut decoder = reel_video::H264Decoder::new().unwrap();
    let frame = reader
        .frames_at("/fox/odd", &[start + 3 * period], &mut decoder, None)
        .unwrap()
        .remove(0);
    assert_eq!((frame.width, frame.height), (33, 25));
    let psnr = reel_video::quality::psnr(&bytes_of(&exp["odd_frame3"]), &frame.data);
    assert!(psnr > 30.0, "odd-sized camera: {psnr:.1} dB");
}
