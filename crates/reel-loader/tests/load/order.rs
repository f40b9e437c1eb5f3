//! The order of samples: deterministic, changed by seed and epoch, partitioned by shards,
//! and locality runs served together.

use super::*;

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
