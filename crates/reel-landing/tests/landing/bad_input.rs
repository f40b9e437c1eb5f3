//! Bad input gives typed errors that name the file, never a panic.

use std::collections::BTreeMap;
use std::io::Cursor;

use reel_io::{Kinded, MemorySource};
use reel_landing::{PackConfig, pack_episode};
use reel_mcap::{EpisodeReader, Error};
use reel_synth::{FaultKind, FaultRates, SynthConfig, generate_episode};
use reel_video::H264Decoder;

fn canonical() -> Vec<u8> {
    let config = SynthConfig {
        seconds: 2.0,
        cameras: 2,
        width: 64,
        height: 48,
        ..SynthConfig::default()
    };
    let landing = generate_episode(&config, 1).unwrap();
    pack_episode("landing.mcap", &landing.mcap, &PackConfig::default())
        .unwrap()
        .0
}

fn open(bytes: Vec<u8>) -> reel_mcap::Result<EpisodeReader<MemorySource>> {
    EpisodeReader::open(MemorySource::new("broken.mcap", bytes))
}

#[test]
fn truncated_and_foreign_files() {
    let bytes = canonical();
    for len in [0, 10, 100, bytes.len() / 2, bytes.len() - 1] {
        let err = open(bytes[..len].to_vec()).unwrap_err();
        assert!(matches!(err, Error::Truncated { .. }), "{len}: {err}");
        assert!(err.to_string().contains("broken.mcap"), "{err}");
    }
    let err = open(b"PK\x03\x04 this is a zip file, not an MCAP at all....".to_vec()).unwrap_err();
    assert!(matches!(err, Error::Truncated { .. }), "{err}");
}

#[test]
fn bad_chunk_crc_is_reported() {
    let mut bytes = canonical();
    let reader = open(bytes.clone()).unwrap();
    let chunk = reader.summary().unwrap().chunk_indexes[0].clone();
    let group = reader.groups().keys().next().unwrap().clone();
    // Flip one byte in the middle of the first chunk's compressed records.
    let at = (chunk.compressed_data_offset().unwrap() + chunk.compressed_size / 2) as usize;
    bytes[at] ^= 0x40;
    let reader = open(bytes).unwrap();
    let err = reader.read_window(&group, 0..u64::MAX).unwrap_err();
    assert!(
        matches!(&err, Error::Corrupt { reason, .. } if reason.contains("CRC")),
        "{err}"
    );
    assert_eq!(err.kind(), reel_io::ErrorKind::BadInput, "{err}");
    assert!(err.to_string().contains("broken.mcap"), "{err}");
}

#[test]
fn missing_summary_falls_back_to_a_scan_with_a_warning() {
    // A writer with every summary record turned off, as some recorders do when killed.
    let mut writer = mcap::WriteOptions::new()
        .emit_summary_records(false)
        .emit_summary_offsets(false)
        .emit_statistics(false)
        .emit_chunk_indexes(false)
        .emit_metadata_indexes(false)
        .emit_attachment_indexes(false)
        .emit_message_indexes(false)
        .create(Cursor::new(Vec::new()))
        .unwrap();
    let meta = BTreeMap::from([("reel.group".to_owned(), "proprio".to_owned())]);
    let channel = writer
        .add_channel(0, "/joint_states", "json", &meta)
        .unwrap();
    for i in 0..100u64 {
        let header = mcap::records::MessageHeader {
            channel_id: channel,
            sequence: i as u32,
            log_time: i * 1000,
            publish_time: i * 1000,
        };
        writer.write_to_known_channel(&header, b"{}").unwrap();
    }
    writer.finish().unwrap();
    let bytes = writer.into_inner().into_inner();
    let footer = mcap::read::footer(&bytes).unwrap();
    assert_eq!(footer.summary_start, 0, "the file really has no summary");

    let reader = open(bytes).unwrap();
    assert_eq!(reader.warnings().len(), 1);
    assert!(
        reader.warnings()[0].contains("no summary"),
        "{:?}",
        reader.warnings()
    );
    let window = reader.read_window("proprio", 10_000..20_000).unwrap();
    assert_eq!(window.len(), 10);
    assert_eq!(window[0].log_time, 10_000);
}

#[test]
fn a_summary_failing_its_crc_is_not_trusted() {
    let bytes = canonical();
    let whole = open(bytes.clone()).unwrap();
    assert!(whole.warnings().is_empty(), "{:?}", whole.warnings());
    let group = whole.groups().keys().next().unwrap().clone();
    let expected = whole.read_window(&group, 0..u64::MAX).unwrap().len();
    // Flip a byte inside the summary section (past its first records).
    let footer = mcap::read::footer(&bytes).unwrap();
    let mut damaged = bytes.clone();
    damaged[footer.summary_start as usize + 20] ^= 0x01;
    let reader = open(damaged).unwrap();
    assert!(
        reader.warnings().iter().any(|w| w.contains("summary CRC")),
        "{:?}",
        reader.warnings()
    );
    assert_eq!(
        reader.read_window(&group, 0..u64::MAX).unwrap().len(),
        expected
    );
    assert_eq!(reader.metadata(), whole.metadata());

    // A wrong leading magic on a file read whole: not trusted, and the scan says what is
    // wrong. (On a large file the reader does not spend a request on the first bytes:
    // nothing it reads depends on them, and the chunk and summary CRCs cover what it does.)
    let mut writer = mcap::Writer::new(Cursor::new(Vec::new())).unwrap();
    let channel = writer
        .add_channel(0, "/joint_states", "json", &BTreeMap::new())
        .unwrap();
    let header = mcap::records::MessageHeader {
        channel_id: channel,
        sequence: 0,
        log_time: 1,
        publish_time: 1,
    };
    writer.write_to_known_channel(&header, b"{}").unwrap();
    writer.finish().unwrap();
    let mut foreign = writer.into_inner().into_inner();
    assert!(open(foreign.clone()).is_ok());
    foreign[1] = b'X';
    let err = open(foreign).unwrap_err();
    assert!(err.to_string().contains("broken.mcap"), "{err}");
}

#[test]
fn unknown_topics_and_groups_are_named() {
    let reader = open(canonical()).unwrap();
    let err = reader.read_window("lidar", 0..10).unwrap_err();
    assert!(
        matches!(err, Error::UnknownGroup { .. }) && err.to_string().contains("lidar"),
        "{err}"
    );
    let mut decoder = H264Decoder::new().unwrap();
    let err = reader
        .frames_at("/camera/nope", &[0], &mut decoder, None)
        .unwrap_err();
    assert!(
        matches!(err, Error::UnknownTopic { .. }) && err.to_string().contains("/camera/nope"),
        "{err}"
    );
}

#[test]
fn landing_topics_nothing_reads_are_kept_as_recorded_unless_skipped() {
    let mut writer = mcap::WriteOptions::new()
        .create(Cursor::new(Vec::new()))
        .unwrap();
    let strings = writer
        .add_schema("std_msgs/msg/String", "ros2msg", b"string data\n")
        .unwrap();
    let broken = writer
        .add_schema(
            "acme_msgs/msg/Thing",
            "ros2msg",
            b"acme_msgs/Missing inner\n",
        )
        .unwrap();
    let joints = writer
        .add_schema(
            "std_msgs/msg/Float64MultiArray",
            "ros2msg",
            b"float64[] data\n",
        )
        .unwrap();
    let mut put = |schema, topic: &str, data: &[u8], time: u64| {
        let channel = writer
            .add_channel(schema, topic, "cdr", &BTreeMap::new())
            .unwrap();
        let header = mcap::records::MessageHeader {
            channel_id: channel,
            sequence: 0,
            log_time: time,
            publish_time: time,
        };
        writer.write_to_known_channel(&header, data).unwrap();
    };
    put(
        strings,
        "/chatter",
        &[0, 1, 0, 0, 3, 0, 0, 0, b'h', b'i', 0],
        5,
    );
    put(broken, "/thing", &[0, 1, 0, 0], 6);
    // One double (32.0), after 4 bytes that align it to 8.
    put(
        joints,
        "/values",
        &[
            0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x40,
        ],
        7,
    );
    writer.finish().unwrap();
    let landing = writer.into_inner().into_inner();

    let (bytes, report) = pack_episode("log.mcap", &landing, &PackConfig::default()).unwrap();
    assert_eq!(report.signals, 1, "{report:?}");
    assert_eq!(
        report.recorded_topics["/chatter"],
        "no images or numeric fields"
    );
    assert!(
        report.recorded_topics["/thing"].contains("no definition of acme_msgs/Missing"),
        "{report:?}"
    );
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    assert_eq!(report.problems[0].topic, "/thing");
    let reader = EpisodeReader::open(MemorySource::new("out.mcap", bytes)).unwrap();
    let kept = reader.read_topics(&["/chatter"], 0..u64::MAX).unwrap();
    assert_eq!(&kept[0].data[..], &[0, 1, 0, 0, 3, 0, 0, 0, b'h', b'i', 0]);

    let config = PackConfig {
        skip_unknown: true,
        ..PackConfig::default()
    };
    let (_, report) = pack_episode("log.mcap", &landing, &config).unwrap();
    assert_eq!(report.skipped_topics["/chatter"], "std_msgs/msg/String");
    assert!(report.recorded_topics.is_empty());
}

#[test]
fn corrupt_landing_jpeg_is_an_error_unless_skipped() {
    let config = SynthConfig {
        seconds: 3.0,
        cameras: 1,
        width: 64,
        height: 48,
        faults: FaultRates::none().with(FaultKind::CorruptFrame, 60.0),
        ..SynthConfig::default()
    };
    let landing = generate_episode(&config, 2).unwrap();
    let corrupt = landing
        .faults
        .faults
        .iter()
        .filter(|f| f.kind == FaultKind::CorruptFrame)
        .count() as u64;
    assert!(corrupt > 0, "the synthetic episode has corrupt frames");

    let err = pack_episode("faulty.mcap", &landing.mcap, &PackConfig::default()).unwrap_err();
    assert!(matches!(err, Error::CorruptFrame { .. }), "{err}");
    assert!(
        err.to_string().contains("faulty.mcap") && err.to_string().contains("/camera/"),
        "{err}"
    );

    let skip = PackConfig {
        skip_bad_frames: true,
        ..PackConfig::default()
    };
    let (_, report) = pack_episode("faulty.mcap", &landing.mcap, &skip).unwrap();
    assert_eq!(report.bad_frames, corrupt);
}

#[test]
fn byte_flips_never_panic() {
    let bytes = canonical();
    let mut decoder = H264Decoder::new().unwrap();
    let mut state = 0x9e3779b97f4a7c15u64;
    for _ in 0..200 {
        let mut mutated = bytes.clone();
        for _ in 0..4 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let at = (state % mutated.len() as u64) as usize;
            mutated[at] = (state >> 32) as u8;
        }
        if let Ok(reader) = open(mutated) {
            for group in reader.groups().clone().keys() {
                let _ = reader.read_window(group, 0..u64::MAX);
            }
            if let Some(camera) = reader
                .groups()
                .get("cameras")
                .and_then(|c| c.first())
                .cloned()
            {
                let _ = reader.frames_at(&camera, &[0, u64::MAX / 2], &mut decoder, Some((32, 24)));
            }
        }
    }
}

#[test]
fn corrupt_camera_message_is_an_error_not_an_empty_frame() {
    use prost::Message as _;
    use reel_mcap::proto::CompressedVideo;

    let mut writer = mcap::WriteOptions::new()
        .create(Cursor::new(Vec::new()))
        .unwrap();
    let meta = BTreeMap::from([("reel.group".to_owned(), "cameras".to_owned())]);
    let camera = "/camera/front";
    let channel = writer.add_channel(0, camera, "protobuf", &meta).unwrap();
    let unit = |nal: u8| CompressedVideo {
        data: vec![0, 0, 0, 1, nal, 0x88, 0x84].into(),
        format: "h264".into(),
        ..CompressedVideo::default()
    };
    // An IDR access unit, a P access unit, then a message that is not protobuf at all
    // (field 3 claims 16 bytes that are not there).
    let messages = [
        (0, unit(0x65).encode_to_vec()),
        (1_000, unit(0x41).encode_to_vec()),
        (2_000, vec![0x1a, 0x10]),
    ];
    for (i, (log_time, data)) in messages.iter().enumerate() {
        let header = mcap::records::MessageHeader {
            channel_id: channel,
            sequence: i as u32,
            log_time: *log_time,
            publish_time: *log_time,
        };
        writer.write_to_known_channel(&header, data).unwrap();
    }
    writer.finish().unwrap();
    let reader = open(writer.into_inner().into_inner()).unwrap();
    assert!(reader.summary().is_some());

    let mut decoder = H264Decoder::new().unwrap();
    let err = reader
        .frames_at(camera, &[2_000], &mut decoder, None)
        .unwrap_err();
    match &err {
        Error::BadMessage {
            name,
            topic,
            log_time,
            ..
        } => assert_eq!(
            (name.as_str(), topic.as_str(), *log_time),
            ("broken.mcap", camera, 2_000)
        ),
        other => panic!("expected a bad message, got {other}"),
    }
    // Planning GOPs fetches the same chunk and reports the same message, before any
    // decoding.
    let err = reader.plan_gops(&[(camera, &[500])], true).unwrap_err();
    assert!(
        matches!(
            err,
            Error::BadMessage {
                log_time: 2_000,
                ..
            }
        ),
        "{err}"
    );
}
