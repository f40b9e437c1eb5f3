//! Selections (format version 3): positions in base manifests read as the manifest
//! holding those rows would, from a folder and from an object store; bases that are
//! missing, rewritten or short, and positions outside them or picked twice, refused.

use std::path::Path;

use reel_manifest::{
    BaseRef, Manifest, ManifestError, ManifestMeta, ManifestRow, ManifestWriter, Picks,
    SamplingRule, UriTemplate, open_uri_with, write_selection,
};

const RULE: SamplingRule = SamplingRule {
    period_ns: 100_000_000,
    before_ns: 200_000_000,
    after_ns: 300_000_000,
};

/// A self-contained manifest of `n` episodes named `{prefix}-i`, some too short for a
/// sample, in record batches of 7 rows.
fn write_base(path: &Path, prefix: &str, n: usize) -> Manifest {
    let ids: Vec<String> = (0..n).map(|i| format!("{prefix}-{i:04}")).collect();
    let uris: Vec<String> = ids
        .iter()
        .map(|id| format!("canonical/{id}.mcap"))
        .collect();
    let meta = ManifestMeta {
        uri_template: UriTemplate::of(&uris[0], &ids[0]),
        // The base's own rule is not the selection's: a selection samples by its own.
        ..ManifestMeta::new("compaction", "snap", SamplingRule::at_hz(1.0, 0.0, 0.0))
    };
    let mut writer = ManifestWriter::create(path, &meta)
        .expect("creates")
        .with_batch_rows(7);
    for (i, (id, uri)) in ids.iter().zip(&uris).enumerate() {
        let start = 1_000_000_000_000 + i as i64 * 9_000_000_000;
        let len = 300_000_000 + ((i * 37) % 30) as i64 * 100_000_000;
        writer
            .push(&ManifestRow {
                episode_id: id,
                uri,
                start_ns: start,
                end_ns: start + len,
                bytes: 1000 + i as u64,
                camera_frames: 90,
                state_steps: 600,
                action_steps: 150,
                digest: 7000 + i as u64,
            })
            .expect("pushes");
    }
    writer.finish().expect("finishes");
    Manifest::open(path).expect("opens")
}

/// The rows at `positions` of `bases` taken in order, written as a self-contained
/// manifest under `RULE`: what the selection must read as.
fn write_copy(path: &Path, bases: &[&Manifest], positions: &[u64]) -> Manifest {
    let all: Vec<_> = bases.iter().flat_map(|b| b.episodes()).collect();
    let mut writer = ManifestWriter::create(path, &ManifestMeta::new("q", "s", RULE))
        .expect("creates")
        .with_batch_rows(5);
    for &p in positions {
        let e = all[p as usize];
        let uri = e.uri().expect("uri");
        writer
            .push(&ManifestRow {
                episode_id: e.episode_id().expect("id"),
                uri: &uri,
                start_ns: e.start_ns(),
                end_ns: e.end_ns(),
                bytes: e.bytes(),
                camera_frames: e.camera_frames(),
                state_steps: e.state_steps(),
                action_steps: e.action_steps(),
                digest: e.digest().unwrap_or(0),
            })
            .expect("pushes");
    }
    writer.finish().expect("finishes");
    Manifest::open(path).expect("opens")
}

fn select(path: &Path, bases: &[(&Manifest, &str)], positions: &[u64]) -> (usize, u64) {
    let all: Vec<_> = bases.iter().flat_map(|(b, _)| b.episodes()).collect();
    let starts: Vec<i64> = positions
        .iter()
        .map(|&p| all[p as usize].start_ns())
        .collect();
    let ends: Vec<i64> = positions
        .iter()
        .map(|&p| all[p as usize].end_ns())
        .collect();
    let refs: Vec<BaseRef> = bases
        .iter()
        .map(|(b, location)| BaseRef::to(b, *location))
        .collect();
    write_selection(
        path,
        &ManifestMeta::new("q", "s", RULE),
        &refs,
        Picks {
            positions,
            start_ns: &starts,
            end_ns: &ends,
        },
    )
    .expect("writes the selection")
}

/// Every row and every sample of `a` and `b` agree.
fn assert_same(a: &Manifest, b: &Manifest) {
    assert_eq!(a.len(), b.len());
    assert_eq!(a.num_samples(), b.num_samples());
    for (x, y) in a.episodes().zip(b.episodes()) {
        assert_eq!(x.row(), y.row());
        assert_eq!(x.episode_id().expect("id"), y.episode_id().expect("id"));
        assert_eq!(x.uri().expect("uri"), y.uri().expect("uri"));
        assert_eq!(
            (x.start_ns(), x.end_ns(), x.bytes(), x.digest()),
            (y.start_ns(), y.end_ns(), y.bytes(), y.digest())
        );
        assert_eq!(
            (x.camera_frames(), x.state_steps(), x.action_steps()),
            (y.camera_frames(), y.state_steps(), y.action_steps())
        );
        assert_eq!(
            (x.num_samples(), x.sample_offset()),
            (y.num_samples(), y.sample_offset())
        );
    }
    for i in 0..a.num_samples() {
        let (s, t) = (a.sample(i).expect("sample"), b.sample(i).expect("sample"));
        assert_eq!(
            (s.episode.row(), s.local_index, s.time_ns),
            (t.episode.row(), t.local_index, t.time_ns),
            "sample {i}"
        );
    }
    assert!(a.sample(a.num_samples()).is_err());
    assert_eq!(a.total_bytes(), b.total_bytes());
}

#[test]
fn a_selection_reads_as_the_manifest_of_the_rows_it_picks_across_two_bases() {
    let dir = tempfile::tempdir().expect("tempdir");
    let compacted = write_base(&dir.path().join("compacted.arrow"), "ep", 40);
    let newer = write_base(&dir.path().join("newer.arrow"), "new", 9);
    // Out of order, across both bases and their batches, with short episodes among them.
    let positions: Vec<u64> = vec![3, 0, 39, 7, 8, 13, 14, 40, 48, 21, 1, 44, 35, 6];
    let written = select(
        &dir.path().join("sel.arrow"),
        // One base by absolute path, one by a name beside the selection.
        &[
            (
                &compacted,
                dir.path().join("compacted.arrow").to_str().expect("utf-8"),
            ),
            (&newer, "newer.arrow"),
        ],
        &positions,
    );
    let selection = Manifest::open(dir.path().join("sel.arrow")).expect("opens");
    assert!(selection.is_selection());
    assert_eq!(selection.bases().count(), 2);
    let copy = write_copy(
        &dir.path().join("copy.arrow"),
        &[&compacted, &newer],
        &positions,
    );
    assert!(!copy.is_selection());
    assert_eq!(written, (copy.len(), copy.num_samples()));
    assert!(selection.num_samples() > 0);
    assert_same(&selection, &copy);
    // Shards cover it the same way.
    let shard = selection.shard(1, 3).expect("shard");
    assert_eq!(shard.range(), copy.shard(1, 3).expect("shard").range());

    // Moved together, the selection still finds the base named beside it.
    let moved = tempfile::tempdir().expect("tempdir");
    for name in ["sel.arrow", "newer.arrow"] {
        std::fs::copy(dir.path().join(name), moved.path().join(name)).expect("copies");
    }
    let again = Manifest::open(moved.path().join("sel.arrow")).expect("opens moved");
    assert_eq!(again.content_hash(), selection.content_hash());
    assert_same(&again, &copy);
}

#[test]
fn an_empty_selection_opens_with_no_samples() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = write_base(&dir.path().join("b.arrow"), "ep", 5);
    assert_eq!(
        select(&dir.path().join("s.arrow"), &[(&base, "b.arrow")], &[]),
        (0, 0)
    );
    let s = Manifest::open(dir.path().join("s.arrow")).expect("opens");
    assert_eq!((s.len(), s.num_samples()), (0, 0));
    assert!(s.sample(0).is_err());
}

#[test]
fn positions_outside_the_bases_or_picked_twice_are_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = write_base(&dir.path().join("b.arrow"), "ep", 10);
    let refs = [BaseRef::to(&base, "b.arrow")];
    let meta = ManifestMeta::new("q", "s", RULE);
    let times = [0i64; 3];
    for (positions, needle) in [
        (&[1u64, 10, 2][..], "outside"),
        (&[4u64, 2, 4][..], "picked twice (first at row 0)"),
    ] {
        let out = dir.path().join("bad.arrow");
        let picks = Picks {
            positions,
            start_ns: &times,
            end_ns: &times,
        };
        let err = write_selection(&out, &meta, &refs, picks).expect_err("refused");
        assert!(
            matches!(err, ManifestError::InvalidRow { .. }) && err.to_string().contains(needle),
            "{err}"
        );
        assert!(!out.exists());
    }
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .expect("lists")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(names.len(), 1, "no temporary left: {names:?}");
}

/// A selection written by another tool (here arrow-rs's own IPC writer) that repeats a
/// position, in one record batch or across two, is refused when it opens: the rule holds
/// where the data is read, not only where Reel writes it.
#[test]
fn a_selection_written_elsewhere_that_repeats_a_position_is_refused_on_open() {
    use std::sync::Arc;

    use arrow_array::{Array, RecordBatch, UInt64Array};

    let dir = tempfile::tempdir().expect("tempdir");
    let base = write_base(&dir.path().join("b.arrow"), "ep", 12);
    let sel = dir.path().join("s.arrow");
    select(&sel, &[(&base, "b.arrow")], &[3, 5, 8]);
    let file = std::fs::File::open(&sel).expect("opens");
    let reader = arrow_ipc::reader::FileReader::try_new(file, None).expect("arrow reads it");
    let schema = reader.schema();
    let batches: Vec<RecordBatch> = reader.map(|b| b.expect("batch")).collect();
    let [batch] = batches.as_slice() else {
        panic!("one record batch")
    };
    let column = |name: &str| schema.index_of(name).expect("column");
    let rows = column("row");
    let edited = |values: &[u64]| {
        let mut columns: Vec<Arc<dyn Array>> = batch.columns().to_vec();
        columns[rows] = Arc::new(UInt64Array::from(values.to_vec()));
        RecordBatch::try_new(schema.clone(), columns).expect("batch")
    };
    for (name, written) in [
        ("one-batch.arrow", vec![edited(&[3, 5, 3])]),
        (
            "two-batches.arrow",
            vec![edited(&[3, 5, 8]), edited(&[9, 8, 11])],
        ),
    ] {
        let path = dir.path().join(name);
        let out = std::fs::File::create(&path).expect("creates");
        let mut writer = arrow_ipc::writer::FileWriter::try_new(out, &schema).expect("writer");
        for batch in &written {
            writer.write(batch).expect("writes");
        }
        writer.finish().expect("finishes");
        let err = Manifest::open(&path).expect_err("a repeated position is refused");
        assert!(
            matches!(err, ManifestError::Corrupt { .. })
                && err.to_string().contains("picked twice")
                && err.to_string().contains(name),
            "{name}: {err}"
        );
    }
}

#[test]
fn a_base_named_by_a_relative_path_with_a_folder_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = write_base(&dir.path().join("b.arrow"), "ep", 4);
    let meta = ManifestMeta::new("q", "s", RULE);
    let times = [0i64];
    for location in [
        "../b.arrow",
        "sub/b.arrow",
        ".b.arrow",
        "b.parquet",
        "file://../b.arrow",
        "http://example.com/b.arrow",
    ] {
        let picks = Picks {
            positions: &[0],
            start_ns: &times,
            end_ns: &times,
        };
        let refs = [BaseRef::to(&base, location)];
        let err =
            write_selection(dir.path().join("s.arrow"), &meta, &refs, picks).expect_err("refused");
        assert!(
            err.to_string().contains("base location"),
            "{location}: {err}"
        );
    }
    // Written by hand past the writer's check, it is refused on open.
    std::fs::copy(dir.path().join("b.arrow"), dir.path().join("abcd.arrow")).expect("copies");
    std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
    std::fs::copy(
        dir.path().join("b.arrow"),
        dir.path().join("sub/abcd.arrow"),
    )
    .expect("copies");
    select(
        &dir.path().join("sub/s.arrow"),
        &[(&base, "abcd.arrow")],
        &[0],
    );
    assert!(Manifest::open(dir.path().join("sub/s.arrow")).is_ok());
    let bytes = std::fs::read(dir.path().join("sub/s.arrow")).expect("reads");
    let hostile = replace_all(&bytes, b" abcd.arrow", b" ../x.arrow");
    std::fs::write(dir.path().join("sub/h.arrow"), hostile).expect("writes");
    let err = Manifest::open(dir.path().join("sub/h.arrow")).expect_err("refused");
    assert!(
        matches!(err, ManifestError::Corrupt { .. }) && err.to_string().contains("../x.arrow"),
        "{err}"
    );
}

/// `bytes` with every occurrence of `from` replaced by `to` (of the same length).
fn replace_all(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    assert_eq!(from.len(), to.len());
    let mut out = bytes.to_vec();
    let mut found = 0;
    let mut i = 0;
    while i + from.len() <= out.len() {
        if &out[i..i + from.len()] == from {
            out[i..i + from.len()].copy_from_slice(to);
            found += 1;
            i += from.len();
        } else {
            i += 1;
        }
    }
    assert!(found > 0, "occurs");
    out
}

#[test]
fn a_missing_rewritten_or_short_base_is_named_when_the_selection_opens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = write_base(&dir.path().join("b.arrow"), "ep", 12);
    let sel = dir.path().join("s.arrow");
    select(&sel, &[(&base, "b.arrow")], &[11, 2, 5]);
    drop(base);

    // Rewritten with other rows under the same name.
    write_base(&dir.path().join("b.arrow"), "other", 12);
    let err = Manifest::open(&sel).expect_err("rewritten base");
    assert!(matches!(err, ManifestError::Base { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("s.arrow") && text.contains("b.arrow") && text.contains("rewritten"),
        "{text}"
    );
    assert_eq!(reel_io::Kinded::kind(&err), reel_io::ErrorKind::BadInput);

    // Shorter than named.
    write_base(&dir.path().join("b.arrow"), "ep", 11);
    let err = Manifest::open(&sel).expect_err("short base");
    assert!(
        err.to_string()
            .contains("has 11 rows, the selection names 12"),
        "{err}"
    );

    // Gone.
    std::fs::remove_file(dir.path().join("b.arrow")).expect("removes");
    let err = Manifest::open(&sel).expect_err("missing base");
    assert!(
        matches!(err, ManifestError::BaseGone { ref base, .. } if base == "b.arrow"),
        "{err:?}"
    );
    assert!(err.to_string().contains("retention"), "{err}");
    assert_eq!(reel_io::Kinded::kind(&err), reel_io::ErrorKind::Environment);

    // A selection naming itself, or another selection, as its base is refused at the
    // base, before any of that one's bases is opened.
    let base = write_base(&dir.path().join("b.arrow"), "ep", 12);
    let own = BaseRef {
        location: "self.arrow".into(),
        content_hash: base.content_hash().to_string(),
        rows: 12,
    };
    let picks = Picks {
        positions: &[0],
        start_ns: &[0],
        end_ns: &[0],
    };
    let meta = ManifestMeta::new("q", "s", RULE);
    write_selection(dir.path().join("self.arrow"), &meta, &[own], picks).expect("writes");
    let err = Manifest::open(dir.path().join("self.arrow")).expect_err("names itself");
    assert!(err.to_string().contains("is itself a selection"), "{err}");

    // A selection cannot be a base.
    let base = write_base(&dir.path().join("b.arrow"), "ep", 12);
    select(&sel, &[(&base, "b.arrow")], &[1]);
    let inner = Manifest::open(&sel).expect("opens");
    select(&dir.path().join("s2.arrow"), &[(&inner, "s.arrow")], &[0]);
    let err = Manifest::open(dir.path().join("s2.arrow")).expect_err("selection as base");
    assert!(err.to_string().contains("is itself a selection"), "{err}");
}

#[test]
fn a_selection_in_an_object_store_fetches_its_bases_once_per_node() {
    let dir = tempfile::tempdir().expect("tempdir");
    let compacted = write_base(&dir.path().join("compacted.arrow"), "ep", 30);
    let newer = write_base(&dir.path().join("newer.arrow"), "new", 4);
    let server = reel_io::test_support::S3Server::start("reel").expect("s3s-fs");
    let upload = |prefix: &str, key: &str, file: &str| {
        let bytes = std::fs::read(dir.path().join(file)).expect("reads");
        server
            .store("reel", prefix)
            .expect("store")
            .write_atomic(key, bytes)
            .expect("uploads");
    };
    upload(
        "warehouse",
        "compacted/c-1/episodes.arrow",
        "compacted.arrow",
    );
    // The base in the warehouse by its object URI (store URIs carry no credentials),
    // the newer rows beside the selection.
    let base_location = server.uri("reel", "warehouse/compacted/c-1/episodes.arrow");
    let positions = [29u64, 0, 31, 5, 33];
    select(
        &dir.path().join("sel.arrow"),
        &[(&compacted, &base_location), (&newer, "sel.newer.arrow")],
        &positions,
    );
    upload("runs", "sel.arrow", "sel.arrow");
    upload("runs", "sel.newer.arrow", "newer.arrow");
    let copy = write_copy(
        &dir.path().join("copy.arrow"),
        &[&compacted, &newer],
        &positions,
    );

    let node = tempfile::tempdir().expect("tempdir");
    let uri = server.uri("reel", "runs/sel.arrow");
    let fetched = open_uri_with(&uri, node.path(), &server.options()).expect("fetches");
    assert_same(&fetched, &copy);
    // The selection and its two bases, each copied once to the node.
    let copies = || std::fs::read_dir(node.path()).expect("lists").count();
    assert_eq!(copies(), 3);
    let again = open_uri_with(&uri, node.path(), &server.options()).expect("maps again");
    assert_same(&again, &copy);
    assert_eq!(copies(), 3, "nothing downloaded twice");
}
