//! What the batches hold: every element the grid point it asks for, frames equal to an
//! independent decode and close to the landing JPEGs, and depth exactly as recorded.

use super::*;

#[test]
fn every_element_is_the_grid_point_it_asks_for() {
    let spec = spec();
    let f = fixture(2, 4.0, spec.sampling_rule());
    let options = LoaderOptions {
        batch_size: 5,
        workers: 2,
        shuffle: Shuffle::Global,
        ..LoaderOptions::default()
    };
    let loader = loader(&f, &spec, options);
    let manifest = Manifest::open(&f.manifest).expect("manifest");
    // 4 s episodes, anchors every 0.1 s from 1.0 s while 0.98 s of actions still fit.
    assert!(
        loader.total_samples() >= 2 * 18,
        "{}",
        loader.total_samples()
    );
    let batches = all_batches(&loader, 0);
    assert_eq!(samples(&batches).len() as u64, loader.total_samples());

    // The loader's conversion (the default, swscale's fast path): pixels must be equal.
    let mut decoder = H264Decoder::with_conversion(RgbConversion::Fast).expect("decoder");
    let mut image_decoder = ImageDecoder::new();
    let mut psnrs = Vec::new();
    for batch in &batches {
        assert!(batch.skipped.is_empty(), "{:?}", batch.skipped);
        let rows = batch
            .get("episode_row")
            .and_then(|t| t.as_i64())
            .expect("rows");
        let anchors = batch
            .get("anchor_ns")
            .and_then(|t| t.as_i64())
            .expect("anchors");
        for (slot, (&row, &anchor)) in rows.iter().zip(anchors).enumerate() {
            let uri = manifest
                .episode(row as usize)
                .expect("row")
                .uri()
                .expect("uri")
                .to_string();
            let path = f.dir.path().join(&uri);
            let reader =
                EpisodeReader::open(MmapSource::open(&path).expect("mmap")).expect("opens");
            // Numeric streams: exactly the grid point at the requested time, same values.
            for (name, topic, offsets) in [
                (
                    "state",
                    "/joint_states",
                    (0..200)
                        .map(|i| (i - 199) * 5_000_000)
                        .collect::<Vec<i64>>(),
                ),
                (
                    "action",
                    "/action",
                    (0..50).map(|i| i * 20_000_000).collect(),
                ),
            ] {
                let values = batch.get(name).expect("values");
                let fields = values.shape[2];
                let times = batch
                    .get(&format!("{name}.time_ns"))
                    .and_then(|t| t.as_i64())
                    .expect("times");
                let mask = batch
                    .get(&format!("{name}.mask"))
                    .and_then(|t| t.as_u8())
                    .expect("mask");
                let first = (anchor + offsets[0]) as u64;
                let last = (anchor + offsets[offsets.len() - 1]) as u64;
                let truth = reader
                    .signals(&[topic], first..last + 1)
                    .expect("signals")
                    .remove(0);
                let by_time: BTreeMap<u64, &[f64]> = truth
                    .log_times
                    .iter()
                    .copied()
                    .zip(truth.values.chunks(fields))
                    .collect();
                for (i, offset) in offsets.iter().enumerate() {
                    let e = slot * offsets.len() + i;
                    let requested = anchor + offset;
                    let Some(expected) = by_time.get(&(requested as u64)) else {
                        // A grid point missing in a gap: interpolated or masked, never a neighbour.
                        assert_eq!(
                            times[e], requested,
                            "{name}: off-grid element not at its time"
                        );
                        continue;
                    };
                    assert_eq!(mask[e], 1, "{name} at {requested}");
                    assert_eq!(times[e], requested, "{name}: zero time error on the grid");
                    let got = &values.as_f32().expect("f32")[e * fields..(e + 1) * fields];
                    for (g, x) in got.iter().zip(*expected) {
                        assert_eq!(*g, *x as f32, "{name} value at {requested}");
                    }
                }
            }
            // Cameras: the frame on the grid at each offset (grid periods are whole ns, so
            // frame times drift from exact multiples by under a microsecond), with the
            // pixels an independent decode gives and close to the landing JPEG.
            for (name, topic, offsets, chw) in [
                ("high", HIGH, vec![-500_000_000i64, 0], false),
                ("wrist", WRIST, vec![0i64], true),
            ] {
                let frames = batch.get(name).and_then(|t| t.as_u8()).expect("frames");
                let times = batch
                    .get(&format!("{name}.time_ns"))
                    .and_then(|t| t.as_i64())
                    .expect("times");
                let mask = batch
                    .get(&format!("{name}.mask"))
                    .and_then(|t| t.as_u8())
                    .expect("mask");
                for (j, offset) in offsets.iter().enumerate() {
                    let e = slot * offsets.len() + j;
                    let requested = anchor + offset;
                    assert!(
                        (times[e] - requested).abs() < 100_000,
                        "{name}: frame {} for {requested}",
                        times[e]
                    );
                    assert_eq!(mask[e], 1);
                    let independent = reader
                        .frames_at(topic, &[times[e] as u64], &mut decoder, None)
                        .expect("decodes")
                        .remove(0);
                    let got = &frames[e * 64 * 48 * 3..(e + 1) * 64 * 48 * 3];
                    let hwc: Vec<u8> = if chw {
                        (0..64 * 48)
                            .flat_map(|p| [got[p], got[64 * 48 + p], got[2 * 64 * 48 + p]])
                            .collect()
                    } else {
                        got.to_vec()
                    };
                    assert_eq!(hwc, independent.data, "{name} pixels at {}", times[e]);
                    psnrs.push(landing_psnr(
                        &f.landing[&uri],
                        topic,
                        times[e],
                        &independent,
                        &mut image_decoder,
                    ));
                }
            }
        }
    }
    let mean = psnrs.iter().sum::<f64>() / psnrs.len() as f64;
    assert!(
        mean > 30.0,
        "mean PSNR against the landing frames {mean:.1} dB"
    );
}

#[test]
fn depth_comes_back_exactly_as_recorded_in_millimetres_and_in_metres() {
    let spec = SampleSpec::from_toml_str(
        r#"
anchor_hz = 10.0
[[depth]]
name = "depth_mm"
topic = "/camera/high/depth/image_raw"
offsets_s = [-0.2, 0.0]
[[depth]]
name = "depth_m"
topic = "/camera/high/depth/image_raw"
offsets_s = [0.0]
unit = "m"
[[proprio]]
name = "state"
topic = "/joint_states"
kind = "window"
steps = 10
hz = 200.0
"#,
    )
    .expect("spec");
    let synth = SynthConfig {
        seed: 9,
        seconds: 2.0,
        cameras: 1,
        depth_cameras: 1,
        width: 40,
        height: 30,
        ..SynthConfig::default()
    };
    let f = fixture_of(synth, 2, spec.sampling_rule());
    let loader = loader(
        &f,
        &spec,
        LoaderOptions {
            batch_size: 4,
            workers: 2,
            ..LoaderOptions::default()
        },
    );
    let manifest = Manifest::open(&f.manifest).expect("manifest");
    let batches = all_batches(&loader, 0);
    assert!(
        samples(&batches).len() >= 2 * 15,
        "{}",
        samples(&batches).len()
    );
    let topic = "/camera/high/depth/image_raw";
    let pixels = 40 * 30;
    let mut image_decoder = ImageDecoder::new();
    let mut checked = 0;
    for batch in &batches {
        assert!(batch.skipped.is_empty(), "{:?}", batch.skipped);
        let mm = batch.get("depth_mm").expect("depth_mm");
        assert_eq!(mm.shape, [mm.shape[0], 2, 30, 40]);
        let mm_values = mm.as_u16().expect("u16 millimetres");
        let metres = batch
            .get("depth_m")
            .and_then(|t| t.as_f32())
            .expect("f32 metres");
        let rows = batch
            .get("episode_row")
            .and_then(|t| t.as_i64())
            .expect("rows");
        let mm_times = batch
            .get("depth_mm.time_ns")
            .and_then(|t| t.as_i64())
            .expect("times");
        let mm_mask = batch
            .get("depth_mm.mask")
            .and_then(|t| t.as_u8())
            .expect("mask");
        let m_times = batch
            .get("depth_m.time_ns")
            .and_then(|t| t.as_i64())
            .expect("times");
        for (slot, &row) in rows.iter().enumerate() {
            let uri = manifest
                .episode(row as usize)
                .expect("row")
                .uri()
                .expect("uri")
                .to_string();
            let landing =
                reel_landing::read_landing(&uri, &f.landing[&uri], &|_| false).expect("landing");
            let camera = landing
                .depths
                .iter()
                .find(|d| d.topic == topic)
                .expect("a landing depth camera");
            let mut recorded = |time: i64| {
                let frame = camera
                    .frames
                    .iter()
                    .find(|fr| fr.log_time as i64 == time)
                    .unwrap_or_else(|| panic!("no landing depth frame at {time}"));
                frame
                    .encoding
                    .to_depth(&mut image_decoder, &frame.data)
                    .expect("decodes")
                    .data
            };
            for j in 0..2 {
                let e = slot * 2 + j;
                assert_eq!(mm_mask[e], 1, "a 30 Hz frame lies within half a period");
                let want = recorded(mm_times[e]);
                assert_eq!(&mm_values[e * pixels..(e + 1) * pixels], want.as_slice());
                assert!(want.contains(&0), "holes stay 0");
            }
            let want = recorded(m_times[slot]);
            let got = &metres[slot * pixels..(slot + 1) * pixels];
            for (m, mm) in got.iter().zip(&want) {
                assert_eq!(*m, f32::from(*mm) / 1000.0);
            }
            checked += 1;
        }
    }
    assert_eq!(checked as u64, loader.total_samples());
}

/// PSNR of `frame` against the landing JPEG nearest `time` (the better of its neighbours).
fn landing_psnr(
    landing: &[u8],
    topic: &str,
    time: i64,
    frame: &RgbImage,
    decoder: &mut ImageDecoder,
) -> f64 {
    let landing = decode_landing("landing", "landing", landing).expect("landing");
    let camera = landing
        .episode
        .cameras
        .iter()
        .find(|c| c.topic == topic)
        .expect("camera");
    let i = camera
        .frames
        .partition_point(|f| (f.log_time as i64) < time);
    camera.frames[i.saturating_sub(1)..(i + 1).min(camera.frames.len())]
        .iter()
        .map(|f| {
            let format = ImageFormat::sniff(&f.data).expect("image format");
            let image = decoder.decode(format, &f.data).expect("jpeg");
            psnr(&image.data, &frame.data)
        })
        .fold(0.0, f64::max)
}

fn psnr(a: &[u8], b: &[u8]) -> f64 {
    let mse = a
        .iter()
        .zip(b)
        .map(|(x, y)| (f64::from(*x) - f64::from(*y)).powi(2))
        .sum::<f64>()
        / a.len() as f64;
    10.0 * (255.0f64 * 255.0 / mse.max(1e-9)).log10()
}
