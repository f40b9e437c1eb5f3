//! Delivery benchmarks for reel-cache, measured side by side in one run:
//!
//! 1. cache-hit reads by one reader beside reads of the same bytes from a local file;
//! 2. cache hits beside one connection to an emulated cloud store;
//! 3. warm throughput at several concurrencies against the emulated store.
//!
//! The emulated store is a real S3 server (s3s-fs) behind a loopback TCP proxy that
//! gives every connection a bandwidth cap and a per-request latency. (opendal 0.59's
//! ThrottleLayer limits writes only, so it cannot model a slow read path.)
//!
//! `cargo bench -p reel-cache --bench delivery -- [--mb-per-s 200] [--latency-ms 10]
//! [--hit-mib 512] [--warm-mib 2048] [--parts 1,2,3]`

#![allow(clippy::unwrap_used, clippy::expect_used)] // A benchmark fails loudly.

use std::io::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use reel_cache::{BlockCache, CacheConfig, WarmItem, WarmOptions};
use reel_io::test_support::{CloudProxy, S3Server};
use reel_io::{ByteSource, FileSource, Store};

const MIB: u64 = 1 << 20;

struct Settings {
    bytes_per_s: f64,
    latency: Duration,
    hit_bytes: u64,
    warm_bytes: u64,
    parts: Vec<u32>,
}

fn settings() -> Settings {
    let args: Vec<String> = std::env::args().collect();
    let get = |name: &str, default: f64| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map(|v| v.parse::<f64>().expect(name))
            .unwrap_or(default)
    };
    Settings {
        bytes_per_s: get("--mb-per-s", 200.0) * 1e6,
        latency: Duration::from_secs_f64(get("--latency-ms", 10.0) / 1e3),
        hit_bytes: get("--hit-mib", 512.0) as u64 * MIB,
        warm_bytes: get("--warm-mib", 2048.0) as u64 * MIB,
        parts: args
            .iter()
            .position(|a| a == "--parts")
            .and_then(|i| args.get(i + 1))
            .map_or_else(
                || vec![1, 2, 3],
                |v| v.split(',').map(|p| p.parse().expect("--parts")).collect(),
            ),
    }
}

/// Incompressible bytes (splitmix64), so nothing along the way can shortcut them.
fn random_bytes(n: u64, seed: u64) -> Vec<u8> {
    let mut state = seed;
    let mut out = Vec::with_capacity(n as usize + 8);
    while (out.len() as u64) < n {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(n as usize);
    out
}

/// Reads `source` front to back in `request`-byte reads starting at `offset`, `passes`
/// times; returns the best pass in bytes per second.
fn sequential_rate(source: &dyn ByteSource, request: u64, offset: u64, passes: usize) -> f64 {
    let len = source.len().unwrap();
    let mut best = 0.0f64;
    for _ in 0..passes {
        let start = Instant::now();
        let mut pos = offset;
        let mut bytes = 0u64;
        while pos < len {
            let end = (pos + request).min(len);
            let got = source.read_range(pos..end).unwrap();
            bytes += got.len() as u64;
            std::hint::black_box(&got);
            pos = end;
        }
        best = best.max(bytes as f64 / start.elapsed().as_secs_f64());
    }
    best
}

fn mb_s(rate: f64) -> String {
    format!("{:.0} MB/s", rate / 1e6)
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs us too: do nothing then.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let s = settings();
    let work = tempfile::tempdir().unwrap();
    println!("## reel-cache delivery benchmark");
    println!(
        "emulated remote: s3s-fs behind a proxy, {} per connection, {} ms per request",
        mb_s(s.bytes_per_s),
        s.latency.as_millis()
    );

    if s.parts.contains(&1) {
        hits_beside_local_file(&s, work.path());
    }
    if s.parts.contains(&2) || s.parts.contains(&3) {
        beside_emulated_remote(&s, work.path());
    }
    cleanup(work.path());
}

/// 1. Cache hits beside a local file, with and without the table of open blocks.
fn hits_beside_local_file(s: &Settings, work: &Path) {
    let local = work.join("remote");
    std::fs::create_dir_all(&local).unwrap();
    let store = Store::open(local.to_str().unwrap()).unwrap();
    store
        .write_atomic("ep.mcap", random_bytes(s.hit_bytes, 1))
        .unwrap();
    let file = FileSource::open(local.join("ep.mcap")).unwrap();
    let cache_dir = work.join("cache-hit");
    let cache = BlockCache::for_store(CacheConfig::new(&cache_dir, 1 << 40), &store).unwrap();
    let object = cache.object("ep.mcap").unwrap();
    // A second process's view of the same folder that keeps no block open: every read
    // opens the block file and hashes the pages it touches.
    let mut no_handles = CacheConfig::new(&cache_dir, 1 << 40);
    no_handles.open_blocks = 0;
    let uncached_handles = BlockCache::for_store(no_handles, &store).unwrap();
    let object_no_handles = uncached_handles.object("ep.mcap").unwrap();
    let options = WarmOptions::default();
    let plan = cache
        .plan_warm(&[WarmItem::whole("ep.mcap")], &options)
        .unwrap();
    cache.warm(plan, &options, |_| {}).unwrap();
    println!(
        "\n### 1. one reader, cache hits vs the same bytes from a local file ({} MiB, page cache warm, best of 5)",
        s.hit_bytes / MIB
    );
    println!(
        "| request | offset | local file | cache hits | ratio | hits, no open blocks | ratio |\n|---|---|---|---|---|---|---|"
    );
    for (request, offset) in [(4 * MIB, 0), (4 * MIB, MIB), (MIB, 0), (256 << 10, 0)] {
        // Alternate the three so that noise from the rest of the machine hits all alike.
        let (mut direct, mut cached, mut reopened) = (0.0f64, 0.0f64, 0.0f64);
        for _ in 0..5 {
            direct = direct.max(sequential_rate(&file, request, offset, 1));
            cached = cached.max(sequential_rate(&object, request, offset, 1));
            reopened = reopened.max(sequential_rate(&object_no_handles, request, offset, 1));
        }
        println!(
            "| {} KiB | {} KiB | {} | {} | {:.2} | {} | {:.2} |",
            request >> 10,
            offset >> 10,
            mb_s(direct),
            mb_s(cached),
            cached / direct,
            mb_s(reopened),
            reopened / direct
        );
        std::io::stdout().flush().unwrap();
    }
    let m = cache.metrics();
    assert_eq!(m.remote_requests, plan_requests(&m));
    let m = uncached_handles.metrics();
    assert_eq!((m.misses, m.remote_requests), (0, 0));
    drop((object, cache, object_no_handles, uncached_handles));
    std::fs::remove_dir_all(&cache_dir).unwrap();
    std::fs::remove_dir_all(&local).unwrap();
}

/// 2. and 3. against the emulated cloud store.
fn beside_emulated_remote(s: &Settings, work: &Path) {
    let server = S3Server::start("bucket").expect("s3s-fs is needed for this benchmark");
    let proxy = CloudProxy::start(server.port(), s.bytes_per_s, s.latency).unwrap();
    let fast = server.store("bucket", "").unwrap();
    let cloud = server.store_through(&proxy, "bucket", "").unwrap();

    if s.parts.contains(&2) {
        remote_beside_cache(&fast, &cloud, work);
    }
    if s.parts.contains(&3) {
        warm_throughput(s, &fast, &cloud, work);
    }
}

/// 2. One reader: the emulated remote beside the cache, cold and hot.
fn remote_beside_cache(fast: &Store, cloud: &Store, work: &Path) {
    let one_size = 256 * MIB;
    fast.write_atomic("one.mcap", random_bytes(one_size, 2))
        .unwrap();
    let remote = cloud.source("one.mcap");
    let cache_dir = work.join("cache-remote");
    let cache = BlockCache::for_store(CacheConfig::new(&cache_dir, 1 << 40), cloud).unwrap();
    let object = cache.object("one.mcap").unwrap();
    println!(
        "\n### 2. one reader, emulated remote (one connection) vs the cache ({} MiB, 4 MiB reads)",
        one_size / MIB
    );
    let loopback = sequential_rate(&fast.source("one.mcap"), 4 * MIB, 0, 1);
    let direct = sequential_rate(&remote, 4 * MIB, 0, 1);
    let cold = sequential_rate(&object, 4 * MIB, 0, 1);
    let hits = sequential_rate(&object, 4 * MIB, 0, 5);
    println!("| path | rate | vs remote |\n|---|---|---|");
    println!(
        "| s3s-fs on loopback without emulation (for reference) | {} | {:.2} |",
        mb_s(loopback),
        loopback / direct
    );
    println!(
        "| remote, ranged GETs through one connection | {} | 1.00 |",
        mb_s(direct)
    );
    println!(
        "| cache, cold (every block a miss) | {} | {:.2} |",
        mb_s(cold),
        cold / direct
    );
    println!("| cache, hits | {} | {:.1} |", mb_s(hits), hits / direct);
    drop((object, cache));
    std::fs::remove_dir_all(&cache_dir).unwrap();
}

/// 3. Warm throughput at several concurrencies.
fn warm_throughput(s: &Settings, fast: &Store, cloud: &Store, work: &Path) {
    let objects = 16u64;
    let size = s.warm_bytes / objects;
    let mut items = Vec::new();
    for i in 0..objects {
        let key = format!("warm/ep-{i:02}.mcap");
        fast.write_atomic(&key, random_bytes(size, 100 + i))
            .unwrap();
        items.push(WarmItem::whole(key));
    }
    println!(
        "\n### 3. warm {} MiB ({objects} objects, 4 MiB blocks, up to 16 MiB per request) from the emulated remote",
        s.warm_bytes / MIB
    );
    println!("| concurrency | seconds | rate | requests |\n|---|---|---|---|");
    for concurrency in [1usize, 8, 32, 64] {
        let dir = work.join(format!("cache-warm-{concurrency}"));
        let mut config = CacheConfig::new(&dir, 1 << 40);
        config.max_concurrent_fetches = concurrency;
        let cache = BlockCache::for_store(config, cloud).unwrap();
        let options = WarmOptions {
            concurrency,
            verify: false,
            pin: Some("bench".into()),
        };
        let plan = cache.plan_warm(&items, &options).unwrap();
        let report = cache.warm(plan, &options, |_| {}).unwrap();
        println!(
            "| {concurrency} | {:.2} | {} | {} |",
            report.seconds,
            mb_s(report.bytes_per_second()),
            report.requests
        );
        std::io::stdout().flush().unwrap();
        drop(cache);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// Every remote request of the hit benchmark came from its warm.
fn plan_requests(m: &reel_cache::CacheMetrics) -> u64 {
    assert_eq!(m.misses, 0, "hit benchmark saw misses: {m:?}");
    m.remote_requests
}

fn cleanup(path: &Path) {
    let _ = std::fs::remove_dir_all(path);
}
