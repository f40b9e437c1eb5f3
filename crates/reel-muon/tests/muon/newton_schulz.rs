//! Newton–Schulz and the single-process optimizer against the exact SVD oracle.

use crate::common::{gaussian, matmul_f64, orthogonal, with_singular_values};
use faer::Par;
use reel_muon::spectral::{newton_schulz_oracle, relative_error, singular_values};
use reel_muon::{
    AdamWConfig, AdjustLr, DEFAULT_COEFFICIENTS, Muon, MuonConfig, NewtonSchulz, NsPrecision,
    ParamSpec,
};

const SHAPES: [(usize, usize); 4] = [(16, 24), (24, 16), (32, 32), (8, 64)];

fn ns() -> NewtonSchulz {
    NewtonSchulz::default()
}

#[test]
fn f32_matches_the_svd_oracle() {
    for (seed, &(rows, cols)) in SHAPES.iter().enumerate() {
        let g = gaussian(rows, cols, seed as u64);
        let exact = newton_schulz_oracle(&g, rows, cols, DEFAULT_COEFFICIENTS, 5).expect("oracle");
        let got = ns().orthogonalize(&g, rows, cols, Par::Seq);
        let err = relative_error(&got, &exact);
        assert!(err <= 1e-5, "{rows}×{cols}: relative error {err:e}");
    }
}

#[test]
fn bf16_matches_the_oracle_at_bf16_precision() {
    let ns = NewtonSchulz {
        precision: NsPrecision::Bf16,
        ..NewtonSchulz::default()
    };
    for (seed, &(rows, cols)) in SHAPES.iter().enumerate() {
        let g = gaussian(rows, cols, 100 + seed as u64);
        let exact = newton_schulz_oracle(&g, rows, cols, DEFAULT_COEFFICIENTS, 5).expect("oracle");
        let err = relative_error(&ns.orthogonalize(&g, rows, cols, Par::Seq), &exact);
        assert!(err <= 2e-2, "{rows}×{cols}: relative error {err:e}");
        assert!(
            err > 1e-5,
            "{rows}×{cols}: bf16 rounding should be visible, error {err:e}"
        );
    }
}

#[test]
fn singular_values_land_in_the_band() {
    // Singular values spread over a decade, all ≥ 1% of the Frobenius norm.
    let s: Vec<f64> = (0..12).map(|k| 10f64.powf(k as f64 / 11.0)).collect();
    let norm = s.iter().map(|x| x * x).sum::<f64>().sqrt();
    assert!(s[0] / norm >= 0.01);
    for &(rows, cols) in &[(12, 20), (20, 12), (12, 12)] {
        let g = with_singular_values(rows, cols, &s, 7);
        let out = ns().orthogonalize(&g, rows, cols, Par::Seq);
        for sv in singular_values(&out, rows, cols).expect("svd") {
            assert!(
                (0.68..=1.14).contains(&sv),
                "{rows}×{cols}: singular value {sv}"
            );
        }
    }
}

#[test]
fn transpose_and_sign_are_exact_symmetries() {
    let (rows, cols) = (12, 20);
    let g = gaussian(rows, cols, 3);
    let gt: Vec<f32> = (0..rows * cols)
        .map(|k| g[(k % rows) * cols + k / rows])
        .collect();
    let out = ns().orthogonalize(&g, rows, cols, Par::Seq);
    let out_t = ns().orthogonalize(&gt, cols, rows, Par::Seq);
    for i in 0..rows {
        for j in 0..cols {
            assert_eq!(out[i * cols + j].to_bits(), out_t[j * rows + i].to_bits());
        }
    }
    let neg: Vec<f32> = g.iter().map(|x| -x).collect();
    let out_neg = ns().orthogonalize(&neg, rows, cols, Par::Seq);
    assert!(
        out.iter()
            .zip(&out_neg)
            .all(|(a, b)| a.to_bits() == (-b).to_bits())
    );
}

#[test]
fn positive_scale_does_not_change_the_result() {
    let (rows, cols) = (16, 24);
    let g = gaussian(rows, cols, 4);
    let out = ns().orthogonalize(&g, rows, cols, Par::Seq);
    // A power of two scales the norm exactly: bit-identical.
    let doubled: Vec<f32> = g.iter().map(|x| 2.0 * x).collect();
    assert_eq!(out, ns().orthogonalize(&doubled, rows, cols, Par::Seq));
    for c in [3.7f32, 1e-3, 250.0] {
        let scaled: Vec<f32> = g.iter().map(|x| c * x).collect();
        let out_c = ns().orthogonalize(&scaled, rows, cols, Par::Seq);
        let exact: Vec<f64> = out.iter().map(|&x| f64::from(x)).collect();
        assert!(relative_error(&out_c, &exact) < 1e-5, "scale {c}");
    }
}

#[test]
fn left_orthogonal_factor_commutes() {
    let (rows, cols) = (16, 24);
    let g = gaussian(rows, cols, 5);
    let q = orthogonal(rows, 6);
    let g64: Vec<f64> = g.iter().map(|&x| f64::from(x)).collect();
    let qg: Vec<f32> = matmul_f64(&q, &g64, rows, rows, cols)
        .into_iter()
        .map(|x| x as f32)
        .collect();
    let out = ns().orthogonalize(&g, rows, cols, Par::Seq);
    let out64: Vec<f64> = out.iter().map(|&x| f64::from(x)).collect();
    let expected = matmul_f64(&q, &out64, rows, rows, cols);
    let got = ns().orthogonalize(&qg, rows, cols, Par::Seq);
    let err = relative_error(&got, &expected);
    assert!(err < 1e-5, "relative error {err:e}");
}

#[test]
fn first_step_has_the_closed_form() {
    // Zero momentum: buf = (1−β)g and the Nesterov direction is (1−β²)g, a positive multiple of g,
    // so the update is NS(g) exactly: p₁ = p₀(1 − lr·wd) − lr·ratio·NS(g). AdamW's first step is
    // p₁ = p₀(1 − lr·wd) − lr·g/(|g| + eps).
    let (rows, cols) = (24, 16);
    for adjust_lr in [
        AdjustLr::Original,
        AdjustLr::MatchRmsAdamw,
        AdjustLr::Spectral,
    ] {
        let muon = MuonConfig {
            lr: 0.02,
            weight_decay: 0.1,
            adjust_lr,
            ..MuonConfig::default()
        };
        let adamw = AdamWConfig {
            lr: 3e-3,
            ..AdamWConfig::default()
        };
        let specs = vec![
            ParamSpec::muon("w", [rows, cols]),
            ParamSpec::adamw("b", [cols]),
        ];
        let mut optimizer = Muon::new(specs, muon, adamw).expect("optimizer");
        let p0 = [gaussian(rows, cols, 8), gaussian(1, cols, 9)];
        let grads = [gaussian(rows, cols, 10), gaussian(1, cols, 11)];
        let mut params = p0.clone();
        optimizer.step(&mut params, &grads).expect("step");

        let ratio = f64::from(adjust_lr.ratio(rows, cols));
        let exact =
            newton_schulz_oracle(&grads[0], rows, cols, DEFAULT_COEFFICIENTS, 5).expect("oracle");
        let expected: Vec<f64> = p0[0]
            .iter()
            .zip(&exact)
            .map(|(&p, &u)| f64::from(p) * (1.0 - 0.02 * 0.1) - 0.02 * ratio * u)
            .collect();
        let err = relative_error(&params[0], &expected);
        assert!(err < 1e-6, "{adjust_lr:?}: relative error {err:e}");
        let expected_ratio = match adjust_lr {
            AdjustLr::Original => 1.5f64.sqrt(),
            AdjustLr::MatchRmsAdamw => 0.2 * 24f64.sqrt(),
            AdjustLr::Spectral => 1.5f64.sqrt(),
        };
        assert!((ratio - expected_ratio).abs() < 1e-6);

        for ((&p, &g), &p1) in p0[1].iter().zip(&grads[1]).zip(&params[1]) {
            let (p, g) = (f64::from(p), f64::from(g));
            let expected = p * (1.0 - 3e-3 * 0.01) - 3e-3 * g / (g.abs() + 1e-8);
            assert!(
                (f64::from(p1) - expected).abs() < 1e-6,
                "adamw {p1} vs {expected}"
            );
        }
    }
}

#[test]
fn spectral_rule_differs_from_original_on_wide_matrices() {
    assert_eq!(AdjustLr::Original.ratio(16, 64), 1.0);
    assert_eq!(AdjustLr::Spectral.ratio(16, 64), 0.5);
}

#[test]
fn conv_weights_are_flattened_to_out_by_rest() {
    let spec = ParamSpec::muon("conv", [8, 3, 2, 2]);
    assert_eq!(spec.matrix_dims(), (8, 12));
    let mut optimizer = Muon::new(
        vec![spec],
        MuonConfig {
            weight_decay: 0.0,
            ..MuonConfig::default()
        },
        AdamWConfig::default(),
    )
    .expect("optimizer");
    let g = gaussian(8, 12, 12);
    let mut params = [vec![0.0f32; 96]];
    optimizer
        .step(&mut params, std::slice::from_ref(&g))
        .expect("step");
    let exact = newton_schulz_oracle(&g, 8, 12, DEFAULT_COEFFICIENTS, 5).expect("oracle");
    let expected: Vec<f64> = exact.iter().map(|u| -1e-3 * u).collect();
    assert!(relative_error(&params[0], &expected) < 1e-5);
}

#[test]
fn bad_shapes_are_typed_errors() {
    assert!(
        Muon::new(
            vec![ParamSpec::muon("bias", [4])],
            MuonConfig::default(),
            AdamWConfig::default()
        )
        .is_err()
    );
    let mut optimizer = Muon::new(
        vec![ParamSpec::muon("w", [4, 4])],
        MuonConfig::default(),
        AdamWConfig::default(),
    )
    .expect("optimizer");
    let err = optimizer
        .step(&mut [vec![0.0f32; 16]], &[vec![0.0f32; 15]])
        .expect_err("short gradient");
    assert!(err.to_string().contains("`w`"), "{err}");
}

/// Two-layer linear regression `ŷ = W₂·W₁·x` with hand-written gradients of the mean squared error.
#[test]
fn two_layer_linear_regression_converges() {
    let (d_in, hidden, d_out, n) = (16, 32, 8, 64);
    let x = gaussian(n, d_in, 20);
    let w_true = gaussian(d_out, d_in, 21);
    let y: Vec<f32> = (0..n * d_out)
        .map(|k| {
            (0..d_in)
                .map(|l| w_true[(k % d_out) * d_in + l] * x[(k / d_out) * d_in + l])
                .sum()
        })
        .collect();
    let scale = |v: Vec<f32>, s: f32| v.into_iter().map(|a| a * s).collect::<Vec<f32>>();
    let mut params = vec![
        scale(gaussian(hidden, d_in, 22), 0.25),
        scale(gaussian(d_out, hidden, 23), 0.18),
    ];
    let specs = vec![
        ParamSpec::muon("w1", [hidden, d_in]),
        ParamSpec::muon("w2", [d_out, hidden]),
    ];
    let muon = MuonConfig {
        lr: 0.02,
        weight_decay: 0.0,
        ..MuonConfig::default()
    };
    let mut optimizer = Muon::new(specs, muon, AdamWConfig::default()).expect("optimizer");

    let forward = |params: &[Vec<f32>]| {
        let h: Vec<f32> = (0..n * hidden)
            .map(|k| {
                (0..d_in)
                    .map(|l| params[0][(k % hidden) * d_in + l] * x[(k / hidden) * d_in + l])
                    .sum()
            })
            .collect();
        let pred: Vec<f32> = (0..n * d_out)
            .map(|k| {
                (0..hidden)
                    .map(|l| params[1][(k % d_out) * hidden + l] * h[(k / d_out) * hidden + l])
                    .sum()
            })
            .collect();
        let residual: Vec<f32> = pred.iter().zip(&y).map(|(p, t)| p - t).collect();
        let loss = residual.iter().map(|r| r * r).sum::<f32>() / (n * d_out) as f32;
        (h, residual, loss)
    };
    let initial = forward(&params).2;
    let mut loss = initial;
    for _ in 0..200 {
        let (h, residual, l) = forward(&params);
        loss = l;
        let k = 2.0 / (n * d_out) as f32;
        // dL/dW₂ = k·Rᵀ·H, dL/dH = k·R·W₂, dL/dW₁ = dHᵀ·X.
        let mut g2 = vec![0.0f32; d_out * hidden];
        let mut dh = vec![0.0f32; n * hidden];
        for s in 0..n {
            for o in 0..d_out {
                let r = k * residual[s * d_out + o];
                for j in 0..hidden {
                    g2[o * hidden + j] += r * h[s * hidden + j];
                    dh[s * hidden + j] += r * params[1][o * hidden + j];
                }
            }
        }
        let mut g1 = vec![0.0f32; hidden * d_in];
        for s in 0..n {
            for j in 0..hidden {
                for i in 0..d_in {
                    g1[j * d_in + i] += dh[s * hidden + j] * x[s * d_in + i];
                }
            }
        }
        optimizer.step(&mut params, &[g1, g2]).expect("step");
    }
    assert!(
        loss < 0.1 * initial,
        "loss {loss} after 200 steps, initial {initial}"
    );
}
