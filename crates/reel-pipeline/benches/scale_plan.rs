//! `reel-plan`'s work as the landing prefix grows: one listing of N landing objects, the
//! bin-packing into batches and the plan file written, on a local folder and through the
//! S3-compatible server on loopback (s3s-fs), each size in a process of its own (its
//! peak memory is its own).
//!
//! `cargo bench -p reel-pipeline --bench scale_plan -- [--local 1000,100000,1000000]
//!  [--s3 1000,10000,100000] [--dir DIR]`
//!
//! One JSON line per measurement on stdout, a Markdown table on stderr.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use reel_io::Store;
use reel_pipeline::{BatchTarget, list_landing, make_plan};

use reel_io::test_support::bench::{arg, peak_rss_mib, sizes};

type Error = Box<dyn std::error::Error>;

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(uri) = arg(&args, "--measure") {
        return measure(&uri, &arg(&args, "--label").unwrap_or_default());
    }
    let temp = tempfile::tempdir()?;
    let root = arg(&args, "--dir").map_or_else(|| temp.path().to_path_buf(), Into::into);
    eprintln!(
        "| landing objects | store | list + plan + write s | per object µs | peak RSS MiB | batches |"
    );
    eprintln!("|---|---|---|---|---|---|");
    for n in sizes(&args, "--local", "1000,10000")? {
        let dir = root.join(format!("local-{n}"));
        fill(&dir, n)?;
        run_child(&dir.to_string_lossy(), "local", n, &[])?;
        std::fs::remove_dir_all(&dir)?;
    }
    let s3_sizes = sizes(&args, "--s3", "1000")?;
    if !s3_sizes.is_empty() {
        let server = reel_io::test_support::S3Server::start("landing")?;
        let options = server.options();
        let credentials = [
            (
                "AWS_ACCESS_KEY_ID",
                options.access_key_id.unwrap_or_default(),
            ),
            (
                "AWS_SECRET_ACCESS_KEY",
                options.secret_access_key.unwrap_or_default(),
            ),
        ];
        for n in s3_sizes {
            let prefix = format!("scale-{n}");
            // s3s-fs keeps objects as files: filling its folder is the quick way to N.
            fill(&server.root().join("landing").join(&prefix), n)?;
            let uri = server.uri("landing", &prefix);
            run_child(&uri, "s3 (s3s-fs, loopback)", n, &credentials)?;
        }
    }
    Ok(())
}

/// `n` small landing episodes (`*.mcap`, 1–4 KiB) in `dir`.
fn fill(dir: &Path, n: u64) -> Result<(), Error> {
    std::fs::create_dir_all(dir)?;
    let data = vec![0u8; 4096];
    for i in 0..n {
        let len = 1024 + (i * 2_654_435_761 % 3072) as usize;
        std::fs::write(dir.join(format!("ep{i:08}.mcap")), &data[..len])?;
    }
    Ok(())
}

/// Measures `uri` in a process of its own, with `env` (the S3 server's credentials).
fn run_child(uri: &str, label: &str, n: u64, env: &[(&str, String)]) -> Result<(), Error> {
    let out = Command::new(std::env::current_exe()?)
        .args(["--measure", uri, "--label", label])
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()?;
    if !out.status.success() {
        return Err(format!("{label} {n}: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    let line = String::from_utf8(out.stdout)?;
    let m: serde_json::Value = serde_json::from_str(line.trim())?;
    let s = m["seconds"].as_f64().unwrap_or(f64::NAN);
    eprintln!(
        "| {n} | {label} | {s:.3} | {:.2} | {:.0} | {} |",
        s * 1e6 / n as f64,
        m["peak_rss_mib"].as_f64().unwrap_or(f64::NAN),
        m["batches"]
    );
    println!("{}", line.trim());
    Ok(())
}

fn measure(uri: &str, label: &str) -> Result<(), Error> {
    let started = Instant::now();
    let store = Store::open(uri)?;
    let episodes = list_landing(&store, "")?;
    let listed = episodes.len();
    let plan = make_plan(
        uri,
        episodes,
        BatchTarget::Count((listed / 100).clamp(1, 10_000)),
    );
    let out = tempfile::NamedTempFile::new()?;
    std::fs::write(out.path(), plan.to_json())?;
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "{}",
        serde_json::json!({
            "stage": "plan",
            "order": label,
            "rows": listed,
            "seconds": seconds,
            "batches": plan.batches.len(),
            "peak_rss_mib": peak_rss_mib(),
        })
    );
    Ok(())
}
