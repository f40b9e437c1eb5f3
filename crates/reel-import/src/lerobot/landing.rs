//! One episode of a dataset read as a landing log: its rows from the data file as signal
//! topics, its videos' units as recorded (depth videos and image features as pictures),
//! and the `episode` record.

use std::collections::BTreeMap;

use bytes::Bytes;
use reel_landing::{LandingImage, LandingImages, LandingLog, LandingVideo};
use reel_mcap::{Sample, SignalStream};

use super::Dataset;
use super::depth;
use super::episodes::{EpisodeEntry, VideoSpan};
use super::info::kind_of;
use super::keys;
use super::table::Table;
use crate::{Error, Result};

/// Columns LeRobot keeps for its own bookkeeping: not features Reel imports as topics.
const BOOKKEEPING: [&str; 5] = [
    "timestamp",
    "frame_index",
    "episode_index",
    "index",
    "task_index",
];

impl Dataset {
    /// Reads one episode as a landing log: its rows from the data file, its video units
    /// from each video file. A video whose frame count or times disagree with the rows is
    /// an error naming the file.
    pub fn landing_log(&self, episode: &EpisodeEntry) -> Result<LandingLog> {
        let period_ns = (1e9 / self.info.fps).round() as u64;
        let data = Table::read(&episode.data_path)?;
        let in_episode: Vec<bool> = data
            .integers("episode_index")?
            .into_iter()
            .map(|e| e == episode.index)
            .collect();
        let rows = in_episode.iter().filter(|&&b| b).count();
        if rows != episode.length {
            return Err(Error::dataset(
                data.path(),
                format!(
                    "episode {} has {rows} rows, its entry in meta/episodes says {}",
                    episode.index, episode.length
                ),
            ));
        }
        let pick = |all: Vec<Vec<f64>>| -> Vec<Vec<f64>> {
            all.into_iter()
                .zip(&in_episode)
                .filter_map(|(v, &keep)| keep.then_some(v))
                .collect()
        };
        let frame_index: Vec<i64> = data
            .integers("frame_index")?
            .into_iter()
            .zip(&in_episode)
            .filter_map(|(v, &keep)| keep.then_some(v))
            .collect();
        let timestamps: Vec<f64> = data
            .floats("timestamp")?
            .into_iter()
            .zip(&in_episode)
            .filter_map(|(v, &keep)| keep.then_some(v))
            .collect();
        // LeRobot checks every timestamp within 1e-4 s of frame_index / fps; the log puts
        // each row on that grid exactly, so values land on grid points unchanged.
        for (i, (&f, &t)) in frame_index.iter().zip(&timestamps).enumerate() {
            let expected = f as f64 / self.info.fps;
            if f != i as i64 || (t - expected).abs() > 1e-4 {
                return Err(Error::dataset(
                    data.path(),
                    format!(
                        "episode {} row {i}: frame_index {f} at {t} s is not frame {i} of a {} fps grid",
                        episode.index, self.info.fps
                    ),
                ));
            }
        }
        let log_time = |i: usize| i as u64 * period_ns;

        let mut signals = Vec::new();
        for (key, feature) in &self.info.features {
            if BOOKKEEPING.contains(&key.as_str())
                || matches!(feature.dtype.as_str(), "video" | "image" | "string")
            {
                continue;
            }
            if !data.has(key) {
                return Err(Error::dataset(
                    data.path(),
                    format!("no column for feature `{key}`"),
                ));
            }
            let values = pick(data.numbers(key)?);
            let count = values.first().map_or(0, Vec::len);
            if let Some(row) = values.iter().position(|v| v.len() != count) {
                return Err(Error::dataset(
                    data.path(),
                    format!(
                        "feature `{key}` has {} values in row {row}, {count} in the first",
                        values[row].len()
                    ),
                ));
            }
            signals.push(SignalStream {
                topic: format!("/{key}"),
                group: String::new(),
                kind: kind_of(key),
                fields: feature.value_names(key, count),
                source_schema: format!("lerobot.{}", feature.dtype),
                samples: values
                    .into_iter()
                    .enumerate()
                    .map(|(i, values)| Sample {
                        log_time: log_time(i),
                        publish_time: log_time(i),
                        stamp_ns: log_time(i),
                        values,
                    })
                    .collect(),
            });
        }

        let mut videos = Vec::new();
        // Depth videos and image features: cameras landing as pictures.
        let mut pictures = Vec::new();
        for (key, feature) in &self.info.features {
            match feature.dtype.as_str() {
                "video" => {}
                "image" => {
                    pictures.push(self.picture_frames(&data, key, &in_episode, period_ns)?);
                    continue;
                }
                _ => continue,
            }
            let span = episode.videos.get(key).ok_or_else(|| {
                Error::dataset(
                    self.root.join("meta/episodes").display(),
                    format!("episode {} has no video entry for `{key}`", episode.index),
                )
            })?;
            if feature.is_depth() {
                let read = self.checked_span(key, span, episode)?;
                let quantizer = depth::Quantizer::of(feature);
                pictures.push(
                    depth::depth_images(key, &read, &quantizer, period_ns).map_err(|e| {
                        Error::dataset(span.path.display(), format!("depth video `{key}`: {e}"))
                    })?,
                );
            } else {
                videos.push(self.video_units(key, span, episode, period_ns)?);
            }
        }

        let mut record = BTreeMap::from([
            ("episode_id".to_owned(), self.episode_id(episode)),
            ("task".to_owned(), episode.tasks.join("; ")),
            (
                "robot_id".to_owned(),
                self.info.robot_type.clone().unwrap_or_default(),
            ),
            (keys::SOURCE.to_owned(), "lerobot".to_owned()),
            (keys::SOURCE_DATASET.to_owned(), self.name.clone()),
            (keys::SOURCE_REVISION.to_owned(), self.revision.clone()),
            (
                keys::SOURCE_EPISODE_INDEX.to_owned(),
                episode.index.to_string(),
            ),
            (keys::FPS.to_owned(), self.info.fps.to_string()),
            (keys::INFO.to_owned(), self.info_text.clone()),
        ]);
        if let Some(stats) = episode.stats.as_ref().or(self.stats_text.as_ref()) {
            record.insert(keys::STATS.to_owned(), stats.clone());
        }
        Ok(LandingLog {
            videos,
            images: pictures,
            signals,
            metadata: BTreeMap::from([("episode".to_owned(), record)]),
        })
    }

    /// An image feature's pictures for one episode (PNG or JPEG files in the frame rows),
    /// frame `i` at `i * period_ns`, stored as they are.
    fn picture_frames(
        &self,
        data: &Table,
        key: &str,
        in_episode: &[bool],
        period_ns: u64,
    ) -> Result<LandingImages> {
        let frames = data
            .image_bytes(key)?
            .into_iter()
            .zip(in_episode)
            .filter_map(|(bytes, &keep)| keep.then_some(bytes))
            .enumerate()
            .map(|(i, bytes)| {
                let picture = match reel_video::ImageFormat::sniff(&bytes) {
                    Some(reel_video::ImageFormat::Jpeg) => LandingImage::Jpeg(Bytes::from(bytes)),
                    Some(reel_video::ImageFormat::Png) => LandingImage::Png(Bytes::from(bytes)),
                    _ => {
                        return Err(Error::dataset(
                            data.path(),
                            format!("`{key}` row {i} is neither a PNG nor a JPEG picture"),
                        ));
                    }
                };
                Ok((i as u64 * period_ns, picture))
            })
            .collect::<Result<_>>()?;
        Ok(LandingImages {
            topic: format!("/{key}"),
            frame_id: key.to_owned(),
            frames,
        })
    }

    /// Reads one episode's span of a video file, checked against the episode: a frame per
    /// row, each on the dataset's fps grid. Errors name the file.
    fn checked_span(
        &self,
        key: &str,
        span: &VideoSpan,
        episode: &EpisodeEntry,
    ) -> Result<reel_video::VideoSpan> {
        let path = span.path.display().to_string();
        if !span.path.is_file() {
            return Err(Error::dataset(&path, format!("missing (video `{key}`)")));
        }
        let read = reel_video::read_video_span(&span.path, span.from_s, span.to_s)?;
        if read.units.len() != episode.length {
            return Err(Error::dataset(
                &path,
                format!(
                    "`{key}` has {} frames from {} s to {} s, episode {} has {} rows",
                    read.units.len(),
                    span.from_s,
                    span.to_s,
                    episode.index,
                    episode.length
                ),
            ));
        }
        // Units come in decode order; the n-th picture out of a decoder is the n-th in
        // presentation order, so the n-th unit takes the n-th grid time.
        let mut shown: Vec<f64> = read.units.iter().map(|u| u.pts_s - span.from_s).collect();
        shown.sort_by(f64::total_cmp);
        let half = 0.5 / self.info.fps;
        if let Some(i) = shown
            .iter()
            .enumerate()
            .position(|(i, t)| (t - i as f64 / self.info.fps).abs() >= half)
        {
            return Err(Error::dataset(
                &path,
                format!(
                    "`{key}` frame {i} of episode {} is shown at {:.4} s, not on its {} fps grid",
                    episode.index, shown[i], self.info.fps
                ),
            ));
        }
        Ok(read)
    }

    fn video_units(
        &self,
        key: &str,
        span: &VideoSpan,
        episode: &EpisodeEntry,
        period_ns: u64,
    ) -> Result<LandingVideo> {
        let read = self.checked_span(key, span, episode)?;
        Ok(LandingVideo {
            topic: format!("/{key}"),
            frame_id: key.to_owned(),
            codec: read.codec,
            units: read
                .units
                .into_iter()
                .enumerate()
                .map(|(i, u)| (i as u64 * period_ns, Bytes::from(u.data)))
                .collect(),
        })
    }
}
