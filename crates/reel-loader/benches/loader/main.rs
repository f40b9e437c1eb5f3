//! Loader throughput on real canonical episodes, side by side in one run: global against
//! locality-aware shuffle, and 1 against 2 worker threads.
//!
//! `cargo bench -p reel-loader --bench loader -- --manifest M --store DIR [--spec S]
//!  [--batches N] [--batch-size B] [--workers 1,2] [--runs 10,30] [--rounds R]
//!  [--shuffles global,locality]`
//!
//! `--runs` lists the locality run lengths (anchors drawn from each opened window);
//! `--rounds` repeats the whole table, configurations taking turns, so every
//! configuration sees the same machine load.
//!
//! For each configuration: samples/s, samples per CPU-second (user + system time of the
//! whole process, all threads), frames decoded per sample, chunks read per sample, time
//! to first batch, the process's peak RSS so far and the share of wanted frames found
//! already decoded in the GOP cache the workers share (run one configuration per process,
//! `--shuffles` and `--workers` with one value each, for a peak of its own). Manifest and episodes are read once beforehand so every
//! configuration starts from a warm page cache.

mod floor;

use std::time::Instant;

use reel_io::Store;
use std::error::Error;

use reel_loader::{Batch, Loader, LoaderOptions, SampleSpec, Shuffle, Sources};
use reel_manifest::Manifest;

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

/// Peak resident set of this process so far, MiB.
fn peak_rss_mib() -> f64 {
    // SAFETY: as in `cpu_seconds`.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    usage.ru_maxrss as f64 / 1024.0
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let Some(manifest_path) = arg(&args, "--manifest") else {
        eprintln!(
            "usage: loader --manifest M --store DIR [--spec S] [--batches N] [--batch-size B]"
        );
        return Ok(());
    };
    let store_uri = arg(&args, "--store").ok_or("--store is required")?;
    let spec_path = arg(&args, "--spec").unwrap_or_else(|| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/spec.toml").to_string()
    });
    let batches: usize = arg(&args, "--batches").map_or(Ok(40), |v| v.parse())?;
    let batch_size: usize = arg(&args, "--batch-size").map_or(Ok(8), |v| v.parse())?;
    let list = |name: &str, default: &str| -> Result<Vec<usize>, std::num::ParseIntError> {
        arg(&args, name)
            .unwrap_or_else(|| default.to_string())
            .split(',')
            .map(str::parse)
            .collect()
    };
    let worker_counts = list("--workers", "1,2")?;
    let runs = list("--runs", "10")?;
    let rounds: usize = arg(&args, "--rounds").map_or(Ok(1), |v| v.parse())?;
    let with_floor = args.iter().any(|a| a == "--floor");
    let kinds = arg(&args, "--shuffles").unwrap_or_else(|| "global,locality".into());
    let mut shuffles = Vec::new();
    for kind in kinds.split(',') {
        match kind {
            "global" => shuffles.push(Shuffle::Global),
            "locality" => shuffles.extend(
                runs.iter()
                    .map(|&run| Shuffle::Locality { run: run as u64 }),
            ),
            other => return Err(format!("--shuffles: `{other}` is not global or locality").into()),
        }
    }
    reel_video::quiet_ffmpeg_logs();
    let spec = SampleSpec::from_toml_file(&spec_path)?;
    let store = Store::open(&store_uri)?;
    // Warm the page cache: every configuration then reads from memory.
    {
        let manifest = Manifest::open(&manifest_path)?;
        for episode in manifest.episodes() {
            std::hint::black_box(store.read(&episode.uri()?)?);
        }
    }
    println!(
        "| shuffle | workers | samples | samples/s | samples per CPU-s | frames decoded per sample | chunks read per sample | first batch | peak RSS MiB | GOP cache hits % |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut floors = Vec::new();
    for _ in 0..rounds {
        for &shuffle in &shuffles {
            for &workers in &worker_counts {
                let started = Instant::now();
                let cpu = cpu_seconds();
                let options = LoaderOptions {
                    batch_size,
                    workers,
                    shuffle,
                    seed: 1,
                    ..LoaderOptions::default()
                };
                let loader = Loader::new(
                    Manifest::open(&manifest_path)?,
                    &spec,
                    Sources::Store(store.clone()),
                    options,
                )?;
                let mut first = None;
                let mut samples = 0;
                let mut shown = Vec::new();
                let (mut frames, mut chunks, mut wanted, mut cached) = (0, 0, 0, 0);
                let mut epoch = 0;
                let mut delivered = 0;
                while delivered < batches {
                    let mut iter = loader.epoch(epoch)?;
                    for batch in iter.by_ref().take(batches - delivered) {
                        let batch = batch?;
                        samples += batch.len();
                        if with_floor {
                            record_samples(&batch, &mut shown)?;
                        }
                        first.get_or_insert_with(|| started.elapsed().as_secs_f64());
                        delivered += 1;
                    }
                    let stats = iter.stats();
                    frames += stats.frames_decoded;
                    chunks += stats.chunks_read;
                    wanted += stats.frames_wanted;
                    cached += stats.frames_cached;
                    epoch += 1;
                }
                let seconds = started.elapsed().as_secs_f64();
                let cpu = cpu_seconds() - cpu;
                let name = match shuffle {
                    Shuffle::Global => "global".to_string(),
                    Shuffle::Locality { run } => format!("locality (run {run})"),
                };
                println!(
                    "| {name} | {workers} | {samples} | {:.1} | {:.1} | {:.1} | {:.2} | {:.3} s | {:.0} | {:.1} |",
                    samples as f64 / seconds,
                    samples as f64 / cpu,
                    frames as f64 / samples as f64,
                    chunks as f64 / samples as f64,
                    first.unwrap_or(0.0),
                    peak_rss_mib(),
                    100.0 * cached as f64 / wanted.max(1) as f64
                );
                if with_floor {
                    floors.push(Measured {
                        name,
                        workers,
                        samples: shown,
                        cpu_s: cpu,
                        frames_decoded: frames,
                        whole_gops: matches!(shuffle, Shuffle::Locality { .. }),
                    });
                }
            }
        }
    }
    if !floors.is_empty() {
        print_floors(&manifest_path, &store, &spec, floors)?;
    }
    Ok(())
}

/// The (episode row, anchor) of each sample of `batch`, in order.
fn record_samples(batch: &Batch, shown: &mut Vec<(usize, i64)>) -> Result<(), Box<dyn Error>> {
    let column = |name: &str| {
        batch
            .get(name)
            .and_then(|t| t.as_i64())
            .ok_or_else(|| format!("the batch has no i64 tensor {name}"))
    };
    let (rows, anchors) = (column("episode_row")?, column("anchor_ns")?);
    shown.extend(
        rows.iter()
            .map(|&r| r as usize)
            .zip(anchors.iter().copied()),
    );
    Ok(())
}

/// One configuration's run, kept for its floor.
struct Measured {
    name: String,
    workers: usize,
    /// (episode row, anchor ns) of each sample delivered, in order.
    samples: Vec<(usize, i64)>,
    cpu_s: f64,
    frames_decoded: u64,
    whole_gops: bool,
}

/// The floor table: each configuration's samples replayed as bare decodes (`floor.rs`).
fn print_floors(
    manifest_path: &str,
    store: &Store,
    spec: &SampleSpec,
    floors: Vec<Measured>,
) -> Result<(), Box<dyn Error>> {
    let manifest = Manifest::open(manifest_path)?;
    let defaults = LoaderOptions::default();
    println!();
    println!(
        "| floor of | workers | samples | Reel CPU ms per sample | Reel frames decoded per sample | replay frames decoded per sample | bare decode µs per frame | bare decode + RGB µs per frame | floor ms per sample (Reel's frames, bare decode) | Reel / floor | Reel / floor with RGB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for m in floors {
        let how = floor::Replay {
            // The loader's GOP cache holds `gop_cache` per worker, shared.
            cache: defaults.gop_cache * m.workers.max(1),
            whole_gops: m.whole_gops,
            conversion: defaults.rgb,
            cpu_seconds,
        };
        let f = floor::replay(&manifest, store, spec, &m.samples, &how)?;
        let (name, workers, reel_cpu, reel_frames) = (m.name, m.workers, m.cpu_s, m.frames_decoded);
        let n = f.samples.max(1) as f64;
        let frames = f.frames_decoded.max(1) as f64;
        let (per_frame, per_frame_rgb) = (f.decode_s / frames, f.decode_rgb_s / frames);
        let reel_per_sample = reel_cpu / n;
        let reel_frames_per_sample = reel_frames as f64 / n;
        let floor = per_frame * reel_frames_per_sample;
        let floor_rgb = per_frame_rgb * reel_frames_per_sample;
        println!(
            "| floor: {name} | {workers} | {} | {:.3} | {:.1} | {:.1} | {:.1} | {:.1} | {:.3} | {:.2} | {:.2} |",
            f.samples,
            1e3 * reel_per_sample,
            reel_frames_per_sample,
            frames / n,
            1e6 * per_frame,
            1e6 * per_frame_rgb,
            1e3 * floor,
            reel_per_sample / floor,
            reel_per_sample / floor_rgb,
        );
    }
    Ok(())
}
