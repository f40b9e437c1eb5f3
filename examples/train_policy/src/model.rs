//! A two-layer perceptron from the current state and coarse frames to the action chunk,
//! with its gradient written out by hand (the example needs no tensor library).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use reel_loader::Batch;
use reel_muon::ParamSpec;

/// Side of the coarse grid each frame is average-pooled to.
pub const POOL_W: usize = 8;
pub const POOL_H: usize = 6;

/// Inputs and targets of a batch, flattened.
#[derive(Debug)]
pub struct Examples {
    pub n: usize,
    pub inputs: Vec<f32>,
    pub targets: Vec<f32>,
    /// 1 where the target element is real data (its mask), 0 where it is padding.
    pub weights: Vec<f32>,
    /// What the network's output is added to: the current joint positions held over the
    /// chunk (actions are position targets, the state's leading fields), else 0.
    pub baseline: Vec<f32>,
}

/// Builds inputs (last state step, each camera's latest frame pooled to 8×6 RGB) and
/// targets (the action chunk, predicted as a change from the current state) from a batch
/// of the spec in testdata/spec.toml.
pub fn examples(batch: &Batch, cameras: &[String]) -> anyhow::Result<Examples> {
    let n = batch.len();
    let get = |name: &str| {
        batch
            .get(name)
            .ok_or_else(|| anyhow::anyhow!("the batch has no tensor {name}"))
    };
    let state = get("state")?;
    let (steps, fields) = (state.shape[1], state.shape[2]);
    let state_values = state.as_f32().unwrap_or_default();
    let action = get("action")?;
    let action_len = action.sample_len();
    let action_values = action.as_f32().unwrap_or_default();
    let action_fields = action.shape[2];
    let action_mask = get("action.mask")?.as_u8().unwrap_or_default();
    let mut inputs = Vec::new();
    for i in 0..n {
        let last = (i * steps + steps - 1) * fields;
        inputs.extend_from_slice(&state_values[last..last + fields]);
        for camera in cameras {
            let frames = get(camera)?;
            let (k, h, w) = (frames.shape[1], frames.shape[2], frames.shape[3]);
            let pixels = frames.as_u8().unwrap_or_default();
            let frame = &pixels[(i * k + k - 1) * h * w * 3..(i * k + k) * h * w * 3];
            inputs.extend(pool(frame, w, h));
        }
    }
    let mut weights = Vec::with_capacity(n * action_len);
    for m in action_mask {
        weights.extend(std::iter::repeat_n(f32::from(*m), action_fields));
    }
    let mut baseline = vec![0f32; n * action_len];
    // Joint states carry positions first (then velocities, efforts); position-target
    // actions are predicted as a change from the current positions.
    if action_fields <= fields {
        for i in 0..n {
            let last = (i * steps + steps - 1) * fields;
            for chunk in baseline[i * action_len..(i + 1) * action_len].chunks_mut(action_fields) {
                chunk.copy_from_slice(&state_values[last..last + action_fields]);
            }
        }
    }
    Ok(Examples {
        n,
        inputs,
        targets: action_values.to_vec(),
        weights,
        baseline,
    })
}

/// Average-pools an HWC RGB frame to POOL_W×POOL_H, scaled to [-0.5, 0.5].
fn pool(frame: &[u8], w: usize, h: usize) -> Vec<f32> {
    let mut out = vec![0f32; POOL_W * POOL_H * 3];
    let mut counts = [0f32; POOL_W * POOL_H];
    for y in 0..h {
        for x in 0..w {
            let cell = (y * POOL_H / h) * POOL_W + x * POOL_W / w;
            counts[cell] += 1.0;
            for c in 0..3 {
                out[cell * 3 + c] += f32::from(frame[(y * w + x) * 3 + c]);
            }
        }
    }
    for (cell, count) in counts.iter().enumerate() {
        for c in 0..3 {
            out[cell * 3 + c] = out[cell * 3 + c] / (count.max(1.0) * 255.0) - 0.5;
        }
    }
    out
}

/// The policy's parameters: W1 [hidden, inputs], b1, W2 [outputs, hidden], b2.
#[derive(Debug, Clone, PartialEq)]
pub struct Mlp {
    pub inputs: usize,
    pub hidden: usize,
    pub outputs: usize,
    pub params: Vec<Vec<f32>>,
}

impl Mlp {
    pub fn new(inputs: usize, hidden: usize, outputs: usize, seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut uniform = |n: usize, fan_in: usize| -> Vec<f32> {
            let bound = 1.0 / (fan_in as f32).sqrt();
            (0..n).map(|_| rng.random_range(-bound..bound)).collect()
        };
        let params = vec![
            uniform(hidden * inputs, inputs),
            vec![0.0; hidden],
            uniform(outputs * hidden, hidden),
            vec![0.0; outputs],
        ];
        Self {
            inputs,
            hidden,
            outputs,
            params,
        }
    }

    /// Muon for the two matrices, AdamW for the biases.
    pub fn specs(&self) -> Vec<ParamSpec> {
        vec![
            ParamSpec::muon("w1", [self.hidden, self.inputs]),
            ParamSpec::adamw("b1", [self.hidden]),
            ParamSpec::muon("w2", [self.outputs, self.hidden]),
            ParamSpec::adamw("b2", [self.outputs]),
        ]
    }

    /// Weighted mean squared error over the batch and, when `grads` is given, its gradient.
    pub fn loss(&self, ex: &Examples, mut grads: Option<&mut Vec<Vec<f32>>>) -> f32 {
        let (d, h, o) = (self.inputs, self.hidden, self.outputs);
        let (w1, b1, w2, b2) = (
            &self.params[0],
            &self.params[1],
            &self.params[2],
            &self.params[3],
        );
        if let Some(g) = grads.as_deref_mut() {
            *g = self.params.iter().map(|p| vec![0.0; p.len()]).collect();
        }
        let total_weight: f32 = ex.weights.iter().sum::<f32>().max(1.0);
        let mut loss = 0.0f64;
        let mut hidden = vec![0f32; h];
        let mut d_hidden = vec![0f32; h];
        let mut d_out = vec![0f32; o];
        for i in 0..ex.n {
            let x = &ex.inputs[i * d..(i + 1) * d];
            for (j, a) in hidden.iter_mut().enumerate() {
                let row = &w1[j * d..(j + 1) * d];
                let z = b1[j] + row.iter().zip(x).map(|(w, v)| w * v).sum::<f32>();
                *a = z.tanh();
            }
            for k in 0..o {
                let row = &w2[k * h..(k + 1) * h];
                let y = b2[k] + row.iter().zip(&hidden).map(|(w, v)| w * v).sum::<f32>();
                let err = y - (ex.targets[i * o + k] - ex.baseline[i * o + k]);
                let weight = ex.weights[i * o + k];
                loss += f64::from(weight * err * err);
                d_out[k] = 2.0 * weight * err / total_weight;
            }
            let Some(g) = grads.as_deref_mut() else {
                continue;
            };
            d_hidden.fill(0.0);
            for k in 0..o {
                let dk = d_out[k];
                if dk == 0.0 {
                    continue;
                }
                g[3][k] += dk;
                let row = &w2[k * h..(k + 1) * h];
                let grow = &mut g[2][k * h..(k + 1) * h];
                for j in 0..h {
                    grow[j] += dk * hidden[j];
                    d_hidden[j] += dk * row[j];
                }
            }
            for j in 0..h {
                let dj = d_hidden[j] * (1.0 - hidden[j] * hidden[j]);
                g[1][j] += dj;
                let grow = &mut g[0][j * d..(j + 1) * d];
                for (gw, v) in grow.iter_mut().zip(x) {
                    *gw += dj * v;
                }
            }
        }
        (loss / f64::from(total_weight)) as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gradient_matches_finite_differences() {
        let mlp = Mlp::new(5, 4, 3, 1);
        let ex = Examples {
            n: 2,
            inputs: (0..10).map(|i| (i as f32 * 0.37).sin()).collect(),
            targets: (0..6).map(|i| (i as f32 * 0.7).cos()).collect(),
            weights: vec![1.0, 1.0, 0.0, 1.0, 1.0, 1.0],
            baseline: vec![0.1; 6],
        };
        let mut grads = Vec::new();
        mlp.loss(&ex, Some(&mut grads));
        for (p, g) in grads.iter().enumerate() {
            for (i, analytic) in g.iter().enumerate() {
                let eps = 1e-3;
                let mut plus = mlp.clone();
                plus.params[p][i] += eps;
                let mut minus = mlp.clone();
                minus.params[p][i] -= eps;
                let numeric = (plus.loss(&ex, None) - minus.loss(&ex, None)) / (2.0 * eps);
                assert!(
                    (numeric - analytic).abs() < 2e-3,
                    "param {p}[{i}]: {numeric} vs {analytic}"
                );
            }
        }
    }
}
