//! Exact oracle for Newton–Schulz, through an f64 SVD.
//!
//! Newton–Schulz applies an odd matrix polynomial, so it acts on singular values only:
//! `NS(G) = U·φᵏ(Σ/‖G‖_F)·Vᵀ` with `φ(x) = ax + bx³ + cx⁵`. Computing the SVD in f64 and mapping each
//! singular value gives the iteration's exact result, which the f32, bf16 and CUDA paths are checked
//! against.

use faer::Mat;

use crate::error::{MuonError, Result};

/// One step of the quintic on a singular value.
pub fn quintic(coefficients: [f64; 3], x: f64) -> f64 {
    let [a, b, c] = coefficients;
    let x2 = x * x;
    x * (a + x2 * (b + c * x2))
}

/// `NS(G)` of the row-major `rows × cols` matrix `g`, computed exactly in f64 (row-major result).
pub fn newton_schulz_oracle(
    g: &[f32],
    rows: usize,
    cols: usize,
    coefficients: [f32; 3],
    steps: usize,
) -> Result<Vec<f64>> {
    if g.len() != rows * cols {
        return Err(MuonError::shape(
            "oracle input",
            format!("{} elements for {rows}×{cols}", g.len()),
        ));
    }
    let coefficients = coefficients.map(f64::from);
    let a = Mat::<f64>::from_fn(rows, cols, |i, j| f64::from(g[i * cols + j]));
    let norm = a.norm_l2();
    if norm == 0.0 {
        return Ok(vec![0.0; rows * cols]);
    }
    let svd = a
        .thin_svd()
        .map_err(|e| MuonError::Config(format!("SVD did not converge: {e:?}")))?;
    let (u, s, v) = (svd.U(), svd.S().column_vector(), svd.V());
    let mapped: Vec<f64> = (0..s.nrows())
        .map(|k| (0..steps).fold(s[k] / norm, |x, _| quintic(coefficients, x)))
        .collect();
    let mut out = vec![0.0; rows * cols];
    for i in 0..rows {
        for j in 0..cols {
            out[i * cols + j] = (0..mapped.len())
                .map(|k| u[(i, k)] * mapped[k] * v[(j, k)])
                .sum();
        }
    }
    Ok(out)
}

/// Singular values of the row-major `rows × cols` matrix `m`, in f64, largest first.
pub fn singular_values(m: &[f32], rows: usize, cols: usize) -> Result<Vec<f64>> {
    if m.len() != rows * cols {
        return Err(MuonError::shape(
            "singular values",
            format!("{} elements for {rows}×{cols}", m.len()),
        ));
    }
    let a = Mat::<f64>::from_fn(rows, cols, |i, j| f64::from(m[i * cols + j]));
    let mut s = a
        .singular_values()
        .map_err(|e| MuonError::Config(format!("SVD did not converge: {e:?}")))?;
    s.sort_by(|x, y| y.total_cmp(x));
    Ok(s)
}

/// Relative Frobenius error `‖approx − exact‖ / ‖exact‖`.
pub fn relative_error(approx: &[f32], exact: &[f64]) -> f64 {
    let (mut diff, mut norm) = (0.0f64, 0.0f64);
    for (&a, &e) in approx.iter().zip(exact) {
        diff += (f64::from(a) - e).powi(2);
        norm += e * e;
    }
    (diff / norm.max(f64::MIN_POSITIVE)).sqrt()
}
