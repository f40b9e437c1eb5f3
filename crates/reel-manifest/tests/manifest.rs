//! Manifest round trips, sample mapping at every boundary, shards, bad files
//! and fetch-once.

use std::path::Path;
use std::time::Duration;

use reel_manifest::{
    Manifest, ManifestError, ManifestMeta, ManifestNumbers, ManifestRow, ManifestWriter,
    SamplingRule, fetch_once, open_uri, open_uri_with, write_manifest,
};

const RULE: SamplingRule = SamplingRule {
    period_ns: 100_000_000,
    before_ns: 200_000_000,
    after_ns: 300_000_000,
};

/// Episodes of varied lengths, some too short to yield any sample.
fn owned_rows(n: usize) -> Vec<(String, String, i64, i64)> {
    (0..n)
        .map(|i| {
            let start = 1_000_000_000_000 + i as i64 * 7_000_000_000;
            // 0.3 s .. 3.2 s: below 0.5 s no sample fits.
            let len =
                300_000_000 + ((i * 37) % 30) as i64 * 100_000_000 + (i % 3) as i64 * 1_234_567;
            (
                format!("ep-{i:05}"),
                format!("canonical/ep-{i:05}.mcap"),
                start,
                start + len,
            )
        })
        .collect()
}

fn write(path: &Path, rows: &[(String, String, i64, i64)], batch_rows: usize) -> u64 {
    let meta = ManifestMeta::new("SELECT * FROM episodes WHERE success", "snap-42", RULE);
    let mut writer = ManifestWriter::create(path, &meta)
        .expect("creates")
        .with_batch_rows(batch_rows);
    push_rows(&mut writer, rows);
    writer.finish().expect("finishes").1
}

/// Pushes `rows` one by one; row `i` is `bytes` 1000 + i.
fn push_rows(writer: &mut ManifestWriter, rows: &[(String, String, i64, i64)]) {
    for (i, (id, uri, start, end)) in rows.iter().enumerate() {
        writer
            .push(&ManifestRow {
                episode_id: id,
                uri,
                start_ns: *start,
                end_ns: *end,
                bytes: 1000 + i as u64,
                camera_frames: 90,
                state_steps: 600,
                action_steps: 150,
                digest: 7000 + i as u64,
            })
            .expect("pushes");
    }
}

/// The mapping every sample must follow, computed independently.
fn expected_samples(rows: &[(String, String, i64, i64)]) -> Vec<(usize, i64)> {
    let mut out = Vec::new();
    for (row, (_, _, start, end)) in rows.iter().enumerate() {
        let mut t = start + RULE.before_ns as i64;
        while t + RULE.after_ns as i64 <= *end {
            out.push((row, t));
            t += RULE.period_ns as i64;
        }
    }
    out
}

#[test]
fn every_sample_maps_exactly_across_batches() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("m.arrow");
    let rows = owned_rows(50);
    let total = write(&path, &rows, 7);
    let manifest = Manifest::open(&path).expect("opens");
    let expected = expected_samples(&rows);
    assert_eq!(total, expected.len() as u64);
    assert_eq!(manifest.num_samples(), expected.len() as u64);
    assert_eq!(manifest.len(), 50);
    assert!(
        rows.iter().any(|(_, _, s, e)| e - s < 500_000_000),
        "some episodes have no sample"
    );
    for (index, (row, time)) in expected.iter().enumerate() {
        let sample = manifest.sample(index as u64).expect("in range");
        assert_eq!(sample.episode.row(), *row, "sample {index}");
        assert_eq!(sample.time_ns, *time, "sample {index}");
        assert_eq!(sample.episode.episode_id().expect("utf-8"), rows[*row].0);
        assert!(sample.time_ns - RULE.before_ns as i64 >= sample.episode.start_ns());
        assert!(sample.time_ns + RULE.after_ns as i64 <= sample.episode.end_ns());
    }
    let err = manifest
        .sample(expected.len() as u64)
        .expect_err("past the end");
    assert!(
        matches!(err, ManifestError::SampleOutOfRange { .. }),
        "{err}"
    );

    // Rows read back exactly, in order.
    for (episode, (id, uri, start, end)) in manifest.episodes().zip(&rows) {
        assert_eq!(episode.episode_id().expect("utf-8"), id);
        assert_eq!(episode.uri().expect("utf-8"), uri.as_str());
        assert_eq!((episode.start_ns(), episode.end_ns()), (*start, *end));
        assert_eq!(episode.bytes(), 1000 + episode.row() as u64);
        assert_eq!(
            manifest
                .episode(episode.row())
                .expect("row")
                .sample_offset(),
            episode.sample_offset()
        );
    }
    assert_eq!(manifest.meta().warehouse_snapshot, "snap-42");
    assert_eq!(manifest.meta().sampling, RULE);
    assert_eq!(
        manifest.total_bytes(),
        (0..50).map(|i| 1000 + i).sum::<u64>()
    );
}

/// The identity a loader state records: the same for a copy under another name,
/// different for other rows, and the hash of the bytes the footer follows.
#[test]
fn a_manifest_names_the_hash_of_its_content() {
    let dir = tempfile::tempdir().expect("manifest test");
    let rows = owned_rows(300);
    let a = dir.path().join("a.arrow");
    write(&a, &rows, 64);
    let copy = dir.path().join("elsewhere/b.arrow");
    std::fs::create_dir_all(copy.parent().expect("manifest test")).expect("manifest test");
    std::fs::copy(&a, &copy).expect("manifest test");
    let other = dir.path().join("other.arrow");
    write(&other, &rows[..299], 64);

    let hash = Manifest::open(&a)
        .expect("manifest test")
        .content_hash()
        .to_string();
    assert!(
        hash.starts_with("xxh3_128:") && hash.len() == 9 + 32,
        "{hash}"
    );
    assert_eq!(
        Manifest::open(&copy).expect("manifest test").content_hash(),
        hash
    );
    assert_ne!(
        Manifest::open(&other)
            .expect("manifest test")
            .content_hash(),
        hash
    );

    // The footer is last (its length and the magic close the file); before it, the
    // 8-byte end-of-stream marker; before that, the bytes hashed.
    let bytes = std::fs::read(&a).expect("manifest test");
    let trailer = bytes.len() - 10;
    let footer_len = u32::from_le_bytes(
        bytes[trailer..trailer + 4]
            .try_into()
            .expect("manifest test"),
    ) as usize;
    let hashed = &bytes[..trailer - footer_len - 8];
    let expected = twox_hash::XxHash3_128::oneshot(hashed);
    assert_eq!(hash, format!("xxh3_128:{expected:032x}"));
}

#[test]
fn shards_are_disjoint_and_complete() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("m.arrow");
    write(&path, &owned_rows(23), 5);
    let manifest = Manifest::open(&path).expect("opens");
    for world in [1, 2, 3, 7, 8] {
        let mut seen = Vec::new();
        for rank in 0..world {
            let shard = manifest.shard(rank, world).expect("valid shard");
            for i in 0..shard.len() {
                seen.push(shard.sample(i).expect("in shard").index);
            }
            assert!(shard.sample(shard.len()).is_err());
        }
        let all: Vec<u64> = (0..manifest.num_samples()).collect();
        assert_eq!(
            seen, all,
            "world {world}: every sample exactly once, in order"
        );
    }
    assert!(manifest.shard(3, 3).is_err());
    assert!(manifest.shard(0, 0).is_err());
}

#[test]
fn empty_manifest_opens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("m.arrow");
    write_manifest(&path, &[], &ManifestMeta::new("q", "s", RULE)).expect("writes");
    let manifest = Manifest::open(&path).expect("opens");
    assert!(manifest.is_empty());
    assert_eq!(manifest.num_samples(), 0);
    assert!(manifest.sample(0).is_err());
}

#[test]
fn truncated_corrupt_and_foreign_files_give_clear_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("m.arrow");
    write(&path, &owned_rows(30), 8);
    let good = std::fs::read(&path).expect("reads");

    let cut = dir.path().join("cut.arrow");
    std::fs::write(&cut, &good[..good.len() - 100]).expect("writes");
    let err = Manifest::open(&cut).expect_err("truncated");
    assert!(err.to_string().contains("cut.arrow"), "{err}");
    assert!(matches!(err, ManifestError::NotArrow { .. }), "{err}");

    let text = dir.path().join("text.arrow");
    std::fs::write(&text, b"episode_id,uri\nep-1,a.mcap\n").expect("writes");
    let err = Manifest::open(&text).expect_err("not arrow");
    assert!(matches!(err, ManifestError::NotArrow { .. }), "{err}");

    // Flip bytes across the body: whatever breaks must be an error, never a panic.
    for offset in (8..good.len() - 16).step_by(11) {
        let mut bad = good.clone();
        for b in &mut bad[offset..offset + 8] {
            *b ^= 0xa5;
        }
        let p = dir.path().join("flip.arrow");
        std::fs::write(&p, &bad).expect("writes");
        if let Ok(m) = Manifest::open(&p) {
            for e in m.episodes() {
                let _ = (e.episode_id(), e.uri());
            }
            for i in 0..m.num_samples().min(500) {
                let _ = m.sample(i);
            }
        }
    }

    let missing = Manifest::open(dir.path().join("absent.arrow")).expect_err("missing");
    assert!(missing.to_string().contains("absent.arrow"), "{missing}");
}

#[test]
fn wrong_schema_version_is_rejected() {
    use arrow_array::{ArrayRef, Int64Array, RecordBatch};
    use std::sync::Arc;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("old.arrow");
    let schema = arrow_schema::Schema::new(vec![arrow_schema::Field::new(
        "start_ns",
        arrow_schema::DataType::Int64,
        false,
    )])
    .with_metadata(std::collections::HashMap::from([(
        "reel.manifest.version".to_string(),
        "0".to_string(),
    )]));
    let batch = RecordBatch::try_new(
        Arc::new(schema.clone()),
        vec![Arc::new(Int64Array::from(vec![1])) as ArrayRef],
    )
    .expect("batch");
    let mut w = arrow_ipc::writer::FileWriter::try_new(
        std::fs::File::create(&path).expect("creates"),
        &schema,
    )
    .expect("writer");
    w.write(&batch).expect("writes");
    w.finish().expect("finishes");
    let err = Manifest::open(&path).expect_err("old version");
    assert!(matches!(err, ManifestError::Version { .. }), "{err}");
    assert!(err.to_string().contains("version"), "{err}");
}

#[test]
fn invalid_rows_are_refused_and_leave_nothing_behind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("m.arrow");
    let rows = [ManifestRow {
        episode_id: "ep",
        uri: "x",
        start_ns: 10,
        end_ns: 5,
        ..Default::default()
    }];
    let err = write_manifest(&path, &rows, &ManifestMeta::new("q", "s", RULE))
        .expect_err("end before start");
    assert!(err.to_string().contains("before start"), "{err}");
    assert_eq!(
        std::fs::read_dir(dir.path()).expect("lists").count(),
        0,
        "no file, no temporary left"
    );
}

/// Writes `rows` with a few pushed one by one, then the rest column by column.
fn write_columns(path: &Path, rows: &[(String, String, i64, i64)], batch_rows: usize) -> u64 {
    let meta = ManifestMeta::new("SELECT * FROM episodes WHERE success", "snap-42", RULE);
    let mut writer = ManifestWriter::create(path, &meta)
        .expect("creates")
        .with_batch_rows(batch_rows);
    let (first, rest) = rows.split_at(rows.len().min(3));
    push_rows(&mut writer, first);
    let n = rest.len();
    let starts: Vec<i64> = rest.iter().map(|r| r.2).collect();
    let ends: Vec<i64> = rest.iter().map(|r| r.3).collect();
    let bytes: Vec<u64> = (first.len()..rows.len()).map(|i| 1000 + i as u64).collect();
    let (frames, states, actions) = (vec![90; n], vec![600; n], vec![150; n]);
    writer
        .push_columns(
            rest.iter().map(|r| r.0.as_str()),
            rest.iter().map(|r| r.1.as_str()),
            ManifestNumbers {
                start_ns: &starts,
                end_ns: &ends,
                bytes: &bytes,
                camera_frames: &frames,
                state_steps: &states,
                action_steps: &actions,
                digest: &[],
            },
        )
        .expect("pushes columns");
    writer.finish().expect("finishes").1
}

#[test]
fn columns_and_rows_write_the_same_manifest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rows = owned_rows(50);
    for batch_rows in [1, 7, 64] {
        let (a, b) = (dir.path().join("rows.arrow"), dir.path().join("cols.arrow"));
        let samples = write(&a, &rows, batch_rows);
        assert_eq!(write_columns(&b, &rows, batch_rows), samples);
        let (ma, mb) = (
            Manifest::open(&a).expect("opens"),
            Manifest::open(&b).expect("opens"),
        );
        assert_eq!((ma.len(), ma.num_samples()), (mb.len(), mb.num_samples()));
        for i in 0..rows.len() {
            let (x, y) = (ma.episode(i).expect("row"), mb.episode(i).expect("row"));
            assert_eq!(x.episode_id().expect("id"), y.episode_id().expect("id"));
            assert_eq!(x.uri().expect("uri"), y.uri().expect("uri"));
            assert_eq!(
                (
                    x.start_ns(),
                    x.end_ns(),
                    x.bytes(),
                    x.num_samples(),
                    x.sample_offset()
                ),
                (
                    y.start_ns(),
                    y.end_ns(),
                    y.bytes(),
                    y.num_samples(),
                    y.sample_offset()
                ),
                "row {i}, batches of {batch_rows}"
            );
        }
        for (k, &(row, t)) in expected_samples(&rows).iter().enumerate() {
            let s = mb.sample(k as u64).expect("sample");
            assert_eq!((s.episode.row(), s.time_ns), (row, t));
        }
    }
}

#[test]
fn bad_columns_are_refused_and_leave_nothing_behind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("m.arrow");
    let meta = ManifestMeta::new("q", "s", RULE);
    let (starts, ends, bytes) = ([0i64, 10], [5i64, 5], [1u64, 1]);
    let counts = [1u32, 1];
    let numbers = ManifestNumbers {
        start_ns: &starts,
        end_ns: &ends,
        bytes: &bytes,
        camera_frames: &counts,
        state_steps: &counts,
        action_steps: &counts,
        digest: &[],
    };
    let mut writer = ManifestWriter::create(&path, &meta).expect("creates");
    let err = writer
        .push_columns(["a", "b"], ["x", "y"], numbers)
        .expect_err("end before start");
    assert!(err.to_string().contains("row 1"), "{err}");
    let short = ManifestNumbers {
        end_ns: &ends[..1],
        ..numbers
    };
    let err = writer
        .push_columns(["a", "b"], ["x", "y"], short)
        .expect_err("uneven columns");
    assert!(err.to_string().contains("different lengths"), "{err}");
    let fine = ManifestNumbers {
        end_ns: &[5, 15],
        ..numbers
    };
    let err = writer
        .push_columns(["a"], ["x", "y"], fine)
        .expect_err("too few ids");
    assert!(err.to_string().contains("episode ids"), "{err}");
    drop(writer);
    assert_eq!(
        std::fs::read_dir(dir.path()).expect("lists").count(),
        0,
        "no file, no temporary left"
    );
}

#[test]
fn fetch_once_downloads_once_for_many_ranks() {
    let store_dir = tempfile::tempdir().expect("tempdir");
    let node_dir = tempfile::tempdir().expect("tempdir");
    let built = store_dir.path().join("built.arrow");
    write(&built, &owned_rows(12), 4);
    let store = reel_io::Store::open(store_dir.path().to_str().expect("utf-8")).expect("store");
    store
        .write_atomic("manifests/run.arrow", std::fs::read(&built).expect("reads"))
        .expect("uploads");
    let local = node_dir.path().join("run.arrow");
    let samples: Vec<u64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                s.spawn(|| {
                    fetch_once(
                        &store,
                        "manifests/run.arrow",
                        &local,
                        Duration::from_secs(30),
                    )
                    .expect("fetches")
                    .num_samples()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("joins"))
            .collect()
    });
    let expected = Manifest::open(&built).expect("opens").num_samples();
    assert!(samples.iter().all(|&n| n == expected));
    let leftovers: Vec<_> = std::fs::read_dir(node_dir.path())
        .expect("lists")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(
        leftovers,
        vec![std::ffi::OsString::from("run.arrow")],
        "one copy, no lock or temporary left"
    );

    let err = fetch_once(
        &store,
        "manifests/absent.arrow",
        &node_dir.path().join("b.arrow"),
        Duration::from_secs(5),
    )
    .expect_err("missing remote");
    assert!(err.to_string().contains("absent.arrow"), "{err}");
}

#[test]
fn open_uri_maps_local_paths_in_place_and_fetches_objects_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let built = dir.path().join("built.arrow");
    write(&built, &owned_rows(12), 4);
    let expected = Manifest::open(&built).expect("opens").num_samples();

    let node = tempfile::tempdir().expect("tempdir");
    let local = open_uri(built.to_str().expect("utf-8"), node.path()).expect("maps");
    assert_eq!(
        local.path(),
        built,
        "a local manifest is mapped where it is"
    );
    assert_eq!(std::fs::read_dir(node.path()).expect("lists").count(), 0);

    let server = reel_io::test_support::S3Server::start("runs").expect("s3s-fs");
    let bytes = std::fs::read(&built).expect("reads");
    server
        .store("runs", "42")
        .expect("store")
        .write_atomic("train.arrow", bytes.clone())
        .expect("uploads");
    let uri = server.uri("runs", "42/train.arrow");
    let options = server.options();
    let fetched = open_uri_with(&uri, node.path(), &options).expect("fetches");
    assert_eq!(fetched.num_samples(), expected);
    let copy = reel_manifest::local_copy(node.path(), &uri, bytes.len() as u64);
    assert_eq!(fetched.path(), copy);
    assert_eq!(std::fs::read(&copy).expect("reads"), bytes);
    // A second open maps the node's copy: the same file, not a second download.
    let inode =
        |p: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).expect("stat"));
    let first_inode = inode(&copy);
    let again = open_uri_with(&uri, node.path(), &options).expect("maps again");
    assert_eq!(again.path(), copy);
    assert_eq!(inode(&copy), first_inode, "not downloaded again");
    let leftovers = std::fs::read_dir(node.path()).expect("lists").count();
    assert_eq!(leftovers, 1, "one copy, no lock or temporary left");
    // Bad URIs and missing objects fail with the name.
    let missing = server.uri("runs", "42/absent.arrow");
    let err = open_uri_with(&missing, node.path(), &options).expect_err("missing");
    assert!(err.to_string().contains("absent.arrow"), "{err}");
}

#[test]
fn digests_are_kept_and_a_version_1_manifest_without_them_still_opens() {
    use std::sync::Arc;
    let dir = tempfile::tempdir().expect("tempdir");
    let rows = owned_rows(20);
    let (with, without) = (dir.path().join("v2.arrow"), dir.path().join("cols.arrow"));
    write(&with, &rows, 7);
    write_columns(&without, &rows, 7);
    let (m, plain) = (
        Manifest::open(&with).expect("opens"),
        Manifest::open(&without).expect("opens"),
    );
    for i in 0..rows.len() {
        assert_eq!(m.episode(i).expect("row").digest(), Some(7000 + i as u64));
        // `write_columns` pushes its first three rows one by one, with digests.
        let pushed = (i < 3).then_some(7000 + i as u64);
        assert_eq!(
            plain.episode(i).expect("row").digest(),
            pushed,
            "none given"
        );
    }
    assert_eq!(reel_manifest::digest_text(0xab), "xxh3_64:00000000000000ab");
    assert_ne!(
        reel_manifest::object_digest(b"one"),
        reel_manifest::object_digest(b"two")
    );
    assert_eq!(
        reel_manifest::object_digest(b"onetwo"),
        reel_manifest::parts_digest([&b"one"[..], &b"two"[..]])
    );

    // The same rows as format version 1 wrote them: ten columns, no digests.
    let file = std::fs::File::open(&with).expect("opens");
    let reader = arrow_ipc::reader::FileReader::try_new(file, None).expect("reader");
    let schema = reader.schema();
    let mut metadata = schema.metadata().clone();
    metadata.insert("reel.manifest.version".to_string(), "1".to_string());
    let old_schema =
        Arc::new(arrow_schema::Schema::new(schema.fields()[..10].to_vec()).with_metadata(metadata));
    let old = dir.path().join("v1.arrow");
    let mut writer = arrow_ipc::writer::FileWriter::try_new(
        std::fs::File::create(&old).expect("creates"),
        &old_schema,
    )
    .expect("writer");
    for batch in reader {
        let batch = batch.expect("batch");
        let columns = batch.columns()[..10].to_vec();
        let batch = arrow_array::RecordBatch::try_new(old_schema.clone(), columns).expect("batch");
        writer.write(&batch).expect("writes");
    }
    writer.finish().expect("finishes");
    let v1 = Manifest::open(&old).expect("a version 1 manifest opens");
    assert_eq!((v1.len(), v1.num_samples()), (m.len(), m.num_samples()));
    assert_eq!(v1.episode(3).expect("row").digest(), None);
    assert_eq!(
        v1.sample(41).expect("sample").time_ns,
        m.sample(41).expect("sample").time_ns
    );
}

#[test]
fn a_template_gives_every_row_s_path_and_a_path_off_it_is_refused() {
    use reel_manifest::UriTemplate;
    let dir = tempfile::tempdir().expect("tempdir");
    let rows = owned_rows(30);
    let template = UriTemplate::of(&rows[0].1, &rows[0].0).expect("the id is in the path");
    assert!(rows.iter().all(|(id, uri, ..)| template.matches(uri, id)));
    let meta = ManifestMeta {
        uri_template: Some(template.clone()),
        ..ManifestMeta::new("q", "s", RULE)
    };
    let (path, plain) = (dir.path().join("t.arrow"), dir.path().join("plain.arrow"));
    let mut writer = ManifestWriter::create(&path, &meta)
        .expect("creates")
        .with_batch_rows(7);
    push_rows(&mut writer, &rows);
    writer.finish().expect("finishes");
    write(&plain, &rows, 7);
    let (m, p) = (
        Manifest::open(&path).expect("opens"),
        Manifest::open(&plain).expect("opens"),
    );
    assert_eq!(m.meta().uri_template.as_ref(), Some(&template));
    for (i, (_, uri, ..)) in rows.iter().enumerate() {
        assert_eq!(m.episode(i).expect("row").uri().expect("uri"), uri.as_str());
    }
    assert_eq!(m.num_samples(), p.num_samples());
    let (small, large) = (
        std::fs::metadata(&path).expect("stat").len(),
        std::fs::metadata(&plain).expect("stat").len(),
    );
    assert!(small < large, "{small} < {large}: the paths are not stored");
    // A row whose path is not the template's is refused, naming both.
    let mut writer = ManifestWriter::create(dir.path().join("bad.arrow"), &meta).expect("creates");
    let err = writer
        .push(&ManifestRow {
            episode_id: "ep-1",
            uri: "elsewhere/ep-1.mcap",
            end_ns: 1_000_000_000,
            ..Default::default()
        })
        .expect_err("off the template");
    assert!(err.to_string().contains("does not follow"), "{err}");
    assert_eq!(
        UriTemplate::of("a/x/x.mcap", "x"),
        None,
        "the id twice is no template"
    );
}
