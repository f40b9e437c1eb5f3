//! Resuming from a saved state: the batches an uninterrupted run gives, on another world
//! size, and never from another run's state.

use super::*;

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
