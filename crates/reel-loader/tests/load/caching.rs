//! Caches: the block cache serving the same batches, warming a spec's working set, and the
//! decoded GOPs an epoch reuses, as its stats count them.

use super::*;

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
