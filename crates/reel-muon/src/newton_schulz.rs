//! Newton–Schulz orthogonalisation: the heart of Muon.
//!
//! Five iterations of the quintic `X ← aX + (bA + cA²)X` with `A = XXᵀ` drive every singular value of
//! `G/‖G‖_F` towards one without an SVD. The iteration runs on the wide orientation (rows ≤ cols), so the
//! Gram matrices are the small ones. `A` and `A²` are symmetric: only their lower triangles are computed
//! (faer's triangular matmul), which saves a quarter of the FLOPs of a step.

use faer::linalg::matmul::matmul;
use faer::linalg::matmul::triangular::{self, BlockStructure};
use faer::{Accum, Mat, MatMut, MatRef, Par};

// The rounding belongs to the bf16 arithmetic; the emulated path here rounds the same way.
pub use crate::bf16::round_bf16;

/// Keller Jordan's quintic coefficients `(a, b, c)`, as in `torch.optim.Muon`.
pub const DEFAULT_COEFFICIENTS: [f32; 3] = [3.4445, -4.7750, 2.0315];

/// Arithmetic of the Newton–Schulz iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NsPrecision {
    /// f32 storage and f32 products.
    #[default]
    F32,
    /// bf16 storage of `X`, `A` and `B` between products, f32 accumulation — the numerics of
    /// `torch.optim.Muon`, which casts to bf16 before the iteration. Runs on AVX512-BF16 dot products
    /// where the CPU has them, else emulated on f32 products of bf16-rounded values.
    Bf16,
}

/// Configuration of the orthogonalisation.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NewtonSchulz {
    /// `(a, b, c)` of the quintic.
    pub coefficients: [f32; 3],
    /// Number of iterations.
    pub steps: usize,
    /// Lower bound of the Frobenius norm the input is divided by.
    pub eps: f32,
    /// Arithmetic.
    pub precision: NsPrecision,
}

impl Default for NewtonSchulz {
    fn default() -> Self {
        Self {
            coefficients: DEFAULT_COEFFICIENTS,
            steps: 5,
            eps: 1e-7,
            precision: NsPrecision::F32,
        }
    }
}

/// FLOPs of `steps` iterations on a `rows × cols` matrix counted as dense products: `steps·(4m²n + 2m³)`
/// with `m = min(rows, cols)`, `n = max(rows, cols)`. This is the cost the sharding balances and the
/// cost model charges; the symmetric kernels do fewer.
pub fn ns_flops(rows: usize, cols: usize, steps: usize) -> f64 {
    let (m, n) = (rows.min(cols) as f64, rows.max(cols) as f64);
    steps as f64 * (4.0 * m * m * n + 2.0 * m * m * m)
}

impl NewtonSchulz {
    /// Orthogonalises the row-major `rows × cols` matrix `g` into `out` (same layout).
    ///
    /// # Panics
    /// If `g` or `out` do not hold `rows · cols` elements (a programming error inside the crate; the
    /// optimizer checks user shapes before it gets here).
    pub fn orthogonalize_into(
        &self,
        g: &[f32],
        rows: usize,
        cols: usize,
        out: &mut [f32],
        par: Par,
    ) {
        assert_eq!(g.len(), rows * cols, "gradient length");
        assert_eq!(out.len(), rows * cols, "output length");
        let tall = rows > cols;
        let (m, n) = if tall { (cols, rows) } else { (rows, cols) };
        let g = MatRef::from_row_major_slice(g, rows, cols);
        let g = if tall { g.transpose() } else { g };

        let norm = frobenius_norm(g);
        let scale = 1.0 / norm.max(self.eps);
        if self.precision == NsPrecision::Bf16 && crate::bf16::supported() {
            let mut x: Vec<f32> = (0..m * n).map(|k| g[(k / n, k % n)] * scale).collect();
            crate::bf16::newton_schulz(&mut x, m, n, self.coefficients, self.steps);
            let x = MatRef::from_row_major_slice(&x, m, n);
            let mut out = MatMut::from_row_major_slice_mut(out, rows, cols);
            out.copy_from(if tall { x.transpose() } else { x });
            return;
        }
        let mut x = Mat::<f32>::from_fn(m, n, |i, j| g[(i, j)] * scale);
        let mut next = Mat::<f32>::zeros(m, n);
        let mut gram = Mat::<f32>::zeros(m, m);
        let mut poly = Mat::<f32>::zeros(m, m);
        let [a, b, c] = self.coefficients;
        let bf16 = self.precision == NsPrecision::Bf16;
        if bf16 {
            round_all(x.as_mut());
        }
        for _ in 0..self.steps {
            // A = X·Xᵀ, lower triangle only.
            triangular::matmul(
                gram.as_mut(),
                BlockStructure::TriangularLower,
                Accum::Replace,
                x.as_ref(),
                BlockStructure::Rectangular,
                x.transpose(),
                BlockStructure::Rectangular,
                1.0,
                par,
            );
            mirror_lower(gram.as_mut());
            if bf16 {
                round_all(gram.as_mut());
            }
            // B = b·A + c·A², lower triangle only (A² is symmetric).
            poly.copy_from(gram.as_ref());
            scale_in_place(poly.as_mut(), b);
            triangular::matmul(
                poly.as_mut(),
                BlockStructure::TriangularLower,
                Accum::Add,
                gram.as_ref(),
                BlockStructure::Rectangular,
                gram.as_ref(),
                BlockStructure::Rectangular,
                c,
                par,
            );
            mirror_lower(poly.as_mut());
            if bf16 {
                round_all(poly.as_mut());
            }
            // X ← a·X + B·X.
            next.copy_from(x.as_ref());
            scale_in_place(next.as_mut(), a);
            matmul(
                next.as_mut(),
                Accum::Add,
                poly.as_ref(),
                x.as_ref(),
                1.0,
                par,
            );
            if bf16 {
                round_all(next.as_mut());
            }
            std::mem::swap(&mut x, &mut next);
        }

        let mut out = MatMut::from_row_major_slice_mut(out, rows, cols);
        if tall {
            out.copy_from(x.transpose());
        } else {
            out.copy_from(x.as_ref());
        }
    }

    /// Orthogonalises the row-major `rows × cols` matrix `g`, returning a new row-major matrix.
    pub fn orthogonalize(&self, g: &[f32], rows: usize, cols: usize, par: Par) -> Vec<f32> {
        let mut out = vec![0.0; rows * cols];
        self.orthogonalize_into(g, rows, cols, &mut out, par);
        out
    }
}

/// Frobenius norm accumulated in f64, so it does not depend on the summation order's rounding in f32.
fn frobenius_norm(g: MatRef<'_, f32>) -> f32 {
    let mut sum = 0.0f64;
    for j in 0..g.ncols() {
        for i in 0..g.nrows() {
            let v = f64::from(g[(i, j)]);
            sum += v * v;
        }
    }
    sum.sqrt() as f32
}

fn mirror_lower(mut a: MatMut<'_, f32>) {
    for j in 0..a.ncols() {
        for i in j + 1..a.nrows() {
            a[(j, i)] = a[(i, j)];
        }
    }
}

fn scale_in_place(mut a: MatMut<'_, f32>, factor: f32) {
    for j in 0..a.ncols() {
        for v in a.as_mut().col_mut(j).iter_mut() {
            *v *= factor;
        }
    }
}

fn round_all(mut a: MatMut<'_, f32>) {
    for j in 0..a.ncols() {
        for v in a.as_mut().col_mut(j).iter_mut() {
            *v = round_bf16(*v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flops_match_the_dense_count() {
        assert_eq!(ns_flops(4, 8, 5), 5.0 * (4.0 * 16.0 * 8.0 + 2.0 * 64.0));
        assert_eq!(ns_flops(8, 4, 5), ns_flops(4, 8, 5));
    }
}
