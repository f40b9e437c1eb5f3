//! Image quality against a reference: PSNR and SSIM on 8-bit RGB.

/// Peak signal-to-noise ratio in dB over all channels; `f64::INFINITY` when identical.
///
/// Both slices must have the same length (packed RGB of the same size).
pub fn psnr(reference: &[u8], test: &[u8]) -> f64 {
    let mse = mse(reference, test);
    if mse == 0.0 {
        f64::INFINITY
    } else {
        10.0 * (255.0 * 255.0 / mse).log10()
    }
}

/// Mean squared error per sample.
pub fn mse(reference: &[u8], test: &[u8]) -> f64 {
    let n = reference.len().min(test.len()).max(1);
    let sum: u64 = reference
        .iter()
        .zip(test)
        .map(|(&a, &b)| {
            let d = a as i64 - b as i64;
            (d * d) as u64
        })
        .sum();
    sum as f64 / n as f64
}

/// PSNR of a mean squared error.
pub fn psnr_of_mse(mse: f64) -> f64 {
    if mse == 0.0 {
        f64::INFINITY
    } else {
        10.0 * (255.0 * 255.0 / mse).log10()
    }
}

/// Mean SSIM of the luma (BT.601) over 8×8 windows with stride 4, constants from
/// Wang et al. (K1 = 0.01, K2 = 0.03).
pub fn ssim(reference: &[u8], test: &[u8], width: usize, height: usize) -> f64 {
    let luma = |rgb: &[u8]| -> Vec<f64> {
        rgb.chunks_exact(3)
            .map(|p| 0.299 * p[0] as f64 + 0.587 * p[1] as f64 + 0.114 * p[2] as f64)
            .collect()
    };
    let (a, b) = (luma(reference), luma(test));
    let (c1, c2) = ((0.01f64 * 255.0).powi(2), (0.03f64 * 255.0).powi(2));
    const WIN: usize = 8;
    let mut total = 0.0;
    let mut windows = 0usize;
    for y0 in (0..height.saturating_sub(WIN - 1)).step_by(4) {
        for x0 in (0..width.saturating_sub(WIN - 1)).step_by(4) {
            let (mut sa, mut sb, mut saa, mut sbb, mut sab) = (0.0, 0.0, 0.0, 0.0, 0.0);
            for y in y0..y0 + WIN {
                for x in x0..x0 + WIN {
                    let (p, q) = (a[y * width + x], b[y * width + x]);
                    sa += p;
                    sb += q;
                    saa += p * p;
                    sbb += q * q;
                    sab += p * q;
                }
            }
            let n = (WIN * WIN) as f64;
            let (ma, mb) = (sa / n, sb / n);
            let (va, vb, cov) = (saa / n - ma * ma, sbb / n - mb * mb, sab / n - ma * mb);
            total += ((2.0 * ma * mb + c1) * (2.0 * cov + c2))
                / ((ma * ma + mb * mb + c1) * (va + vb + c2));
            windows += 1;
        }
    }
    if windows == 0 {
        1.0
    } else {
        total / windows as f64
    }
}
