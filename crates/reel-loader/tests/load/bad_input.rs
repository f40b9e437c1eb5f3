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

/// Every skipped sample is reported exactly once, whatever the order: in a batch's
/// `skipped`, or, when the epoch's last batches came out empty, by
/// `skipped_after_last_batch`; rolling over epochs, with the next epoch's first batch.
#[test]
fn every_skipped_sample_is_reported_once_even_after_the_last_batch() {
    let spec = spec();
    let f = fixture(3, 3.0, spec.sampling_rule());
    let manifest = Manifest::open(&f.manifest).expect("manifest");
    let bad_uri = corrupt(&f, &manifest, 1);
    let bad_samples = manifest.episode(1).expect("row").num_samples();
    let mut ended_on_empty_batches = 0;
    for seed in 0..8 {
        let loader = loader(
            &f,
            &spec,
            LoaderOptions {
                batch_size: 1,
                workers: 2,
                shuffle: Shuffle::Global,
                seed,
                max_skipped: 1.0,
                ..LoaderOptions::default()
            },
        );
        let mut epoch = loader.epoch(0).expect("epoch");
        let batches: Vec<Batch> = epoch.by_ref().map(|b| b.expect("batch")).collect();
        let trailing = epoch.skipped_after_last_batch();
        ended_on_empty_batches += usize::from(!trailing.is_empty());
        let mut reports: Vec<(&str, i64)> = batches
            .iter()
            .flat_map(|b| &b.skipped)
            .chain(trailing)
            .map(|s| (s.uri.as_str(), s.anchor_ns))
            .collect();
        assert_eq!(epoch.stats().skipped, bad_samples, "seed {seed}");
        assert_eq!(reports.len() as u64, bad_samples, "seed {seed}");
        assert!(reports.iter().all(|(uri, _)| *uri == bad_uri));
        reports.sort_unstable();
        reports.dedup();
        assert_eq!(
            reports.len() as u64,
            bad_samples,
            "seed {seed}: reported twice"
        );

        // Rolling over: epoch 0's last reports come with epoch 1's first batch.
        let first_of_next = loader
            .epoch(1)
            .expect("epoch")
            .next()
            .expect("a batch")
            .expect("batch")
            .skipped
            .len() as u64;
        let rolled: u64 = loader
            .epochs(LoaderState::default())
            .take(batches.len() + 1)
            .map(|b| b.expect("batch").skipped.len() as u64)
            .sum();
        assert_eq!(rolled, bad_samples + first_of_next, "seed {seed}");
    }
    assert!(
        ended_on_empty_batches > 0,
        "no seed ended an epoch on empty batches: the case went untested"
    );
}
