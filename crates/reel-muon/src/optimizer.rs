//! Muon for matrices and AdamW for everything else, in one optimizer (like `MuonWithAuxAdam`).
//!
//! Definitions follow `torch.optim.Muon` and `torch.optim.AdamW`. A [`Muon`] may own only a subset of the
//! parameters: the sharded strategies give each rank the parameters it updates, and optimizer state
//! exists only for those.

use faer::Par;
use rayon::prelude::*;

use crate::error::{MuonError, Result};
use crate::newton_schulz::{NewtonSchulz, ns_flops};

/// How the learning rate of a Muon update is scaled by the matrix shape (`rows = out`, `cols = in`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AdjustLr {
    /// `max(1, rows/cols)^½`: Keller Jordan's original rule, `torch.optim.Muon`'s default.
    #[default]
    Original,
    /// `0.2·max(rows, cols)^½`: the update's RMS matches AdamW's, so AdamW learning rates carry over.
    MatchRmsAdamw,
    /// `(rows/cols)^½`: the spectral-norm condition for feature learning (Yang, Simon & Bernstein).
    Spectral,
}

impl AdjustLr {
    /// The factor the learning rate is multiplied by for a `rows × cols` matrix.
    pub fn ratio(self, rows: usize, cols: usize) -> f32 {
        let (rows, cols) = (rows as f32, cols as f32);
        match self {
            Self::Original => (rows / cols).max(1.0).sqrt(),
            Self::MatchRmsAdamw => 0.2 * rows.max(cols).sqrt(),
            Self::Spectral => (rows / cols).sqrt(),
        }
    }
}

/// Hyper-parameters of the Muon part. Defaults are `torch.optim.Muon`'s.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MuonConfig {
    /// Learning rate.
    pub lr: f32,
    /// Decoupled weight decay: `p ← p·(1 − lr·wd)` before the update.
    pub weight_decay: f32,
    /// Momentum β of the EMA buffer.
    pub momentum: f32,
    /// Nesterov: orthogonalise `(1−β)·g + β·buf` instead of `buf`.
    pub nesterov: bool,
    /// The orthogonalisation.
    pub newton_schulz: NewtonSchulz,
    /// Learning-rate scaling by shape.
    pub adjust_lr: AdjustLr,
}

impl Default for MuonConfig {
    fn default() -> Self {
        Self {
            lr: 1e-3,
            weight_decay: 0.1,
            momentum: 0.95,
            nesterov: true,
            newton_schulz: NewtonSchulz::default(),
            adjust_lr: AdjustLr::Original,
        }
    }
}

/// Hyper-parameters of the AdamW part. Defaults are `torch.optim.AdamW`'s.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AdamWConfig {
    /// Learning rate.
    pub lr: f32,
    /// `(β₁, β₂)`.
    pub betas: (f32, f32),
    /// Added to the denominator.
    pub eps: f32,
    /// Decoupled weight decay.
    pub weight_decay: f32,
}

impl Default for AdamWConfig {
    fn default() -> Self {
        Self {
            lr: 1e-3,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.01,
        }
    }
}

/// Which rule updates a parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParamKind {
    /// Hidden matrices (2-D, or ≥ 3-D flattened to `(shape[0], −1)`, like conv weights).
    Muon,
    /// Embeddings, heads, norms, biases.
    Adamw,
}

/// A named parameter's shape and rule.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ParamSpec {
    /// Unique name, used in state files.
    pub name: String,
    /// Dimensions, outermost first (row-major storage).
    pub shape: Vec<usize>,
    /// Update rule.
    pub kind: ParamKind,
}

/// FLOPs charged for an AdamW element when balancing owners: tiny next to Newton–Schulz.
const ADAMW_FLOPS_PER_ELEMENT: f64 = 12.0;

impl ParamSpec {
    /// A parameter updated by Muon. Must have at least two dimensions.
    pub fn muon(name: impl Into<String>, shape: impl Into<Vec<usize>>) -> Self {
        Self {
            name: name.into(),
            shape: shape.into(),
            kind: ParamKind::Muon,
        }
    }

    /// A parameter updated by AdamW.
    pub fn adamw(name: impl Into<String>, shape: impl Into<Vec<usize>>) -> Self {
        Self {
            name: name.into(),
            shape: shape.into(),
            kind: ParamKind::Adamw,
        }
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// The matrix Muon sees: `(shape[0], product of the rest)`.
    pub fn matrix_dims(&self) -> (usize, usize) {
        let rows = self.shape.first().copied().unwrap_or(1);
        (rows, self.shape.iter().skip(1).product())
    }

    /// Work of one update, in FLOPs (dense Newton–Schulz count for Muon).
    pub fn update_flops(&self, ns_steps: usize) -> f64 {
        match self.kind {
            ParamKind::Muon => {
                let (rows, cols) = self.matrix_dims();
                ns_flops(rows, cols, ns_steps)
            }
            ParamKind::Adamw => ADAMW_FLOPS_PER_ELEMENT * self.numel() as f64,
        }
    }

    /// Checks the shape suits the rule.
    pub fn validate(&self) -> Result<()> {
        if self.shape.is_empty() || self.numel() == 0 {
            return Err(MuonError::shape(
                &self.name,
                format!("empty shape {:?}", self.shape),
            ));
        }
        if self.kind == ParamKind::Muon && self.shape.len() < 2 {
            return Err(MuonError::shape(
                &self.name,
                "Muon needs at least two dimensions; use AdamW for 1-D parameters",
            ));
        }
        Ok(())
    }
}

/// Optimizer state of one parameter.
#[derive(Clone, Debug, PartialEq)]
pub enum ParamState {
    /// Muon's momentum buffer.
    Muon {
        /// EMA of gradients.
        momentum: Vec<f32>,
    },
    /// AdamW's moments.
    Adamw {
        /// First moment.
        exp_avg: Vec<f32>,
        /// Second moment.
        exp_avg_sq: Vec<f32>,
    },
}

impl ParamState {
    pub(crate) fn zeros(spec: &ParamSpec) -> Self {
        let n = spec.numel();
        match spec.kind {
            ParamKind::Muon => Self::Muon {
                momentum: vec![0.0; n],
            },
            ParamKind::Adamw => Self::Adamw {
                exp_avg: vec![0.0; n],
                exp_avg_sq: vec![0.0; n],
            },
        }
    }

    /// Bytes of state held.
    pub fn bytes(&self) -> usize {
        4 * match self {
            Self::Muon { momentum } => momentum.len(),
            Self::Adamw {
                exp_avg,
                exp_avg_sq,
            } => exp_avg.len() + exp_avg_sq.len(),
        }
    }
}

/// Muon (with auxiliary AdamW) over the parameters it owns.
#[derive(Debug, Clone)]
pub struct Muon {
    muon: MuonConfig,
    adamw: AdamWConfig,
    specs: Vec<ParamSpec>,
    /// `Some` exactly for the owned parameters.
    states: Vec<Option<ParamState>>,
    step: u64,
}

impl Muon {
    /// An optimizer that owns every parameter.
    pub fn new(specs: Vec<ParamSpec>, muon: MuonConfig, adamw: AdamWConfig) -> Result<Self> {
        let owned = vec![true; specs.len()];
        Self::with_owned(specs, &owned, muon, adamw)
    }

    /// An optimizer that updates, and keeps state for, only the parameters marked in `owned`.
    pub fn with_owned(
        specs: Vec<ParamSpec>,
        owned: &[bool],
        muon: MuonConfig,
        adamw: AdamWConfig,
    ) -> Result<Self> {
        if owned.len() != specs.len() {
            return Err(MuonError::Config(format!(
                "{} ownership flags for {} parameters",
                owned.len(),
                specs.len()
            )));
        }
        let mut names = std::collections::HashSet::new();
        for spec in &specs {
            spec.validate()?;
            if !names.insert(spec.name.as_str()) {
                return Err(MuonError::shape(&spec.name, "name used twice"));
            }
        }
        if !(0.0..1.0).contains(&muon.momentum) {
            return Err(MuonError::Config(format!(
                "momentum {} outside [0, 1)",
                muon.momentum
            )));
        }
        let states = specs
            .iter()
            .zip(owned)
            .map(|(s, &own)| own.then(|| ParamState::zeros(s)))
            .collect();
        Ok(Self {
            muon,
            adamw,
            specs,
            states,
            step: 0,
        })
    }

    /// The parameters, in order.
    pub fn specs(&self) -> &[ParamSpec] {
        &self.specs
    }

    /// Whether parameter `index` is updated here.
    pub fn owns(&self, index: usize) -> bool {
        self.states.get(index).is_some_and(Option::is_some)
    }

    /// Steps taken so far.
    pub fn step_count(&self) -> u64 {
        self.step
    }

    /// State of parameter `index`, if owned.
    pub fn state(&self, index: usize) -> Option<&ParamState> {
        self.states.get(index).and_then(Option::as_ref)
    }

    /// Bytes of optimizer state held.
    pub fn state_bytes(&self) -> usize {
        self.states.iter().flatten().map(ParamState::bytes).sum()
    }

    pub(crate) fn set_step_count(&mut self, step: u64) {
        self.step = step;
    }

    pub(crate) fn set_state(&mut self, index: usize, state: ParamState) {
        self.states[index] = Some(state);
    }

    /// One step over the owned parameters; the others are left untouched. `grads` must be the fully
    /// reduced gradients (after the data-parallel all-reduce). Parameters are updated in parallel on the
    /// rayon pool, each one's Newton–Schulz sequentially, so results do not depend on the thread count.
    pub fn step<P, G>(&mut self, params: &mut [P], grads: &[G]) -> Result<()>
    where
        P: AsMut<[f32]> + Send,
        G: AsRef<[f32]> + Sync,
    {
        self.check_lengths(params, grads)?;
        self.step += 1;
        let (muon, adamw, step) = (&self.muon, &self.adamw, self.step);
        self.specs
            .par_iter()
            .zip(self.states.par_iter_mut())
            .zip(params.par_iter_mut())
            .zip(grads.par_iter())
            .for_each(|(((spec, state), param), grad)| {
                if let Some(state) = state {
                    update_parameter(
                        spec,
                        state,
                        param.as_mut(),
                        grad.as_ref(),
                        muon,
                        adamw,
                        step,
                    );
                }
            });
        Ok(())
    }

    fn check_lengths<P: AsMut<[f32]>, G: AsRef<[f32]>>(
        &self,
        params: &mut [P],
        grads: &[G],
    ) -> Result<()> {
        if params.len() != self.specs.len() || grads.len() != self.specs.len() {
            return Err(MuonError::Config(format!(
                "{} parameters and {} gradients for {} specs",
                params.len(),
                grads.len(),
                self.specs.len()
            )));
        }
        for ((spec, param), grad) in self.specs.iter().zip(params.iter_mut()).zip(grads) {
            let n = spec.numel();
            if param.as_mut().len() != n || grad.as_ref().len() != n {
                return Err(MuonError::shape(
                    &spec.name,
                    format!(
                        "{} parameter and {} gradient elements for shape {:?}",
                        param.as_mut().len(),
                        grad.as_ref().len(),
                        spec.shape
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Updates one parameter in place. `step` counts from 1.
fn update_parameter(
    spec: &ParamSpec,
    state: &mut ParamState,
    param: &mut [f32],
    grad: &[f32],
    muon: &MuonConfig,
    adamw: &AdamWConfig,
    step: u64,
) {
    match state {
        ParamState::Muon { momentum } => {
            let beta = muon.momentum;
            for (m, &g) in momentum.iter_mut().zip(grad) {
                *m = beta * *m + (1.0 - beta) * g;
            }
            let direction: Vec<f32> = if muon.nesterov {
                grad.iter()
                    .zip(momentum.iter())
                    .map(|(&g, &m)| (1.0 - beta) * g + beta * m)
                    .collect()
            } else {
                momentum.clone()
            };
            let (rows, cols) = spec.matrix_dims();
            let update = muon
                .newton_schulz
                .orthogonalize(&direction, rows, cols, Par::Seq);
            let decay = 1.0 - muon.lr * muon.weight_decay;
            let lr = muon.lr * muon.adjust_lr.ratio(rows, cols);
            for (p, u) in param.iter_mut().zip(update) {
                *p = *p * decay - lr * u;
            }
        }
        ParamState::Adamw {
            exp_avg,
            exp_avg_sq,
        } => {
            let (b1, b2) = adamw.betas;
            let bias1 = 1.0 - b1.powi(step.min(i32::MAX as u64) as i32);
            let bias2_sqrt = (1.0 - b2.powi(step.min(i32::MAX as u64) as i32)).sqrt();
            let decay = 1.0 - adamw.lr * adamw.weight_decay;
            let step_size = adamw.lr / bias1;
            for (((p, &g), m), v) in param
                .iter_mut()
                .zip(grad)
                .zip(exp_avg.iter_mut())
                .zip(exp_avg_sq.iter_mut())
            {
                *m = b1 * *m + (1.0 - b1) * g;
                *v = b2 * *v + (1.0 - b2) * g * g;
                *p = *p * decay - step_size * *m / (v.sqrt() / bias2_sqrt + adamw.eps);
            }
        }
    }
}
