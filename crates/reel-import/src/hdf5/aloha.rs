//! The ALOHA layout (one episode per file: `/observations/images/<camera>`, `qpos`,
//! `qvel`, `effort`, `/action`, root attributes) read as a landing log.

use std::path::Path;

use reel_landing::{LandingImages, LandingLog};
use reel_mcap::SignalKind;

use super::episode::Episode;
use super::file::{h5_err, open, pictures, root_attributes, rows};
use super::landing::{numbered, record, same_length, signal};
use crate::{Error, Result};

/// The ALOHA recorder's frame rate (`DT = 0.02` in its constants), for files that do not
/// say theirs.
pub const ALOHA_FPS: f64 = 50.0;

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

/// ALOHA keeps one folder per task (`sim_transfer_cube_scripted/episode_0.hdf5`).
pub(super) fn task_of(path: &Path) -> String {
    path.parent()
        .and_then(Path::file_name)
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned())
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

pub(super) fn aloha_log(episode: &Episode) -> Result<LandingLog> {
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
