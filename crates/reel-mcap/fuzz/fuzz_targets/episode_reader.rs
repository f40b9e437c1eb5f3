//! Any bytes given to the episode reader give a value or a typed error, never a panic,
//! an abort or a runaway allocation.

#![no_main]

use libfuzzer_sys::fuzz_target;
use reel_io::MemorySource;
use reel_mcap::EpisodeReader;

fuzz_target!(|data: &[u8]| {
    let Ok(reader) = EpisodeReader::open(MemorySource::new("fuzz.mcap", data.to_vec())) else {
        return;
    };
    let groups: Vec<String> = reader.groups().keys().cloned().collect();
    for group in &groups {
        let _ = reader.read_window(group, 0..u64::MAX);
    }
    let topics: Vec<String> = reader.groups().values().flatten().cloned().collect();
    let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
    let _ = reader.signals(&refs, 0..u64::MAX);
    if let (Some(camera), Ok(mut decoder)) = (reader.groups().get("cameras").and_then(|c| c.first()), reel_video::H264Decoder::new()) {
        let _ = reader.frames_at(camera, &[0, u64::MAX / 2, u64::MAX], &mut decoder, Some((16, 16)));
    }
    let _ = reel_mcap::inspect(MemorySource::new("fuzz.mcap", data.to_vec()), true);
});
