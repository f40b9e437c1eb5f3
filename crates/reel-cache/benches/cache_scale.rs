//! The block cache as it grows: warming N blocks (with progress), a second warm of the
//! same set (what a resumed `reel-warm` does), opening with the default capacity (one
//! usage scan), lookups of cached blocks, and an eviction scan that frees 1% — each with
//! the process's peak memory, for N = 10^4 … 10^6 blocks.
//!
//! `cargo bench -p reel-cache --bench cache_scale -- [--blocks 10000,100000,1000000] [--dir DIR]`
//!
//! Objects of 1,000 blocks of 4 KiB in a local store; one process per size (its peak RSS
//! is its own). One JSON line per figure on stdout, a Markdown table on stderr.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use reel_cache::{BlockCache, CacheConfig, WarmItem, WarmOptions};
use reel_io::{ByteSource, Store};

use reel_io::test_support::bench::{arg, peak_rss_mib};

type Error = Box<dyn std::error::Error>;

const BLOCK: u64 = 4096;
const BLOCKS_PER_OBJECT: u64 = 1000;

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(n) = arg(&args, "--measure") {
        let dir = PathBuf::from(arg(&args, "--dir").ok_or("--dir")?);
        return measure(n.parse()?, &dir);
    }
    let sizes: Vec<u64> = arg(&args, "--blocks")
        .unwrap_or_else(|| "10000,100000".into())
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let temp = tempfile::tempdir()?;
    let root = arg(&args, "--dir").map_or_else(|| temp.path().to_path_buf(), PathBuf::from);
    eprintln!("| blocks | figure | seconds | peak RSS MiB |");
    eprintln!("|---|---|---|---|");
    for n in sizes {
        let dir = root.join(format!("cache-{n}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let out = Command::new(std::env::current_exe()?)
            .args(["--measure", &n.to_string(), "--dir"])
            .arg(&dir)
            .output()?;
        if !out.status.success() {
            return Err(format!("{n} blocks: {}", String::from_utf8_lossy(&out.stderr)).into());
        }
        for line in String::from_utf8(out.stdout)?.lines() {
            println!("{line}");
            let m: serde_json::Value = serde_json::from_str(line)?;
            let s = m["seconds"].as_f64().unwrap_or(f64::NAN);
            eprintln!(
                "| {n} | {} | {s:.3e} | {:.0} |",
                m["figure"].as_str().unwrap_or("?"),
                m["peak_rss_mib"].as_f64().unwrap_or(f64::NAN)
            );
        }
        std::fs::remove_dir_all(&dir)?;
    }
    Ok(())
}

fn config(dir: &Path, capacity: u64) -> CacheConfig {
    let mut config = CacheConfig::new(dir.join("cache"), capacity);
    config.block_size = BLOCK;
    config.page_size = BLOCK as u32;
    config.max_request_bytes = 64 << 20;
    config.trust_cached_metadata = true;
    config
}

fn emit(blocks: u64, figure: &str, seconds: f64, extra: serde_json::Value) {
    let mut line = serde_json::json!({
        "stage": "cache",
        "order": figure,
        "figure": figure,
        "rows": blocks,
        "seconds": seconds,
        "peak_rss_mib": peak_rss_mib(),
    });
    if let (Some(line), Some(extra)) = (line.as_object_mut(), extra.as_object()) {
        line.extend(extra.clone());
    }
    println!("{line}");
}

fn measure(n: u64, dir: &Path) -> Result<(), Error> {
    let store = Store::open(&dir.join("store").to_string_lossy())?;
    let objects = n.div_ceil(BLOCKS_PER_OBJECT);
    let mut items = Vec::new();
    for i in 0..objects {
        let blocks = BLOCKS_PER_OBJECT.min(n - i * BLOCKS_PER_OBJECT);
        let path = format!("o{i:05}.bin");
        store.write_atomic(&path, vec![i as u8; (blocks * BLOCK) as usize])?;
        items.push(WarmItem::whole(path));
    }
    let options = WarmOptions {
        pin: None,
        concurrency: 8,
        verify: false,
    };
    let cache = BlockCache::for_store(config(dir, 1 << 50), &store)?;
    let started = Instant::now();
    let plan = cache.plan_warm(&items, &options)?;
    let mut updates = 0u64;
    let report = cache.warm(plan, &options, |_| updates += 1)?;
    emit(
        n,
        "warm",
        started.elapsed().as_secs_f64(),
        serde_json::json!({
        "progress_updates": updates, "fetched_bytes": report.fetched_bytes }),
    );

    // A second warm of the same set: nothing fetched again.
    let started = Instant::now();
    let plan = cache.plan_warm(&items, &options)?;
    let again = cache.warm(plan, &options, |_| {})?;
    emit(
        n,
        "warm again",
        started.elapsed().as_secs_f64(),
        serde_json::json!({
        "fetched_bytes": again.fetched_bytes }),
    );

    // Opening with the default capacity scans the usage once.
    let started = Instant::now();
    let opened = reel_cache::open_with_capacity(config(dir, 0), &store, None)?;
    emit(
        n,
        "open (default capacity)",
        started.elapsed().as_secs_f64(),
        serde_json::json!({}),
    );

    // Lookups: open the object, read one cached block, over a spread of objects.
    let lookups = 10_000u64;
    let started = Instant::now();
    for k in 0..lookups {
        let i = (k * 7919) % objects;
        let object = opened.object(&format!("o{i:05}.bin"))?;
        let blocks = BLOCKS_PER_OBJECT.min(n - i * BLOCKS_PER_OBJECT);
        let b = (k * 31) % blocks;
        std::hint::black_box(object.read_range(b * BLOCK..b * BLOCK + 16)?);
    }
    let per = started.elapsed().as_secs_f64() / lookups as f64;
    emit(n, "one lookup", per, serde_json::json!({}));

    // An eviction scan that frees 1% of what is held.
    let used = cache.usage()?.used_bytes;
    let mut small = config(dir, used - used / 100);
    small.eviction_slack = Some(1);
    let shrinking = BlockCache::for_store(small, &store)?;
    let started = Instant::now();
    let scan = shrinking.evict()?.ok_or("another scan ran")?;
    emit(
        n,
        "evict 1%",
        started.elapsed().as_secs_f64(),
        serde_json::json!({
        "evicted_blocks": scan.evicted_blocks }),
    );
    Ok(())
}
