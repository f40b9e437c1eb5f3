//! The CUDA backend: without the CUDA libraries it must refuse cleanly; with them, bf16 Newton–Schulz
//! must match the oracle at bf16 precision.
#![cfg(feature = "cuda")]

use crate::common::gaussian;
use reel_muon::cuda::{CudaDevice, available};
use reel_muon::spectral::{newton_schulz_oracle, relative_error};
use reel_muon::{DEFAULT_COEFFICIENTS, NewtonSchulz};

#[test]
fn refuses_cleanly_or_matches_the_oracle() {
    if !available() {
        assert!(CudaDevice::new(0).is_err());
        return;
    }
    let device = CudaDevice::new(0).expect("device");
    let ns = NewtonSchulz::default();
    for (rows, cols) in [(64, 96), (96, 64)] {
        let g = gaussian(2 * rows, cols, 3);
        let input = device.upload(&g).expect("upload");
        let out = device
            .newton_schulz(&ns, &input, 2, rows, cols)
            .expect("newton_schulz");
        let out = device
            .download(&device.bf16_to_f32(&out).expect("widen"))
            .expect("download");
        for k in 0..2 {
            let per = rows * cols;
            let exact = newton_schulz_oracle(
                &g[k * per..(k + 1) * per],
                rows,
                cols,
                DEFAULT_COEFFICIENTS,
                5,
            )
            .expect("oracle");
            let err = relative_error(&out[k * per..(k + 1) * per], &exact);
            assert!(err < 2e-2, "{rows}×{cols} #{k}: {err:e}");
        }
    }
}
