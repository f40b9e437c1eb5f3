//! Weighted mixtures of manifests over real episodes, each source in its own store.

use std::collections::HashMap;

use reel_cache::CacheConfig;
use reel_loader::{MixtureEntry, open_loader};

use super::*;

/// (source, row, anchor) of every sample of the batches, in order.
fn sourced(batches: &[Batch]) -> Vec<(i64, i64, i64)> {
    batches
        .iter()
        .flat_map(|b| {
            let column = |name: &str| b.get(name).and_then(|t| t.as_i64()).expect(name).to_vec();
            let (sources, rows, anchors) =
                (column("source"), column("episode_row"), column("anchor_ns"));
            (0..sources.len())
                .map(|i| (sources[i], rows[i], anchors[i]))
                .collect::<Vec<_>>()
        })
        .collect()
}

fn entry(f: &Fixture, weight: f64) -> MixtureEntry {
    MixtureEntry {
        manifest: f.manifest.to_string_lossy().into_owned(),
        weight,
        store: None,
    }
}

fn synth(seed: u64, seconds: f64, width: u32, height: u32) -> SynthConfig {
    SynthConfig {
        seed,
        seconds,
        cameras: 2,
        width,
        height,
        ..SynthConfig::default()
    }
}

#[test]
fn a_mixture_delivers_each_source_s_share_from_its_own_store() {
    let spec = spec();
    let rule = spec.sampling_rule();
    let (a, b) = (
        fixture_of(synth(5, 3.0, 64, 48), 2, rule),
        fixture_of(synth(9, 4.0, 64, 48), 3, rule),
    );
    let options = LoaderOptions {
        batch_size: 7,
        seed: 2,
        ..LoaderOptions::default()
    };
    let mix = [entry(&a, 0.7), entry(&b, 0.3)];
    let loader = open_loader(&mix, &spec, None, options.clone()).expect("mixture");
    let sizes: Vec<u64> = [&a, &b]
        .iter()
        .map(|f| loader_of(f, &f.manifest, &spec, options.clone()).total_samples())
        .collect();
    assert_eq!(loader.num_sources(), 2);
    assert_eq!(loader.total_samples(), sizes[0] + sizes[1]);
    let (share_a, share_b) = (
        loader.source_share(0).expect("a"),
        loader.source_share(1).expect("b"),
    );
    assert_eq!((share_a.1, share_b.1), (sizes[0], sizes[1]));
    assert_eq!(share_a.0 + share_b.0, loader.total_samples());
    let expected_a = (0.7 * loader.total_samples() as f64).round() as u64;
    assert!(
        share_a.0.abs_diff(expected_a) <= 1,
        "{share_a:?} of {}",
        loader.total_samples()
    );

    for epoch in 0..2 {
        let batches = all_batches(&loader, epoch);
        assert!(batches.iter().all(|b| b.skipped.is_empty()));
        let got = sourced(&batches);
        let from_a = got.iter().filter(|s| s.0 == 0).count() as u64;
        assert_eq!(from_a, share_a.0, "epoch {epoch}: source 0 fills its share");
        assert_eq!(got.len() as u64 - from_a, share_b.0);
        // Each sample is a sample of its own source's manifest: the row is that
        // manifest's, the anchor inside that episode, the frame at the anchor present.
        let manifests = [&a, &b].map(|f| Manifest::open(&f.manifest).expect("manifest"));
        for &(source, row, anchor) in &got {
            let episode = manifests[source as usize]
                .episode(row as usize)
                .expect("a row of its source");
            assert!((episode.start_ns()..=episode.end_ns()).contains(&anchor));
        }
        for batch in &batches {
            let mask = batch.get("high.mask").expect("mask");
            let mask = match &mask.data {
                reel_loader::TensorData::U8(m) => m.to_vec(),
                other => panic!("mask is u8, not {other:?}"),
            };
            // Offsets [-0.5 s, 0]: the frame at the anchor is always inside the episode.
            assert!(mask.chunks(2).all(|m| m[1] == 1));
        }
        // Two ranks deliver the same samples between them, none twice.
        let halves: Vec<(i64, i64, i64)> = (0..2)
            .flat_map(|rank| {
                let sharded = open_loader(
                    &mix,
                    &spec,
                    None,
                    LoaderOptions {
                        rank,
                        world: 2,
                        ..options.clone()
                    },
                )
                .expect("rank");
                sourced(&all_batches(&sharded, epoch))
            })
            .collect();
        let count = |samples: &[(i64, i64, i64)]| {
            let mut n: HashMap<(i64, i64, i64), usize> = HashMap::new();
            for &s in samples {
                *n.entry(s).or_default() += 1;
            }
            n
        };
        assert_eq!(count(&halves), count(&got), "epoch {epoch}");
    }

    // Other weights are another run: a state of this one is refused, naming the
    // manifest field, which lists each source's content and weight.
    let saved = loader.saved_state(LoaderState::at(0, 3));
    assert!(
        saved.run.manifest.starts_with("mixture(xxh3_128:"),
        "{}",
        saved.run.manifest
    );
    let reweighted = open_loader(
        &[entry(&a, 0.5), entry(&b, 0.5)],
        &spec,
        None,
        options.clone(),
    )
    .expect("mixture");
    let err = reweighted
        .restore(std::slice::from_ref(&saved), ResumeCheck::SameRun)
        .expect_err("other weights");
    assert!(
        matches!(
            err,
            LoaderError::OtherRun {
                what: "manifest",
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(
        loader
            .restore(&[saved], ResumeCheck::SameRun)
            .expect("same run"),
        LoaderState::at(0, 3)
    );
    // The episode behind a batch's (source, episode_row).
    let episode = loader.open_episode(1, 2).expect("row 2 of source 1");
    let id = Manifest::open(&b.manifest)
        .expect("manifest")
        .episode(2)
        .expect("row")
        .episode_id()
        .expect("id")
        .to_string();
    assert_eq!(
        episode
            .metadata()
            .get("episode")
            .and_then(|e| e.get("episode_id")),
        Some(&id)
    );
}

#[test]
fn sources_that_cannot_share_a_batch_are_refused_by_name() {
    let spec = spec();
    let rule = spec.sampling_rule();
    let (a, small) = (
        fixture_of(synth(5, 3.0, 64, 48), 1, rule),
        fixture_of(synth(6, 3.0, 32, 24), 1, rule),
    );
    let err = open_loader(
        &[entry(&a, 1.0), entry(&small, 1.0)],
        &spec,
        None,
        LoaderOptions::default(),
    )
    .expect_err("other frame sizes");
    let message = err.to_string();
    assert!(matches!(err, LoaderError::Mixture { .. }), "{message}");
    assert!(
        message.contains("source 1") && message.contains("64x48 against 32x24"),
        "{message}"
    );
    // One cache serves one store.
    let cache_dir = tempfile::tempdir().expect("tempdir");
    let err = open_loader(
        &[entry(&a, 1.0), entry(&a, 1.0), entry(&small, 1.0)],
        &spec,
        Some(CacheConfig::new(cache_dir.path(), 1 << 30)),
        LoaderOptions::default(),
    )
    .expect_err("two stores behind one cache");
    assert!(
        err.to_string().contains("a block cache serves one store"),
        "{err}"
    );
}
