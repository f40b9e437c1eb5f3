//! The loader as the corpus grows: start-up, first batch, roll-over into the next epoch
//! and a mid-epoch resume on manifests of 10^4 … 5·10^7 rows, in both orders, with the
//! memory each rank holds beyond the memory-mapped manifest.
//!
//! `cargo bench -p reel-loader --bench scale -- [--rows 10000,100000,1000000]
//!  [--dir DIR] [--batches 3] [--batch-size 8] [--sources K] [--selection]`
//!
//! With `--sources K` each loader is a weighted mixture of K copies of the manifest
//! (weights 1, 2, …, K): K times the rows and samples, through the mixture's mapping.
//! With `--selection` each loader reads a selection (manifest format 3) of every row of
//! the manifest, in reverse order: what `reel-curate --by-position` writes.
//!
//! The manifests' rows point at two real canonical episodes (synthesised and ingested
//! once, 64x48, 4 s): a loader needs no more to start, and every batch decodes real
//! video. Each (rows, order) is measured in a process of its own, so its peak memory is
//! its own. Prints a Markdown table on stderr and one JSON line per measurement on
//! stdout (what `benches/scale/chart.py` draws).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use reel_loader::{
    Loader, LoaderOptions, LoaderState, MixtureSource, ResumeCheck, SampleSpec, SavedState,
    Shuffle, Sources,
};
use reel_manifest::{
    BaseRef, Manifest, ManifestMeta, ManifestNumbers, ManifestWriter, Picks, write_selection,
};
use reel_pipeline::test_support::SynthCorpus;
use reel_synth::SynthConfig;

use reel_io::test_support::bench::arg;

type Error = Box<dyn std::error::Error>;

/// One 64x48 camera at the anchor and a 5-step action chunk: cheap, real samples.
const SPEC: &str = r#"
anchor_hz = 10.0
[[camera]]
name = "cam"
topic = "/camera/high/image_raw/compressed"
offsets_s = [0.0]
[[proprio]]
name = "action"
topic = "/action"
kind = "chunk"
steps = 5
hz = 50.0
"#;

/// Rows written per call to the manifest writer.
const CHUNK: usize = 1 << 20;

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(manifest) = arg(&args, "--measure") {
        return measure(&args, Path::new(&manifest));
    }
    let rows: Vec<usize> = arg(&args, "--rows")
        .unwrap_or_else(|| "10000,100000,1000000".into())
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let kept = arg(&args, "--dir").map(PathBuf::from);
    let temp = tempfile::tempdir()?;
    let dir = kept.as_deref().unwrap_or(temp.path());
    reel_video::quiet_ffmpeg_logs();
    let spec = SampleSpec::from_toml_str(SPEC)?;
    let episodes = ingest_episodes(dir, 2)?;
    eprintln!(
        "| manifest rows | samples | order | manifest written s | loader start s | first batch s | roll-over s | mid-epoch resume s | peak RSS MiB | anonymous RSS MiB |"
    );
    eprintln!("|---|---|---|---|---|---|---|---|---|---|");
    for &n in &rows {
        let manifest = dir.join(format!("manifest-{n}.arrow"));
        let started = Instant::now();
        write_manifest(&manifest, &spec, &episodes, n)?;
        let selection = dir.join(format!("selection-{n}.arrow"));
        let read = if args.iter().any(|a| a == "--selection") {
            write_reversed_selection(&selection, &manifest, &spec)?;
            &selection
        } else {
            &manifest
        };
        let written = started.elapsed().as_secs_f64();
        for order in ["global", "locality"] {
            let out = Command::new(std::env::current_exe()?)
                .arg("--measure")
                .arg(read)
                .args(["--store", &dir.to_string_lossy(), "--order", order])
                .args(forwarded(&args))
                .output()?;
            if !out.status.success() {
                return Err(format!(
                    "{n} rows, {order}: {}",
                    String::from_utf8_lossy(&out.stderr)
                )
                .into());
            }
            let line = String::from_utf8(out.stdout)?;
            let mut m: serde_json::Value = serde_json::from_str(line.trim())?;
            m["manifest_write_s"] = written.into();
            println!("{m}");
            let f = |k: &str| m[k].as_f64().unwrap_or(f64::NAN);
            eprintln!(
                "| {n} | {} | {order} | {written:.2} | {:.3} | {:.3} | {:.3} | {:.3} | {:.0} | {:.1} |",
                m["samples"],
                f("start_s"),
                f("first_batch_s"),
                f("rollover_s"),
                f("resume_s"),
                f("peak_rss_mib"),
                f("anon_rss_mib"),
            );
        }
        std::fs::remove_file(&manifest)?;
        let _ = std::fs::remove_file(&selection);
    }
    Ok(())
}

/// A selection of every row of the manifest at `base`, last row first, beside it.
fn write_reversed_selection(path: &Path, base: &Path, spec: &SampleSpec) -> Result<(), Error> {
    let manifest = Manifest::open(base)?;
    let n = manifest.len() as u64;
    let positions: Vec<u64> = (0..n).rev().collect();
    let (mut start_ns, mut end_ns) = (Vec::new(), Vec::new());
    for &p in &positions {
        let episode = manifest.episode(p as usize)?;
        start_ns.push(episode.start_ns());
        end_ns.push(episode.end_ns());
    }
    let name = base
        .file_name()
        .ok_or("the manifest has no name")?
        .to_string_lossy();
    let meta = ManifestMeta::new("SELECT * FROM episodes", "scale", spec.sampling_rule());
    let picks = Picks {
        positions: &positions,
        start_ns: &start_ns,
        end_ns: &end_ns,
    };
    write_selection(path, &meta, &[BaseRef::to(&manifest, name)], picks)?;
    Ok(())
}

fn forwarded(args: &[String]) -> Vec<String> {
    ["--batches", "--batch-size", "--sources"]
        .iter()
        .filter_map(|name| arg(args, name).map(|v| [name.to_string(), v]))
        .flatten()
        .collect()
}

/// A canonical episode the manifests point at.
struct Episode {
    uri: String,
    start_ns: i64,
    end_ns: i64,
    bytes: u64,
    camera_frames: u32,
    state_steps: u32,
    action_steps: u32,
}

fn ingest_episodes(dir: &Path, n: u64) -> Result<Vec<Episode>, Error> {
    let synth = SynthConfig {
        seed: 11,
        seconds: 4.0,
        cameras: 1,
        width: 64,
        height: 48,
        ..SynthConfig::default()
    };
    let corpus = SynthCorpus::ingest(&synth, n, dir)?;
    Ok(corpus
        .summaries()
        .map(|s| {
            let row = s.manifest_row();
            Episode {
                uri: row.uri.to_owned(),
                start_ns: row.start_ns,
                end_ns: row.end_ns,
                bytes: row.bytes,
                camera_frames: row.camera_frames,
                state_steps: row.state_steps,
                action_steps: row.action_steps,
            }
        })
        .collect())
}

/// `n` rows, row `i` pointing at episode `i % episodes.len()`, curated with the spec's rule.
fn write_manifest(
    path: &Path,
    spec: &SampleSpec,
    episodes: &[Episode],
    n: usize,
) -> Result<(), Error> {
    let meta = ManifestMeta::new("SELECT * FROM episodes", "scale", spec.sampling_rule());
    let mut writer = ManifestWriter::create(path, &meta)?;
    let mut first = 0;
    while first < n {
        let rows = first..(first + CHUNK).min(n);
        let of = |i: usize| &episodes[i % episodes.len()];
        let ids: Vec<String> = rows.clone().map(|i| format!("ep{i:09}")).collect();
        let column =
            |f: &dyn Fn(&Episode) -> i64| rows.clone().map(|i| f(of(i))).collect::<Vec<_>>();
        let start_ns = column(&|e| e.start_ns);
        let end_ns = column(&|e| e.end_ns);
        let bytes: Vec<u64> = rows.clone().map(|i| of(i).bytes).collect();
        let frames: Vec<u32> = rows.clone().map(|i| of(i).camera_frames).collect();
        let state: Vec<u32> = rows.clone().map(|i| of(i).state_steps).collect();
        let action: Vec<u32> = rows.clone().map(|i| of(i).action_steps).collect();
        writer.push_columns(
            ids.iter().map(String::as_str),
            rows.clone().map(|i| of(i).uri.as_str()),
            ManifestNumbers {
                start_ns: &start_ns,
                end_ns: &end_ns,
                bytes: &bytes,
                camera_frames: &frames,
                state_steps: &state,
                action_steps: &action,
                digest: &[],
            },
        )?;
        first = rows.end;
    }
    writer.finish()?;
    Ok(())
}

/// Resident memory from /proc/self/status, MiB: the peak (VmHWM) and the anonymous part
/// now (RssAnon: what the process holds of its own, the mapped manifest's pages aside).
fn memory_mib() -> Result<(f64, f64), Error> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let field = |name: &str| -> Result<f64, Error> {
        let line = status
            .lines()
            .find(|l| l.starts_with(name))
            .ok_or_else(|| format!("no {name} in /proc/self/status"))?;
        let kib: f64 = line
            .split_whitespace()
            .nth(1)
            .ok_or("empty field")?
            .parse()?;
        Ok(kib / 1024.0)
    };
    Ok((field("VmHWM:")?, field("RssAnon:")?))
}

/// One (manifest, order) in this process: prints one JSON line.
fn measure(args: &[String], manifest_path: &Path) -> Result<(), Error> {
    reel_video::quiet_ffmpeg_logs();
    let store_uri = arg(args, "--store").ok_or("--store")?;
    let shuffle = match arg(args, "--order").as_deref() {
        Some("global") => Shuffle::Global,
        _ => Shuffle::Locality { run: 10 },
    };
    let batches: usize = arg(args, "--batches").map_or(Ok(3), |v| v.parse())?;
    let batch_size: usize = arg(args, "--batch-size").map_or(Ok(8), |v| v.parse())?;
    let spec = SampleSpec::from_toml_str(SPEC)?;
    let options = LoaderOptions {
        batch_size,
        workers: 1,
        shuffle,
        seed: 1,
        // Rank 3 of 8: a rank of a node, not the whole corpus.
        rank: 3,
        world: 8,
        ..LoaderOptions::default()
    };
    let sources: usize = arg(args, "--sources").map_or(Ok(1), |v| v.parse())?;
    let open = |options: LoaderOptions| -> Result<Loader, Error> {
        let mix = (1..=sources)
            .map(|k| -> Result<MixtureSource, Error> {
                Ok(MixtureSource {
                    manifest: Manifest::open(manifest_path)?,
                    sources: Sources::Store(reel_io::Store::open(&store_uri)?),
                    weight: k as f64,
                    location: None,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Loader::mixture(mix, &spec, options)?)
    };
    let started = Instant::now();
    let loader = open(options.clone())?;
    let rows = loader.manifest().len() * sources;
    let manifest_is_selection = loader.manifest().is_selection();
    let start_s = started.elapsed().as_secs_f64();
    // The first `batches` batches of an epoch; how long until the first came.
    let run = |state: LoaderState| -> Result<f64, Error> {
        let started = Instant::now();
        let mut first = None;
        for batch in loader.resume(state)?.take(batches) {
            if batch?.is_empty() {
                return Err("an empty batch".into());
            }
            first.get_or_insert(started.elapsed().as_secs_f64());
        }
        Ok(first.ok_or("no batch")?)
    };
    let first_batch_s = run(LoaderState::at(0, 0))?;
    let rollover_s = run(LoaderState::at(1, 0))?;
    let half = loader.epoch_size(2)?.batches / 2;
    let resume_s = run(LoaderState::at(2, half))?;
    // Every rank of the world of 8 saved in the middle of epoch 2, the run resumed on 6
    // ranks: opening rank 3 of 6, placing it in the rest of the epoch, its first batch.
    let elastic_s = {
        let started = Instant::now();
        let saved: Vec<SavedState> = (0..8)
            .map(|rank| SavedState {
                run: loader.identity(),
                rank,
                world: 8,
                position: LoaderState::at(2, half),
                manifests: Vec::new(),
                stores: Vec::new(),
            })
            .collect();
        let six = open(LoaderOptions {
            world: 6,
            ..options
        })?;
        let position = six.restore(&saved, ResumeCheck::SameRun)?;
        let first = six.resume(position)?.next().transpose()?;
        if first.is_none_or(|b| b.is_empty()) {
            return Err("no batch after the resume on 6 ranks".into());
        }
        started.elapsed().as_secs_f64()
    };
    let (peak_rss_mib, anon_rss_mib) = memory_mib()?;
    println!(
        "{}",
        serde_json::json!({
            "stage": match (sources > 1, manifest_is_selection) {
                (true, _) => "loader-mixture",
                (false, true) => "loader-selection",
                (false, false) => "loader",
            },
            "sources": sources,
            "order": arg(args, "--order"),
            "rows": rows,
            "samples": loader.total_samples(),
            "start_s": start_s,
            "first_batch_s": first_batch_s,
            "rollover_s": rollover_s,
            "resume_s": resume_s,
            "elastic_resume_s": elastic_s,
            "peak_rss_mib": peak_rss_mib,
            "anon_rss_mib": anon_rss_mib,
        })
    );
    Ok(())
}
