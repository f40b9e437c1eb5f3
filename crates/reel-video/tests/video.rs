//! Encode → random-access decode round trips, and landing-image decoding.

#![allow(clippy::unwrap_used)] // Tests fail loudly by design.

use reel_video::quality::psnr;
use reel_video::{
    EncoderConfig, Error, GopStructure, H264Decoder, H264Encoder, ImageDecoder, ImageFormat,
    RgbConversion, RgbImage, h264,
};

/// A moving scene with edges and gradients, so the encoder has real work.
fn scene(i: usize, w: usize, h: usize) -> RgbImage {
    let mut data = Vec::with_capacity(w * h * 3);
    let (cx, cy) = (10 + i * 3 % (w - 20), h / 2);
    for y in 0..h {
        for x in 0..w {
            let inside = x.abs_diff(cx) < 8 && y.abs_diff(cy) < 8;
            data.extend_from_slice(&if inside {
                [200, 170, 140]
            } else {
                [
                    (x * 255 / w) as u8,
                    (y * 255 / h) as u8,
                    (128.0 + 100.0 * ((x + 2 * y + 3 * i) as f32 * 0.05).sin()) as u8,
                ]
            });
        }
    }
    RgbImage::new(w, h, data)
}

fn encode(frames: &[RgbImage], config: &EncoderConfig) -> Vec<reel_video::EncodedFrame> {
    let mut encoder = H264Encoder::new(frames[0].width, frames[0].height, config).unwrap();
    let mut units = Vec::new();
    for f in frames {
        units.extend(encoder.push(f).unwrap());
    }
    units.extend(encoder.finish().unwrap());
    units
}

#[test]
fn random_access_decode_matches_sequential_decode() {
    let (w, h) = (96, 64);
    let frames: Vec<RgbImage> = (0..25).map(|i| scene(i, w, h)).collect();
    let config = EncoderConfig {
        gop: 10,
        crf: 20.0,
        ..EncoderConfig::default()
    };
    let units = encode(&frames, &config);

    assert_eq!(units.len(), 25);
    for (i, u) in units.iter().enumerate() {
        assert_eq!(u.index, i as u64, "decode order equals presentation order");
        assert_eq!(u.keyframe, i % 10 == 0, "keyframe flag of unit {i}");
        // Annex B start code, and SPS (NAL type 7) in every keyframe.
        assert!(u.data.starts_with(&[0, 0, 0, 1]) || u.data.starts_with(&[0, 0, 1]));
        let has_sps = u
            .data
            .windows(4)
            .any(|win| win[..3] == [0, 0, 1] && win[3] & 0x1f == 7);
        assert_eq!(has_sps, u.keyframe, "SPS presence in unit {i}");
    }

    let all: Vec<&[u8]> = units.iter().map(|u| u.data.as_slice()).collect();
    let mut decoder = H264Decoder::new().unwrap();
    let every: Vec<usize> = (0..25).collect();
    let sequential = decoder.decode_run(&all, &every, None).unwrap();
    for (i, picture) in sequential.iter().enumerate() {
        let quality = psnr(&frames[i].data, &picture.data);
        assert!(quality > 30.0, "frame {i}: {quality:.1} dB");
        // The picture is this frame's, not a neighbour's.
        for j in [i.saturating_sub(1), (i + 1).min(24)]
            .into_iter()
            .filter(|&j| j != i)
        {
            assert!(
                psnr(&frames[j].data, &picture.data) < quality - 3.0,
                "frame {i} looks like {j}"
            );
        }
    }

    // Frame 17 from its keyframe (10), and two frames of one GOP in one run.
    let gop = &all[10..20];
    let one = decoder.decode_run(gop, &[7], None).unwrap();
    assert_eq!(one[0], sequential[17]);
    let two = decoder.decode_run(gop, &[9, 2], None).unwrap();
    assert_eq!(two, vec![sequential[19].clone(), sequential[12].clone()]);

    // Unconverted pictures hold the decoder's buffers: converted later, after other runs
    // went through the same decoder, they are still the frames they were.
    let held = decoder.decode_pictures(gop, &[3, 9, 3]).unwrap();
    let _ = decoder.decode_run(&all[..10], &[9], None).unwrap();
    let _ = decoder.decode_pictures(&all[20..], &[4]).unwrap();
    assert_eq!(held.len(), 3);
    assert_eq!(decoder.to_rgb(&held[0], None).unwrap(), sequential[13]);
    assert_eq!(decoder.to_rgb(&held[1], None).unwrap(), sequential[19]);
    assert_eq!(decoder.to_rgb(&held[2], None).unwrap(), sequential[13]);
    assert_eq!(
        (held[1].width(), held[1].height()),
        (sequential[19].width, sequential[19].height)
    );
}

#[test]
fn decoder_resizes_and_survives_garbage() {
    let frames: Vec<RgbImage> = (0..3).map(|i| scene(i, 64, 48)).collect();
    let units = encode(&frames, &EncoderConfig::default());
    let all: Vec<&[u8]> = units.iter().map(|u| u.data.as_slice()).collect();
    let mut decoder = H264Decoder::new().unwrap();
    let small = decoder.decode_run(&all, &[2], Some((32, 24))).unwrap();
    assert_eq!(
        (small[0].width, small[0].height, small[0].data.len()),
        (32, 24, 32 * 24 * 3)
    );

    // Garbage and a run that does not start at a keyframe are errors, never panics;
    // the decoder still works afterwards.
    let garbage: Vec<u8> = (0..500u32).map(|i| (i * 7919 % 256) as u8).collect();
    assert!(decoder.decode_run(&[&garbage], &[0], None).is_err());
    assert!(decoder.decode_run(&all[1..], &[1], None).is_err());
    assert!(decoder.decode_run(&all, &[5], None).is_err());
    let again = decoder.decode_run(&all, &[2], None).unwrap();
    let fresh = H264Decoder::new()
        .unwrap()
        .decode_run(&all, &[2], None)
        .unwrap();
    assert_eq!(again, fresh);
}

#[test]
fn forced_keyframes_start_new_gops() {
    let frames: Vec<RgbImage> = (0..12).map(|i| scene(i, 64, 48)).collect();
    let config = EncoderConfig {
        gop: 100,
        ..EncoderConfig::default()
    };
    let mut encoder = H264Encoder::new(64, 48, &config).unwrap();
    let mut units = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        units.extend(
            if i == 7 {
                encoder.push_keyframe(f)
            } else {
                encoder.push(f)
            }
            .unwrap(),
        );
    }
    units.extend(encoder.finish().unwrap());
    let keys: Vec<u64> = units
        .iter()
        .filter(|u| u.keyframe)
        .map(|u| u.index)
        .collect();
    assert_eq!(keys, [0, 7]);
    // The forced keyframe is an IDR: decoding can start there.
    let gop: Vec<&[u8]> = units[7..].iter().map(|u| u.data.as_slice()).collect();
    let mut decoder = H264Decoder::new().unwrap();
    let from_key = decoder.decode_run(&gop, &[3], None).unwrap();
    let all: Vec<&[u8]> = units.iter().map(|u| u.data.as_slice()).collect();
    let sequential = decoder.decode_run(&all, &[10], None).unwrap();
    assert_eq!(from_key, sequential);
}

#[test]
fn encoder_rejects_empty_sizes_and_wrong_frames() {
    let err = H264Encoder::new(0, 48, &EncoderConfig::default()).unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err}");
    let mut encoder = H264Encoder::new(64, 48, &EncoderConfig::default()).unwrap();
    assert!(encoder.push(&RgbImage::new(64, 48, vec![0; 10])).is_err());
}

#[test]
fn odd_sizes_are_coded_one_pixel_larger_and_cropped_back() {
    for (w, h) in [(63, 48), (64, 47), (37, 21)] {
        let frames: Vec<RgbImage> = (0..6).map(|i| scene(i, w, h)).collect();
        let units = encode(&frames, &EncoderConfig::default());
        let all: Vec<&[u8]> = units.iter().map(|u| u.data.as_slice()).collect();
        let mut decoder = H264Decoder::new().unwrap();
        let mut pictures = decoder.decode_pictures(&all, &[0, 5]).unwrap();
        assert_eq!(
            (pictures[0].width(), pictures[0].height()),
            reel_video::coded_size(w, h)
        );
        // The same scene at the coded (even) size, encoded the same way: padding costs
        // no quality.
        let (cw, ch) = reel_video::coded_size(w, h);
        let even: Vec<RgbImage> = (0..6).map(|i| scene(i, cw, ch)).collect();
        let even_units = encode(&even, &EncoderConfig::default());
        let even_all: Vec<&[u8]> = even_units.iter().map(|u| u.data.as_slice()).collect();
        let baseline = decoder.decode_run(&even_all, &[0, 5], None).unwrap();
        for ((picture, source), base) in pictures
            .iter_mut()
            .zip([&frames[0], &frames[5]])
            .zip([(&even[0], &baseline[0]), (&even[5], &baseline[1])])
        {
            picture.crop(w, h).unwrap();
            let rgb = decoder.to_rgb(picture, None).unwrap();
            assert_eq!((rgb.width, rgb.height), (w, h));
            let q = psnr(&source.data, &rgb.data);
            let q_even = psnr(&base.0.data, &base.1.data);
            assert!(
                q > q_even - 1.0,
                "{w}x{h}: {q:.1} dB, {cw}x{ch}: {q_even:.1} dB"
            );
        }
        assert!(pictures[0].crop(w + 2, h).is_err());
    }
}

/// A buffer whose data starts `offset` bytes past a 64-byte boundary.
fn buffer_at(len: usize, offset: usize) -> (Vec<u8>, usize) {
    let buffer = vec![0xAAu8; len + 64 + offset];
    let start = (64 - buffer.as_ptr() as usize % 64) % 64 + offset;
    (buffer, start)
}

#[test]
fn rgb_written_into_a_caller_buffer_equals_the_converted_image() {
    // 96 px rows are 288 bytes (swscale writes them in place when aligned); 37 px rows,
    // cropped from a 38 px coded picture, go through an intermediate image.
    for ((w, h), conversion) in [(96, 64), (37, 21)]
        .into_iter()
        .flat_map(|size| [(size, RgbConversion::Accurate), (size, RgbConversion::Fast)])
    {
        let frames: Vec<RgbImage> = (0..4).map(|i| scene(i, w, h)).collect();
        let units = encode(&frames, &EncoderConfig::default());
        let all: Vec<&[u8]> = units.iter().map(|u| u.data.as_slice()).collect();
        let mut decoder = H264Decoder::with_conversion(conversion).unwrap();
        let mut pictures = decoder.decode_pictures(&all, &[1, 3]).unwrap();
        for picture in &mut pictures {
            picture.crop(w, h).unwrap();
            for size in [None, Some((48, 32))] {
                let image = decoder.to_rgb(picture, size).unwrap();
                for offset in [0, 16, 3] {
                    let (mut buffer, start) = buffer_at(image.data.len(), offset);
                    let dst = &mut buffer[start..start + image.data.len()];
                    decoder.to_rgb_into(picture, size, dst).unwrap();
                    assert!(
                        dst == &image.data[..],
                        "{w}x{h} {conversion:?} at {size:?}, offset {offset}"
                    );
                    // Nothing written past the picture.
                    assert!(
                        buffer[start + image.data.len()..]
                            .iter()
                            .all(|&b| b == 0xAA)
                    );
                }
            }
        }
        let mut short = vec![0u8; w * h * 3 - 1];
        assert!(matches!(
            decoder.to_rgb_into(&pictures[0], None, &mut short),
            Err(Error::InvalidInput(_))
        ));
    }
}

#[test]
fn landing_images_decode() {
    let frame = scene(3, 80, 60);
    let mut jpeg = Vec::new();
    jpeg_encoder::Encoder::new(&mut jpeg, 95)
        .encode(&frame.data, 80, 60, jpeg_encoder::ColorType::Rgb)
        .unwrap();
    assert_eq!(ImageFormat::sniff(&jpeg), Some(ImageFormat::Jpeg));
    assert_eq!(
        ImageFormat::from_name("rgb8; jpeg compressed bgr8"),
        Some(ImageFormat::Jpeg)
    );

    let mut decoder = ImageDecoder::new();
    let decoded = decoder.decode(ImageFormat::Jpeg, &jpeg).unwrap();
    assert_eq!((decoded.width, decoded.height), (80, 60));
    assert!(psnr(&frame.data, &decoded.data) > 30.0);

    let png = include_bytes!("data/gradient.png");
    assert_eq!(ImageFormat::sniff(png), Some(ImageFormat::Png));
    let decoded = decoder.decode(ImageFormat::Png, png).unwrap();
    assert_eq!((decoded.width, decoded.height), (16, 8));
    assert_eq!(
        &decoded.data[3 * 17..3 * 18],
        &[16, 32, 128],
        "pixel (1, 1) is exact"
    );

    // Corrupt and truncated JPEGs are typed errors, and the decoder keeps working.
    let mut corrupt = jpeg.clone();
    corrupt.truncate(20);
    assert!(decoder.decode(ImageFormat::Jpeg, &corrupt).is_err());
    assert!(decoder.decode(ImageFormat::Jpeg, b"not a jpeg").is_err());
    assert!(decoder.decode(ImageFormat::Png, &jpeg).is_err());
    assert!(decoder.decode(ImageFormat::Jpeg, &jpeg).is_ok());
}

#[test]
fn fast_rgb_conversion_stays_close_to_the_accurate_one() {
    let frames: Vec<RgbImage> = (0..12).map(|i| scene(i, 160, 120)).collect();
    let units = encode(&frames, &EncoderConfig::default());
    let all: Vec<&[u8]> = units.iter().map(|u| u.data.as_slice()).collect();
    let every: Vec<usize> = (0..all.len()).collect();
    let accurate = H264Decoder::new()
        .unwrap()
        .decode_run(&all, &every, None)
        .unwrap();
    let fast = H264Decoder::with_conversion(RgbConversion::Fast)
        .unwrap()
        .decode_run(&all, &every, None)
        .unwrap();
    for i in 0..frames.len() {
        let between = psnr(&accurate[i].data, &fast[i].data);
        let (to_source_accurate, to_source_fast) = (
            psnr(&frames[i].data, &accurate[i].data),
            psnr(&frames[i].data, &fast[i].data),
        );
        eprintln!(
            "frame {i}: fast vs accurate {between:.1} dB; source {to_source_accurate:.2} / {to_source_fast:.2} dB"
        );
        assert!(between > 35.0, "frame {i}: {between} dB apart");
        assert!(
            to_source_fast > to_source_accurate - 1.0,
            "frame {i}: fast {to_source_fast} dB against accurate {to_source_accurate} dB"
        );
    }
}

#[test]
fn star_gops_decode_any_frame_from_its_keyframe_alone() {
    let (w, h) = (96, 64);
    let frames: Vec<RgbImage> = (0..25).map(|i| scene(i, w, h)).collect();
    let config = EncoderConfig {
        gop: 10,
        crf: 20.0,
        structure: GopStructure::Star,
        ..EncoderConfig::default()
    };
    let units = encode(&frames, &config);
    assert_eq!(units.len(), 25);
    for (i, u) in units.iter().enumerate() {
        let info = h264::inspect(&u.data);
        assert_eq!(u.index, i as u64);
        assert_eq!(u.keyframe, i % 10 == 0, "keyframe flag of unit {i}");
        assert_eq!(info.idr && info.sps && info.pps, u.keyframe, "unit {i}");
        // Only keyframes are references; nothing is a B-frame (Foxglove plays it).
        assert_eq!(info.reference, u.keyframe, "unit {i}");
        assert!(!info.b_slice && info.slices == 1, "unit {i}");
    }

    // The whole stream, front to back, through FFmpeg's decoder.
    let all: Vec<&[u8]> = units.iter().map(|u| u.data.as_slice()).collect();
    let mut decoder = H264Decoder::new().unwrap();
    let every: Vec<usize> = (0..25).collect();
    let sequential = decoder.decode_run(&all, &every, None).unwrap();
    for (i, picture) in sequential.iter().enumerate() {
        let quality = psnr(&frames[i].data, &picture.data);
        assert!(quality > 30.0, "frame {i}: {quality:.1} dB");
        for j in [i.saturating_sub(1), (i + 1).min(24)]
            .into_iter()
            .filter(|&j| j != i)
        {
            assert!(
                psnr(&frames[j].data, &picture.data) < quality - 3.0,
                "frame {i} looks like {j}"
            );
        }
    }

    // Any frame from its keyframe and itself: the same picture, to the bit (no drift), and
    // a run over the whole GOP decodes only those two units.
    for i in 0..25 {
        let key = i / 10 * 10;
        let pair = decoder
            .decode_run(&[all[key], all[i]], &[usize::from(i != key)], None)
            .unwrap();
        assert_eq!(pair[0], sequential[i], "frame {i} from its keyframe alone");
        let before = decoder.units_decoded();
        let gop = &all[key..(key + 10).min(25)];
        let from_gop = decoder.decode_run(gop, &[i - key], None).unwrap();
        assert_eq!(from_gop[0], sequential[i]);
        assert_eq!(
            decoder.units_decoded() - before,
            if i == key { 1 } else { 2 },
            "units decoded for frame {i}"
        );
    }
    // Frames of one GOP in any order, in one run.
    let two = decoder.decode_run(&all[10..20], &[9, 2], None).unwrap();
    assert_eq!(two, vec![sequential[19].clone(), sequential[12].clone()]);

    // A chain-structured stream still decodes every unit up to the frame.
    let chain = encode(
        &frames[..10],
        &EncoderConfig {
            gop: 10,
            ..EncoderConfig::default()
        },
    );
    let chain: Vec<&[u8]> = chain.iter().map(|u| u.data.as_slice()).collect();
    let before = decoder.units_decoded();
    decoder.decode_run(&chain, &[6], None).unwrap();
    assert_eq!(decoder.units_decoded() - before, 7);
}

#[test]
fn star_gops_are_valid_h264_for_ffmpeg_and_restart_at_forced_keyframes() {
    let (w, h) = (97, 63); // odd sizes: coded one pixel larger
    let config = EncoderConfig {
        gop: 8,
        structure: GopStructure::Star,
        ..EncoderConfig::default()
    };
    let mut encoder = H264Encoder::new(w, h, &config).unwrap();
    let mut units = Vec::new();
    for i in 0..20 {
        let frame = scene(i, w, h);
        units.extend(if i == 5 {
            encoder.push_keyframe(&frame).unwrap()
        } else {
            encoder.push(&frame).unwrap()
        });
    }
    units.extend(encoder.finish().unwrap());
    let keyframes: Vec<usize> = units
        .iter()
        .enumerate()
        .filter(|(_, u)| u.keyframe)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(keyframes, [0, 5, 13]);

    // The FFmpeg command line, told to stop at any bitstream error, decodes all 20 frames.
    let dir = std::env::temp_dir().join(format!("reel-star-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("star.h264");
    std::fs::write(
        &path,
        units
            .iter()
            .flat_map(|u| u.data.clone())
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    let out = std::process::Command::new("ffprobe")
        .args([
            "-v",
            "error",
            "-err_detect",
            "explode",
            "-count_frames",
            "-select_streams",
            "v",
        ])
        .args([
            "-show_entries",
            "stream=nb_read_frames,has_b_frames",
            "-of",
            "csv=p=0",
        ])
        .arg(&path)
        .output()
        .expect("ffprobe (Debian's ffmpeg package) must be installed");
    std::fs::remove_dir_all(&dir).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.trim().is_empty(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0,20");
}

/// LeRobot 0.6.1's own files (testdata/lerobot/make_fixtures.py): H.264 with B-frames and
/// AV1, three episodes back to back in one MP4 each. LeRobot's decoders (torchcodec, PyAV)
/// convert to RGB with swscale's default, the fast path: converted the same way, Reel's
/// frames are LeRobot's.
#[test]
fn video_file_spans_decode_to_the_frames_ffmpeg_gives() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/lerobot");
    for (name, codec) in [
        ("pusht_h264", reel_video::VideoCodec::H264),
        ("pusht_av1", reel_video::VideoCodec::Av1),
    ] {
        let mp4 = root
            .join(name)
            .join("videos/observation.images.cam/chunk-000/file-000.mp4");
        let reference = std::fs::read(root.join(format!("{name}.decoded.rgb"))).unwrap();
        let frame_len = 64 * 48 * 3;
        // The episodes' spans (10 fps: 12, 7 and 15 frames).
        let mut first = 0;
        for (from, to) in [(0.0, 1.2), (1.2, 1.9), (1.9, 3.4)] {
            let span = reel_video::read_video_span(&mp4, from, to).unwrap();
            assert_eq!(span.codec, codec);
            assert_eq!((span.width, span.height), (64, 48));
            assert!(span.units[0].keyframe, "{name} from {from} s");
            let mut decoder =
                reel_video::StreamDecoder::with_conversion(codec, RgbConversion::Fast).unwrap();
            let mut pictures = Vec::new();
            for unit in &span.units {
                pictures.extend(decoder.push(&unit.data).unwrap());
            }
            pictures.extend(decoder.finish().unwrap());
            let count = ((to - from) * 10.0_f64).round() as usize;
            assert_eq!(pictures.len(), count, "{name} from {from} s");
            for (i, picture) in pictures.iter().enumerate() {
                let want = &reference[(first + i) * frame_len..(first + i + 1) * frame_len];
                let q = psnr(want, &picture.data);
                assert!(
                    q > 45.0,
                    "{name} frame {} from {from} s: {q:.1} dB",
                    first + i
                );
            }
            first += count;
        }
    }
}
