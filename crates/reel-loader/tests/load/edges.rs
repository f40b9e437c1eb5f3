//! The edges of an episode: a camera that stops before the rest of the recording, and
//! padding where a sample reaches outside the episode.

use super::*;

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
