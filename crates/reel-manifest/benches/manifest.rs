//! Manifest benchmarks at 1M, 10M and 50M rows: open time beside a full
//! deserialize, memory of 8 reader processes mapping one manifest, and
//! random `sample()` lookups per second.
//!
//! `cargo bench -p reel-manifest --bench manifest [-- ROWS...]`
//! Manifests are generated once into `$REEL_BENCH_DIR` (default
//! `~/.cache/reel/bench`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use reel_manifest::{Manifest, ManifestMeta, ManifestRow, ManifestWriter, SamplingRule};

fn bench_dir() -> PathBuf {
    std::env::var_os("REEL_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/reel/bench")
        })
}

fn build(path: &Path, rows: u64) {
    if path.exists() {
        return;
    }
    let started = Instant::now();
    let meta = ManifestMeta::new(
        "SELECT * FROM episodes WHERE success",
        "bench",
        SamplingRule::at_hz(10.0, 1.0, 1.0),
    );
    let mut writer = ManifestWriter::create(path, &meta).expect("creates");
    let mut id = String::new();
    let mut uri = String::new();
    for i in 0..rows {
        use std::fmt::Write;
        id.clear();
        uri.clear();
        let _ = write!(id, "ep-{:016x}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let _ = write!(uri, "canonical/{id}.mcap");
        let seconds = 20 + (i * 7919) % 160;
        let start = 1_735_689_600_000_000_000 + i as i64 * 1_000_000_000;
        writer
            .push(&ManifestRow {
                episode_id: &id,
                uri: &uri,
                start_ns: start,
                end_ns: start + seconds as i64 * 1_000_000_000,
                bytes: seconds * 2_700_000,
                camera_frames: seconds as u32 * 30,
                state_steps: seconds as u32 * 200,
                action_steps: seconds as u32 * 50,
                digest: i.wrapping_mul(0xbf58_476d_1ce4_e5b9) | 1,
            })
            .expect("pushes");
    }
    writer.finish().expect("finishes");
    eprintln!(
        "built {} ({rows} rows) in {:.1} s",
        path.display(),
        started.elapsed().as_secs_f64()
    );
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Reads every byte a loader could touch: all strings and all numbers.
fn touch_all(m: &Manifest) -> u64 {
    let mut acc = 0u64;
    for e in m.episodes() {
        acc = acc.wrapping_add(e.episode_id().map_or(0, |s| s.len() as u64));
        acc = acc.wrapping_add(e.uri().map_or(0, |s| s.len() as u64));
        acc = acc
            .wrapping_add(e.start_ns() as u64 ^ e.end_ns() as u64)
            .wrapping_add(e.bytes() + e.num_samples() + e.sample_offset())
            .wrapping_add((e.camera_frames() + e.state_steps() + e.action_steps()) as u64);
    }
    acc
}

/// Full deserialize: arrow's FileReader copies every batch into owned memory.
fn full_read(path: &Path) -> usize {
    let file = std::fs::File::open(path).expect("opens");
    let reader = arrow_ipc::reader::FileReader::try_new_buffered(file, None).expect("reader");
    reader
        .map(|b| b.expect("batch").get_array_memory_size())
        .sum()
}

fn memory_kb(pid: u32) -> (u64, u64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0u64)
    };
    (field("Rss:"), field("Pss:"))
}

/// 8 processes touch the whole manifest, then wait while the parent reads
/// their memory. Returns (sum RSS, sum PSS) in bytes.
fn eight_readers(path: &Path, mode: &str) -> (u64, u64) {
    let exe = std::env::current_exe().expect("exe");
    let mut children: Vec<_> = (0..8)
        .map(|_| {
            Command::new(&exe)
                .args(["--child", mode, path.to_str().expect("utf-8")])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("spawns")
        })
        .collect();
    for child in &mut children {
        use std::io::BufRead;
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.as_mut().expect("stdout"))
            .read_line(&mut line)
            .expect("ready line");
    }
    let (mut rss, mut pss) = (0, 0);
    for child in &children {
        let (r, p) = memory_kb(child.id());
        rss += r * 1024;
        pss += p * 1024;
    }
    for mut child in children {
        drop(child.stdin.take());
        child.wait().expect("exits");
    }
    (rss, pss)
}

fn child(mode: &str, path: &str) {
    let kept: Box<dyn std::any::Any> = if mode == "mmap" {
        let m = Manifest::open(path).expect("opens");
        std::hint::black_box(touch_all(&m));
        Box::new(m)
    } else {
        let file = std::fs::File::open(path).expect("opens");
        let reader = arrow_ipc::reader::FileReader::try_new_buffered(file, None).expect("reader");
        let batches: Vec<_> = reader.map(|b| b.expect("batch")).collect();
        Box::new(batches)
    };
    println!("ready");
    let mut buf = String::new();
    let _ = std::io::stdin().read_line(&mut buf);
    drop(kept);
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    if args.first().map(String::as_str) == Some("--child") {
        return child(&args[1], &args[2]);
    }
    let sizes: Vec<u64> = if args.is_empty() {
        vec![1_000_000, 10_000_000, 50_000_000]
    } else {
        args.iter().filter_map(|a| a.parse().ok()).collect()
    };
    let dir = bench_dir();
    std::fs::create_dir_all(&dir).expect("bench dir");
    println!(
        "| rows | file MB | open (median of 20) | full deserialize | 8 readers: sum RSS / sum PSS (mmap) | 8 readers: sum PSS (full read) | sample() lookups/s |"
    );
    println!("|---|---|---|---|---|---|---|");
    for rows in sizes {
        let path = dir.join(format!("manifest-{rows}.arrow"));
        build(&path, rows);
        let size = std::fs::metadata(&path).expect("exists").len();
        // Warm the page cache so both sides read from memory.
        std::hint::black_box(full_read(&path));
        let opens: Vec<Duration> = (0..20)
            .map(|_| {
                let t = Instant::now();
                let m = Manifest::open(&path).expect("opens");
                std::hint::black_box(m.num_samples());
                t.elapsed()
            })
            .collect();
        let full: Vec<Duration> = (0..3)
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(full_read(&path));
                t.elapsed()
            })
            .collect();
        let (rss, pss) = eight_readers(&path, "mmap");
        let (_, full_pss) = eight_readers(&path, "full");
        let m = Manifest::open(&path).expect("opens");
        let total = m.num_samples();
        let lookups = 2_000_000u64;
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let t = Instant::now();
        let mut acc = 0i64;
        for _ in 0..lookups {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            acc = acc.wrapping_add(m.sample(x % total).expect("in range").time_ns);
        }
        std::hint::black_box(acc);
        let rate = lookups as f64 / t.elapsed().as_secs_f64();
        let mb = |b: u64| b as f64 / 1e6;
        println!(
            "| {rows} | {:.0} | {:.3} ms | {:.0} ms | {:.0} MB / {:.0} MB ({:.2}× one copy) | {:.0} MB ({:.2}×) | {:.2} M |",
            mb(size),
            median(opens).as_secs_f64() * 1e3,
            median(full).as_secs_f64() * 1e3,
            mb(rss),
            mb(pss),
            pss as f64 / size as f64,
            mb(full_pss),
            full_pss as f64 / size as f64,
            rate / 1e6
        );
    }
}
