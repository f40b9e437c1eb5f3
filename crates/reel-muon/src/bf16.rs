//! bf16 arithmetic on the CPU: rounding f32 to bf16, and matrix products on AVX512-BF16
//! (`vdpbf16ps`: pairs of bf16 products summed into f32 lanes).
//!
//! Newton–Schulz needs three products per iteration, and each is `C = A·Bᵗᵀ` for row-major operands
//! whose rows are contiguous along the summed dimension: `X·Xᵀ`, `A·A = A·Aᵀ` (symmetric) and
//! `B·X = B·(Xᵀ)ᵀ`. So one kernel covers them: both operands are stored as rows of bf16 *pairs* (two
//! consecutive summed-dimension elements in one `u32`), which is the operand layout `vdpbf16ps` wants.
//! The symmetric products compute only tiles on or below the diagonal.

/// Rows of a tile (broadcast operand).
const MR: usize = 8;
/// Columns of a tile: two 16-lane vectors.
const NR: usize = 32;
/// Summed pairs per cache block: a 128 × 32 panel of `u32` is 16 KiB, half of L1.
const KC: usize = 128;

/// Whether this CPU has the instructions (checked at run time).
pub(crate) fn supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bf16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Rounds an f32 to the nearest bf16 (ties to even), returned as f32.
#[inline]
pub fn round_bf16(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    let bits = x.to_bits();
    let rounded = bits.wrapping_add(0x7fff + ((bits >> 16) & 1));
    f32::from_bits(rounded & 0xffff_0000)
}

fn bf16_bits(x: f32) -> u32 {
    round_bf16(x).to_bits() >> 16
}

/// A matrix as rows of bf16 pairs along the summed dimension, rows padded to a multiple of `pad`.
pub(crate) struct PairRows {
    data: Vec<u32>,
    rows: usize,
    pairs: usize,
}

impl PairRows {
    /// Rows of the row-major `rows × cols` f32 matrix `src`, rounded to bf16.
    pub(crate) fn from_rows(src: &[f32], rows: usize, cols: usize, pad: usize) -> Self {
        let pairs = cols.div_ceil(2);
        let mut data = vec![0u32; rows.next_multiple_of(pad) * pairs];
        for (row, dst) in src.chunks_exact(cols).zip(data.chunks_exact_mut(pairs)) {
            for (p, d) in dst.iter_mut().enumerate() {
                let lo = bf16_bits(row[2 * p]);
                let hi = row.get(2 * p + 1).map_or(0, |&v| bf16_bits(v));
                *d = lo | (hi << 16);
            }
        }
        Self { data, rows, pairs }
    }

    /// Columns of the row-major `rows × cols` f32 matrix `src` (the rows of its transpose).
    pub(crate) fn from_cols(src: &[f32], rows: usize, cols: usize, pad: usize) -> Self {
        let pairs = rows.div_ceil(2);
        let mut data = vec![0u32; cols.next_multiple_of(pad) * pairs];
        for p in 0..pairs {
            let lo_row = &src[2 * p * cols..(2 * p + 1) * cols];
            let hi_row = src.get((2 * p + 1) * cols..(2 * p + 2) * cols);
            for j in 0..cols {
                let hi = hi_row.map_or(0, |r| bf16_bits(r[j]));
                data[j * pairs + p] = bf16_bits(lo_row[j]) | (hi << 16);
            }
        }
        Self {
            data,
            rows: cols,
            pairs,
        }
    }
}

/// `C = A·Bᵀ` into the row-major `a.rows × b.rows` f32 matrix `c`, where `A` and `B` are given as pair
/// rows over the same summed dimension (`a` padded to `MR` rows, `b` to `NR`). With `lower_only`, only
/// tiles touching the lower triangle are computed; the caller mirrors them.
///
/// # Panics
/// If the operands disagree on the summed dimension or padding, or the CPU lacks AVX512-BF16 (callers
/// check [`supported`]).
pub(crate) fn matmul_nt(c: &mut [f32], a: &PairRows, b: &PairRows, lower_only: bool) {
    assert!(supported(), "AVX512-BF16 required");
    assert_eq!(a.pairs, b.pairs, "summed dimension");
    assert_eq!(c.len(), a.rows * b.rows, "output size");
    assert!(
        a.data.len() >= a.rows.next_multiple_of(MR) * a.pairs
            && b.data.len() >= b.rows.next_multiple_of(NR) * b.pairs
    );
    // SAFETY: the CPU features were checked above; buffer sizes were checked above and the kernel
    // reads within `MR`/`NR`-padded rows only.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        x86::matmul_nt(c, a, b, lower_only)
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{KC, MR, NR, PairRows};

    #[target_feature(enable = "avx512f,avx512bf16")]
    pub(super) unsafe fn matmul_nt(c: &mut [f32], a: &PairRows, b: &PairRows, lower_only: bool) {
        let (m, n, pairs) = (a.rows, b.rows, a.pairs);
        let mut panel = vec![0u32; KC * NR];
        let mut tile = [0f32; MR * NR];
        for p0 in (0..pairs).step_by(KC) {
            let kc = KC.min(pairs - p0);
            for j0 in (0..n).step_by(NR) {
                if lower_only && j0 >= m {
                    break;
                }
                // Pack NR rows of B, pairs p0..p0+kc, pair-major: one 32-lane row per pair.
                for jj in 0..NR {
                    let src = &b.data[(j0 + jj) * pairs + p0..(j0 + jj) * pairs + p0 + kc];
                    for (p, &v) in src.iter().enumerate() {
                        panel[p * NR + jj] = v;
                    }
                }
                for i0 in (0..m).step_by(MR) {
                    if lower_only && j0 > i0 + MR - 1 {
                        continue;
                    }
                    // SAFETY: `a` holds MR-padded rows, `panel` holds kc × NR values.
                    unsafe {
                        kernel(
                            a.data.as_ptr().add(i0 * pairs + p0),
                            pairs,
                            panel.as_ptr(),
                            kc,
                            &mut tile,
                        )
                    };
                    let rows = MR.min(m - i0);
                    let cols = NR.min(n - j0);
                    for r in 0..rows {
                        let dst = &mut c[(i0 + r) * n + j0..(i0 + r) * n + j0 + cols];
                        let src = &tile[r * NR..r * NR + cols];
                        if p0 == 0 {
                            dst.copy_from_slice(src);
                        } else {
                            for (d, s) in dst.iter_mut().zip(src) {
                                *d += s;
                            }
                        }
                    }
                }
            }
        }
    }

    /// `tile[MR × NR] = Σ_p A[r, p] · panel[p, :]` over `kc` pairs.
    #[target_feature(enable = "avx512f,avx512bf16")]
    unsafe fn kernel(
        a: *const u32,
        lda: usize,
        panel: *const u32,
        kc: usize,
        tile: &mut [f32; MR * NR],
    ) {
        let mut acc = [_mm512_setzero_ps(); 2 * MR];
        for p in 0..kc {
            // SAFETY: `panel` holds kc × NR values and `a` MR rows of at least kc pairs from here.
            unsafe {
                let b0: __m512bh =
                    std::mem::transmute(_mm512_loadu_si512(panel.add(p * NR).cast()));
                let b1: __m512bh =
                    std::mem::transmute(_mm512_loadu_si512(panel.add(p * NR + 16).cast()));
                for r in 0..MR {
                    let av: __m512bh =
                        std::mem::transmute(_mm512_set1_epi32(*a.add(r * lda + p) as i32));
                    acc[2 * r] = _mm512_dpbf16_ps(acc[2 * r], av, b0);
                    acc[2 * r + 1] = _mm512_dpbf16_ps(acc[2 * r + 1], av, b1);
                }
            }
        }
        for (r, pair) in acc.chunks_exact(2).enumerate() {
            // SAFETY: row r of the tile has NR = 32 floats.
            unsafe {
                _mm512_storeu_ps(tile.as_mut_ptr().add(r * NR), pair[0]);
                _mm512_storeu_ps(tile.as_mut_ptr().add(r * NR + 16), pair[1]);
            }
        }
    }
}

/// bf16 Newton–Schulz on the wide row-major `m × n` matrix `x` (already normalised), in place.
pub(crate) fn newton_schulz(
    x: &mut [f32],
    m: usize,
    n: usize,
    coefficients: [f32; 3],
    steps: usize,
) {
    let [a, b, c] = coefficients;
    let mut gram = vec![0f32; m * m];
    let mut square = vec![0f32; m * m];
    let mut product = vec![0f32; m * n];
    for v in x.iter_mut() {
        *v = round_bf16(*v);
    }
    for _ in 0..steps {
        let x_rows = PairRows::from_rows(x, m, n, NR);
        matmul_nt(&mut gram, &x_rows, &x_rows, true);
        mirror_lower(&mut gram, m);
        for v in gram.iter_mut() {
            *v = round_bf16(*v);
        }
        let gram_rows = PairRows::from_rows(&gram, m, m, NR);
        matmul_nt(&mut square, &gram_rows, &gram_rows, true);
        mirror_lower(&mut square, m);
        // B = b·A + c·A², stored in `square`.
        for (s, &g) in square.iter_mut().zip(&gram) {
            *s = round_bf16(b * g + c * *s);
        }
        let poly_rows = PairRows::from_rows(&square, m, m, MR);
        let x_cols = PairRows::from_cols(x, m, n, NR);
        matmul_nt(&mut product, &poly_rows, &x_cols, false);
        for (v, &p) in x.iter_mut().zip(&product) {
            *v = round_bf16(a * *v + p);
        }
    }
}

fn mirror_lower(a: &mut [f32], m: usize) {
    for i in 0..m {
        for j in i + 1..m {
            a[i * m + j] = a[j * m + i];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_rounding_ties_to_even() {
        assert_eq!(round_bf16(1.0), 1.0);
        // 1 + 2^-8 lies exactly between two bf16 values; ties go to the even mantissa (1.0).
        assert_eq!(round_bf16(1.0 + 1.0 / 256.0), 1.0);
        assert_eq!(round_bf16(1.0 + 3.0 / 256.0), 1.0 + 4.0 / 256.0);
        assert_eq!(round_bf16(-2.5), -2.5);
    }

    #[test]
    fn matches_a_plain_product_of_rounded_values() {
        if !supported() {
            return;
        }
        let (m, n, k) = (13, 37, 21);
        let a: Vec<f32> = (0..m * k)
            .map(|i| ((i * 7919) % 101) as f32 / 50.0 - 1.0)
            .collect();
        let bt: Vec<f32> = (0..n * k)
            .map(|i| ((i * 104_729) % 97) as f32 / 48.0 - 1.0)
            .collect();
        let mut c = vec![0f32; m * n];
        matmul_nt(
            &mut c,
            &PairRows::from_rows(&a, m, k, MR),
            &PairRows::from_rows(&bt, n, k, NR),
            false,
        );
        for i in 0..m {
            for j in 0..n {
                let want: f64 = (0..k)
                    .map(|l| {
                        f64::from(round_bf16(a[i * k + l])) * f64::from(round_bf16(bt[j * k + l]))
                    })
                    .sum();
                assert!(
                    (f64::from(c[i * n + j]) - want).abs() < 1e-4,
                    "({i}, {j}): {} vs {want}",
                    c[i * n + j]
                );
            }
        }
        // Columns of a row-major matrix pack like rows of its transpose.
        let b: Vec<f32> = (0..k * n).map(|i| bt[(i % n) * k + i / n]).collect();
        let mut c2 = vec![0f32; m * n];
        matmul_nt(
            &mut c2,
            &PairRows::from_rows(&a, m, k, MR),
            &PairRows::from_cols(&b, k, n, NR),
            false,
        );
        assert_eq!(c, c2);
    }
}
