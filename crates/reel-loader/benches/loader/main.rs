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
//! to first batch and the process's peak RSS so far (run one configuration per process,
//! `--shuffles` and `--workers` with one value each, for a peak of its own). Manifest and episodes are read once beforehand so every
//! configuration starts from a warm page cache.

use std::time::Instant;

use reel_io::Store;
use reel_loader::{Loader, LoaderOptions, SampleSpec, Shuffle, Sources};
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
            std::hint::black_box(store.read(episode.uri()?)?);
        }
    }
    println!(
        "| shuffle | workers | samples | samples/s | samples per CPU-s | frames decoded per sample | chunks read per sample | first batch | peak RSS MiB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
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
                let (mut frames, mut chunks) = (0, 0);
                let mut epoch = 0;
                let mut delivered = 0;
                while delivered < batches {
                    let mut iter = loader.epoch(epoch)?;
                    for batch in iter.by_ref().take(batches - delivered) {
                        samples += batch?.len();
                        first.get_or_insert_with(|| started.elapsed().as_secs_f64());
                        delivered += 1;
                    }
                    let stats = iter.stats();
                    frames += stats.frames_decoded;
                    chunks += stats.chunks_read;
                    epoch += 1;
                }
                let seconds = started.elapsed().as_secs_f64();
                let cpu = cpu_seconds() - cpu;
                let name = match shuffle {
                    Shuffle::Global => "global".to_string(),
                    Shuffle::Locality { run } => format!("locality (run {run})"),
                };
                println!(
                    "| {name} | {workers} | {samples} | {:.1} | {:.1} | {:.1} | {:.2} | {:.3} s | {:.0} |",
                    samples as f64 / seconds,
                    samples as f64 / cpu,
                    frames as f64 / samples as f64,
                    chunks as f64 / samples as f64,
                    first.unwrap_or(0.0),
                    peak_rss_mib()
                );
            }
        }
    }
    Ok(())
}
