//! Container benchmarks, side by side on the same episodes in one run.
//!
//! ```text
//! cargo bench -p reel-landing --bench container -- [--episodes N] [--seconds S] [--samples K]
//!     [--cameras C] [--size WxH] [--mb-per-s B] [--latency-ms L] [--only layouts|storage|gop]
//! ```
//!
//! 1. Reads per training sample (2 frames of 3 cameras + 1 s of state + a 50-step action
//!    chunk) for three layouts of the same content: topic groups, the default interleaved
//!    1 MiB chunks, one topic per chunk.
//! 2. Read + decode time per sample, same reader, same files, read from a local file
//!    (page cache) and from an S3 server behind an emulated WAN link (s3s-fs on loopback
//!    behind a proxy with a per-request latency and a per-connection bandwidth cap).
//! 3. Storage against per-frame JPEG at equal PSNR (rate–distortion match).
//! 4. Decode cost of one random frame against GOP length.

#![allow(clippy::unwrap_used)] // A benchmark fails loudly.

use std::time::{Duration, Instant};

use reel_io::test_support::{CloudProxy, S3Server};
use reel_io::{ByteSource, CountingSource, FileSource, Store};
use reel_landing::{PackConfig, prepare_episode};
use reel_mcap::{EpisodeReader, Layout, WriteConfig, write_episode};
use reel_synth::scene::SceneRenderer;
use reel_synth::{CAMERA_NAMES, SynthConfig, camera_topic, generate_episode};
use reel_video::quality::{mse, psnr_of_mse, ssim};
use reel_video::{
    ChromaFormat, EncoderConfig, GopStructure, H264Decoder, H264Encoder, ImageDecoder, ImageFormat,
    RgbImage,
};

struct Args {
    episodes: u64,
    seconds: f64,
    samples: usize,
    cameras: usize,
    width: u32,
    height: u32,
    /// Emulated object store for benchmarks 1 + 2: bandwidth per connection and latency
    /// per request.
    mb_per_s: f64,
    latency_ms: f64,
    only: Option<String>,
}

fn args() -> Args {
    let mut a = Args {
        episodes: 3,
        seconds: 20.0,
        samples: 200,
        cameras: 6,
        width: 320,
        height: 240,
        mb_per_s: 200.0,
        latency_ms: 10.0,
        only: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap();
        match flag.as_str() {
            "--episodes" => a.episodes = value().parse().unwrap(),
            "--seconds" => a.seconds = value().parse().unwrap(),
            "--samples" => a.samples = value().parse().unwrap(),
            "--cameras" => a.cameras = value().parse().unwrap(),
            "--size" => {
                let v = value();
                let (w, h) = v.split_once('x').expect("--size WxH");
                a.width = w.parse().unwrap();
                a.height = h.parse().unwrap();
            }
            "--mb-per-s" => a.mb_per_s = value().parse().unwrap(),
            "--latency-ms" => a.latency_ms = value().parse().unwrap(),
            "--only" => a.only = it.next(),
            _ => {} // cargo bench passes --bench
        }
    }
    a
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

const SEC: u64 = 1_000_000_000;

#[derive(Default, Clone, Copy)]
struct Tally {
    reads: u64,
    chunks: u64,
    bytes: u64,
    wait_ns: u64,
    decoded: u64,
    seconds: f64,
    samples: u64,
}

impl std::ops::AddAssign for Tally {
    fn add_assign(&mut self, one: Tally) {
        self.reads += one.reads;
        self.chunks += one.chunks;
        self.bytes += one.bytes;
        self.wait_ns += one.wait_ns;
        self.decoded += one.decoded;
        self.seconds += one.seconds;
        self.samples += one.samples;
    }
}

impl Tally {
    fn per_sample(&self, x: f64) -> f64 {
        x / self.samples as f64
    }
}

type Reader = EpisodeReader<CountingSource<Box<dyn ByteSource>>>;

/// Where the episodes are read from: the same files through two kinds of source.
struct Medium {
    name: String,
    /// Readers by layout, then by episode.
    readers: Vec<Vec<Reader>>,
}

/// One training sample read through `reader` at the episode fraction `u`: frames at
/// t − 0.5 s and t from 3 cameras, 1 s of joint states and hand poses before t and the
/// 50-step action chunk after it.
fn read_sample(reader: &Reader, u: f64, cameras: &[String], decoder: &mut H264Decoder) -> Tally {
    let proprio = [
        "/joint_states",
        "/hand/left/pose",
        "/hand/right/pose",
        "/action",
    ];
    let stats = reader.summary().unwrap().stats.clone().unwrap();
    let span = stats.message_end_time - stats.message_start_time - 3 * SEC;
    let t = stats.message_start_time + 3 * SEC / 2 + (u * span as f64) as u64;
    reader.source().reset();
    let chunks_before = reader.chunks_read();
    let decoded_before = reader.frames_decoded();
    let started = Instant::now();
    let times = [t - SEC / 2, t];
    let requests: Vec<(&str, &[u64])> = cameras.iter().map(|c| (c.as_str(), &times[..])).collect();
    let frames = reader.frames(&requests, decoder, None).unwrap();
    let signals = reader.signals(&proprio, t - SEC..t + SEC).unwrap();
    let seconds = started.elapsed().as_secs_f64();
    let actions_after = signals[3]
        .log_times
        .iter()
        .filter(|&&x| x >= t)
        .take(50)
        .count();
    assert!(frames.iter().all(|f| f.len() == 2) && actions_after >= 45);
    let read = reader.source().stats();
    Tally {
        reads: read.reads,
        chunks: reader.chunks_read() - chunks_before,
        bytes: read.bytes,
        wait_ns: read.wait_ns,
        decoded: reader.frames_decoded() - decoded_before,
        seconds,
        samples: 1,
    }
}

/// What one connection to `store` delivers, measured: the time of a 1-byte read (the
/// per-request cost) and the rate of an 8 MB read (best of 3 each).
fn measure_link(store: &Store) -> String {
    let len = 8_000_000u64;
    store
        .write_atomic("link-probe", vec![7u8; len as usize])
        .unwrap();
    let source = store.source("link-probe");
    let best = |range: std::ops::Range<u64>| {
        (0..3)
            .map(|_| {
                let started = Instant::now();
                source.read_range(range.clone()).unwrap();
                started.elapsed().as_secs_f64()
            })
            .fold(f64::MAX, f64::min)
    };
    let request = best(0..1);
    let large = best(0..len);
    format!(
        "{:.1} ms per 1-byte read, {:.0} MB/s on an 8 MB read",
        request * 1e3,
        len as f64 / (large - request) / 1e6
    )
}

fn layouts(args: &Args) {
    let dir = tempfile::tempdir().unwrap();
    let synth = SynthConfig {
        seconds: args.seconds,
        cameras: args.cameras,
        width: args.width,
        height: args.height,
        ..SynthConfig::default()
    };
    let layouts = [
        ("topic groups (Reel)", Layout::TopicGroups),
        (
            "default: interleaved 1 MiB",
            Layout::Interleaved {
                chunk_size: 1 << 20,
            },
        ),
        ("one topic per chunk", Layout::TopicPerChunk),
    ];
    // The same files on local disk and in an S3 server behind an emulated WAN link.
    let server = S3Server::start("episodes")
        .expect("s3s-fs is needed for this benchmark (scripts/setup.sh installs it)");
    let proxy = CloudProxy::start(
        server.port(),
        args.mb_per_s * 1e6,
        Duration::from_secs_f64(args.latency_ms / 1e3),
    )
    .unwrap();
    let remote = server.store_through(&proxy, "episodes", "").unwrap();
    let mut names: Vec<Vec<String>> = vec![Vec::new(); layouts.len()];
    let mut sizes = vec![0u64; layouts.len()];
    let mut bytes_per_s = 0.0;
    for index in 0..args.episodes {
        let landing = generate_episode(&synth, index).unwrap();
        let (episode, write_config, _) =
            prepare_episode("landing", &landing.mcap, &PackConfig::default()).unwrap();
        for (i, (_, layout)) in layouts.iter().enumerate() {
            let bytes = write_episode(
                &episode,
                &WriteConfig {
                    layout: *layout,
                    ..write_config.clone()
                },
            )
            .unwrap();
            let name = format!("ep{index}-{i}.mcap");
            sizes[i] += bytes.len() as u64;
            if i == 0 {
                bytes_per_s += bytes.len() as f64 / args.seconds / args.episodes as f64;
            }
            std::fs::write(dir.path().join(&name), &bytes).unwrap();
            remote.write_atomic(&name, bytes).unwrap();
            names[i].push(name);
        }
    }
    let link = measure_link(&remote);
    let cameras: Vec<String> = CAMERA_NAMES[..3].iter().map(|c| camera_topic(c)).collect();
    let mut decoder = H264Decoder::new().unwrap();
    // Same sample times for every layout: (episode, fraction of the episode).
    let mut rng = Rng(0x5eed);
    let plan: Vec<(usize, f64)> = (0..args.samples)
        .map(|_| ((rng.next() % args.episodes) as usize, rng.unit()))
        .collect();
    // Warm the page cache for every file, so local time measures the reader, not the disk.
    for name in names.iter().flatten() {
        let _ = std::fs::read(dir.path().join(name)).unwrap();
    }
    // Readers by layout, then by episode, over the sources `source` opens by object name.
    let readers_of = |source: &dyn Fn(&str) -> Box<dyn ByteSource>| -> Vec<Vec<Reader>> {
        names
            .iter()
            .map(|ns| {
                ns.iter()
                    .map(|n| EpisodeReader::open(CountingSource::new(source(n))).unwrap())
                    .collect()
            })
            .collect()
    };
    let media = [
        Medium {
            name: "local file, page cache".into(),
            readers: readers_of(&|n| Box::new(FileSource::open(dir.path().join(n)).unwrap())),
        },
        Medium {
            name: format!(
                "object store: s3s-fs on loopback behind a proxy set to {} ms per request and \
                 {:.0} MB/s per connection; measured {link}",
                args.latency_ms, args.mb_per_s
            ),
            readers: readers_of(&|n| Box::new(remote.source(n))),
        },
    ];
    let mut tallies = vec![vec![Tally::default(); layouts.len()]; media.len()];
    // Layouts and media take turns sample by sample, so load on the machine hits them
    // alike, and the one going first changes from sample to sample (whoever goes first
    // pays for fresh frame buffers).
    let turns: Vec<(usize, usize)> = (0..media.len())
        .flat_map(|m| (0..layouts.len()).map(move |i| (m, i)))
        .collect();
    for (k, &(episode, u)) in plan.iter().enumerate() {
        for j in 0..turns.len() {
            let (m, i) = turns[(k + j) % turns.len()];
            let one = read_sample(&media[m].readers[i][episode], u, &cameras, &mut decoder);
            tallies[m][i] += one;
        }
    }
    println!(
        "\n## Container 1+2: reads per sample and read + decode time ({} episodes × {} s, \
         {} cameras {}×{} H.264 CRF 23 GOP 30 ({:.2} MB/s of episode in the topic-group file), \
         {} samples)",
        args.episodes,
        args.seconds,
        args.cameras,
        args.width,
        args.height,
        bytes_per_s / 1e6,
        args.samples
    );
    for (m, medium) in media.iter().enumerate() {
        println!("\n### {}", medium.name);
        println!(
            "| layout | file MB | ranged reads / sample | chunks / sample | KB read / sample \
             | ms waiting on reads / sample | frames decoded / sample | ms / sample (read + decode) |"
        );
        println!("|---|---|---|---|---|---|---|---|");
        for (i, (name, _)) in layouts.iter().enumerate() {
            let t = tallies[m][i];
            println!(
                "| {name} | {:.1} | {:.2} | {:.2} | {:.0} | {:.2} | {:.1} | {:.2} |",
                sizes[i] as f64 / 1e6 / args.episodes as f64,
                t.per_sample(t.reads as f64),
                t.per_sample(t.chunks as f64),
                t.per_sample(t.bytes as f64) / 1e3,
                t.per_sample(t.wait_ns as f64) / 1e6,
                t.per_sample(t.decoded as f64),
                t.per_sample(t.seconds) * 1e3
            );
        }
        let ours = tallies[m][0];
        for (i, (name, _)) in layouts.iter().enumerate().skip(1) {
            let t = tallies[m][i];
            println!(
                "ratio {name} / topic groups: reads {:.2}×, chunks {:.2}×, bytes {:.2}×, \
                 waiting {:.2}×, read + decode {:.2}×",
                t.reads as f64 / ours.reads as f64,
                t.chunks as f64 / ours.chunks as f64,
                t.bytes as f64 / ours.bytes as f64,
                t.wait_ns as f64 / ours.wait_ns as f64,
                t.seconds / ours.seconds
            );
        }
    }
}

fn render_frames(n: usize, w: u32, h: u32) -> Vec<RgbImage> {
    let scene = SceneRenderer::new(7, w, h);
    (0..n)
        .map(|i| RgbImage::new(w as usize, h as usize, scene.render(i as f64 / 30.0)))
        .collect()
}

fn encode(frames: &[RgbImage], config: &EncoderConfig) -> Vec<Vec<u8>> {
    let mut encoder = H264Encoder::new(frames[0].width, frames[0].height, config).unwrap();
    let mut units = Vec::new();
    for f in frames {
        units.extend(encoder.push(f).unwrap());
    }
    units.extend(encoder.finish().unwrap());
    units.into_iter().map(|u| u.data).collect()
}

/// Mean PSNR (of the mean MSE), mean SSIM, total bytes of a decoded sequence.
fn quality(frames: &[RgbImage], decoded: &[RgbImage]) -> (f64, f64) {
    let m: f64 = frames
        .iter()
        .zip(decoded)
        .map(|(a, b)| mse(&a.data, &b.data))
        .sum::<f64>()
        / frames.len() as f64;
    let s: f64 = frames
        .iter()
        .zip(decoded)
        .step_by(10)
        .map(|(a, b)| ssim(&a.data, &b.data, a.width, a.height))
        .sum::<f64>()
        / frames.iter().step_by(10).count() as f64;
    (psnr_of_mse(m), s)
}

fn storage() {
    let (w, h, n) = (320u32, 240u32, 300usize);
    let frames = render_frames(n, w, h);
    let mut images = ImageDecoder::new();
    // JPEG curve: quality 5..=100 with both 4:2:0 and 4:4:4 chroma.
    let mut jpeg: Vec<(f64, f64, u64, String)> = Vec::new();
    for q in (10..=100).step_by(5) {
        for (label, sampling) in [
            ("4:2:0", jpeg_encoder::SamplingFactor::F_2_2),
            ("4:4:4", jpeg_encoder::SamplingFactor::F_1_1),
        ] {
            let mut bytes = 0u64;
            let mut decoded = Vec::with_capacity(n);
            for f in &frames {
                let mut out = Vec::new();
                let mut enc = jpeg_encoder::Encoder::new(&mut out, q as u8);
                enc.set_sampling_factor(sampling);
                enc.encode(&f.data, w as u16, h as u16, jpeg_encoder::ColorType::Rgb)
                    .unwrap();
                bytes += out.len() as u64;
                decoded.push(images.decode(ImageFormat::Jpeg, &out).unwrap());
            }
            let (p, s) = quality(&frames, &decoded);
            jpeg.push((p, s, bytes, format!("q{q} {label}")));
        }
    }
    // Smallest JPEG reaching at least a given PSNR (the best JPEG setting for that quality),
    // interpolated linearly in PSNR between the envelope's points.
    let mut envelope: Vec<(f64, u64)> = Vec::new();
    let mut by_bytes = jpeg.clone();
    by_bytes.sort_by_key(|j| j.2);
    for j in &by_bytes {
        if envelope.last().is_none_or(|e| j.0 > e.0) {
            envelope.push((j.0, j.2));
        }
    }
    let jpeg_bytes_at = |p: f64| -> Option<f64> {
        let i = envelope.iter().position(|e| e.0 >= p)?;
        if i == 0 {
            return Some(envelope[0].1 as f64);
        }
        let (a, b) = (envelope[i - 1], envelope[i]);
        Some(a.1 as f64 + (p - a.0) / (b.0 - a.0) * (b.1 as f64 - a.1 as f64))
    };
    println!(
        "\n## Container 3: storage against per-frame JPEG at equal PSNR ({n} frames {w}×{h} of the reel-synth scene, GOP 30, preset medium, tune fastdecode)"
    );
    println!("| video | PSNR dB | SSIM | video KB | JPEG KB at same PSNR | video / JPEG |");
    println!("|---|---|---|---|---|---|");
    let mut decoder = H264Decoder::new().unwrap();
    for (chroma, label) in [
        (ChromaFormat::Yuv420, "4:2:0"),
        (ChromaFormat::Yuv444, "4:4:4"),
    ] {
        for crf in [12.0f32, 15.0, 18.0, 23.0, 28.0, 33.0] {
            let config = EncoderConfig {
                crf,
                chroma,
                ..EncoderConfig::default()
            };
            let units = encode(&frames, &config);
            let bytes: u64 = units.iter().map(|u| u.len() as u64).sum();
            let refs: Vec<&[u8]> = units.iter().map(Vec::as_slice).collect();
            let all: Vec<usize> = (0..n).collect();
            let decoded = decoder.decode_run(&refs, &all, None).unwrap();
            let (p, s) = quality(&frames, &decoded);
            let (jpeg_kb, ratio) = match jpeg_bytes_at(p) {
                Some(j) => (
                    format!("{:.0}", j / 1e3),
                    format!("{:.1}%", 100.0 * bytes as f64 / j),
                ),
                None => ("(above every JPEG)".into(), "-".into()),
            };
            println!(
                "| H.264 {label} CRF {crf} | {p:.2} | {s:.4} | {:.0} | {jpeg_kb} | {ratio} |",
                bytes as f64 / 1e3
            );
        }
    }
    println!("\nJPEG curve (jpeg-encoder, per frame):");
    println!("| JPEG | PSNR dB | SSIM | KB |");
    println!("|---|---|---|---|");
    for j in &jpeg {
        println!(
            "| {} | {:.2} | {:.4} | {:.0} |",
            j.3,
            j.0,
            j.1,
            j.2 as f64 / 1e3
        );
    }
}

fn gop_cost() {
    let (w, h, n) = (320u32, 240u32, 300usize);
    let frames = render_frames(n, w, h);
    let mut decoder = H264Decoder::new().unwrap();
    println!(
        "\n## Container 4: decode cost of one random frame vs GOP length and structure ({n} frames {w}×{h}, CRF 23, 200 random frames)"
    );
    println!(
        "| structure | GOP | KB (10 s) | PSNR dB | encode ms / frame | mean ms / random frame | frames decoded / random frame |"
    );
    println!("|---|---|---|---|---|---|---|");
    let rows = [
        (GopStructure::Chain, [1u32, 2, 5, 10, 30].as_slice()),
        (GopStructure::Star, [5u32, 10, 15, 30].as_slice()),
    ];
    for (structure, gops) in rows {
        for &gop in gops {
            let config = EncoderConfig {
                gop,
                structure,
                ..EncoderConfig::default()
            };
            let started = Instant::now();
            let units = encode(&frames, &config);
            let encode_ms = started.elapsed().as_secs_f64() * 1e3 / n as f64;
            let bytes: u64 = units.iter().map(|u| u.len() as u64).sum();
            let refs: Vec<&[u8]> = units.iter().map(Vec::as_slice).collect();
            let every: Vec<usize> = (0..n).collect();
            let (psnr, _) = quality(&frames, &decoder.decode_run(&refs, &every, None).unwrap());
            let mut rng = Rng(42);
            let mut seconds = 0.0;
            let decoded_before = decoder.units_decoded();
            let trials = 200;
            for _ in 0..trials {
                let i = (rng.next() % n as u64) as usize;
                let key = i - i % gop as usize;
                let started = Instant::now();
                let _ = decoder
                    .decode_run(&refs[key..=i], &[i - key], None)
                    .unwrap();
                seconds += started.elapsed().as_secs_f64();
            }
            let decoded = decoder.units_decoded() - decoded_before;
            println!(
                "| {structure:?} | {gop} | {:.0} | {psnr:.2} | {encode_ms:.2} | {:.2} | {:.1} |",
                bytes as f64 / 1e3,
                seconds * 1e3 / trials as f64,
                decoded as f64 / trials as f64
            );
        }
    }
}

fn main() {
    reel_video::quiet_ffmpeg_logs();
    let args = args();
    let only = args.only.as_deref();
    if only.is_none_or(|o| o == "layouts") {
        layouts(&args);
    }
    if only.is_none_or(|o| o == "storage") {
        storage();
    }
    if only.is_none_or(|o| o == "gop") {
        gop_cost();
    }
}
