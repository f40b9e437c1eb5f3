//! Saving and loading optimizer state as safetensors.
//!
//! A file holds the state of the parameters one rank owns: f32 tensors named
//! `muon.momentum.<param>`, `adamw.exp_avg.<param>` and `adamw.exp_avg_sq.<param>` in the parameter's
//! shape, and the metadata `format = "reel-muon-state/1"` and `step`. Hyper-parameters are not stored:
//! they come from the training configuration. A sharded job writes one file per rank
//! (`rank-00000.safetensors`, …); [`OptimizerState::merge`] joins them (hybrid ranks of different
//! nodes hold identical copies, which must agree bit for bit) and any layout on any world size then
//! loads what it owns from the merged state.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use safetensors::tensor::{Dtype, SafeTensors, TensorView};

use crate::comm::Communicator;
use crate::error::{MuonError, Result};
use crate::optimizer::{Muon, ParamSpec, ParamState};
use crate::shard::ShardedMuon;

const FORMAT: &str = "reel-muon-state/1";
const MUON_MOMENTUM: &str = "muon.momentum.";
const ADAMW_EXP_AVG: &str = "adamw.exp_avg.";
const ADAMW_EXP_AVG_SQ: &str = "adamw.exp_avg_sq.";

/// Optimizer state by parameter name: all of it, or one rank's share.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OptimizerState {
    /// Steps taken.
    pub step: u64,
    /// State of each parameter present.
    pub params: BTreeMap<String, ParamState>,
}

impl OptimizerState {
    /// Joins the shares of several ranks. Steps must agree; a parameter present in several shares must
    /// have bit-identical state.
    pub fn merge(shards: impl IntoIterator<Item = OptimizerState>) -> Result<Self> {
        let mut merged: Option<OptimizerState> = None;
        for shard in shards {
            let Some(all) = merged.as_mut() else {
                merged = Some(shard);
                continue;
            };
            if all.step != shard.step {
                return Err(MuonError::Config(format!(
                    "shards at steps {} and {}",
                    all.step, shard.step
                )));
            }
            for (name, state) in shard.params {
                match all.params.get(&name) {
                    Some(existing) if !bit_identical(existing, &state) => {
                        return Err(MuonError::shape(
                            &name,
                            "shards hold different state for the same parameter",
                        ));
                    }
                    Some(_) => {}
                    None => {
                        all.params.insert(name, state);
                    }
                }
            }
        }
        Ok(merged.unwrap_or_default())
    }

    /// Writes the state to `path` as safetensors (through a temporary file renamed into place).
    pub fn save(&self, path: &Path, specs: &[ParamSpec]) -> Result<()> {
        let shapes: HashMap<&str, &[usize]> = specs
            .iter()
            .map(|s| (s.name.as_str(), s.shape.as_slice()))
            .collect();
        let mut tensors: Vec<(String, &[f32], &[usize])> = Vec::new();
        for (name, state) in &self.params {
            let shape = *shapes
                .get(name.as_str())
                .ok_or_else(|| MuonError::shape(name, "state for an unknown parameter"))?;
            match state {
                ParamState::Muon { momentum } => {
                    tensors.push((format!("{MUON_MOMENTUM}{name}"), momentum, shape))
                }
                ParamState::Adamw {
                    exp_avg,
                    exp_avg_sq,
                } => {
                    tensors.push((format!("{ADAMW_EXP_AVG}{name}"), exp_avg, shape));
                    tensors.push((format!("{ADAMW_EXP_AVG_SQ}{name}"), exp_avg_sq, shape));
                }
            }
        }
        let bytes: Vec<Vec<u8>> = tensors
            .iter()
            .map(|(_, data, _)| data.iter().flat_map(|v| v.to_le_bytes()).collect())
            .collect();
        let views = tensors
            .iter()
            .zip(&bytes)
            .map(|((name, _, shape), data)| {
                TensorView::new(Dtype::F32, shape.to_vec(), data)
                    .map(|view| (name.clone(), view))
                    .map_err(|e| MuonError::shape(name, e.to_string()))
            })
            .collect::<Result<Vec<_>>>()?;
        let metadata = HashMap::from([
            ("format".to_owned(), FORMAT.to_owned()),
            ("step".to_owned(), self.step.to_string()),
        ]);
        let encoded = safetensors::serialize(views, Some(metadata))
            .map_err(|e| MuonError::bad_file(path, e.to_string()))?;
        write_atomically(path, &encoded)
    }

    /// Reads a file written by [`OptimizerState::save`].
    pub fn load(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|e| MuonError::io(path, e))?;
        let bad = |what: String| MuonError::bad_file(path, what);
        let (_, header) =
            SafeTensors::read_metadata(&bytes).map_err(|e| bad(format!("not safetensors: {e}")))?;
        let metadata = header.metadata().clone().unwrap_or_default();
        if metadata.get("format").map(String::as_str) != Some(FORMAT) {
            return Err(bad(format!(
                "metadata `format` is {:?}, expected {FORMAT:?}",
                metadata.get("format")
            )));
        }
        let step = metadata
            .get("step")
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad("metadata `step` is missing or not an integer".into()))?;
        let file =
            SafeTensors::deserialize(&bytes).map_err(|e| bad(format!("not safetensors: {e}")))?;
        let mut moments: BTreeMap<String, AdamWMoments> = BTreeMap::new();
        let mut params = BTreeMap::new();
        for (name, view) in file.tensors() {
            if view.dtype() != Dtype::F32 {
                return Err(bad(format!(
                    "tensor `{name}` is {:?}, expected F32",
                    view.dtype()
                )));
            }
            let data: Vec<f32> = view
                .data()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            if let Some(param) = name.strip_prefix(MUON_MOMENTUM) {
                params.insert(param.to_owned(), ParamState::Muon { momentum: data });
            } else if let Some(param) = name.strip_prefix(ADAMW_EXP_AVG_SQ) {
                moments.entry(param.to_owned()).or_default().1 = Some(data);
            } else if let Some(param) = name.strip_prefix(ADAMW_EXP_AVG) {
                moments.entry(param.to_owned()).or_default().0 = Some(data);
            } else {
                return Err(bad(format!("unexpected tensor `{name}`")));
            }
        }
        for (param, pair) in moments {
            let (Some(exp_avg), Some(exp_avg_sq)) = pair else {
                return Err(bad(format!(
                    "parameter `{param}` has only one of its two AdamW moments"
                )));
            };
            params.insert(
                param,
                ParamState::Adamw {
                    exp_avg,
                    exp_avg_sq,
                },
            );
        }
        Ok(Self { step, params })
    }
}

/// `(exp_avg, exp_avg_sq)` of a parameter while its two tensors are read.
type AdamWMoments = (Option<Vec<f32>>, Option<Vec<f32>>);

fn bit_identical(a: &ParamState, b: &ParamState) -> bool {
    let same = |x: &[f32], y: &[f32]| {
        x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits())
    };
    match (a, b) {
        (ParamState::Muon { momentum: x }, ParamState::Muon { momentum: y }) => same(x, y),
        (
            ParamState::Adamw {
                exp_avg: m1,
                exp_avg_sq: v1,
            },
            ParamState::Adamw {
                exp_avg: m2,
                exp_avg_sq: v2,
            },
        ) => same(m1, m2) && same(v1, v2),
        _ => false,
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes).map_err(|e| MuonError::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| MuonError::io(path, e))
}

impl Muon {
    /// The state of the owned parameters.
    pub fn export_state(&self) -> OptimizerState {
        let params = (0..self.specs().len())
            .filter_map(|i| {
                self.state(i)
                    .map(|s| (self.specs()[i].name.clone(), s.clone()))
            })
            .collect();
        OptimizerState {
            step: self.step_count(),
            params,
        }
    }

    /// Takes the state of every owned parameter from `state` (which may hold more), checking kinds and
    /// lengths. Fails, changing nothing, if an owned parameter is missing.
    pub fn import_state(&mut self, state: &OptimizerState) -> Result<()> {
        let mut chosen = Vec::new();
        for (index, spec) in self.specs().iter().enumerate() {
            if !self.owns(index) {
                continue;
            }
            let found = state
                .params
                .get(&spec.name)
                .ok_or_else(|| MuonError::shape(&spec.name, "no state saved"))?;
            let fits = match found {
                ParamState::Muon { momentum } => {
                    spec.kind == crate::ParamKind::Muon && momentum.len() == spec.numel()
                }
                ParamState::Adamw {
                    exp_avg,
                    exp_avg_sq,
                } => {
                    spec.kind == crate::ParamKind::Adamw
                        && exp_avg.len() == spec.numel()
                        && exp_avg_sq.len() == spec.numel()
                }
            };
            if !fits {
                return Err(MuonError::shape(
                    &spec.name,
                    "saved state has another kind or length",
                ));
            }
            chosen.push((index, found.clone()));
        }
        for (index, found) in chosen {
            self.set_state(index, found);
        }
        self.set_step_count(state.step);
        Ok(())
    }
}

/// File of rank `rank` in a sharded checkpoint folder.
pub fn rank_file(dir: &Path, rank: usize) -> PathBuf {
    dir.join(format!("rank-{rank:05}.safetensors"))
}

/// Reads and merges every `rank-*.safetensors` in `dir`, whatever world size wrote them.
pub fn load_sharded(dir: &Path) -> Result<OptimizerState> {
    let entries = std::fs::read_dir(dir).map_err(|e| MuonError::io(dir, e))?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| MuonError::io(dir, e))?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name.starts_with("rank-") && name.ends_with(".safetensors") {
            files.push(path);
        }
    }
    if files.is_empty() {
        return Err(MuonError::bad_file(dir, "no rank-*.safetensors files"));
    }
    files.sort();
    OptimizerState::merge(
        files
            .iter()
            .map(|f| OptimizerState::load(f))
            .collect::<Result<Vec<_>>>()?,
    )
}

impl<C: Communicator> ShardedMuon<C> {
    /// Writes this rank's share to `dir/rank-NNNNN.safetensors`.
    pub fn save_shard(&self, dir: &Path) -> Result<PathBuf> {
        let path = rank_file(dir, self.comm().rank());
        self.optimizer()
            .export_state()
            .save(&path, self.optimizer().specs())?;
        Ok(path)
    }

    /// Loads the owned part of a merged state (see [`load_sharded`]).
    pub fn import_state(&mut self, state: &OptimizerState) -> Result<()> {
        self.optimizer_mut().import_state(state)
    }
}
