//! Landing encodings side by side, in one run: the same rendered camera frames recorded as
//! JPEG (`sensor_msgs/CompressedImage`, today's common path), PNG, each raw
//! `sensor_msgs/Image` layout, and as recorded H.264 (`foxglove.CompressedVideo`, kept as
//! recorded or transcoded); and the same depth frames as `16UC1`, `32FC1` and
//! `compressedDepth` PNG and RVL.
//!
//! ```text
//! cargo bench -p reel-pipeline --bench landing -- [--seconds S] [--size WxH] [--rounds R]
//! ```
//!
//! Reports, per camera encoding: landing bytes, the landing decode alone (to RGB, per
//! frame), `reel-pack` (decode + H.264 encode + write) and ingest (`process_episode`:
//! decode, resample, quality checks, encode, write) as episode-seconds per CPU-second,
//! with the ratio to the JPEG path. Per depth encoding: landing bytes per frame beside the
//! canonical depth stream's (zstd-compressed `foxglove.RawImage` chunks), the landing
//! decode per frame, ingest, and reading the canonical frames back. Rounds alternate
//! encodings so drift on a shared machine hits them alike.

#![allow(clippy::unwrap_used)] // A benchmark fails loudly.

use std::collections::BTreeMap;
use std::io::Cursor;

use reel_io::MemorySource;
use reel_landing::{PackConfig, pack_episode, read_landing};
use reel_mcap::EpisodeReader;
use reel_mcap::proto::{COMPRESSED_VIDEO, CompressedVideo, Timestamp, compressed_video_schema};
use reel_pipeline::{PipelineConfig, process_episode};
use reel_synth::ros2;
use reel_synth::scene::{CameraMotion, SceneRenderer};
use reel_video::{EncoderConfig, H264Encoder, ImageDecoder, RgbImage};

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

const ENCODINGS: [&str; 10] = [
    "jpeg",
    "png",
    "h264 kept",
    "h264 transcoded",
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
        "png" => png_bytes(
            rgb,
            width,
            height,
            png::ColorType::Rgb,
            png::BitDepth::Eight,
        ),
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

fn png_bytes(
    data: &[u8],
    width: usize,
    height: usize,
    colour: png::ColorType,
    depth: png::BitDepth,
) -> Vec<u8> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, width as u32, height as u32);
    encoder.set_color(colour);
    encoder.set_depth(depth);
    encoder
        .write_header()
        .unwrap()
        .write_image_data(data)
        .unwrap();
    out
}

/// Recorded H.264 as a camera that encodes on board writes it: a keyframe each second
/// (30 frames), no B-frames, SPS/PPS on keyframes: what ingest keeps as recorded.
fn recorded_h264(rgb: &[Vec<u8>], width: usize, height: usize) -> Vec<Vec<u8>> {
    let config = EncoderConfig {
        gop: 30,
        crf: 20.0,
        fps: 30,
        ..EncoderConfig::default()
    };
    let mut encoder = H264Encoder::new(width, height, &config).unwrap();
    let mut units = Vec::new();
    for (i, frame) in rgb.iter().enumerate() {
        let image = RgbImage::new(width, height, frame.clone());
        units.extend(if i % 30 == 0 {
            encoder.push_keyframe(&image).unwrap()
        } else {
            encoder.push(&image).unwrap()
        });
    }
    units.extend(encoder.finish().unwrap());
    units.sort_by_key(|u| u.index);
    units.into_iter().map(|u| u.data).collect()
}

fn bytes_per_pixel(encoding: &str) -> usize {
    match encoding {
        "rgb8" | "bgr8" => 3,
        "bgra8" | "32FC1" => 4,
        "yuv422_yuy2" | "16UC1" => 2,
        _ => 1,
    }
}

/// A landing MCAP: one camera at 30 Hz in `encoding` (`frames` as the message payload
/// carries them), joint states at 100 Hz.
fn landing(encoding: &str, frames: &[Vec<u8>], width: usize, height: usize) -> Vec<u8> {
    let mut writer = mcap::WriteOptions::new()
        .compression(Some(mcap::Compression::Zstd))
        .create(Cursor::new(Vec::new()))
        .unwrap();
    let video = encoding.starts_with("h264");
    let compressed = matches!(encoding, "jpeg" | "png") || encoding.contains("compressedDepth");
    let image_schema = if video {
        writer
            .add_schema(COMPRESSED_VIDEO, "protobuf", &compressed_video_schema())
            .unwrap()
    } else if compressed {
        writer
            .add_schema(
                "sensor_msgs/msg/CompressedImage",
                "ros2msg",
                ros2::compressed_image_schema().as_bytes(),
            )
            .unwrap()
    } else {
        writer
            .add_schema(
                "sensor_msgs/msg/Image",
                "ros2msg",
                ros2::image_schema().as_bytes(),
            )
            .unwrap()
    };
    let joint_schema = writer
        .add_schema(
            "sensor_msgs/msg/JointState",
            "ros2msg",
            ros2::joint_state_schema().as_bytes(),
        )
        .unwrap();
    let camera = writer
        .add_channel(
            image_schema,
            "/camera/high",
            if video { "protobuf" } else { "cdr" },
            &BTreeMap::new(),
        )
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
        let message = if video {
            prost::Message::encode_to_vec(&CompressedVideo {
                timestamp: Some(Timestamp::from_ns(t)),
                frame_id: "cam".into(),
                data: frame.clone().into(),
                format: "h264".into(),
            })
        } else if compressed {
            ros2::compressed_image(t, "cam", encoding, frame)
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

const DEPTH_ENCODINGS: [&str; 4] = [
    "16UC1",
    "32FC1",
    "16UC1; compressedDepth png",
    "16UC1; compressedDepth rvl",
];

/// One depth frame (millimetres) in `encoding`.
fn encode_depth(encoding: &str, mm: &[u16], width: usize, height: usize) -> Vec<u8> {
    // compressedDepth's 12-byte header: format word, two inverse-depth parameters.
    let header = [0u8; 12];
    match encoding {
        "16UC1" => mm.iter().flat_map(|v| v.to_le_bytes()).collect(),
        "32FC1" => mm
            .iter()
            .flat_map(|&v| (f32::from(v) / 1000.0).to_le_bytes())
            .collect(),
        "16UC1; compressedDepth png" => {
            let be: Vec<u8> = mm.iter().flat_map(|v| v.to_be_bytes()).collect();
            let png = png_bytes(
                &be,
                width,
                height,
                png::ColorType::Grayscale,
                png::BitDepth::Sixteen,
            );
            [&header[..], &png].concat()
        }
        "16UC1; compressedDepth rvl" => {
            let size = [(width as u32).to_le_bytes(), (height as u32).to_le_bytes()].concat();
            [&header[..], &size, &reel_video::rvl::encode(mm)].concat()
        }
        other => panic!("no depth encoder for {other}"),
    }
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
    let h264 = recorded_h264(&rgb, width, height);
    let landings: Vec<(&str, Vec<u8>)> = ENCODINGS
        .iter()
        .map(|&e| {
            let frames: Vec<Vec<u8>> = if e.starts_with("h264") {
                h264.clone()
            } else {
                rgb.iter().map(|f| encode(e, f, width, height)).collect()
            };
            (e, landing(e, &frames, width, height))
        })
        .collect();

    let pack_config = PackConfig::default();
    let ingest_config = PipelineConfig::default();
    let mut transcode_pack = PackConfig::default();
    transcode_pack.encode.keep_recorded_video = false;
    let mut transcode_ingest = PipelineConfig::default();
    transcode_ingest.encode.keep_recorded_video = false;
    let configs = |encoding: &str| {
        if encoding == "h264 transcoded" {
            (&transcode_pack, &transcode_ingest)
        } else {
            (&pack_config, &ingest_config)
        }
    };
    let mut decode_cpu: BTreeMap<&str, f64> = BTreeMap::new();
    let mut pack_cpu: BTreeMap<&str, f64> = BTreeMap::new();
    let mut ingest_cpu: BTreeMap<&str, f64> = BTreeMap::new();
    let mut frames_of: BTreeMap<&str, usize> = BTreeMap::new();
    let mut video_of: BTreeMap<&str, String> = BTreeMap::new();
    for _ in 0..rounds {
        for (encoding, bytes) in &landings {
            let (pack_with, ingest_with) = configs(encoding);
            // The landing decode alone: parse the log and turn every frame into RGB.
            let start = cpu_seconds();
            let episode = read_landing(encoding, bytes, &|_| false).unwrap();
            let camera = &episode.cameras[0];
            for (_, picture) in reel_landing::CameraFrames::new(camera) {
                std::hint::black_box(picture.unwrap());
            }
            *decode_cpu.entry(encoding).or_default() += cpu_seconds() - start;
            frames_of.insert(encoding, camera.frames.len());
            // The whole pack.
            let start = cpu_seconds();
            let (canonical, report) = pack_episode(encoding, bytes, pack_with).unwrap();
            *pack_cpu.entry(encoding).or_default() += cpu_seconds() - start;
            std::hint::black_box(canonical);
            let what = if !report.kept_videos.is_empty() {
                "kept"
            } else if !report.transcoded_videos.is_empty() {
                "transcoded"
            } else {
                "encoded"
            };
            video_of.insert(encoding, what.to_owned());
            // Ingest.
            let start = cpu_seconds();
            std::hint::black_box(process_episode(encoding, encoding, bytes, ingest_with).unwrap());
            *ingest_cpu.entry(encoding).or_default() += cpu_seconds() - start;
        }
    }
    println!(
        "landing camera encodings, 1 camera {width}x{height} @ 30 Hz + joints @ 100 Hz, {seconds} s, {rounds} rounds (CPU time, all threads)"
    );
    println!(
        "| encoding | landing MB | decode ms/frame | pack episode-s per CPU-s | ingest episode-s per CPU-s | ingest vs JPEG | canonical camera |"
    );
    println!("|---|---|---|---|---|---|---|");
    let rate = |cpu: &BTreeMap<&str, f64>, e: &str| seconds * rounds as f64 / cpu[e];
    for (encoding, bytes) in &landings {
        println!(
            "| {encoding} | {:.1} | {:.2} | {:.2} | {:.2} | {:.2}x | {} |",
            bytes.len() as f64 / 1e6,
            decode_cpu[encoding] * 1e3 / (frames_of[encoding] * rounds) as f64,
            rate(&pack_cpu, encoding),
            rate(&ingest_cpu, encoding),
            rate(&ingest_cpu, encoding) / rate(&ingest_cpu, "jpeg"),
            video_of[encoding],
        );
    }

    // Depth: the same frames in every landing depth encoding.
    let depth: Vec<Vec<u16>> = (0..count)
        .map(|i| reel_synth::depth::depth_frame(width as u32, height as u32, i as f64 / 30.0, 3))
        .collect();
    // (encoding, landing frame bytes, landing MCAP)
    type DepthLanding = (&'static str, Vec<Vec<u8>>, Vec<u8>);
    let depth_landings: Vec<DepthLanding> = DEPTH_ENCODINGS
        .iter()
        .map(|&e| {
            let frames: Vec<Vec<u8>> = depth
                .iter()
                .map(|d| encode_depth(e, d, width, height))
                .collect();
            let bytes = landing(e, &frames, width, height);
            (e, frames, bytes)
        })
        .collect();
    let mut decode_cpu: BTreeMap<&str, f64> = BTreeMap::new();
    let mut ingest_cpu: BTreeMap<&str, f64> = BTreeMap::new();
    let mut read_cpu: BTreeMap<&str, f64> = BTreeMap::new();
    let mut canonical_depth: BTreeMap<&str, u64> = BTreeMap::new();
    for _ in 0..rounds {
        for (encoding, _, bytes) in &depth_landings {
            let start = cpu_seconds();
            let episode = read_landing(encoding, bytes, &|_| false).unwrap();
            let camera = &episode.depths[0];
            let mut decoder = ImageDecoder::new();
            for f in &camera.frames {
                std::hint::black_box(f.encoding.to_depth(&mut decoder, &f.data).unwrap());
            }
            *decode_cpu.entry(encoding).or_default() += cpu_seconds() - start;
            let start = cpu_seconds();
            let processed = process_episode(encoding, encoding, bytes, &ingest_config).unwrap();
            *ingest_cpu.entry(encoding).or_default() += cpu_seconds() - start;
            let reader =
                EpisodeReader::open(MemorySource::new("depth.mcap", processed.bytes.clone()))
                    .unwrap();
            // The camera group holds the depth stream alone: its chunks are its bytes.
            let layout = reel_mcap::inspect(
                MemorySource::new("depth.mcap", processed.bytes.clone()),
                false,
            )
            .unwrap();
            let group = layout.groups.iter().find(|g| g.group == "cameras").unwrap();
            canonical_depth.insert(encoding, group.compressed_bytes);
            let start = cpu_seconds();
            let window = reader.depth("/camera/high", 0..u64::MAX).unwrap();
            *read_cpu.entry(encoding).or_default() += cpu_seconds() - start;
            assert_eq!(window.log_times.len(), count);
        }
    }
    let raw16 = (width * height * 2) as f64;
    println!(
        "\ndepth encodings, 1 depth camera {width}x{height} @ 30 Hz + joints @ 100 Hz, {seconds} s, {rounds} rounds; raw 16-bit = {:.0} KB/frame",
        raw16 / 1e3
    );
    println!(
        "| landing encoding | landing KB/frame | canonical KB/frame | canonical / raw 16-bit | landing decode ms/frame | ingest episode-s per CPU-s | canonical read ms/frame |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (encoding, frames, _) in &depth_landings {
        let landing_frame =
            frames.iter().map(|f| f.len() as f64).sum::<f64>() / frames.len() as f64;
        let canonical_frame = canonical_depth[encoding] as f64 / count as f64;
        let per_frame = |cpu: f64| cpu * 1e3 / (count * rounds) as f64;
        println!(
            "| {encoding} | {:.1} | {:.1} | {:.3} | {:.3} | {:.2} | {:.3} |",
            landing_frame / 1e3,
            canonical_frame / 1e3,
            canonical_frame / raw16,
            per_frame(decode_cpu[encoding]),
            seconds * rounds as f64 / ingest_cpu[encoding],
            per_frame(read_cpu[encoding]),
        );
    }
}
