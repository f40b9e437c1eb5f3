//! Landing image encodings side by side: the same rendered camera frames recorded as
//! JPEG (`sensor_msgs/CompressedImage`, today's common path) and as each raw
//! `sensor_msgs/Image` layout, packed into canonical episodes in one run.
//!
//! ```text
//! cargo bench -p reel-mcap --bench landing -- [--seconds S] [--size WxH] [--rounds R]
//! ```
//!
//! Reports, per encoding: landing bytes, the landing decode alone (to RGB, per frame) and
//! the whole pack (decode + H.264 encode + write) as episode-seconds per CPU-second, with
//! the ratio to the JPEG path. Rounds alternate encodings so drift on a shared machine
//! hits them alike.

#![allow(clippy::unwrap_used)] // A benchmark fails loudly.

use std::collections::BTreeMap;
use std::io::Cursor;

use reel_mcap::{PackConfig, pack_episode, read_landing};
use reel_synth::ros2;
use reel_synth::scene::{CameraMotion, SceneRenderer};
use reel_video::ImageDecoder;

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the zeroed struct it is given; RUSAGE_SELF is always valid.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    t(usage.ru_utime) + t(usage.ru_stime)
}

const ENCODINGS: [&str; 7] = [
    "jpeg",
    "rgb8",
    "bgr8",
    "bgra8",
    "mono8",
    "yuv422_yuy2",
    "bayer_rggb8",
];

/// One frame in `encoding`: (format or encoding, bytes, step).
fn encode(encoding: &str, rgb: &[u8], width: usize, height: usize) -> Vec<u8> {
    let pixels = rgb.chunks_exact(3);
    match encoding {
        "jpeg" => {
            let mut out = Vec::new();
            jpeg_encoder::Encoder::new(&mut out, 90)
                .encode(
                    rgb,
                    width as u16,
                    height as u16,
                    jpeg_encoder::ColorType::Rgb,
                )
                .unwrap();
            out
        }
        "rgb8" => rgb.to_vec(),
        "bgr8" => pixels.flat_map(|p| [p[2], p[1], p[0]]).collect(),
        "bgra8" => pixels.flat_map(|p| [p[2], p[1], p[0], 255]).collect(),
        "mono8" => pixels.map(|p| p[1]).collect(),
        "yuv422_yuy2" => rgb
            .chunks_exact(6)
            .flat_map(|two| {
                let y = |p: &[u8]| {
                    (16.0
                        + 0.257 * f32::from(p[0])
                        + 0.504 * f32::from(p[1])
                        + 0.098 * f32::from(p[2])) as u8
                };
                let u = (128.0 - 0.148 * f32::from(two[0]) - 0.291 * f32::from(two[1])
                    + 0.439 * f32::from(two[2])) as u8;
                let v = (128.0 + 0.439 * f32::from(two[0])
                    - 0.368 * f32::from(two[1])
                    - 0.071 * f32::from(two[2])) as u8;
                [y(&two[..3]), u, y(&two[3..]), v]
            })
            .collect(),
        "bayer_rggb8" => (0..height)
            .flat_map(|y| (0..width).map(move |x| (x, y)))
            .map(|(x, y)| rgb[(y * width + x) * 3 + [[0, 1], [1, 2]][y % 2][x % 2]])
            .collect(),
        other => panic!("no encoder for {other}"),
    }
}

fn bytes_per_pixel(encoding: &str) -> usize {
    match encoding {
        "rgb8" | "bgr8" => 3,
        "bgra8" => 4,
        "yuv422_yuy2" => 2,
        _ => 1,
    }
}

/// A landing MCAP: one camera at 30 Hz in `encoding`, joint states at 100 Hz.
fn landing(encoding: &str, frames: &[Vec<u8>], width: usize, height: usize) -> Vec<u8> {
    let mut writer = mcap::WriteOptions::new()
        .compression(Some(mcap::Compression::Zstd))
        .create(Cursor::new(Vec::new()))
        .unwrap();
    let (schema_name, schema_text) = if encoding == "jpeg" {
        (
            "sensor_msgs/msg/CompressedImage",
            ros2::compressed_image_schema(),
        )
    } else {
        ("sensor_msgs/msg/Image", ros2::image_schema())
    };
    let image_schema = writer
        .add_schema(schema_name, "ros2msg", schema_text.as_bytes())
        .unwrap();
    let joint_schema = writer
        .add_schema(
            "sensor_msgs/msg/JointState",
            "ros2msg",
            ros2::joint_state_schema().as_bytes(),
        )
        .unwrap();
    let camera = writer
        .add_channel(image_schema, "/camera/high", "cdr", &BTreeMap::new())
        .unwrap();
    let joints = writer
        .add_channel(joint_schema, "/joint_states", "cdr", &BTreeMap::new())
        .unwrap();
    let mut put = |channel, time: u64, data: &[u8]| {
        let header = mcap::records::MessageHeader {
            channel_id: channel,
            sequence: 0,
            log_time: time,
            publish_time: time,
        };
        writer.write_to_known_channel(&header, data).unwrap();
    };
    let names = vec!["j0".to_owned(), "j1".to_owned()];
    let duration = frames.len() as u64 * 33_333_333;
    for i in 0..duration / 10_000_000 {
        let t = i * 10_000_000;
        let v = [i as f64 * 0.01, 0.5];
        put(joints, t, &ros2::joint_state(t, &names, &v, &v, &[]));
    }
    for (i, frame) in frames.iter().enumerate() {
        let t = i as u64 * 33_333_333;
        let message = if encoding == "jpeg" {
            ros2::compressed_image(t, "cam", "jpeg", frame)
        } else {
            let step = (width * bytes_per_pixel(encoding)) as u32;
            ros2::image(
                t,
                "cam",
                (width as u32, height as u32, step),
                encoding,
                frame,
            )
        };
        put(camera, t, &message);
    }
    writer.finish().unwrap();
    writer.into_inner().into_inner()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let seconds: f64 = arg("--seconds").map_or(10.0, |s| s.parse().unwrap());
    let (width, height) = arg("--size").map_or((640, 480), |s| {
        let (w, h) = s.split_once('x').unwrap();
        (w.parse().unwrap(), h.parse().unwrap())
    });
    let rounds: usize = arg("--rounds").map_or(3, |s| s.parse().unwrap());
    reel_video::quiet_ffmpeg_logs();

    let renderer = SceneRenderer::with_motion(7, width as u32, height as u32, CameraMotion::WRIST);
    let count = (seconds * 30.0) as usize;
    let rgb: Vec<Vec<u8>> = (0..count)
        .map(|i| renderer.render(i as f64 / 30.0))
        .collect();
    let landings: Vec<(&str, Vec<u8>)> = ENCODINGS
        .iter()
        .map(|&e| {
            let frames: Vec<Vec<u8>> = rgb.iter().map(|f| encode(e, f, width, height)).collect();
            (e, landing(e, &frames, width, height))
        })
        .collect();

    let config = PackConfig::default();
    let mut decode_cpu: BTreeMap<&str, f64> = BTreeMap::new();
    let mut pack_cpu: BTreeMap<&str, f64> = BTreeMap::new();
    let mut frames_of: BTreeMap<&str, usize> = BTreeMap::new();
    for _ in 0..rounds {
        for (encoding, bytes) in &landings {
            // The landing decode alone: parse the log and turn every frame into RGB.
            let start = cpu_seconds();
            let episode = read_landing(encoding, bytes, &|_| false).unwrap();
            let mut decoder = ImageDecoder::new();
            let camera = &episode.cameras[0];
            for f in &camera.frames {
                std::hint::black_box(f.encoding.to_rgb(&mut decoder, &f.data).unwrap());
            }
            *decode_cpu.entry(encoding).or_default() += cpu_seconds() - start;
            frames_of.insert(encoding, camera.frames.len());
            // The whole pack.
            let start = cpu_seconds();
            std::hint::black_box(pack_episode(encoding, bytes, &config).unwrap());
            *pack_cpu.entry(encoding).or_default() += cpu_seconds() - start;
        }
    }
    println!(
        "landing encodings, 1 camera {width}x{height} @ 30 Hz + joints @ 100 Hz, {seconds} s, {rounds} rounds (CPU time, all threads)"
    );
    println!("| encoding | landing MB | decode ms/frame | pack episode-s per CPU-s | vs JPEG |");
    println!("|---|---|---|---|---|");
    let rate = |e: &str| seconds * rounds as f64 / pack_cpu[e];
    for (encoding, bytes) in &landings {
        println!(
            "| {encoding} | {:.1} | {:.2} | {:.2} | {:.2}x |",
            bytes.len() as f64 / 1e6,
            decode_cpu[encoding] * 1e3 / (frames_of[encoding] * rounds) as f64,
            rate(encoding),
            rate(encoding) / rate("jpeg"),
        );
    }
}
