//! Landing episodes from reel-synth pack into canonical episodes that read back exactly.

use reel_io::{CountingSource, MemorySource};
use reel_landing::{EncodeConfig, EncodeStructure, PackConfig, pack_episode};
use reel_mcap::{EpisodeReader, keys};
use reel_synth::{Flavor, SynthConfig, generate_episode};
use reel_video::H264Decoder;

fn synth(flavor: Flavor) -> reel_synth::SynthEpisode {
    let config = SynthConfig {
        seconds: 3.0,
        cameras: 3,
        width: 96,
        height: 64,
        flavor,
        ..SynthConfig::default()
    };
    generate_episode(&config, 0).unwrap()
}

#[test]
fn ros2_episode_packs_and_reads_back() {
    let landing = synth(Flavor::Ros2);
    let (bytes, report) =
        pack_episode("landing.mcap", &landing.mcap, &PackConfig::default()).unwrap();
    assert_eq!(report.cameras, 3);
    assert_eq!(report.signals, 4, "joint states, action, two hands");
    assert!(report.skipped_topics.is_empty());
    let landing_counts = &landing.report.counts;
    let frames: u64 = landing_counts
        .iter()
        .filter(|(t, _)| t.starts_with("/camera/"))
        .map(|(_, c)| c)
        .sum();
    assert_eq!(report.frames, frames);

    let source = CountingSource::new(MemorySource::new("canonical.mcap", bytes));
    let reader = EpisodeReader::open(&source).unwrap();
    assert!(source.stats().reads <= 2, "{:?}", source.stats());
    assert_eq!(
        reader.groups().keys().collect::<Vec<_>>(),
        ["cameras", "proprio"]
    );
    assert_eq!(
        reader.metadata()["episode"]["episode_id"],
        landing.report.meta.episode_id
    );
    assert_eq!(
        reader.metadata()["episode"]["reel.format_version"],
        reel_mcap::FORMAT_VERSION
    );

    // Every landing message is there, per topic.
    let stats = reader.summary().unwrap().stats.clone().unwrap();
    let total: u64 = landing_counts.values().sum();
    assert_eq!(stats.message_count, total);
    for (topic, count) in landing_counts {
        let id = reader.channel(topic).unwrap().id;
        assert_eq!(stats.channel_message_counts[&id], *count, "{topic}");
    }

    // A 1 s state window + 1 s of actions: one ranged read for the proprio group.
    let t0 = stats.message_start_time;
    source.reset();
    let window = reader
        .signals(
            &["/joint_states", "/action"],
            t0 + 1_000_000_000..t0 + 2_000_000_000,
        )
        .unwrap();
    assert_eq!(source.stats().reads, 1);
    let joints = &window[0];
    assert_eq!(joints.fields.len(), 14 * 3);
    assert!(
        (190..=210).contains(&joints.log_times.len()),
        "{}",
        joints.log_times.len()
    );
    assert!(joints.log_times.windows(2).all(|w| w[0] <= w[1]));
    assert!((45..=55).contains(&window[1].log_times.len()));
    let channel = reader.channel("/action").unwrap();
    assert_eq!(channel.metadata[keys::KIND], "action");

    // Two frames from each of three cameras: one ranged read for the camera group.
    let cameras: Vec<String> = reader.groups()["cameras"].clone();
    let times = [t0 + 1_450_000_000, t0 + 1_550_000_000];
    let requests: Vec<(&str, &[u64])> = cameras.iter().map(|c| (c.as_str(), &times[..])).collect();
    let mut decoder = H264Decoder::new().unwrap();
    source.reset();
    let frames = reader.frames(&requests, &mut decoder, None).unwrap();
    assert_eq!(source.stats().reads, 1, "{:?}", source.stats());
    for per_camera in &frames {
        assert_eq!(per_camera.len(), 2);
        assert_eq!((per_camera[0].width, per_camera[0].height), (96, 64));
    }
}

#[test]
fn frames_decode_on_every_layout() {
    use reel_landing::prepare_episode;
    use reel_mcap::{Layout, WriteConfig, write_episode};
    let landing = synth(Flavor::Ros2);
    let (episode, config, _) =
        prepare_episode("landing.mcap", &landing.mcap, &PackConfig::default()).unwrap();
    let camera = "/camera/high/image_raw/compressed";
    let mut decoder = H264Decoder::new().unwrap();
    let mut results = Vec::new();
    // Small interleaved chunks force the reader to walk back chunk by chunk for keyframes.
    for layout in [
        Layout::TopicGroups,
        Layout::Interleaved {
            chunk_size: 16 << 10,
        },
        Layout::TopicPerChunk,
    ] {
        let bytes = write_episode(
            &episode,
            &WriteConfig {
                layout,
                ..config.clone()
            },
        )
        .unwrap();
        let reader = EpisodeReader::open(MemorySource::new("layout.mcap", bytes)).unwrap();
        let t0 = reader
            .summary()
            .unwrap()
            .stats
            .clone()
            .unwrap()
            .message_start_time;
        let times = [t0, t0 + 950_000_000, t0 + 1_990_000_000, t0 + 2_500_000_000];
        let frames = reader
            .frames_at(camera, &times, &mut decoder, None)
            .unwrap();
        // Planned GOPs, whole or up to the frames asked for, show the same pictures.
        for whole in [true, false] {
            let planned = reader.plan_gops(&[(camera, &times)], whole).unwrap();
            let gops: Vec<_> = planned[0]
                .iter()
                .map(|gop| reader.decode_gop(gop, &mut decoder, None).unwrap())
                .collect();
            for (t, frame) in times.iter().zip(&frames) {
                // A time before the camera's first frame shows the first keyframe.
                let (_, rgb) = gops
                    .iter()
                    .find_map(|g| g.rgb_at(*t, &mut decoder).unwrap())
                    .or_else(|| gops[0].keyframe_rgb(&mut decoder).unwrap())
                    .unwrap();
                assert!(
                    rgb == frame,
                    "{layout:?} whole={whole}: frame at {t} differs"
                );
            }
        }
        results.push(frames);
    }
    assert_eq!(
        results[0], results[1],
        "interleaved layout decodes the same pictures"
    );
    assert_eq!(
        results[0], results[2],
        "topic-per-chunk layout decodes the same pictures"
    );
}

/// Chunk compressions of a canonical file, as any MCAP reader sees them.
fn chunk_compressions(bytes: &[u8]) -> std::collections::BTreeSet<String> {
    mcap::Summary::read(bytes)
        .unwrap()
        .unwrap()
        .chunk_indexes
        .iter()
        .map(|c| c.compression.clone())
        .collect()
}

#[test]
fn named_encodings_and_star_gops_pack_and_read_back() {
    let landing = synth(Flavor::Ros2);
    let canonical = PackConfig::default();
    let (plain, _) = pack_episode("landing.mcap", &landing.mcap, &canonical).unwrap();
    assert_eq!(chunk_compressions(&plain), ["zstd".to_owned()].into());

    let random_access = PackConfig {
        encode: EncodeConfig::named("random-access").unwrap(),
        ..PackConfig::default()
    };
    assert!(EncodeConfig::named("fastest").is_none());
    let mut star = PackConfig::default();
    star.encode.structure = EncodeStructure::Star;
    star.encode.gop = 15;

    let cameras = [
        "/camera/high/image_raw/compressed",
        "/camera/left_wrist/image_raw/compressed",
    ];
    let mut decoder = H264Decoder::new().unwrap();
    let reference = EpisodeReader::open(MemorySource::new("plain.mcap", plain)).unwrap();
    let t0 = reference
        .summary()
        .unwrap()
        .stats
        .clone()
        .unwrap()
        .message_start_time;
    let times = [t0 + 900_000_000, t0 + 1_450_000_000, t0 + 2_000_000_000];
    let requests: Vec<(&str, &[u64])> = cameras.iter().map(|c| (*c, &times[..])).collect();
    let expected = reference.frames(&requests, &mut decoder, None).unwrap();
    // A random frame of the canonical encoding decodes from its GOP's keyframe on.
    assert!(
        reference.frames_decoded() > 12,
        "{}",
        reference.frames_decoded()
    );

    for (name, config, most_decoded, compression, structure) in [
        ("random-access", &random_access, 2 * 6, "", None),
        ("star", &star, 2 * 6, "zstd", Some(keys::STAR)),
    ] {
        let (bytes, report) = pack_episode("landing.mcap", &landing.mcap, config).unwrap();
        assert_eq!(report.cameras, 3, "{name}");
        assert_eq!(
            chunk_compressions(&bytes),
            [compression.to_owned()].into(),
            "{name}"
        );
        let reader = EpisodeReader::open(MemorySource::new("ep.mcap", bytes)).unwrap();
        for camera in cameras {
            let channel = reader.channel(camera).unwrap();
            assert_eq!(
                channel
                    .metadata
                    .get(keys::GOP_STRUCTURE)
                    .map(String::as_str),
                structure,
                "{name}"
            );
        }
        // The same frames (each encoding within a few dB of the canonical one), decoded
        // from at most two access units each.
        let frames = reader.frames(&requests, &mut decoder, None).unwrap();
        assert!(
            reader.frames_decoded() <= most_decoded,
            "{name}: {}",
            reader.frames_decoded()
        );
        for (got, want) in frames.iter().flatten().zip(expected.iter().flatten()) {
            let psnr = reel_video::quality::psnr(&want.data, &got.data);
            assert!(psnr > 30.0, "{name}: {psnr:.1} dB from the canonical frame");
        }
        // Numeric streams read back the same whatever the chunk compression.
        let window = t0 + 500_000_000..t0 + 2_500_000_000;
        assert_eq!(
            reader
                .signals(&["/joint_states", "/action"], window.clone())
                .unwrap(),
            reference
                .signals(&["/joint_states", "/action"], window)
                .unwrap(),
            "{name}"
        );
    }
}
