//! `reel.open_episode`: one canonical episode's topics, metadata, frames and numeric
//! streams as NumPy arrays, read from a store like the loader reads it.

use std::path::PathBuf;

use numpy::{IntoPyArray, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use reel_io::{ByteSource, Store, split_object_uri};
use reel_mcap::EpisodeReader;
use reel_mcap::records::ChannelContent;
use reel_video::H264Decoder;

use crate::errors::{OrRaise, bad_input};

/// An open canonical episode.
#[pyclass(module = "reel._reel", frozen)]
#[derive(Debug)]
pub struct Episode {
    reader: EpisodeReader<Box<dyn ByteSource>>,
}

/// Opens the episode at `uri`: a key inside `store`, or (without `store`) a local path or
/// a full object URI.
#[pyfunction]
#[pyo3(signature = (uri, store=None))]
pub fn open_episode(py: Python<'_>, uri: PathBuf, store: Option<PathBuf>) -> PyResult<Episode> {
    let uri = crate::paths::text("uri", uri)?;
    let store = store.map(|s| crate::paths::text("store", s)).transpose()?;
    py.detach(move || {
        reel_video::quiet_ffmpeg_logs();
        let (root, key) = match store {
            Some(store) => (store, uri),
            None => split_object_uri(&uri).or_raise()?,
        };
        let store = Store::open_existing(&root).or_raise()?;
        let source = reel_loader::Sources::Store(store).open(&key).or_raise()?;
        let reader = EpisodeReader::open(source).or_raise()?;
        Ok(Episode { reader })
    })
}

/// How far before the first time asked for `Episode.depth` reads first (ns).
const DEPTH_LOOKBACK_NS: u64 = 2_000_000_000;

impl Episode {
    /// What the channel on `topic` holds; an unknown topic or unreadable metadata raises.
    fn content(&self, topic: &str) -> PyResult<ChannelContent> {
        Ok(self.reader.channel_info(topic).or_raise()?.content)
    }
}

#[pymethods]
impl Episode {
    /// The file's name (path or URI).
    #[getter]
    fn name(&self) -> &str {
        self.reader.name()
    }

    /// Every topic, in group order.
    #[getter]
    fn topics(&self) -> Vec<String> {
        self.reader.groups().values().flatten().cloned().collect()
    }

    /// Topic groups (read together), each with its topics.
    #[getter]
    fn groups<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(self.reader.groups().clone().into_pyobject(py)?.into_any())
    }

    /// Metadata records: record name → key → value (`episode` holds id, robot, task, …).
    #[getter]
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(self.reader.metadata().clone().into_pyobject(py)?.into_any())
    }

    /// A topic's channel metadata (encoding, size, fields, rate, …).
    fn channel_metadata<'py>(&self, py: Python<'py>, topic: &str) -> PyResult<Bound<'py, PyDict>> {
        let channel = self.reader.channel(topic).or_raise()?;
        let dict = PyDict::new(py);
        for (k, v) in &channel.metadata {
            dict.set_item(k, v)?;
        }
        Ok(dict)
    }

    /// The frames of camera `topic` shown at each of `times_ns` (log time, ns: the latest
    /// frame at or before each time), as uint8 RGB `[len(times_ns), height, width, 3]`;
    /// `size=(width, height)` resizes.
    #[pyo3(signature = (topic, times_ns, size=None))]
    fn frames<'py>(
        &self,
        py: Python<'py>,
        topic: &str,
        times_ns: Vec<u64>,
        size: Option<(usize, usize)>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let ChannelContent::Depth(_) = self.content(topic)? {
            return Err(bad_input(format!(
                "{}: {topic} is a depth camera: read it with depth(topic, times_ns)",
                self.reader.name()
            )));
        }
        let pictures = py.detach(|| {
            let mut decoder = H264Decoder::new().or_raise()?;
            self.reader
                .frames_at(topic, &times_ns, &mut decoder, size)
                .or_raise()
        })?;
        let (width, height) = match pictures.first() {
            Some(p) => (p.width, p.height),
            None => (0, 0),
        };
        let mut pixels = Vec::with_capacity(pictures.len() * width * height * 3);
        for p in &pictures {
            pixels.extend_from_slice(&p.data);
        }
        let array = pixels
            .into_pyarray(py)
            .reshape([pictures.len(), height, width, 3])?;
        Ok(array.into_any())
    }

    /// The stored frames of depth camera `topic` shown at each of `times_ns` (the latest
    /// frame at or before each time; the first frame for times up to 2 s before it;
    /// earlier times raise), as uint16
    /// `[len(times_ns), height, width]` in the channel's unit (`channel_metadata(topic)
    /// ["reel.unit"]`: `mm` or `raw`).
    fn depth<'py>(
        &self,
        py: Python<'py>,
        topic: &str,
        times_ns: Vec<u64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (Some(&first), Some(&last)) = (times_ns.iter().min(), times_ns.iter().max()) else {
            return Err(bad_input("depth: times_ns is empty"));
        };
        let window = py.detach(|| {
            // The frames from a little before the first time; from the stream's start when
            // none is that close; and a little past the last time when every time comes
            // before the stream's first frame.
            let near = first.saturating_sub(DEPTH_LOOKBACK_NS)..last.saturating_add(1);
            let mut frames = self.reader.depth(topic, near).or_raise()?;
            for wider in [
                0..last.saturating_add(1),
                0..last.saturating_add(DEPTH_LOOKBACK_NS),
            ] {
                if frames.log_times.first().is_some_and(|&t| t <= first) {
                    break;
                }
                frames = self.reader.depth(topic, wider).or_raise()?;
            }
            Ok::<_, PyErr>(frames)
        })?;
        if window.log_times.is_empty() {
            return Err(bad_input(format!(
                "{}: {topic} has no frame up to 2 s after {last} ns",
                self.reader.name()
            )));
        }
        let frame_len = window.width * window.height;
        let mut values = Vec::with_capacity(times_ns.len() * frame_len);
        for t in &times_ns {
            let i = window
                .log_times
                .partition_point(|&l| l <= *t)
                .saturating_sub(1);
            values.extend_from_slice(window.frame(i));
        }
        let array =
            values
                .into_pyarray(py)
                .reshape([times_ns.len(), window.height, window.width])?;
        Ok(array.into_any())
    }

    /// A numeric stream whole: `(time_ns, values, fields)` with `time_ns` int64 `[n]`,
    /// `values` float64 `[n, len(fields)]`. A camera topic raises, naming what reads it.
    fn signal<'py>(&self, py: Python<'py>, topic: &str) -> PyResult<Bound<'py, PyAny>> {
        let read_with = match self.content(topic)? {
            ChannelContent::Depth(_) => Some("a depth camera: read it with depth(topic, times_ns)"),
            ChannelContent::Camera(_) => Some("a camera: read it with frames(topic, times_ns)"),
            _ => None,
        };
        if let Some(read_with) = read_with {
            return Err(bad_input(format!(
                "{}: {topic} is {read_with}",
                self.reader.name()
            )));
        }
        let window = py.detach(|| {
            self.reader
                .signals(&[topic], 0..u64::MAX)
                .or_raise()?
                .pop()
                .ok_or_else(|| bad_input(format!("{}: no stream {topic}", self.reader.name())))
        })?;
        let rows = window.log_times.len();
        let columns = window.fields.len();
        if rows * columns != window.values.len() {
            return Err(bad_input(format!(
                "{}: {topic} has {} values for {rows} samples of {columns} fields",
                self.reader.name(),
                window.values.len()
            )));
        }
        let times: Vec<i64> = window.log_times.iter().map(|&t| t as i64).collect();
        let values = window.values.into_pyarray(py).reshape([rows, columns])?;
        Ok((times.into_pyarray(py), values, window.fields)
            .into_pyobject(py)?
            .into_any())
    }

    /// Problems that did not stop opening the file (e.g. a missing summary).
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.reader.warnings().to_vec()
    }

    fn __repr__(&self) -> String {
        format!("Episode({:?})", self.reader.name())
    }
}
