//! Episodes served over S3: a store outage mid-epoch, an outage while asking whether an
//! object changed, and an object rewritten mid-epoch.

use super::*;

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
    loader_at(f, server, &server.uri("reel", ""), spec, options)
}

/// A loader reading the store at `uri` (served by `server`, perhaps through a proxy),
/// retrying a failed request once.
fn loader_at(
    f: &Fixture,
    server: &S3Server,
    uri: &str,
    spec: &SampleSpec,
    options: LoaderOptions,
) -> Loader {
    let store_options = StoreOptions {
        retries: Some(1),
        ..server.options()
    };
    let sources = Sources::open_store(uri, &store_options, None).expect("sources");
    let manifest = Manifest::open(&f.manifest).expect("manifest");
    Loader::new(manifest, spec, sources, options).expect("loader")
}

/// Takes the epoch's batches into `delivered` until one fails, which must be an outage
/// (transient or the environment's), not the end of the epoch.
fn until_outage(batches: &mut reel_loader::Batches, delivered: &mut Vec<Batch>) {
    let outage = loop {
        match batches.next() {
            Some(Ok(batch)) => delivered.push(batch),
            Some(Err(e)) => break e,
            None => panic!("the epoch ended with the store down"),
        }
    };
    assert!(
        matches!(outage.kind(), ErrorKind::Transient | ErrorKind::Environment),
        "{outage} is {:?}",
        outage.kind()
    );
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
    until_outage(&mut batches, &mut delivered);
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

/// The store served garbled bytes of an episode that had read well, then went down: the
/// loader asks whether the object was replaced, and the store cannot answer. That is an
/// outage (the batch fails, nothing is skipped), not a damaged episode, and the run
/// resumed once the store is back delivers exactly the rest.
#[test]
fn an_outage_while_asking_whether_an_object_changed_is_not_damage() {
    let spec = spec();
    let f = fixture(1, 3.0, spec.sampling_rule());
    let server = served(&f);
    let proxy = CloudProxy::start(server.port(), f64::INFINITY, Duration::ZERO).expect("proxy");
    let through_proxy = format!(
        "s3://reel/?endpoint=http://127.0.0.1:{}&region=us-east-1",
        proxy.port()
    );
    // One sample a batch: a sample skipped would be a batch passed over, and lost.
    let options = LoaderOptions {
        batch_size: 1,
        workers: 1,
        prefetch: 1,
        gop_cache: 1,
        seed: 2,
        shuffle: Shuffle::Global,
        max_skipped: 1.0,
        ..LoaderOptions::default()
    };
    let uninterrupted = samples(&all_batches(
        &s3_loader(&f, &server, &spec, options.clone()),
        0,
    ));
    let loader = loader_at(&f, &server, &through_proxy, &spec, options.clone());
    let mut batches = loader.epoch(0).expect("epoch");
    let mut delivered: Vec<Batch> = batches
        .by_ref()
        .take(2)
        .map(|b| b.expect("batch"))
        .collect();
    proxy.garble_once_then_fail();
    until_outage(&mut batches, &mut delivered);
    assert!(proxy.failed_requests() > 0, "the store went down");
    let reported: Vec<_> = delivered
        .iter()
        .flat_map(|b| &b.skipped)
        .chain(batches.skipped_after_last_batch())
        .collect();
    assert!(
        reported.is_empty(),
        "an outage skipped samples: {reported:?}"
    );
    assert_eq!(batches.stats().skipped, 0);
    let state = batches.state();
    drop(batches);
    drop(loader);

    proxy.heal();
    let rest: Vec<Batch> = loader_at(&f, &server, &through_proxy, &spec, options)
        .resume(state)
        .expect("resumes")
        .map(|b| b.expect("batch"))
        .collect();
    assert!(rest.iter().all(|b| b.skipped.is_empty()));
    delivered.extend(rest);
    assert_eq!(samples(&delivered), uninterrupted, "every sample once");
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
