//! A remote that is down, gone or flaky: cached blocks are still served, faults are
//! retried, and errors name the object.

use std::path::Path;
use std::time::Duration;

use opendal::layers::ChaosLayer;
use reel_cache::{BlockCache, CacheConfig};
use reel_io::ByteSource;
use reel_io::test_support::S3Server;

use crate::{BLOCK, config, local_store, pattern};

#[test]
fn remote_down_hits_are_served_and_misses_name_the_object() {
    let server = S3Server::start("landing").unwrap();
    let store = server.store("landing", "canonical").unwrap();
    let data = pattern(4 * BLOCK as usize, 11);
    store.write_atomic("ep-1.mcap", data.clone()).unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = BlockCache::for_store(config(cache_dir.path(), 1 << 30), &store).unwrap();
    cache
        .object("ep-1.mcap")
        .unwrap()
        .read_range(0..2 * BLOCK)
        .unwrap();
    drop(server);

    // Opening falls back to the recorded version; blocks 0 and 1 are still served.
    let object = cache.object("ep-1.mcap").unwrap();
    let got = object.read_range(100..2 * BLOCK).unwrap();
    assert_eq!(&got[..], &data[100..2 * BLOCK as usize]);
    let err = object.read_range(BLOCK..3 * BLOCK).unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("s3://landing/canonical/ep-1.mcap"),
        "{message}"
    );
    assert!(matches!(err, reel_io::Error::Store { .. }), "{err:?}");
    // An object the cache never saw cannot be opened, with a clear error.
    let err = cache.object("ep-2.mcap").unwrap_err();
    assert!(err.to_string().contains("ep-2.mcap"), "{err}");
    assert!(cache.metrics().get_errors > 0);
}

#[test]
fn a_local_store_gone_is_down_not_empty() {
    let remote = tempfile::tempdir().unwrap();
    let root = remote.path().join("store");
    let store = local_store(&root);
    let data = pattern(4 * BLOCK as usize, 12);
    store.write_atomic("ep-1.mcap", data.clone()).unwrap();
    store.write_atomic("ep-2.mcap", data.clone()).unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = BlockCache::for_store(config(cache_dir.path(), 1 << 30), &store).unwrap();
    let seen = cache.object("ep-1.mcap").unwrap();
    seen.read_range(0..2 * BLOCK).unwrap();

    // One object removed while its store is there: gone, whatever the cache holds.
    std::fs::remove_file(root.join("ep-2.mcap")).unwrap();
    let err = cache.object("ep-2.mcap").unwrap_err();
    assert!(
        matches!(
            err,
            reel_cache::Error::Source(reel_io::Error::NotFound { .. })
        ),
        "{err:?}"
    );

    // The whole folder gone (unmounted, removed): cached blocks are still served.
    std::fs::remove_dir_all(&root).unwrap();
    let object = cache.object("ep-1.mcap").unwrap();
    assert_eq!(
        &object.read_range(10..2 * BLOCK).unwrap()[..],
        &data[10..2 * BLOCK as usize]
    );
    let err = object.read_range(2 * BLOCK..3 * BLOCK).unwrap_err();
    assert!(err.to_string().contains("ep-1.mcap"), "{err}");

    // A reader opened after it went: the same, and the folder is not created again.
    let uri = root.to_str().unwrap();
    let reopened =
        BlockCache::for_existing_store(config(cache_dir.path(), 1 << 30), uri, &Default::default())
            .unwrap();
    assert!(reopened.store_missing());
    let object = reopened.object("ep-1.mcap").unwrap();
    assert_eq!(
        &object.read_range(0..2 * BLOCK).unwrap()[..],
        &data[..2 * BLOCK as usize]
    );
    let err = object.read_range(3 * BLOCK..4 * BLOCK).unwrap_err();
    assert!(
        err.to_string().contains(&format!("{uri}/ep-1.mcap")),
        "{err}"
    );
    let err = reopened.object("ep-3.mcap").unwrap_err();
    assert!(err.to_string().contains("ep-3.mcap"), "{err}");
    assert!(!root.exists());
    // With the folder there, the cache is an ordinary one.
    let store = local_store(&root);
    store.write_atomic("ep-1.mcap", data.clone()).unwrap();
    let present =
        BlockCache::for_existing_store(config(cache_dir.path(), 1 << 30), uri, &Default::default())
            .unwrap();
    assert!(!present.store_missing());
}

#[test]
fn faults_injected_by_the_chaos_layer_are_retried() {
    let remote = tempfile::tempdir().unwrap();
    let store = local_store(remote.path());
    let data = pattern(40 * BLOCK as usize, 13);
    store.write_atomic("a.bin", data.clone()).unwrap();
    let chaotic = store.operator().clone().layer(ChaosLayer::new(0.3));
    let cache_dir = tempfile::tempdir().unwrap();
    let mut config = config(cache_dir.path(), 1 << 30);
    config.retries = 30;
    config.retry_min_delay = Duration::from_millis(1);
    config.retry_max_delay = Duration::from_millis(2);
    let cache = BlockCache::new(config, chaotic, "chaos").unwrap();
    let object = cache.object("a.bin").unwrap();
    for b in (0..40).step_by(3) {
        let range = b * BLOCK + 7..((b + 2) * BLOCK).min(40 * BLOCK);
        let got = object.read_range(range.clone()).unwrap();
        assert_eq!(&got[..], &data[range.start as usize..range.end as usize]);
    }
    // Without retries the same faults surface as errors naming the object.
    let cache_dir = tempfile::tempdir().unwrap();
    let mut config = config_no_retry(cache_dir.path());
    config.retries = 0;
    let always = store.operator().clone().layer(ChaosLayer::new(1.0));
    let cache = BlockCache::new(config, always, "chaos").unwrap();
    let err = cache
        .object("a.bin")
        .unwrap()
        .read_range(0..10)
        .unwrap_err();
    assert!(err.to_string().contains("chaos/a.bin"), "{err}");
}

fn config_no_retry(dir: &Path) -> CacheConfig {
    let mut c = config(dir, 1 << 30);
    c.retries = 0;
    c
}
