//! Any other layout, as a [`Mapping`] describes it: the groups that are episodes, and each
//! episode read as a landing log.

use std::path::Path;

use hdf5_metno as hdf5;
use reel_landing::{LandingImages, LandingLog};

use super::episode::Episode;
use super::file::{h5_err, open, pictures, rows};
use super::landing::{numbered, record, same_length, signal};
use super::mapping::Mapping;
use crate::{Error, Result};

/// The groups `pattern` names: a path whose last part may end in `*` (every member of the
/// parent group starting with what comes before it, `demo_2` before `demo_10`).
pub(super) fn matching_groups(
    path: &Path,
    file: &hdf5::File,
    pattern: &str,
) -> Result<Vec<String>> {
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

pub(super) fn mapped_log(episode: &Episode, mapping: &Mapping) -> Result<LandingLog> {
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
