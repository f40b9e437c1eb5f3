//! The robomimic layout (demos under `data/`: `obs/*`, `actions`, `rewards`, `dones`,
//! `states`, the environment in `data`'s `env_args`) read as landing logs.

use hdf5::types::VarLenUnicode;
use hdf5_metno as hdf5;
use reel_landing::{LandingImages, LandingLog};
use reel_mcap::SignalKind;

use super::episode::Episode;
use super::file::{h5_err, open, pictures, rows};
use super::landing::{numbered, record, same_length, signal};
use crate::{Error, Result};

/// robomimic's default control frequency, for files whose `env_args` do not say theirs.
pub const ROBOMIMIC_FPS: f64 = 20.0;

pub(super) fn env_args(data: &hdf5::Group) -> Option<serde_json::Value> {
    let text = data
        .attr("env_args")
        .ok()?
        .read_scalar::<VarLenUnicode>()
        .ok()?;
    serde_json::from_str(text.as_str()).ok()
}

pub(super) fn control_freq(env: &serde_json::Value) -> Option<f64> {
    env.get("env_kwargs")?.get("control_freq")?.as_f64()
}

pub(super) fn robomimic_log(episode: &Episode) -> Result<LandingLog> {
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
