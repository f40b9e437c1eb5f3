//! The loader against real canonical episodes (synthesised, ingested by reel-pipeline):
//! exact grid times and values, frames equal to an independent decode and close to the
//! landing JPEGs, determinism, shards, resume, edge padding, the block cache and a
//! corrupt episode.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use reel_io::test_support::S3Server;
use reel_io::{ErrorKind, MmapSource, Store, StoreOptions};
use reel_loader::{
    Batch, EdgePolicy, Loader, LoaderError, LoaderOptions, LoaderState, ResumeCheck, SampleSpec,
    SavedState, Shuffle, Sources,
};
use reel_manifest::{Manifest, ManifestMeta, ManifestWriter, SamplingRule};
use reel_mcap::EpisodeReader;
use reel_pipeline::{PipelineConfig, decode_landing, process_episode};
use reel_synth::{SynthConfig, generate_episode};
use reel_video::{H264Decoder, ImageDecoder, ImageFormat, RgbConversion, RgbImage};

const HIGH: &str = "/camera/high/image_raw/compressed";
const WRIST: &str = "/camera/left_wrist/image_raw/compressed";

const SPEC: &str = r#"
anchor_hz = 10.0
[[camera]]
name = "high"
topic = "/camera/high/image_raw/compressed"
offsets_s = [-0.5, 0.0]
[[camera]]
name = "wrist"
topic = "/camera/left_wrist/image_raw/compressed"
offsets_s = [0.0]
layout = "chw"
[[proprio]]
name = "state"
topic = "/joint_states"
kind = "window"
steps = 200
hz = 200.0
[[proprio]]
name = "action"
topic = "/action"
kind = "chunk"
steps = 50
hz = 50.0
"#;

struct Fixture {
    dir: tempfile::TempDir,
    manifest: PathBuf,
    /// Landing episodes by canonical key, for pixel checks.
    landing: BTreeMap<String, Vec<u8>>,
}

fn fixture(episodes: u64, seconds: f64, rule: SamplingRule) -> Fixture {
    fixture_of(
        SynthConfig {
            seed: 5,
            seconds,
            cameras: 2,
            width: 64,
            height: 48,
            ..SynthConfig::default()
        },
        episodes,
        rule,
    )
}

fn fixture_of(synth: SynthConfig, episodes: u64, rule: SamplingRule) -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("canonical")).expect("mkdir");
    let manifest = dir.path().join("manifest.arrow");
    let meta = ManifestMeta::new("SELECT * FROM episodes", "test", rule);
    let mut writer = ManifestWriter::create(&manifest, &meta).expect("manifest");
    let mut landing = BTreeMap::new();
    for i in 0..episodes {
        let episode = generate_episode(&synth, i).expect("synth");
        let processed = process_episode(
            &episode.name,
            &episode.name,
            &episode.mcap,
            &PipelineConfig::default(),
        )
        .expect("ingests");
        let s = &processed.summary;
        std::fs::write(dir.path().join(&s.canonical_key), &processed.bytes).expect("writes");
        writer.push(&s.manifest_row()).expect("row");
        landing.insert(s.canonical_key.clone(), episode.mcap);
    }
    writer.finish().expect("finishes");
    Fixture {
        dir,
        manifest,
        landing,
    }
}

fn spec() -> SampleSpec {
    SampleSpec::from_toml_str(SPEC).expect("spec")
}

fn store(dir: &Path) -> Store {
    Store::open(dir.to_str().expect("utf-8")).expect("store")
}

fn loader(f: &Fixture, spec: &SampleSpec, options: LoaderOptions) -> Loader {
    loader_of(f, &f.manifest, spec, options)
}

/// A loader over the manifest at `manifest`, reading the fixture's store.
fn loader_of(f: &Fixture, manifest: &Path, spec: &SampleSpec, options: LoaderOptions) -> Loader {
    let manifest = Manifest::open(manifest).expect("manifest");
    Loader::new(manifest, spec, Sources::Store(store(f.dir.path())), options).expect("loader")
}

fn all_batches(loader: &Loader, epoch: u64) -> Vec<Batch> {
    loader
        .epoch(epoch)
        .expect("epoch")
        .map(|b| b.expect("batch"))
        .collect()
}

/// (episode row, anchor) of every sample of the batches, in order.
fn samples(batches: &[Batch]) -> Vec<(i64, i64)> {
    batches
        .iter()
        .flat_map(|b| {
            let rows = b.get("episode_row").and_then(|t| t.as_i64()).expect("rows");
            let anchors = b
                .get("anchor_ns")
                .and_then(|t| t.as_i64())
                .expect("anchors");
            rows.iter()
                .copied()
                .zip(anchors.iter().copied())
                .collect::<Vec<_>>()
        })
        .collect()
}

fn psnr(a: &[u8], b: &[u8]) -> f64 {
    let mse = a
        .iter()
        .zip(b)
        .map(|(x, y)| (f64::from(*x) - f64::from(*y)).powi(2))
        .sum::<f64>()
        / a.len() as f64;
    10.0 * (255.0f64 * 255.0 / mse.max(1e-9)).log10()
}

#[test]
fn every_element_is_the_grid_point_it_asks_for() {
    let spec = spec();
    let f = fixture(2, 4.0, spec.sampling_rule());
    let options = LoaderOptions {
        batch_size: 5,
        workers: 2,
        shuffle: Shuffle::Global,
        ..LoaderOptions::default()
    };
    let loader = loader(&f, &spec, options);
    let manifest = Manifest::open(&f.manifest).expect("manifest");
    // 4 s episodes, anchors every 0.1 s from 1.0 s while 0.98 s of actions still fit.
    assert!(
        loader.total_samples() >= 2 * 18,
        "{}",
        loader.total_samples()
    );
    let batches = all_batches(&loader, 0);
    assert_eq!(samples(&batches).len() as u64, loader.total_samples());

    // The loader's conversion (the default, swscale's fast path): pixels must be equal.
    let mut decoder = H264Decoder::with_conversion(RgbConversion::Fast).expect("decoder");
    let mut image_decoder = ImageDecoder::new();
    let mut psnrs = Vec::new();
    for batch in &batches {
        assert!(batch.skipped.is_empty(), "{:?}", batch.skipped);
        let rows = batch
            .get("episode_row")
            .and_then(|t| t.as_i64())
            .expect("rows");
        let anchors = batch
            .get("anchor_ns")
            .and_then(|t| t.as_i64())
            .expect("anchors");
        for (slot, (&row, &anchor)) in rows.iter().zip(anchors).enumerate() {
            let uri = manifest
                .episode(row as usize)
                .expect("row")
                .uri()
                .expect("uri")
                .to_string();
            let path = f.dir.path().join(&uri);
            let reader =
                EpisodeReader::open(MmapSource::open(&path).expect("mmap")).expect("opens");
            // Numeric streams: exactly the grid point at the requested time, same values.
            for (name, topic, offsets) in [
                (
                    "state",
                    "/joint_states",
                    (0..200)
                        .map(|i| (i - 199) * 5_000_000)
                        .collect::<Vec<i64>>(),
                ),
                (
                    "action",
                    "/action",
                    (0..50).map(|i| i * 20_000_000).collect(),
                ),
            ] {
                let values = batch.get(name).expect("values");
                let fields = values.shape[2];
                let times = batch
                    .get(&format!("{name}.time_ns"))
                    .and_then(|t| t.as_i64())
                    .expect("times");
                let mask = batch
                    .get(&format!("{name}.mask"))
                    .and_then(|t| t.as_u8())
                    .expect("mask");
                let first = (anchor + offsets[0]) as u64;
                let last = (anchor + offsets[offsets.len() - 1]) as u64;
                let truth = reader
                    .signals(&[topic], first..last + 1)
                    .expect("signals")
                    .remove(0);
                let by_time: BTreeMap<u64, &[f64]> = truth
                    .log_times
                    .iter()
                    .copied()
                    .zip(truth.values.chunks(fields))
                    .collect();
                for (i, offset) in offsets.iter().enumerate() {
                    let e = slot * offsets.len() + i;
                    let requested = anchor + offset;
                    let Some(expected) = by_time.get(&(requested as u64)) else {
                        // A grid point missing in a gap: interpolated or masked, never a neighbour.
                        assert_eq!(
                            times[e], requested,
                            "{name}: off-grid element not at its time"
                        );
                        continue;
                    };
                    assert_eq!(mask[e], 1, "{name} at {requested}");
                    assert_eq!(times[e], requested, "{name}: zero time error on the grid");
                    let got = &values.as_f32().expect("f32")[e * fields..(e + 1) * fields];
                    for (g, x) in got.iter().zip(*expected) {
                        assert_eq!(*g, *x as f32, "{name} value at {requested}");
                    }
                }
            }
            // Cameras: the frame on the grid at each offset (grid periods are whole ns, so
            // frame times drift from exact multiples by under a microsecond), with the
            // pixels an independent decode gives and close to the landing JPEG.
            for (name, topic, offsets, chw) in [
                ("high", HIGH, vec![-500_000_000i64, 0], false),
                ("wrist", WRIST, vec![0i64], true),
            ] {
                let frames = batch.get(name).and_then(|t| t.as_u8()).expect("frames");
                let times = batch
                    .get(&format!("{name}.time_ns"))
                    .and_then(|t| t.as_i64())
                    .expect("times");
                let mask = batch
                    .get(&format!("{name}.mask"))
                    .and_then(|t| t.as_u8())
                    .expect("mask");
                for (j, offset) in offsets.iter().enumerate() {
                    let e = slot * offsets.len() + j;
                    let requested = anchor + offset;
                    assert!(
                        (times[e] - requested).abs() < 100_000,
                        "{name}: frame {} for {requested}",
                        times[e]
                    );
                    assert_eq!(mask[e], 1);
                    let independent = reader
                        .frames_at(topic, &[times[e] as u64], &mut decoder, None)
                        .expect("decodes")
                        .remove(0);
                    let got = &frames[e * 64 * 48 * 3..(e + 1) * 64 * 48 * 3];
                    let hwc: Vec<u8> = if chw {
                        (0..64 * 48)
                            .flat_map(|p| [got[p], got[64 * 48 + p], got[2 * 64 * 48 + p]])
                            .collect()
                    } else {
                        got.to_vec()
                    };
                    assert_eq!(hwc, independent.data, "{name} pixels at {}", times[e]);
                    psnrs.push(landing_psnr(
                        &f.landing[&uri],
                        topic,
                        times[e],
                        &independent,
                        &mut image_decoder,
                    ));
                }
            }
        }
    }
    let mean = psnrs.iter().sum::<f64>() / psnrs.len() as f64;
    assert!(
        mean > 30.0,
        "mean PSNR against the landing frames {mean:.1} dB"
    );
}

#[test]
fn depth_comes_back_exactly_as_recorded_in_millimetres_and_in_metres() {
    let spec = SampleSpec::from_toml_str(
        r#"
anchor_hz = 10.0
[[depth]]
name = "depth_mm"
topic = "/camera/high/depth/image_raw"
offsets_s = [-0.2, 0.0]
[[depth]]
name = "depth_m"
topic = "/camera/high/depth/image_raw"
offsets_s = [0.0]
unit = "m"
[[proprio]]
name = "state"
topic = "/joint_states"
kind = "window"
steps = 10
hz = 200.0
"#,
    )
    .expect("spec");
    let synth = SynthConfig {
        seed: 9,
        seconds: 2.0,
        cameras: 1,
        depth_cameras: 1,
        width: 40,
        height: 30,
        ..SynthConfig::default()
    };
    let f = fixture_of(synth, 2, spec.sampling_rule());
    let loader = loader(
        &f,
        &spec,
        LoaderOptions {
            batch_size: 4,
            workers: 2,
            ..LoaderOptions::default()
        },
    );
    let manifest = Manifest::open(&f.manifest).expect("manifest");
    let batches = all_batches(&loader, 0);
    assert!(
        samples(&batches).len() >= 2 * 15,
        "{}",
        samples(&batches).len()
    );
    let topic = "/camera/high/depth/image_raw";
    let pixels = 40 * 30;
    let mut image_decoder = ImageDecoder::new();
    let mut checked = 0;
    for batch in &batches {
        assert!(batch.skipped.is_empty(), "{:?}", batch.skipped);
        let mm = batch.get("depth_mm").expect("depth_mm");
        assert_eq!(mm.shape, [mm.shape[0], 2, 30, 40]);
        let mm_values = mm.as_u16().expect("u16 millimetres");
        let metres = batch
            .get("depth_m")
            .and_then(|t| t.as_f32())
            .expect("f32 metres");
        let rows = batch
            .get("episode_row")
            .and_then(|t| t.as_i64())
            .expect("rows");
        let mm_times = batch
            .get("depth_mm.time_ns")
            .and_then(|t| t.as_i64())
            .expect("times");
        let mm_mask = batch
            .get("depth_mm.mask")
            .and_then(|t| t.as_u8())
            .expect("mask");
        let m_times = batch
            .get("depth_m.time_ns")
            .and_then(|t| t.as_i64())
            .expect("times");
        for (slot, &row) in rows.iter().enumerate() {
            let uri = manifest
                .episode(row as usize)
                .expect("row")
                .uri()
                .expect("uri")
                .to_string();
            let landing =
                reel_mcap::read_landing(&uri, &f.landing[&uri], &|_| false).expect("landing");
            let camera = landing
                .depths
                .iter()
                .find(|d| d.topic == topic)
                .expect("a landing depth camera");
            let mut recorded = |time: i64| {
                let frame = camera
                    .frames
                    .iter()
                    .find(|fr| fr.log_time as i64 == time)
                    .unwrap_or_else(|| panic!("no landing depth frame at {time}"));
                frame
                    .encoding
                    .to_depth(&mut image_decoder, &frame.data)
                    .expect("decodes")
                    .data
            };
            for j in 0..2 {
                let e = slot * 2 + j;
                assert_eq!(mm_mask[e], 1, "a 30 Hz frame lies within half a period");
                let want = recorded(mm_times[e]);
                assert_eq!(&mm_values[e * pixels..(e + 1) * pixels], want.as_slice());
                assert!(want.contains(&0), "holes stay 0");
            }
            let want = recorded(m_times[slot]);
            let got = &metres[slot * pixels..(slot + 1) * pixels];
            for (m, mm) in got.iter().zip(&want) {
                assert_eq!(*m, f32::from(*mm) / 1000.0);
            }
            checked += 1;
        }
    }
    assert_eq!(checked as u64, loader.total_samples());
}

/// The landing episode without `topic`'s messages logged after `until_ns`: a camera that
/// stops before the rest of the recording, as a flaky USB camera does.
fn without_tail(landing: &[u8], topic: &str, until_ns: u64) -> Vec<u8> {
    let mut out = mcap::Writer::new(std::io::Cursor::new(Vec::new())).expect("writer");
    for message in mcap::MessageStream::new(landing).expect("landing") {
        let message = message.expect("message");
        if message.channel.topic == topic && message.log_time > until_ns {
            continue;
        }
        out.write(&message).expect("writes");
    }
    out.finish().expect("finishes");
    out.into_inner().into_inner()
}

#[test]
fn a_camera_that_stops_early_costs_no_sample() {
    let spec = spec();
    let synth = SynthConfig {
        seed: 11,
        seconds: 5.0,
        cameras: 2,
        width: 64,
        height: 48,
        ..SynthConfig::default()
    };
    let episode = generate_episode(&synth, 0).expect("synth");
    let stop = episode.report.start_ns + 3_000_000_000;
    let landing = without_tail(&episode.mcap, WRIST, stop);
    let processed =
        process_episode("ep", "ep", &landing, &PipelineConfig::default()).expect("ingests");
    let s = &processed.summary;
    assert!(s.covered_end_ns <= stop, "{} > {stop}", s.covered_end_ns);
    assert!(s.end_ns > stop + 1_500_000_000, "the rest runs on");
    assert!(
        s.qc.findings
            .iter()
            .any(|f| f.topic == WRIST && f.detail.as_deref() == Some("ends early")),
        "{:?}",
        s.qc.findings
    );
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("canonical")).expect("mkdir");
    std::fs::write(dir.path().join(&s.canonical_key), &processed.bytes).expect("writes");
    // The manifest row ingest gives, and one spanning the whole recording.
    let covered = s.manifest_row();
    let whole = reel_manifest::ManifestRow {
        start_ns: s.start_ns as i64,
        end_ns: s.end_ns as i64,
        ..s.manifest_row()
    };
    let mut served = Vec::new();
    for (name, row) in [("covered", covered), ("whole", whole)] {
        let path = dir.path().join(format!("{name}.arrow"));
        let meta = ManifestMeta::new("SELECT * FROM episodes", "test", spec.sampling_rule());
        let mut writer = ManifestWriter::create(&path, &meta).expect("manifest");
        writer.push(&row).expect("row");
        writer.finish().expect("finishes");
        let loader = Loader::new(
            Manifest::open(&path).expect("manifest"),
            &spec,
            Sources::Store(store(dir.path())),
            LoaderOptions {
                batch_size: 4,
                ..LoaderOptions::default()
            },
        )
        .expect("loader");
        let batches = all_batches(&loader, 0);
        let skipped: usize = batches.iter().map(|b| b.skipped.len()).sum();
        // Frames the wrist camera could not give: masked.
        let missing = batches
            .iter()
            .flat_map(|b| b.get("wrist.mask").and_then(|t| t.as_u8()).expect("mask"))
            .filter(|&&m| m == 0)
            .count();
        served.push((
            loader.total_samples(),
            samples(&batches).len(),
            skipped,
            missing,
        ));
    }
    let (covered, whole) = (served[0], served[1]);
    assert!(covered.0 > 0, "{covered:?}");
    assert_eq!(
        (covered.2, covered.3),
        (0, 0),
        "every sample whole: {covered:?}"
    );
    assert_eq!(covered.1 as u64, covered.0);
    // Anchored over the whole recording, the samples past the camera's end lack it: masked
    // every time, whichever worker decoded the camera's last GOP first (never skipped).
    assert!(whole.3 > 0, "{whole:?}");
    assert_eq!(whole.2, 0, "{whole:?}");
}

/// PSNR of `frame` against the landing JPEG nearest `time` (the better of its neighbours).
fn landing_psnr(
    landing: &[u8],
    topic: &str,
    time: i64,
    frame: &RgbImage,
    decoder: &mut ImageDecoder,
) -> f64 {
    let landing = decode_landing("landing", "landing", landing).expect("landing");
    let camera = landing
        .episode
        .cameras
        .iter()
        .find(|c| c.topic == topic)
        .expect("camera");
    let i = camera
        .frames
        .partition_point(|f| (f.log_time as i64) < time);
    camera.frames[i.saturating_sub(1)..(i + 1).min(camera.frames.len())]
        .iter()
        .map(|f| {
            let format = ImageFormat::sniff(&f.data).expect("image format");
            let image = decoder.decode(format, &f.data).expect("jpeg");
            psnr(&image.data, &frame.data)
        })
        .fold(0.0, f64::max)
}

#[test]
fn the_order_is_deterministic_and_shards_partition_the_samples() {
    let spec = spec();
    let f = fixture(3, 3.0, SamplingRule::at_hz(10.0, 1.0, 1.0));
    for shuffle in [Shuffle::Global, Shuffle::Locality { run: 4 }] {
        let options = |workers, seed, rank, world| LoaderOptions {
            batch_size: 3,
            workers,
            seed,
            rank,
            world,
            shuffle,
            ..LoaderOptions::default()
        };
        let one = loader(&f, &spec, options(1, 7, 0, 1));
        let a = all_batches(&one, 0);
        let b = all_batches(&loader(&f, &spec, options(3, 7, 0, 1)), 0);
        assert_eq!(a, b, "{shuffle:?}: worker count changes nothing");
        // Page-locked buffers where CUDA is present (pageable here): the same batches.
        let pinned = loader(
            &f,
            &spec,
            LoaderOptions {
                pin_memory: Some(0),
                ..options(2, 7, 0, 1)
            },
        );
        let c = all_batches(&pinned, 0);
        assert_eq!(a, c, "{shuffle:?}: pinned memory changes nothing");
        let pinned_here = pinned.host_memory().is_pinned();
        assert!(c.iter().all(|batch| {
            batch
                .tensors
                .iter()
                .all(|t| t.data.is_pinned() == pinned_here)
        }));
        let other_seed = samples(&all_batches(&loader(&f, &spec, options(2, 8, 0, 1)), 0));
        let other_epoch = samples(&all_batches(&one, 1));
        let all = samples(&a);
        assert_ne!(all, other_seed, "{shuffle:?}: seed changes the order");
        assert_ne!(all, other_epoch, "{shuffle:?}: epoch changes the order");
        let sorted = |v: &[(i64, i64)]| v.iter().copied().collect::<BTreeSet<_>>();
        assert_eq!(sorted(&all), sorted(&other_seed));
        assert_eq!(all.len() as u64, one.total_samples());
        assert_eq!(sorted(&all).len(), all.len(), "no sample twice in an epoch");

        let mut union = BTreeSet::new();
        let mut count = 0;
        for rank in 0..3 {
            let shard = samples(&all_batches(&loader(&f, &spec, options(2, 7, rank, 3)), 0));
            count += shard.len();
            union.extend(shard);
        }
        assert_eq!(count, all.len(), "{shuffle:?}: shards are disjoint");
        assert_eq!(
            union,
            sorted(&all),
            "{shuffle:?}: shards cover every sample"
        );
    }
}

#[test]
fn locality_runs_are_served_together() {
    let spec = spec();
    let rule = spec.sampling_rule();
    let f = fixture(2, 4.0, rule);
    let manifest = Manifest::open(&f.manifest).expect("manifest");
    let run = 4;
    let options = LoaderOptions {
        batch_size: 3,
        shuffle: Shuffle::Locality { run },
        ..LoaderOptions::default()
    };
    let all = samples(&all_batches(&loader(&f, &spec, options), 0));
    // The block of a sample: which `run` consecutive samples of the manifest it is among
    // (consecutive anchors of an episode, the last ones of one and the first of the next
    // where a block crosses their boundary).
    let run_of = |(row, anchor): (i64, i64)| {
        let episode = manifest.episode(row as usize).expect("row");
        let k = (anchor - episode.start_ns() - rule.before_ns as i64) / rule.period_ns as i64;
        (episode.sample_offset() + k as u64) / run
    };
    let mut seen = BTreeSet::new();
    let mut previous = None;
    for &sample in &all {
        let r = run_of(sample);
        if previous != Some(r) {
            assert!(
                seen.insert(r),
                "run {r:?} is split: its samples must come together"
            );
            previous = Some(r);
        }
    }
    assert!(
        seen.len() > 2 && seen.len() < all.len(),
        "{} runs",
        seen.len()
    );
}

#[test]
fn resuming_gives_the_batches_an_uninterrupted_run_gives() {
    let spec = spec();
    let f = fixture(2, 3.0, spec.sampling_rule());
    for shuffle in [Shuffle::Global, Shuffle::Locality { run: 5 }] {
        let options = LoaderOptions {
            batch_size: 2,
            workers: 2,
            seed: 3,
            shuffle,
            ..LoaderOptions::default()
        };
        let loader = loader(&f, &spec, options);
        let uninterrupted = all_batches(&loader, 2);
        let mut first = loader.epoch(2).expect("epoch");
        let head: Vec<Batch> = first.by_ref().take(3).map(|b| b.expect("batch")).collect();
        let state = first.state();
        assert_eq!(state, LoaderState::at(2, 3));
        drop(first);
        // The state survives a checkpoint as JSON.
        let state: LoaderState =
            serde_json::from_str(&serde_json::to_string(&state).expect("json")).expect("parses");
        let rest: Vec<Batch> = loader
            .resume(state)
            .expect("resumes")
            .map(|b| b.expect("batch"))
            .collect();
        let resumed: Vec<Batch> = head.into_iter().chain(rest).collect();
        assert_eq!(resumed, uninterrupted, "{shuffle:?}");
    }
}

/// Three ranks save mid-epoch; the run resumes on two ranks, then on five: what was
/// delivered before plus what the new ranks deliver is the whole epoch, each sample once.
#[test]
fn a_run_resumes_on_another_world_size_delivering_the_rest_once() {
    let spec = spec();
    let f = fixture(3, 3.0, spec.sampling_rule());
    for shuffle in [Shuffle::Global, Shuffle::Locality { run: 4 }] {
        let at = |rank, world| LoaderOptions {
            batch_size: 3,
            workers: 2,
            seed: 11,
            shuffle,
            rank,
            world,
            ..LoaderOptions::default()
        };
        let whole = samples(&all_batches(&loader(&f, &spec, at(0, 1)), 1));
        for new_world in [2, 5] {
            let mut seen = Vec::new();
            let saved: Vec<SavedState> = (0..3)
                .map(|rank| {
                    let old = loader(&f, &spec, at(rank, 3));
                    let mut batches = old.epoch(1).expect("epoch");
                    let head: Vec<Batch> = batches
                        .by_ref()
                        .take(2 + rank % 2)
                        .map(|b| b.expect("batch"))
                        .collect();
                    seen.extend(samples(&head));
                    let saved = old.saved_state(batches.state());
                    // A checkpoint keeps it as JSON.
                    serde_json::from_str(&serde_json::to_string(&saved).expect("json"))
                        .expect("parses")
                })
                .collect();
            for rank in 0..new_world {
                let new = loader(&f, &spec, at(rank, new_world));
                let position = new.restore(&saved, ResumeCheck::SameRun).expect("restores");
                let rest: Vec<Batch> = new
                    .epochs(position)
                    .take_while(|b| b.as_ref().is_ok_and(|b| b.epoch == 1))
                    .map(|b| b.expect("batch"))
                    .collect();
                seen.extend(samples(&rest));
            }
            let mut expected = whole.clone();
            expected.sort();
            seen.sort();
            assert_eq!(seen, expected, "{shuffle:?} on {new_world} ranks");
        }
    }
}

/// A state names its run: another seed, spec or manifest content is refused naming what
/// changed; a copy of the manifest elsewhere is the same manifest; the override goes on.
#[test]
fn a_state_from_another_run_is_refused_naming_what_changed() {
    let spec = spec();
    let f = fixture(2, 3.0, spec.sampling_rule());
    let options = LoaderOptions {
        batch_size: 2,
        seed: 3,
        ..LoaderOptions::default()
    };
    let first = loader(&f, &spec, options.clone());
    let saved = first.saved_state(LoaderState::at(0, 2));
    let refused = |other: &Loader, what: &str| {
        let err = other
            .restore(std::slice::from_ref(&saved), ResumeCheck::SameRun)
            .expect_err(what);
        assert!(
            matches!(&err, LoaderError::OtherRun { what: w, .. } if *w == what),
            "{err}"
        );
        assert_eq!(err.kind(), reel_io::ErrorKind::BadInput);
        assert!(err.to_string().contains(what), "{err}");
    };
    let reseeded = loader(
        &f,
        &spec,
        LoaderOptions {
            seed: 4,
            ..options.clone()
        },
    );
    refused(&reseeded, "seed");
    let mut other_spec = spec.clone();
    other_spec.cameras.pop();
    let respecced = loader(&f, &other_spec, options.clone());
    refused(&respecced, "spec");
    let bigger = loader(
        &f,
        &spec,
        LoaderOptions {
            batch_size: 4,
            ..options.clone()
        },
    );
    refused(&bigger, "batch size");

    // The same rows under another name are the same manifest.
    let copy = f.dir.path().join("elsewhere.arrow");
    std::fs::copy(&f.manifest, &copy).expect("copy");
    let moved = loader_of(&f, &copy, &spec, options.clone());
    assert_eq!(
        moved
            .restore(std::slice::from_ref(&saved), ResumeCheck::SameRun)
            .expect("same run"),
        LoaderState::at(0, 2)
    );
    // Other rows are another manifest.
    let rows = Manifest::open(&f.manifest).expect("manifest");
    let fewer = f.dir.path().join("fewer.arrow");
    let meta = ManifestMeta::new("SELECT 1", "test", spec.sampling_rule());
    let mut writer = ManifestWriter::create(&fewer, &meta).expect("manifest");
    let e = rows.episode(0).expect("row");
    writer
        .push(&reel_manifest::ManifestRow {
            episode_id: e.episode_id().expect("id"),
            uri: &e.uri().expect("uri"),
            start_ns: e.start_ns(),
            end_ns: e.end_ns(),
            ..Default::default()
        })
        .expect("row");
    writer.finish().expect("written");
    let recurated = loader_of(&f, &fewer, &spec, options.clone());
    refused(&recurated, "manifest");
    // Deliberately: the saved epoch and batch, in the new order.
    assert_eq!(
        reseeded
            .restore(&[saved], ResumeCheck::KeepPosition)
            .expect("kept"),
        LoaderState::at(0, 2)
    );
}

/// The fixture's canonical episodes served by s3s-fs (bucket `reel`), and a loader over
/// them that retries a failed request once.
fn served(f: &Fixture) -> S3Server {
    let server = S3Server::start("reel").expect("s3s-fs");
    let canonical = server.root().join("reel/canonical");
    std::fs::create_dir_all(&canonical).expect("mkdir");
    for entry in std::fs::read_dir(f.dir.path().join("canonical")).expect("canonical") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), canonical.join(entry.file_name())).expect("copy");
    }
    server
}

fn s3_loader(f: &Fixture, server: &S3Server, spec: &SampleSpec, options: LoaderOptions) -> Loader {
    let store_options = StoreOptions {
        retries: Some(1),
        ..server.options()
    };
    let sources =
        Sources::open_store(&server.uri("reel", ""), &store_options, None).expect("sources");
    let manifest = Manifest::open(&f.manifest).expect("manifest");
    Loader::new(manifest, spec, sources, options).expect("loader")
}

/// The store's server killed mid-epoch: the iteration fails with the outage (not a
/// skipped episode), and once the server is back the run resumed from its state
/// delivers exactly the rest.
#[test]
fn a_store_outage_fails_loudly_and_the_run_resumes_from_its_state() {
    let spec = spec();
    let f = fixture(2, 3.0, spec.sampling_rule());
    let mut server = served(&f);
    let options = LoaderOptions {
        batch_size: 2,
        workers: 1,
        prefetch: 1,
        gop_cache: 1,
        seed: 2,
        shuffle: Shuffle::Global,
        ..LoaderOptions::default()
    };
    let uninterrupted = samples(&all_batches(
        &s3_loader(&f, &server, &spec, options.clone()),
        0,
    ));
    let loader = s3_loader(&f, &server, &spec, options.clone());
    let mut batches = loader.epoch(0).expect("epoch");
    let mut delivered: Vec<Batch> = batches
        .by_ref()
        .take(2)
        .map(|b| b.expect("batch"))
        .collect();
    server.kill();
    let outage = loop {
        match batches.next() {
            Some(Ok(batch)) => delivered.push(batch),
            Some(Err(e)) => break e,
            None => panic!("the epoch ended with the store's server down"),
        }
    };
    assert!(
        matches!(outage.kind(), ErrorKind::Transient | ErrorKind::Environment),
        "{outage} is {:?}",
        outage.kind()
    );
    assert!(
        delivered.iter().all(|b| b.skipped.is_empty()),
        "an outage skipped samples"
    );
    assert!(batches.next().is_none(), "no batch after the outage");
    let state = batches.state();
    drop(batches);
    drop(loader);

    server.restart().expect("s3s-fs again");
    let rest: Vec<Batch> = s3_loader(&f, &server, &spec, options)
        .resume(state)
        .expect("resumes")
        .map(|b| b.expect("batch"))
        .collect();
    assert!(rest.iter().all(|b| b.skipped.is_empty()));
    delivered.extend(rest);
    assert_eq!(samples(&delivered), uninterrupted);
}

/// An episode's object replaced mid-epoch (here by another episode's bytes) is opened
/// again: what is then reported is the new object's mismatch with its manifest row, never
/// a read of mixed versions; the other episode's samples all arrive.
#[test]
fn an_object_rewritten_mid_epoch_is_opened_again() {
    let spec = spec();
    let f = fixture(2, 3.0, spec.sampling_rule());
    let server = served(&f);
    let options = LoaderOptions {
        batch_size: 2,
        workers: 1,
        prefetch: 1,
        gop_cache: 1,
        seed: 2,
        shuffle: Shuffle::Global,
        max_skipped: 1.0,
        ..LoaderOptions::default()
    };
    let loader = s3_loader(&f, &server, &spec, options);
    let manifest = Manifest::open(&f.manifest).expect("manifest");
    let uri = |row: usize| {
        manifest
            .episode(row)
            .expect("row")
            .uri()
            .expect("uri")
            .to_string()
    };
    let mut batches = loader.epoch(0).expect("epoch");
    let mut delivered = vec![batches.next().expect("a batch").expect("batch")];
    let other = std::fs::read(f.dir.path().join(uri(1))).expect("episode 1");
    server
        .store("reel", "")
        .expect("store")
        .write_atomic(&uri(0), other)
        .expect("rewrite");
    delivered.extend(batches.map(|b| b.expect("batch")));
    let reasons: Vec<&str> = delivered
        .iter()
        .flat_map(|b| &b.skipped)
        .map(|s| s.reason.as_str())
        .collect();
    assert!(
        !reasons.is_empty(),
        "samples of the rewritten episode were read afresh"
    );
    assert!(
        reasons.iter().all(|r| r.contains("the manifest says")),
        "{reasons:?}"
    );
    let rows_of = |row: i64| {
        samples(&delivered)
            .iter()
            .filter(|(r, _)| *r == row)
            .count()
    };
    let episode_1 = manifest.episode(1).expect("row").num_samples() as usize;
    assert_eq!(rows_of(1), episode_1);
}

#[test]
fn padding_masks_what_lies_outside_the_episode() {
    let mut spec = spec();
    spec.edge = EdgePolicy::Pad;
    let f = fixture(1, 2.0, spec.sampling_rule());
    let options = LoaderOptions {
        batch_size: 64,
        shuffle: Shuffle::Global,
        ..LoaderOptions::default()
    };
    let manifest = Manifest::open(&f.manifest).expect("manifest");
    let (start, end) = {
        let e = manifest.episode(0).expect("row");
        (e.start_ns(), e.end_ns())
    };
    let loader = loader(&f, &spec, options);
    let batch = all_batches(&loader, 0).remove(0);
    assert!(batch.skipped.is_empty(), "{:?}", batch.skipped.first());
    assert_eq!(batch.len() as u64, loader.total_samples());
    let anchors = batch
        .get("anchor_ns")
        .and_then(|t| t.as_i64())
        .expect("anchors");
    assert!(
        anchors.contains(&start),
        "pad anchors start at the episode start"
    );
    let times = batch
        .get("state.time_ns")
        .and_then(|t| t.as_i64())
        .expect("times");
    let mask = batch
        .get("state.mask")
        .and_then(|t| t.as_u8())
        .expect("mask");
    let values = batch.get("state").and_then(|t| t.as_f32()).expect("values");
    let fields = batch.get("state").expect("state").shape[2];
    // The manifest's span is where every stream has data; the state stream itself starts a
    // little earlier, and before its first grid point there is nothing to read.
    let reader = EpisodeReader::open(
        MmapSource::open(
            f.dir
                .path()
                .join(&*manifest.episode(0).expect("row").uri().expect("uri")),
        )
        .expect("mmap"),
    )
    .expect("opens");
    let state_start = reader
        .signals(&["/joint_states"], 0..u64::MAX)
        .expect("signals")
        .remove(0)
        .log_times[0] as i64;
    assert!(state_start <= start);
    let (mut outside, mut inside) = (0, 0);
    for (e, (&t, &m)) in times.iter().zip(mask).enumerate() {
        if t < state_start {
            assert_eq!(m, 0, "state before the stream's start is masked");
            assert!(
                values[e * fields..(e + 1) * fields]
                    .iter()
                    .all(|v| *v == 0.0)
            );
            outside += 1;
        } else if m == 1 {
            inside += 1;
        }
    }
    assert!(
        outside > 0 && inside > 0,
        "{outside} outside, {inside} inside"
    );
    let action_times = batch
        .get("action.time_ns")
        .and_then(|t| t.as_i64())
        .expect("times");
    let action_mask = batch
        .get("action.mask")
        .and_then(|t| t.as_u8())
        .expect("mask");
    let action_end = *reader
        .signals(&["/action"], 0..u64::MAX)
        .expect("signals")
        .remove(0)
        .log_times
        .last()
        .expect("actions") as i64;
    assert!(action_end >= end);
    assert!(
        action_times
            .iter()
            .zip(action_mask)
            .any(|(&t, &m)| t > action_end && m == 0)
    );
}

/// Truncates the episode of manifest row `row` to half its size; returns its URI.
fn corrupt(f: &Fixture, manifest: &Manifest, row: usize) -> String {
    let uri = manifest
        .episode(row)
        .expect("row")
        .uri()
        .expect("uri")
        .to_string();
    let path = f.dir.path().join(&uri);
    let mut bytes = std::fs::read(&path).expect("reads");
    bytes.truncate(bytes.len() / 2);
    std::fs::write(&path, bytes).expect("corrupts");
    uri
}

#[test]
fn a_corrupt_episode_is_skipped_and_reported_whatever_its_row() {
    let spec = spec();
    for bad_row in [0, 1, 2] {
        let f = fixture(3, 3.0, spec.sampling_rule());
        let manifest = Manifest::open(&f.manifest).expect("manifest");
        let bad_uri = corrupt(&f, &manifest, bad_row);
        let bad_samples = manifest.episode(bad_row).expect("row").num_samples();
        let options = |max_skipped| LoaderOptions {
            batch_size: 4,
            workers: 2,
            shuffle: Shuffle::Global,
            max_skipped,
            ..LoaderOptions::default()
        };
        // A third of the samples is more than the default allows: the epoch fails,
        // naming the episode, whichever row it is in.
        let strict = loader(&f, &spec, options(LoaderOptions::default().max_skipped));
        let failure = strict
            .epoch(0)
            .expect("epoch")
            .find_map(Result::err)
            .expect("too many samples skipped");
        let text = failure.to_string();
        assert!(
            matches!(failure, reel_loader::LoaderError::TooManySkipped { .. }),
            "row {bad_row}: {text}"
        );
        assert!(text.contains(&bad_uri), "{text}");

        // Allowed, every sample of the bad episode is skipped and reported, once.
        let lenient = loader(&f, &spec, options(0.5));
        let mut epoch = lenient.epoch(0).expect("epoch");
        let batches: Vec<Batch> = epoch.by_ref().map(|b| b.expect("batch")).collect();
        let skipped: Vec<_> = batches.iter().flat_map(|b| b.skipped.iter()).collect();
        assert_eq!(skipped.len() as u64, bad_samples, "row {bad_row}");
        assert!(
            skipped
                .iter()
                .all(|s| s.uri == bad_uri && !s.reason.is_empty())
        );
        let episodes = epoch.skipped_episodes();
        assert_eq!(episodes.len(), 1);
        assert_eq!(
            (episodes[0].uri.as_str(), episodes[0].samples),
            (bad_uri.as_str(), bad_samples)
        );
        let good = samples(&batches);
        assert_eq!(good.len() as u64, lenient.total_samples() - bad_samples);
        assert!(good.iter().all(|(row, _)| *row != bad_row as i64));
    }
}

#[test]
fn a_manifest_row_the_episode_contradicts_makes_it_a_corrupt_episode() {
    let spec = spec();
    let f = fixture(3, 3.0, spec.sampling_rule());
    let manifest = Manifest::open(&f.manifest).expect("manifest");
    // Row 0 as ingest wrote it; row 1 starting 5 s before its episode (zeroed or shifted
    // times served zeros, every mask 0, as if they were data); row 2 of the wrong size.
    let path = f.dir.path().join("edited.arrow");
    let meta = ManifestMeta::new("SELECT * FROM episodes", "test", spec.sampling_rule());
    let mut writer = ManifestWriter::create(&path, &meta).expect("manifest");
    let rows: Vec<_> = manifest.episodes().collect();
    let ids: Vec<String> = rows
        .iter()
        .map(|e| e.episode_id().expect("id").to_owned())
        .collect();
    let uris: Vec<String> = rows
        .iter()
        .map(|e| e.uri().expect("uri").into_owned())
        .collect();
    for (i, e) in rows.iter().enumerate() {
        writer
            .push(&reel_manifest::ManifestRow {
                episode_id: &ids[i],
                uri: &uris[i],
                start_ns: e.start_ns() - if i == 1 { 5_000_000_000 } else { 0 },
                end_ns: e.end_ns(),
                bytes: e.bytes() + u64::from(i == 2),
                camera_frames: e.camera_frames(),
                state_steps: e.state_steps(),
                action_steps: e.action_steps(),
                digest: e.digest().unwrap_or(0),
            })
            .expect("row");
    }
    writer.finish().expect("finishes");
    let loader = Loader::new(
        Manifest::open(&path).expect("manifest"),
        &spec,
        Sources::Store(store(f.dir.path())),
        LoaderOptions {
            batch_size: 4,
            max_skipped: 1.0,
            ..LoaderOptions::default()
        },
    )
    .expect("loader");
    let mut epoch = loader.epoch(0).expect("epoch");
    let batches: Vec<Batch> = epoch.by_ref().map(|b| b.expect("batch")).collect();
    let skipped = epoch.skipped_episodes();
    let reasons: BTreeMap<&str, &str> = skipped
        .iter()
        .map(|e| (e.uri.as_str(), e.reason.as_str()))
        .collect();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(
        reasons[uris[1].as_str()].contains("manifest row 1"),
        "{reasons:?}"
    );
    assert!(
        reasons[uris[1].as_str()].contains("not inside"),
        "{reasons:?}"
    );
    assert!(reasons[uris[2].as_str()].contains("bytes"), "{reasons:?}");
    // Row 0's samples, whole.
    let served = samples(&batches);
    assert!(!served.is_empty() && served.iter().all(|(row, _)| *row == 0));
}

#[test]
fn the_block_cache_serves_the_same_batches() {
    let spec = spec();
    let f = fixture(1, 3.0, spec.sampling_rule());
    let options = LoaderOptions {
        batch_size: 4,
        shuffle: Shuffle::Global,
        ..LoaderOptions::default()
    };
    let direct = all_batches(&loader(&f, &spec, options.clone()), 0);
    let cache_dir = tempfile::tempdir().expect("tempdir");
    let mut config = reel_cache::CacheConfig::new(cache_dir.path(), 1 << 30);
    config.block_size = 256 << 10;
    let cache = reel_cache::BlockCache::for_store(config, &store(f.dir.path())).expect("cache");
    let cache = std::sync::Arc::new(cache);
    let manifest = Manifest::open(&f.manifest).expect("manifest");
    let cached =
        Loader::new(manifest, &spec, Sources::Cache(cache.clone()), options).expect("loader");
    assert_eq!(all_batches(&cached, 0), direct);
    let metrics = cache.metrics();
    assert!(metrics.hits > 0, "{metrics:?}");
}

#[test]
fn a_spec_the_episodes_cannot_serve_is_refused_with_the_reason() {
    let spec = spec();
    let f = fixture(1, 2.5, spec.sampling_rule());
    let mut wrong = spec.clone();
    wrong.cameras[0].topic = "/camera/missing".into();
    let manifest = Manifest::open(&f.manifest).expect("manifest");
    let err = Loader::new(
        manifest,
        &wrong,
        Sources::Store(store(f.dir.path())),
        LoaderOptions::default(),
    )
    .expect_err("refused")
    .to_string();
    assert!(err.contains("/camera/missing"), "{err}");
    let manifest = Manifest::open(&f.manifest).expect("manifest");
    let options = LoaderOptions {
        rank: 2,
        world: 2,
        ..LoaderOptions::default()
    };
    let err = Loader::new(
        manifest,
        &spec,
        Sources::Store(store(f.dir.path())),
        options,
    )
    .expect_err("bad shard")
    .to_string();
    assert!(err.contains("rank 2"), "{err}");
}

#[test]
fn stats_count_each_epoch_on_its_own() {
    let spec = spec();
    let f = fixture(2, 3.0, spec.sampling_rule());
    for shuffle in [Shuffle::Global, Shuffle::Locality { run: 4 }] {
        let loader = loader(
            &f,
            &spec,
            LoaderOptions {
                batch_size: 3,
                workers: 1,
                shuffle,
                ..LoaderOptions::default()
            },
        );
        let run = |epoch| {
            let mut batches = loader.epoch(epoch).expect("epoch");
            let samples: usize = batches.by_ref().map(|b| b.expect("batch").len()).sum();
            (samples, batches.stats())
        };
        let (samples, first) = run(0);
        let (_, again) = run(0);
        assert_eq!(first.samples, samples as u64, "{shuffle:?}");
        assert!(
            first.frames_decoded > 0 && first.chunks_read > 0,
            "{shuffle:?}: {first:?}"
        );
        // The same epoch again: decoded GOPs kept from the first pass can only save work,
        // and nothing of the first pass is counted twice.
        assert!(again.chunks_read > 0, "{shuffle:?}: {again:?}");
        assert!(
            again.frames_decoded <= first.frames_decoded && again.chunks_read <= first.chunks_read,
            "{shuffle:?}: second pass {again:?} after {first:?}"
        );
        // Every sample asks for each camera frame of the spec once; the frames found in the
        // shared GOP cache are among them, and each pass counts only its own.
        let per_sample: u64 = spec.cameras.iter().map(|c| c.offsets_s.len() as u64).sum();
        assert_eq!(
            first.frames_wanted,
            per_sample * first.samples,
            "{shuffle:?}"
        );
        assert_eq!(again.frames_wanted, first.frames_wanted, "{shuffle:?}");
        assert!(
            first.frames_cached <= first.frames_wanted,
            "{shuffle:?}: {first:?}"
        );
        if matches!(shuffle, Shuffle::Locality { .. }) {
            assert!(
                first.frames_cached > 0,
                "nearby samples reuse decoded GOPs: {first:?}"
            );
        }
    }
}

#[test]
fn warming_the_working_set_of_a_spec_makes_every_read_a_hit() {
    let full = spec();
    let f = fixture(2, 3.0, full.sampling_rule());
    let episode_bytes: u64 = std::fs::read_dir(f.dir.path().join("canonical"))
        .expect("lists")
        .map(|e| e.expect("entry").metadata().expect("stat").len())
        .sum();
    // A state-and-actions policy reads no camera chunk.
    let mut proprio_only = full.clone();
    proprio_only.cameras.clear();
    let mut with_cameras = None;
    for (spec, reads_cameras) in [(&full, true), (&proprio_only, false)] {
        let manifest = Manifest::open(&f.manifest).expect("manifest");
        let items = reel_loader::working_set(&manifest, spec, &store(f.dir.path())).expect("set");
        assert_eq!(items.len(), 2, "one item per episode");
        let ranged: u64 = items
            .iter()
            .flat_map(|i| i.ranges.clone().expect("ranges"))
            .map(|r| r.end - r.start)
            .sum();
        assert!(ranged <= episode_bytes);
        if reads_cameras {
            with_cameras = Some(ranged);
        } else {
            // These tiny test cameras (64×48) are a small share of the bytes; the camera
            // chunks must still be left out.
            let with_cameras = with_cameras.expect("the full spec went first");
            assert!(
                ranged < with_cameras,
                "{ranged} bytes without cameras, {with_cameras} with"
            );
        }
        let cache_dir = tempfile::tempdir().expect("tempdir");
        let mut config = reel_cache::CacheConfig::new(cache_dir.path(), 1 << 30);
        config.block_size = 64 << 10;
        let cache = reel_cache::BlockCache::for_store(config, &store(f.dir.path())).expect("cache");
        let options = reel_cache::WarmOptions::default();
        let plan = cache.plan_warm(&items, &options).expect("plan");
        cache.warm(plan, &options, |_| {}).expect("warm");
        let warmed = cache.metrics();
        let cache = std::sync::Arc::new(cache);
        let loader = Loader::new(
            manifest,
            spec,
            Sources::Cache(cache.clone()),
            LoaderOptions {
                batch_size: 4,
                shuffle: Shuffle::Global,
                ..LoaderOptions::default()
            },
        )
        .expect("loader");
        let batches = all_batches(&loader, 0);
        assert!(!batches.is_empty());
        let after = cache.metrics();
        assert!(after.hits > warmed.hits, "{after:?}");
        assert_eq!(
            after.misses, warmed.misses,
            "reads outside the warmed set: {after:?}"
        );
    }
}

mod mixture;
