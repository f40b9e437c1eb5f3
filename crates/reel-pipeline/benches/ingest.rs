//! Ingest throughput beside the encode-only floor.
//!
//! `cargo bench -p reel-pipeline --bench ingest -- [seconds] [reps]`
//!
//! One synthetic landing episode (3 cameras 320×240 @ 30 Hz JPEG, 200 Hz joint states,
//! 50 Hz actions, 2 × 30 Hz hand poses) goes through `process_episode` (decode, resample,
//! derive, measure and encode cameras, quality checks, canonical MCAP) on one thread, and
//! its grid frames, decoded beforehand, go through the H.264 encoder alone with the same
//! settings and keyframes (the floor). Runs alternate so both see the same machine state.
//! Then the same work on 1 and 2 worker threads over several episodes.

use std::time::Instant;

use rayon::prelude::*;
use reel_pipeline::{PipelineConfig, decode_landing, process_episode, resample};
use reel_synth::{SynthConfig, generate_episode};
use reel_video::{H264Encoder, ImageDecoder, ImageFormat, RgbImage};

/// CPU time of this process (user + system), seconds, from /proc (Linux).
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return f64::NAN;
    };
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit(')').next().unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    (ticks(11) + ticks(12)) / 100.0
}

struct Floor {
    frames: Vec<Vec<(u64, RgbImage)>>,
    origin: u64,
    period: u64,
}

fn prepare_floor(name: &str, landing: &[u8], config: &PipelineConfig) -> Floor {
    let landing = decode_landing(name, name, landing).expect("landing");
    let grid = resample(&landing.episode, &config.resample);
    let mut decoder = ImageDecoder::new();
    let frames = landing
        .episode
        .cameras
        .iter()
        .zip(&grid.cameras)
        .map(|(camera, g)| {
            let decoded: Vec<Option<RgbImage>> = camera
                .frames
                .iter()
                .map(|f| decoder.decode(ImageFormat::Jpeg, &f.data).ok())
                .collect();
            g.picks
                .iter()
                .filter_map(|&(t, i)| decoded[i].clone().map(|img| (t, img)))
                .collect()
        })
        .collect();
    Floor {
        frames,
        origin: grid.origin_ns,
        period: grid.cameras[0].period_ns,
    }
}

fn encode_floor(floor: &Floor, config: &PipelineConfig) -> usize {
    let window = floor.period * config.encode.gop as u64;
    let fps = (1e9 / floor.period as f64).round() as u32;
    let mut bytes = 0;
    for camera in &floor.frames {
        let Some((_, first)) = camera.first() else {
            continue;
        };
        let mut encoder = H264Encoder::new(first.width, first.height, &config.encode.encoder(fps))
            .expect("encoder");
        let mut last = None;
        for (t, image) in camera {
            let w = (t - floor.origin) / window;
            let units = if last != Some(w) {
                encoder.push_keyframe(image)
            } else {
                encoder.push(image)
            }
            .expect("encode");
            last = Some(w);
            bytes += units.iter().map(|u| u.data.len()).sum::<usize>();
        }
        bytes += encoder
            .finish()
            .expect("finish")
            .iter()
            .map(|u| u.data.len())
            .sum::<usize>();
    }
    bytes
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    reel_video::quiet_ffmpeg_logs();
    let args: Vec<f64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let seconds = args.first().copied().unwrap_or(10.0);
    let reps = args.get(1).copied().unwrap_or(3.0) as usize;
    let synth = SynthConfig {
        seconds,
        ..SynthConfig::default()
    };
    let config = PipelineConfig::default();
    let episode = generate_episode(&synth, 0).expect("synth");
    let floor = prepare_floor(&episode.name, &episode.mcap, &config);
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("pool");

    let (mut ingest_cpu, mut floor_cpu, mut ingest_wall, mut floor_wall) =
        (vec![], vec![], vec![], vec![]);
    for rep in 0..=reps {
        let (c0, w0) = (cpu_seconds(), Instant::now());
        let processed = one
            .install(|| process_episode(&episode.name, &episode.name, &episode.mcap, &config))
            .expect("ingest");
        let (c1, w1) = (cpu_seconds(), Instant::now());
        let video = encode_floor(&floor, &config);
        let (c2, w2) = (cpu_seconds(), Instant::now());
        if rep == 0 {
            // warm-up
            eprintln!(
                "canonical {} bytes, floor video {} bytes",
                processed.bytes.len(),
                video
            );
            continue;
        }
        ingest_cpu.push(c1 - c0);
        floor_cpu.push(c2 - c1);
        ingest_wall.push((w1 - w0).as_secs_f64());
        floor_wall.push((w2 - w1).as_secs_f64());
    }
    let (ic, fc) = (median(ingest_cpu), median(floor_cpu));
    let (iw, fw) = (median(ingest_wall), median(floor_wall));
    let frames: usize = floor.frames.iter().map(Vec::len).sum();
    println!(
        "episode: {seconds} s, 3 cameras 320x240 @ 30 Hz ({frames} grid frames), 200 Hz state; median of {reps}"
    );
    println!(
        "ingest (process_episode, 1 thread): {iw:.3} s wall, {ic:.2} s CPU -> {:.2} episode-s per CPU-s",
        seconds / ic
    );
    println!(
        "encode-only floor (same frames, same x264 settings): {fw:.3} s wall, {fc:.2} s CPU -> {:.2} episode-s per CPU-s",
        seconds / fc
    );
    println!(
        "ingest / floor: {:.3} (wall), {:.3} (CPU)",
        iw / fw,
        ic / fc
    );
    let per_week = seconds / ic * 64.0 * 7.0 * 24.0;
    println!("one 64-core node at this rate: {per_week:.0} episode-hours per week");

    // Scaling: the same episodes on 1 and 2 worker threads (episodes in parallel).
    let episodes: Vec<_> = (0..4)
        .map(|i| generate_episode(&synth, i).expect("synth"))
        .collect();
    let mut rates = Vec::new();
    for threads in [1, 2] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("pool");
        let (c0, started) = (cpu_seconds(), Instant::now());
        pool.install(|| {
            episodes.par_iter().for_each(|e| {
                process_episode(&e.name, &e.name, &e.mcap, &config).expect("ingest");
            })
        });
        let wall = started.elapsed().as_secs_f64();
        let cpu = cpu_seconds() - c0;
        let work = episodes.len() as f64 * seconds;
        let rate = work / wall;
        println!(
            "{threads} worker thread(s): {} episodes in {wall:.2} s wall, {cpu:.2} s CPU -> {rate:.2} episode-s per wall-s, {:.2} per CPU-s",
            episodes.len(),
            work / cpu
        );
        rates.push(rate);
    }
    println!("scaling 1 -> 2 workers: {:.2}x", rates[1] / rates[0]);
}
