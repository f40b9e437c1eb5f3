//! Landing files whose summary is missing, wrong or whose chunks repeat: the episode's
//! metadata still comes through (read from its Metadata records, not the summary's index)
//! and no message is read twice. A recording with nothing to read is refused by pack.

use std::io::Cursor;

use reel_landing::{LandingEpisode, PackConfig, pack_episode, read_landing};
use reel_mcap::Error;
use reel_synth::{SynthConfig, generate_episode};

fn landing() -> Vec<u8> {
    let config = SynthConfig {
        seconds: 2.0,
        cameras: 1,
        width: 64,
        height: 48,
        ..SynthConfig::default()
    };
    generate_episode(&config, 3).unwrap().mcap
}

fn read(bytes: &[u8]) -> LandingEpisode {
    read_landing("damaged.mcap", bytes, &|_| false).unwrap()
}

fn frames(episode: &LandingEpisode) -> usize {
    episode.cameras.iter().map(|c| c.frames.len()).sum()
}

/// Offset of the footer's `summary_start` field (footer: opcode, length, summary_start,
/// summary_offset_start, summary_crc; then the closing magic).
fn summary_start_at(bytes: &[u8]) -> usize {
    bytes.len() - 8 - 29 + 9
}

/// Byte range of the first chunk record, found by walking the records after the magic.
fn first_chunk(bytes: &[u8]) -> std::ops::Range<usize> {
    let mut at = 8;
    loop {
        let len = u64::from_le_bytes(bytes[at + 1..at + 9].try_into().unwrap()) as usize;
        if bytes[at] == 0x06 {
            return at..at + 9 + len;
        }
        at += 9 + len;
    }
}

#[test]
fn metadata_survives_a_missing_or_wrong_summary() {
    let bytes = landing();
    let whole = read(&bytes);
    let id = whole.metadata["episode"]["episode_id"].clone();
    assert!(!id.is_empty());

    let mut no_summary = bytes.clone();
    let at = summary_start_at(&no_summary);
    no_summary[at..at + 8].copy_from_slice(&0u64.to_le_bytes());
    let mut wrong_summary = bytes.clone();
    wrong_summary[at..at + 8].copy_from_slice(&12_345u64.to_le_bytes());
    for damaged in [no_summary, wrong_summary] {
        let episode = read(&damaged);
        assert_eq!(episode.metadata, whole.metadata);
        assert_eq!(frames(&episode), frames(&whole));
    }
}

#[test]
fn a_duplicated_chunk_is_read_once_and_counted() {
    let bytes = landing();
    let whole = read(&bytes);
    let chunk = first_chunk(&bytes);
    let mut doubled = bytes[..chunk.end].to_vec();
    doubled.extend_from_slice(&bytes[chunk.clone()]);
    doubled.extend_from_slice(&bytes[chunk.end..]);
    let episode = read(&doubled);
    assert_eq!(episode.duplicate_chunks, 1);
    assert_eq!(whole.duplicate_chunks, 0);
    assert_eq!(frames(&episode), frames(&whole));
    let samples =
        |e: &LandingEpisode| -> Vec<usize> { e.signals.iter().map(|s| s.samples.len()).collect() };
    assert_eq!(samples(&episode), samples(&whole));
    assert_eq!(episode.metadata, whole.metadata);
}

#[test]
fn pack_refuses_a_recording_with_nothing_to_read() {
    let mut writer = mcap::Writer::new(Cursor::new(Vec::new())).unwrap();
    writer
        .write_metadata(&mcap::records::Metadata {
            name: "episode".into(),
            metadata: [("episode_id".to_owned(), "empty".to_owned())].into(),
        })
        .unwrap();
    writer.finish().unwrap();
    let bytes = writer.into_inner().into_inner();
    let err = pack_episode("empty.mcap", &bytes, &PackConfig::default()).unwrap_err();
    assert!(matches!(err, Error::NothingToRead { .. }), "{err}");
    assert!(err.to_string().starts_with("empty.mcap: "), "{err}");
}

#[test]
fn a_zeroed_range_inside_a_compressed_chunk_is_an_error_not_an_abort() {
    // The input that showed it: 512 zero bytes inside a zstd chunk made mcap's chunk reader
    // allocate a record length read from garbage (exabytes) and abort the process.
    let mut bytes = landing();
    let chunk = first_chunk(&bytes);
    let middle = (chunk.start + chunk.end) / 2;
    bytes[middle..middle + 512].fill(0);
    let err = read_landing("damaged.mcap", &bytes, &|_| false).unwrap_err();
    assert!(err.to_string().starts_with("damaged.mcap: "), "{err}");
}
