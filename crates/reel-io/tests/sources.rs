//! Every source returns the same bytes for the same ranges, and rejects bad ranges.

#![allow(clippy::unwrap_used)] // Tests fail loudly by design.

use reel_io::test_support::S3Server;
use reel_io::{
    ByteSource, CountingSource, Error, FileSource, Kinded, MemorySource, MmapSource, Store,
    open_object, split_object_uri, write_file_atomic,
};

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 31 % 251) as u8).collect()
}

fn check_source(source: &dyn ByteSource, data: &[u8]) {
    let len = data.len() as u64;
    assert_eq!(source.len().unwrap(), len);
    for range in [0..0, 0..1, 5..4096, 1000..len, 0..len] {
        let got = source.read_range(range.clone()).unwrap();
        assert_eq!(
            &got[..],
            &data[range.start as usize..range.end as usize],
            "{range:?}"
        );
    }
    let err = source.read_range(len - 2..len + 1).unwrap_err();
    assert!(matches!(err, Error::OutOfBounds { .. }), "{err}");
    assert!(err.to_string().contains(source.name()), "{err}");
}

#[test]
fn local_sources_agree() {
    let dir = tempfile::tempdir().unwrap();
    let data = pattern(100_000);
    let path = dir.path().join("x.bin");
    write_file_atomic(&path, &data).unwrap();
    // No temporary file is left behind.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);

    check_source(&FileSource::open(&path).unwrap(), &data);
    check_source(&MmapSource::open(&path).unwrap(), &data);
    check_source(&MemorySource::new("mem", data.clone()), &data);

    let store = Store::open(dir.path().to_str().unwrap()).unwrap();
    check_source(&store.source("x.bin"), &data);
    let object = open_object(path.to_str().unwrap(), &Default::default()).unwrap();
    check_source(&object, &data);
}

#[test]
fn counting_source_counts_reads_and_bytes() {
    let data = pattern(1000);
    let source = CountingSource::new(MemorySource::new("mem", data));
    source.read_range(0..10).unwrap();
    source.read_range(100..400).unwrap();
    let _ = source.read_range(999..2000);
    assert_eq!(source.stats().reads, 2);
    assert_eq!(source.stats().bytes, 310);
    assert!(source.stats().wait_ns > 0, "time inside reads is counted");
    source.reset();
    assert_eq!(source.stats(), Default::default());
}

#[test]
fn missing_objects_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let err = FileSource::open(dir.path().join("nope.mcap")).unwrap_err();
    assert!(err.to_string().contains("nope.mcap"), "{err}");
    let store = Store::open(dir.path().to_str().unwrap()).unwrap();
    let err = store.source("nope.mcap").len().unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
    assert!(err.to_string().contains("nope.mcap"), "{err}");
}

#[test]
fn store_writes_atomically_and_lists() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().to_str().unwrap()).unwrap();
    store.write_atomic("eps/a.mcap", b"aaa".to_vec()).unwrap();
    store.write_atomic("eps/b.mcap", b"bb".to_vec()).unwrap();
    store.write_atomic("eps/a.mcap", b"AAAA".to_vec()).unwrap();
    assert_eq!(store.list("eps/").unwrap(), ["eps/a.mcap", "eps/b.mcap"]);
    assert_eq!(&store.read("eps/a.mcap").unwrap()[..], b"AAAA");
}

#[test]
fn object_uris_split_into_store_and_key() {
    let (store, key) = split_object_uri("s3://b/eps/x.mcap?endpoint=http://h:1&region=r").unwrap();
    assert_eq!(store, "s3://b/eps?endpoint=http://h:1&region=r");
    assert_eq!(key, "x.mcap");
    assert_eq!(
        split_object_uri("/data/x.mcap").unwrap(),
        ("/data".into(), "x.mcap".into())
    );
    assert_eq!(
        split_object_uri("x.mcap").unwrap(),
        (".".into(), "x.mcap".into())
    );
    assert!(split_object_uri("s3://bucket").is_err());
    // object_uri is the inverse: the key goes before the query.
    let uri = "s3://b/eps?endpoint=http://h:1&region=r";
    let object = Store::open(uri).unwrap().object_uri("x.mcap");
    assert_eq!(object, "s3://b/eps/x.mcap?endpoint=http://h:1&region=r");
    assert_eq!(
        split_object_uri(&object).unwrap(),
        (uri.into(), "x.mcap".into())
    );
    assert_eq!(
        Store::open("/data/").unwrap().object_uri("x.mcap"),
        "/data/x.mcap"
    );
    assert!(split_object_uri("/data/").is_err());
    let err = Store::open("s3://b/p?colour=blue").unwrap_err();
    assert!(matches!(err, Error::InvalidUri { .. }), "{err}");
}

#[test]
fn s3_store_serves_ranges() {
    let server = S3Server::start("landing").unwrap();
    let store = server.store("landing", "episodes").unwrap();
    let data = pattern(300_000);
    store.write_atomic("ep-0.mcap", data.clone()).unwrap();
    // The object landed under the prefix, in the server's folder.
    assert!(server.root().join("landing/episodes/ep-0.mcap").is_file());
    assert_eq!(store.list("").unwrap(), ["ep-0.mcap"]);

    let source = CountingSource::new(store.source("ep-0.mcap"));
    check_source(&source, &data);
    assert_eq!(source.stats().reads, 5);

    let uri = format!(
        "s3://landing/episodes/ep-0.mcap?endpoint=http://127.0.0.1:{}",
        server.port()
    );
    let object = open_object(&uri, &server.options()).unwrap();
    check_source(&object, &data);

    let err = store.source("missing.mcap").len().unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
}

/// Reads of an object that another writer replaced fail with `Changed`, never mixing bytes
/// of two versions; a fresh source reads the new version.
fn replaced_objects_are_never_read_torn(store: &Store) {
    let first = pattern(200_000);
    store.write_atomic("ep.mcap", first.clone()).unwrap();
    let source = store.source("ep.mcap");
    assert!(!source.has_changed().unwrap(), "nothing read yet");
    assert_eq!(&source.read_range(0..1000).unwrap()[..], &first[..1000]);
    assert!(!source.has_changed().unwrap());
    // Another writer replaces it with a shorter version.
    let second: Vec<u8> = pattern(150_000).iter().map(|b| b ^ 0x5a).collect();
    store.write_atomic("ep.mcap", second.clone()).unwrap();
    assert!(source.has_changed().unwrap());
    let err = source.read_range(140_000..160_000).unwrap_err();
    assert!(matches!(err, Error::Changed { .. }), "{err}");
    assert!(err.to_string().contains("ep.mcap"), "{err}");
    let fresh = store.source("ep.mcap");
    assert_eq!(&fresh.read_range(0..150_000).unwrap()[..], &second[..]);
}

#[test]
fn replaced_local_objects_are_never_read_torn() {
    let dir = tempfile::tempdir().unwrap();
    replaced_objects_are_never_read_torn(&Store::open(dir.path().to_str().unwrap()).unwrap());
}

#[test]
fn replaced_s3_objects_are_never_read_torn() {
    let server = S3Server::start("landing").unwrap();
    replaced_objects_are_never_read_torn(&server.store("landing", "episodes").unwrap());
}

/// A store that drops every third request: writes, lists, stats and ranged reads all
/// succeed through the retries, and the same store without retries fails.
#[test]
fn transient_store_failures_are_retried() {
    use reel_io::test_support::CloudProxy;
    let server = S3Server::start("landing").unwrap();
    let proxy = CloudProxy::flaky(server.port(), 3).unwrap();
    let uri = format!(
        "s3://landing/episodes?endpoint=http://127.0.0.1:{}&region=us-east-1",
        proxy.port()
    );
    let store = Store::open_with(&uri, &server.options()).unwrap();
    let data = pattern(100_000);
    for i in 0..4 {
        store
            .write_atomic(&format!("ep-{i}.mcap"), data.clone())
            .unwrap();
    }
    assert_eq!(store.list("").unwrap().len(), 4);
    for i in 0..4 {
        let source = store.source(&format!("ep-{i}.mcap"));
        check_source(&source, &data);
    }
    assert!(store.create_new("claim.json", b"{}".to_vec()).unwrap());
    assert!(!store.create_new("claim.json", b"{}".to_vec()).unwrap());
    assert!(
        proxy.failed_requests() >= 5,
        "only {} requests failed",
        proxy.failed_requests()
    );

    let no_retries = reel_io::StoreOptions {
        retries: Some(0),
        ..server.options()
    };
    let fragile = Store::open_with(&uri, &no_retries).unwrap();
    let outcomes: Vec<_> = (0..6)
        .map(|i| fragile.len_of(&format!("ep-{}.mcap", i % 4)))
        .collect();
    let err = outcomes
        .into_iter()
        .find_map(Result::err)
        .expect("a dropped request surfaces without retries");
    assert_eq!(err.kind(), reel_io::ErrorKind::Transient, "{err}");
}

#[test]
fn create_new_lets_exactly_one_racing_writer_claim_a_key() {
    fn race(store: &Store) {
        let created: Vec<bool> = std::thread::scope(|scope| {
            let writers: Vec<_> = (0..8u8)
                .map(|i| scope.spawn(move || store.create_new("claims/ep.json", vec![i; 64])))
                .collect();
            writers
                .into_iter()
                .map(|w| w.join().unwrap().unwrap())
                .collect()
        });
        assert_eq!(created.iter().filter(|c| **c).count(), 1, "{created:?}");
        let winner = created.iter().position(|c| *c).unwrap() as u8;
        // The object is the winner's, whole.
        assert_eq!(
            &store.read("claims/ep.json").unwrap()[..],
            &[winner; 64][..]
        );
        assert!(
            !store
                .create_new("claims/ep.json", b"late".to_vec())
                .unwrap()
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let local = Store::open(dir.path().to_str().unwrap()).unwrap();
    race(&local);
    // No temporaries left behind.
    let names: Vec<_> = std::fs::read_dir(dir.path().join("claims"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    // On S3 the PUT is conditional (`If-None-Match: *`), atomic on S3 itself; s3s-fs,
    // the test server, checks and then writes, so only the one-after-another semantics
    // are tested there.
    let server = S3Server::start("landing").unwrap();
    let s3 = server.store("landing", "episodes").unwrap();
    assert!(s3.create_new("claims/ep.json", vec![1; 64]).unwrap());
    assert!(!s3.create_new("claims/ep.json", vec![2; 64]).unwrap());
    assert_eq!(&s3.read("claims/ep.json").unwrap()[..], &[1; 64][..]);
}
