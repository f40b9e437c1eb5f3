//! Input the loader cannot serve: a corrupt episode, a manifest row its episode
//! contradicts, and a spec or shard the episodes cannot serve.

use super::*;

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
