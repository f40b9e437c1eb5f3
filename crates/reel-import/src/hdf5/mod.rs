//! HDF5 episodes, read with the HDF5 library (hdf5-metno): the ALOHA layout (one episode
//! per file: `/observations/images/<camera>` raw or JPEG, `/observations/qpos`, `qvel`,
//! `effort`, `/action`, root attributes) and the robomimic layout (one file of demos:
//! `data/demo_N/obs/*`, `actions`, `rewards`, `dones`, `states`, the environment in
//! `data`'s `env_args`), and any other layout through a TOML [`Mapping`]. Each episode
//! becomes a landing log like a LeRobot episode: every
//! dataset a topic on the episode's fps grid from 0, values unchanged, pictures as recorded
//! (raw RGB, or the JPEG bytes ALOHA compressed them to).

mod mapping;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use hdf5::types::VarLenUnicode;
use hdf5_metno as hdf5;
use ndarray::s;
use reel_mcap::{LandingImage, LandingImages, LandingLog, Sample, SignalKind, SignalStream};

use crate::{Error, Result, Source, SourceEpisode};
pub use mapping::{MappedCamera, MappedSignal, Mapping};

/// The ALOHA recorder's frame rate (`DT = 0.02` in its constants), for files that do not
/// say theirs.
pub const ALOHA_FPS: f64 = 50.0;

/// robomimic's default control frequency, for files whose `env_args` do not say theirs.
pub const ROBOMIMIC_FPS: f64 = 20.0;

/// ALOHA's joint order (`STATE_NAMES` of each arm, left then right).
const ALOHA_JOINTS: [&str; 7] = [
    "waist",
    "shoulder",
    "elbow",
    "forearm_roll",
    "wrist_angle",
    "wrist_rotate",
    "gripper",
];

/// How an HDF5 file lays out its episodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// One episode per file, ALOHA's datasets.
    Aloha,
    /// Demos under `data/`, robomimic's datasets.
    Robomimic,
    /// Any layout, as a [`Mapping`] describes it.
    Mapped,
}

impl Layout {
    /// The layout a file has: `data/` holding demos is robomimic, `/observations` ALOHA.
    pub fn detect(path: &Path) -> Result<Self> {
        let file = open(path)?;
        if file.link_exists("data") {
            Ok(Self::Robomimic)
        } else if file.link_exists("observations") {
            Ok(Self::Aloha)
        } else {
            Err(Error::dataset(
                path.display(),
                "neither the ALOHA layout (/observations) nor robomimic's (/data)",
            ))
        }
    }

    /// `aloha` or `robomimic`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Aloha => "aloha",
            Self::Robomimic => "robomimic",
            Self::Mapped => "mapped",
        }
    }
}

/// One episode of a set of HDF5 files.
#[derive(Debug, Clone)]
struct Episode {
    file: PathBuf,
    layout: Layout,
    /// The episode's group (a robomimic demo, a mapping's episode group), or none (the
    /// file is the episode).
    demo: Option<String>,
    id: String,
    fps: f64,
}

impl Episode {
    /// The number ending the episode's group name (`demo_12`) or, for a file that is one
    /// episode, its file name (`episode_3.hdf5`): how these layouts number episodes.
    fn index(&self) -> Option<i64> {
        let name = match &self.demo {
            Some(group) => group.rsplit('/').next().unwrap_or(group).to_owned(),
            None => self.file.file_stem()?.to_string_lossy().into_owned(),
        };
        let prefix = name.trim_end_matches(|c: char| c.is_ascii_digit());
        name[prefix.len()..].parse().ok()
    }
}

/// HDF5 files opened for import, their episodes listed.
#[derive(Debug, Clone)]
pub struct Hdf5Files {
    name: String,
    episodes: Vec<Episode>,
    mapping: Option<Arc<Mapping>>,
}

impl Hdf5Files {
    /// Lists the episodes of `files` (each file's layout detected). `fps` overrides the
    /// rate a file records or its layout's default. A file that does not open, or holds
    /// no episode, is an error naming it.
    pub fn open(files: &[PathBuf], fps: Option<f64>) -> Result<Self> {
        Self::open_with(files, fps, None)
    }

    /// Like [`open`](Self::open), but with `mapping` (when given) describing every file's
    /// layout instead of detecting ALOHA's or robomimic's.
    pub fn open_with(
        files: &[PathBuf],
        fps: Option<f64>,
        mapping: Option<Mapping>,
    ) -> Result<Self> {
        let mut episodes = Vec::new();
        for path in files {
            let stem = path.file_stem().map_or_else(
                || "episode".to_owned(),
                |s| s.to_string_lossy().into_owned(),
            );
            if let Some(mapping) = &mapping {
                let file = open(path)?;
                let groups = match &mapping.episodes {
                    Some(pattern) => matching_groups(path, &file, pattern)?,
                    None => vec![String::new()],
                };
                for group in groups {
                    episodes.push(Episode {
                        file: path.clone(),
                        layout: Layout::Mapped,
                        id: episode_id(&stem, group.rsplit('/').next().unwrap_or_default())
                            .trim_end_matches('_')
                            .to_owned(),
                        demo: (!group.is_empty()).then_some(group),
                        fps: fps.unwrap_or(mapping.fps),
                    });
                }
                continue;
            }
            let layout = Layout::detect(path)?;
            let stem = path.file_stem().map_or_else(
                || "episode".to_owned(),
                |s| s.to_string_lossy().into_owned(),
            );
            match layout {
                Layout::Aloha => episodes.push(Episode {
                    file: path.clone(),
                    layout,
                    demo: None,
                    id: episode_id(&task_of(path), &stem),
                    fps: fps.unwrap_or(ALOHA_FPS),
                }),
                Layout::Robomimic => {
                    let file = open(path)?;
                    let data = file.group("data").map_err(|e| h5_err(path, "/data", e))?;
                    let env = env_args(&data);
                    let rate = fps
                        .or_else(|| env.as_ref().and_then(control_freq))
                        .unwrap_or(ROBOMIMIC_FPS);
                    let mut demos: Vec<String> = data
                        .member_names()
                        .map_err(|e| h5_err(path, "/data", e))?
                        .into_iter()
                        .filter(|n| n.starts_with("demo_"))
                        .collect();
                    // demo_2 before demo_10.
                    demos.sort_by_key(|n| (n.len(), n.clone()));
                    if demos.is_empty() {
                        return Err(Error::dataset(
                            path.display(),
                            "no demo_N group under /data",
                        ));
                    }
                    for demo in demos {
                        episodes.push(Episode {
                            file: path.clone(),
                            layout,
                            id: episode_id(&stem, &demo),
                            demo: Some(demo),
                            fps: rate,
                        });
                    }
                }
                Layout::Mapped => {}
            }
        }
        if let Some(pair) = episodes.windows(2).find(|w| w[0].id == w[1].id) {
            return Err(Error::dataset(
                pair[1].file.display(),
                format!("its episode id `{}` is another file's too", pair[1].id),
            ));
        }
        let name = match files {
            [one] => one
                .file_stem()
                .map_or_else(|| "hdf5".to_owned(), |s| s.to_string_lossy().into_owned()),
            _ => files
                .first()
                .and_then(|f| f.parent())
                .and_then(Path::file_name)
                .map_or_else(|| "hdf5".to_owned(), |s| s.to_string_lossy().into_owned()),
        };
        Ok(Self {
            name,
            episodes,
            mapping: mapping.map(Arc::new),
        })
    }
}

impl Hdf5Files {
    /// The frame rate of every episode: one import runs the pipeline at one rate, so files
    /// of different rates are imported apart.
    pub fn fps(&self) -> Result<f64> {
        let first = self.episodes.first().map_or(ALOHA_FPS, |e| e.fps);
        match self.episodes.iter().find(|e| e.fps != first) {
            Some(other) => Err(Error::dataset(
                other.file.display(),
                format!(
                    "recorded at {} fps, the other files at {first}: import them apart",
                    other.fps
                ),
            )),
            None => Ok(first),
        }
    }
}

impl Source for Hdf5Files {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        "hdf5"
    }

    fn episodes(&self) -> Vec<SourceEpisode> {
        self.episodes
            .iter()
            .enumerate()
            .map(|(index, e)| SourceEpisode {
                index: index as i64,
                id: e.id.clone(),
            })
            .collect()
    }

    fn landing_log(&self, index: usize) -> Result<LandingLog> {
        let episode = self
            .episodes
            .get(index)
            .ok_or_else(|| Error::dataset(&self.name, format!("no episode {index}")))?;
        match (episode.layout, &self.mapping) {
            (Layout::Aloha, _) => aloha_log(episode),
            (Layout::Robomimic, _) => robomimic_log(episode),
            (Layout::Mapped, Some(mapping)) => mapped_log(episode, mapping),
            (Layout::Mapped, None) => Err(Error::dataset(
                episode.file.display(),
                "a mapped episode without its mapping",
            )),
        }
    }
}

fn open(path: &Path) -> Result<hdf5::File> {
    if !path.is_file() {
        return Err(Error::dataset(path.display(), "missing"));
    }
    hdf5::File::open(path)
        .map_err(|e| Error::dataset(path.display(), format!("not a readable HDF5 file: {e}")))
}

fn h5_err(path: &Path, object: &str, e: hdf5::Error) -> Error {
    Error::dataset(path.display(), format!("{object}: {e}"))
}

/// An episode id from two parts, as one path segment.
fn episode_id(a: &str, b: &str) -> String {
    format!("{a}_{b}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// ALOHA keeps one folder per task (`sim_transfer_cube_scripted/episode_0.hdf5`).
fn task_of(path: &Path) -> String {
    path.parent()
        .and_then(Path::file_name)
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned())
}

fn env_args(data: &hdf5::Group) -> Option<serde_json::Value> {
    let text = data
        .attr("env_args")
        .ok()?
        .read_scalar::<VarLenUnicode>()
        .ok()?;
    serde_json::from_str(text.as_str()).ok()
}

fn control_freq(env: &serde_json::Value) -> Option<f64> {
    env.get("env_kwargs")?.get("control_freq")?.as_f64()
}

/// A numeric dataset as rows of values (a 1-d dataset is one value a row).
fn rows(path: &Path, ds: &hdf5::Dataset, name: &str) -> Result<Vec<Vec<f64>>> {
    let shape = ds.shape();
    let values: Vec<f64> = ds.read_raw::<f64>().map_err(|e| h5_err(path, name, e))?;
    match shape[..] {
        [t] => Ok(values.into_iter().take(t).map(|v| vec![v]).collect()),
        [_, width] if width > 0 => Ok(values.chunks_exact(width).map(<[f64]>::to_vec).collect()),
        _ => Err(Error::dataset(
            path.display(),
            format!("{name} has shape {shape:?}, not (frames,) or (frames, values)"),
        )),
    }
}

fn signal(
    topic: &str,
    kind: SignalKind,
    fields: Vec<String>,
    values: Vec<Vec<f64>>,
    period_ns: u64,
) -> SignalStream {
    SignalStream {
        topic: topic.to_owned(),
        group: String::new(),
        kind,
        fields,
        source_schema: "hdf5".into(),
        samples: values
            .into_iter()
            .enumerate()
            .map(|(i, values)| {
                let t = i as u64 * period_ns;
                Sample {
                    log_time: t,
                    publish_time: t,
                    stamp_ns: t,
                    values,
                }
            })
            .collect(),
    }
}

fn numbered(prefix: &str, count: usize) -> Vec<String> {
    if count == 1 {
        return vec![prefix.to_owned()];
    }
    (0..count).map(|i| format!("{prefix}.{i}")).collect()
}

/// ALOHA's names for 14 values (both arms), else numbered.
fn aloha_names(prefix: &str, count: usize) -> Vec<String> {
    if count == 14 {
        ["left", "right"]
            .iter()
            .flat_map(|arm| ALOHA_JOINTS.iter().map(move |j| format!("{arm}_{j}")))
            .collect()
    } else {
        numbered(prefix, count)
    }
}

/// Checks every stream of an episode has `frames` rows.
fn same_length(path: &Path, what: &str, rows: usize, frames: usize) -> Result<()> {
    if rows == frames {
        return Ok(());
    }
    Err(Error::dataset(
        path.display(),
        format!("{what} has {rows} frames, the episode {frames}"),
    ))
}

/// A camera dataset: (T, H, W, 3) uint8 raw pictures, or (T, padded) uint8 of JPEG bytes
/// padded with zeros (ALOHA's compressed recordings).
fn pictures(
    path: &Path,
    ds: &hdf5::Dataset,
    name: &str,
    period_ns: u64,
) -> Result<Vec<(u64, LandingImage)>> {
    let shape = ds.shape();
    match shape[..] {
        [t, h, w, 3] => (0..t)
            .map(|i| {
                let frame = ds
                    .read_slice::<u8, _, ndarray::Ix3>(s![i, .., .., ..])
                    .map_err(|e| h5_err(path, name, e))?;
                let data: Vec<u8> = frame.iter().copied().collect();
                Ok((
                    i as u64 * period_ns,
                    LandingImage::Rgb {
                        width: w,
                        height: h,
                        data: Bytes::from(data),
                    },
                ))
            })
            .collect(),
        [t, _] => (0..t)
            .map(|i| {
                let row = ds
                    .read_slice_1d::<u8, _>(s![i, ..])
                    .map_err(|e| h5_err(path, name, e))?;
                let bytes: Vec<u8> = row.iter().copied().collect();
                // The padding is zeros after JPEG's end-of-image marker.
                let end = bytes
                    .windows(2)
                    .rposition(|w| w == [0xff, 0xd9])
                    .ok_or_else(|| {
                        Error::dataset(
                            path.display(),
                            format!("{name} frame {i} is not a JPEG picture (no end marker)"),
                        )
                    })?;
                Ok((
                    i as u64 * period_ns,
                    LandingImage::Jpeg(Bytes::from(bytes[..end + 2].to_vec())),
                ))
            })
            .collect(),
        _ => Err(Error::dataset(
            path.display(),
            format!(
                "{name} has shape {shape:?}, not (frames, height, width, 3) or (frames, JPEG bytes)"
            ),
        )),
    }
}

/// The file's root attributes as JSON text (numbers, strings, booleans), for the record.
fn root_attributes(file: &hdf5::File) -> String {
    let mut out = serde_json::Map::new();
    for name in file.attr_names().unwrap_or_default() {
        let Ok(attr) = file.attr(&name) else { continue };
        let value = if let Ok(b) = attr.read_scalar::<bool>() {
            serde_json::Value::Bool(b)
        } else if let Ok(v) = attr.read_scalar::<f64>() {
            serde_json::json!(v)
        } else if let Ok(s) = attr.read_scalar::<VarLenUnicode>() {
            serde_json::Value::String(s.as_str().to_owned())
        } else {
            continue;
        };
        out.insert(name, value);
    }
    serde_json::Value::Object(out).to_string()
}

fn record(
    episode: &Episode,
    task: String,
    robot: String,
    extra: &[(&str, String)],
) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut record = BTreeMap::from([
        ("episode_id".to_owned(), episode.id.clone()),
        ("task".to_owned(), task),
        ("robot_id".to_owned(), robot),
        (
            crate::keys::SOURCE.to_owned(),
            format!("hdf5.{}", episode.layout.name()),
        ),
        (
            crate::keys::SOURCE_DATASET.to_owned(),
            episode.file.display().to_string(),
        ),
        (crate::keys::FPS.to_owned(), episode.fps.to_string()),
    ]);
    if let Some(index) = episode.index() {
        record.insert(
            crate::keys::SOURCE_EPISODE_INDEX.to_owned(),
            index.to_string(),
        );
    }
    for (k, v) in extra {
        record.insert((*k).to_owned(), v.clone());
    }
    BTreeMap::from([("episode".to_owned(), record)])
}

fn aloha_log(episode: &Episode) -> Result<LandingLog> {
    let path = &episode.file;
    let file = open(path)?;
    let period_ns = (1e9 / episode.fps).round() as u64;
    let dataset = |name: &str| {
        file.dataset(name)
            .map_err(|_| Error::dataset(path.display(), format!("no dataset {name}")))
    };
    let qpos = rows(path, &dataset("observations/qpos")?, "/observations/qpos")?;
    let frames = qpos.len();
    let action = rows(path, &dataset("action")?, "/action")?;
    same_length(path, "/action", action.len(), frames)?;
    let width = |v: &[Vec<f64>]| v.first().map_or(0, Vec::len);
    let mut signals = vec![
        signal(
            "/observations/qpos",
            SignalKind::State,
            aloha_names("qpos", width(&qpos)),
            qpos,
            period_ns,
        ),
        signal(
            "/action",
            SignalKind::Action,
            aloha_names("action", width(&action)),
            action,
            period_ns,
        ),
    ];
    for name in ["qvel", "effort"] {
        let full = format!("observations/{name}");
        if file.link_exists(&full) {
            let values = rows(path, &dataset(&full)?, &format!("/{full}"))?;
            same_length(path, &format!("/{full}"), values.len(), frames)?;
            signals.push(signal(
                &format!("/{full}"),
                SignalKind::Signal,
                aloha_names(name, width(&values)),
                values,
                period_ns,
            ));
        }
    }
    let cameras = file
        .group("observations/images")
        .map_err(|_| Error::dataset(path.display(), "no group /observations/images"))?;
    let mut images = Vec::new();
    for camera in cameras
        .member_names()
        .map_err(|e| h5_err(path, "/observations/images", e))?
    {
        let name = format!("/observations/images/{camera}");
        let ds = cameras
            .dataset(&camera)
            .map_err(|e| h5_err(path, &name, e))?;
        let frames_of = pictures(path, &ds, &name, period_ns)?;
        same_length(path, &name, frames_of.len(), frames)?;
        images.push(LandingImages {
            topic: name,
            frame_id: camera,
            frames: frames_of,
        });
    }
    Ok(LandingLog {
        videos: Vec::new(),
        images,
        signals,
        metadata: record(
            episode,
            task_of(path),
            "aloha".into(),
            &[("hdf5.attributes", root_attributes(&file))],
        ),
    })
}

fn robomimic_log(episode: &Episode) -> Result<LandingLog> {
    let path = &episode.file;
    let file = open(path)?;
    let demo_name = episode.demo.clone().unwrap_or_default();
    let demo = file
        .group(&format!("data/{demo_name}"))
        .map_err(|e| h5_err(path, &format!("/data/{demo_name}"), e))?;
    let period_ns = (1e9 / episode.fps).round() as u64;
    let at = |name: &str| format!("/data/{demo_name}/{name}");
    let actions_ds = demo
        .dataset("actions")
        .map_err(|_| Error::dataset(path.display(), format!("no dataset {}", at("actions"))))?;
    let actions = rows(path, &actions_ds, &at("actions"))?;
    let frames = actions.len();
    let width = |v: &[Vec<f64>]| v.first().map_or(0, Vec::len);
    let mut signals = vec![signal(
        "/actions",
        SignalKind::Action,
        numbered("actions", width(&actions)),
        actions,
        period_ns,
    )];
    for name in ["rewards", "dones", "states"] {
        if let Ok(ds) = demo.dataset(name) {
            let values = rows(path, &ds, &at(name))?;
            same_length(path, &at(name), values.len(), frames)?;
            signals.push(signal(
                &format!("/{name}"),
                SignalKind::Signal,
                numbered(name, width(&values)),
                values,
                period_ns,
            ));
        }
    }
    let mut images = Vec::new();
    if let Ok(obs) = demo.group("obs") {
        for key in obs
            .member_names()
            .map_err(|e| h5_err(path, &at("obs"), e))?
        {
            let name = at(&format!("obs/{key}"));
            let ds = obs.dataset(&key).map_err(|e| h5_err(path, &name, e))?;
            let is_picture = ds.ndim() == 4 && ds.shape().last() == Some(&3);
            if is_picture {
                let frames_of = pictures(path, &ds, &name, period_ns)?;
                same_length(path, &name, frames_of.len(), frames)?;
                images.push(LandingImages {
                    topic: format!("/obs/{key}"),
                    frame_id: key,
                    frames: frames_of,
                });
            } else {
                let values = rows(path, &ds, &name)?;
                same_length(path, &name, values.len(), frames)?;
                let kind = if key.ends_with("joint_pos") {
                    SignalKind::State
                } else {
                    SignalKind::Signal
                };
                signals.push(signal(
                    &format!("/obs/{key}"),
                    kind,
                    numbered(&key, width(&values)),
                    values,
                    period_ns,
                ));
            }
        }
    }
    let data = file.group("data").map_err(|e| h5_err(path, "/data", e))?;
    let env = env_args(&data);
    let task = env
        .as_ref()
        .and_then(|e| e.get("env_name"))
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let robot = env
        .as_ref()
        .and_then(|e| {
            e.get("env_kwargs")?
                .get("robots")?
                .get(0)?
                .as_str()
                .map(str::to_owned)
        })
        .unwrap_or_default();
    Ok(LandingLog {
        videos: Vec::new(),
        images,
        signals,
        metadata: record(
            episode,
            task,
            robot,
            &[
                ("source.demo", demo_name.clone()),
                (
                    "robomimic.env_args",
                    env.map(|e| e.to_string()).unwrap_or_default(),
                ),
            ],
        ),
    })
}

/// The groups `pattern` names: a path whose last part may end in `*` (every member of the
/// parent group starting with what comes before it, `demo_2` before `demo_10`).
fn matching_groups(path: &Path, file: &hdf5::File, pattern: &str) -> Result<Vec<String>> {
    let pattern = pattern.trim_matches('/');
    let Some(prefix_of_leaf) = pattern.strip_suffix('*') else {
        return match file.group(pattern) {
            Ok(_) => Ok(vec![pattern.to_owned()]),
            Err(_) => Err(Error::dataset(
                path.display(),
                format!("no group /{pattern}"),
            )),
        };
    };
    let (parent, prefix) = prefix_of_leaf
        .rsplit_once('/')
        .unwrap_or(("", prefix_of_leaf));
    let group = if parent.is_empty() {
        file.group("/")
    } else {
        file.group(parent)
    }
    .map_err(|_| Error::dataset(path.display(), format!("no group /{parent}")))?;
    let mut names: Vec<String> = group
        .member_names()
        .map_err(|e| h5_err(path, &format!("/{parent}"), e))?
        .into_iter()
        .filter(|n| n.starts_with(prefix) && group.group(n).is_ok())
        .collect();
    names.sort_by_key(|n| (n.len(), n.clone()));
    if names.is_empty() {
        return Err(Error::dataset(
            path.display(),
            format!("no group matches `{pattern}`"),
        ));
    }
    Ok(names
        .into_iter()
        .map(|n| {
            if parent.is_empty() {
                n
            } else {
                format!("{parent}/{n}")
            }
        })
        .collect())
}

fn mapped_log(episode: &Episode, mapping: &Mapping) -> Result<LandingLog> {
    let path = &episode.file;
    let file = open(path)?;
    let base = episode.demo.clone().unwrap_or_default();
    let root = file
        .group(if base.is_empty() { "/" } else { &base })
        .map_err(|e| h5_err(path, &format!("/{base}"), e))?;
    let at = |dataset: &str| {
        format!(
            "/{}",
            [base.as_str(), dataset.trim_matches('/')]
                .iter()
                .filter(|p| !p.is_empty())
                .copied()
                .collect::<Vec<_>>()
                .join("/")
        )
    };
    let period_ns = (1e9 / episode.fps).round() as u64;
    let mut frames: Option<(String, usize)> = None;
    let mut check = |name: &str, count: usize| match &frames {
        Some((first, n)) => same_length(path, name, count, *n).map_err(|_| {
            Error::dataset(
                path.display(),
                format!("{name} has {count} frames, {first} {n}"),
            )
        }),
        None => {
            frames = Some((name.to_owned(), count));
            Ok(())
        }
    };
    let dataset = |name: &str| {
        root.dataset(name.trim_matches('/'))
            .map_err(|_| Error::dataset(path.display(), format!("no dataset {}", at(name))))
    };
    let mut signals = Vec::new();
    for mapped in &mapping.signals {
        let name = at(&mapped.dataset);
        let values = rows(path, &dataset(&mapped.dataset)?, &name)?;
        check(&name, values.len())?;
        let width = values.first().map_or(0, Vec::len);
        let fields = match &mapped.names {
            Some(names) if names.len() == width => names.clone(),
            Some(names) => {
                return Err(Error::dataset(
                    path.display(),
                    format!(
                        "{name} has {width} values, the mapping names {}",
                        names.len()
                    ),
                ));
            }
            None => numbered(mapped.dataset.rsplit('/').next().unwrap_or("value"), width),
        };
        signals.push(signal(
            &mapped.topic(),
            mapped.kind(),
            fields,
            values,
            period_ns,
        ));
    }
    let mut images = Vec::new();
    for camera in &mapping.cameras {
        let name = at(&camera.dataset);
        let pictures_of = pictures(path, &dataset(&camera.dataset)?, &name, period_ns)?;
        check(&name, pictures_of.len())?;
        images.push(LandingImages {
            topic: camera.topic(),
            frame_id: camera
                .dataset
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .to_owned(),
            frames: pictures_of,
        });
    }
    Ok(LandingLog {
        videos: Vec::new(),
        images,
        signals,
        metadata: record(
            episode,
            mapping.task.clone(),
            mapping.robot.clone(),
            &[("source.group", format!("/{base}"))],
        ),
    })
}
