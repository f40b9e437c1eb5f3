//! Newton–Schulz on the GPU: stacks of same-shape matrices orthogonalised with strided-batched bf16
//! GEMMs (f32 accumulation), and the GEMM rate it is measured against.

use cudarc::cublas::{result as blas, sys as blas_sys};
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};

use super::device::CudaDevice;
use super::kernels::elementwise;
use crate::error::{MuonError, Result};
use crate::newton_schulz::NewtonSchulz;

impl CudaDevice {
    /// One strided-batched bf16 GEMM, column-major: `C = alpha·op(A)·op(B) + beta·C`.
    #[allow(clippy::too_many_arguments)]
    fn gemm(
        &self,
        (trans_a, trans_b): (bool, bool),
        (m, n, k): (usize, usize, usize),
        alpha: f32,
        (a, lda, stride_a): (&CudaSlice<u16>, usize, usize),
        (b, ldb, stride_b): (&CudaSlice<u16>, usize, usize),
        beta: f32,
        (c, ldc, stride_c): (&mut CudaSlice<u16>, usize, usize),
        batch: usize,
    ) -> Result<()> {
        let op = |t: bool| {
            if t {
                blas_sys::cublasOperation_t::CUBLAS_OP_T
            } else {
                blas_sys::cublasOperation_t::CUBLAS_OP_N
            }
        };
        let int = |v: usize| {
            i32::try_from(v).map_err(|_| MuonError::Cuda(format!("GEMM dimension {v} exceeds i32")))
        };
        let long = |v: usize| {
            i64::try_from(v).map_err(|_| MuonError::Cuda(format!("GEMM stride {v} exceeds i64")))
        };
        let bf16 = blas_sys::cudaDataType_t::CUDA_R_16BF;
        let (a_ptr, _a) = a.device_ptr(&self.stream);
        let (b_ptr, _b) = b.device_ptr(&self.stream);
        let (c_ptr, _c) = c.device_ptr_mut(&self.stream);
        // SAFETY: every dimension, leading dimension and stride is derived from the buffers' shapes by
        // the callers below, which allocate `batch` matrices of the stated sizes.
        let result = unsafe {
            blas::gemm_strided_batched_ex(
                *self.blas.handle(),
                op(trans_a),
                op(trans_b),
                int(m)?,
                int(n)?,
                int(k)?,
                (&alpha) as *const f32 as *const _,
                a_ptr as *const _,
                bf16,
                int(lda)?,
                long(stride_a)?,
                b_ptr as *const _,
                bf16,
                int(ldb)?,
                long(stride_b)?,
                (&beta) as *const f32 as *const _,
                c_ptr as *mut _,
                bf16,
                int(ldc)?,
                long(stride_c)?,
                int(batch)?,
                blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        };
        cuda!("cublasGemmStridedBatchedEx", result)
    }

    /// Orthogonalises `batch` stacked row-major `rows × cols` f32 matrices in bf16; returns the stacked
    /// bf16 results (row-major, as raw bf16 bits).
    pub fn newton_schulz(
        &self,
        ns: &NewtonSchulz,
        input: &CudaSlice<f32>,
        batch: usize,
        rows: usize,
        cols: usize,
    ) -> Result<CudaSlice<u16>> {
        let per_matrix = rows * cols;
        let total = batch * per_matrix;
        if input.len() < total || total == 0 {
            return Err(MuonError::Cuda(format!(
                "{} elements for {batch} × {rows}×{cols}",
                input.len()
            )));
        }
        let tall = rows > cols;
        let (m, n) = if tall { (cols, rows) } else { (rows, cols) };
        let alloc = |len: usize| cuda!("allocate", self.stream.alloc_zeros::<u16>(len));
        let mut sumsq = cuda!("allocate", self.stream.alloc_zeros::<f64>(batch))?;
        let mut x = alloc(total)?;
        let mut next = alloc(total)?;
        let mut gram = alloc(batch * m * m)?;
        let mut poly = alloc(batch * m * m)?;
        let (per_matrix_i64, total_i64) = (per_matrix as i64, total as i64);
        // SAFETY: kernel arguments match the signatures in KERNELS; buffers hold `total` elements.
        unsafe {
            let mut launch = self.stream.launch_builder(&self.kernels.sum_squares);
            launch.arg(input).arg(&mut sumsq).arg(&per_matrix_i64);
            let cfg = LaunchConfig {
                grid_dim: (batch as u32, 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            };
            cuda!("sum_squares", launch.launch(cfg))?;
            let mut launch = self.stream.launch_builder(&self.kernels.normalize_to_bf16);
            launch
                .arg(input)
                .arg(&sumsq)
                .arg(&mut x)
                .arg(&per_matrix_i64)
                .arg(&total_i64)
                .arg(&ns.eps);
            cuda!("normalize_to_bf16", launch.launch(elementwise(total)))?;
        }
        let [a, b, c] = ns.coefficients;
        let (sx, sg) = (per_matrix, m * m);
        for _ in 0..ns.steps {
            // The memory holds Y = Xᵀ (n × m, ld n) for wide matrices and X (m × n, ld m) for tall ones.
            if tall {
                self.gemm(
                    (false, true),
                    (m, m, n),
                    1.0,
                    (&x, m, sx),
                    (&x, m, sx),
                    0.0,
                    (&mut gram, m, sg),
                    batch,
                )?;
            } else {
                self.gemm(
                    (true, false),
                    (m, m, n),
                    1.0,
                    (&x, n, sx),
                    (&x, n, sx),
                    0.0,
                    (&mut gram, m, sg),
                    batch,
                )?;
            }
            cuda!("copy", self.stream.memcpy_dtod(&gram, &mut poly))?;
            self.gemm(
                (false, false),
                (m, m, m),
                c,
                (&gram, m, sg),
                (&gram, m, sg),
                b,
                (&mut poly, m, sg),
                batch,
            )?;
            cuda!("copy", self.stream.memcpy_dtod(&x, &mut next))?;
            if tall {
                // X ← a·X + B·X
                self.gemm(
                    (false, false),
                    (m, n, m),
                    1.0,
                    (&poly, m, sg),
                    (&x, m, sx),
                    a,
                    (&mut next, m, sx),
                    batch,
                )?;
            } else {
                // Y ← a·Y + Y·B (B symmetric)
                self.gemm(
                    (false, false),
                    (n, m, m),
                    1.0,
                    (&x, n, sx),
                    (&poly, m, sg),
                    a,
                    (&mut next, n, sx),
                    batch,
                )?;
            }
            std::mem::swap(&mut x, &mut next);
        }
        Ok(x)
    }

    /// Times `reps` square bf16 GEMMs of size `n` (f32 accumulation) and returns the achieved FLOP/s:
    /// the peak Newton–Schulz is measured against.
    pub fn gemm_rate(&self, n: usize, reps: usize) -> Result<f64> {
        let a = cuda!("allocate", self.stream.alloc_zeros::<u16>(n * n))?;
        let mut c = cuda!("allocate", self.stream.alloc_zeros::<u16>(n * n))?;
        let run = |c: &mut CudaSlice<u16>| {
            self.gemm(
                (false, false),
                (n, n, n),
                1.0,
                (&a, n, 0),
                (&a, n, 0),
                0.0,
                (c, n, 0),
                1,
            )
        };
        run(&mut c)?;
        self.synchronize()?;
        let start = std::time::Instant::now();
        for _ in 0..reps {
            run(&mut c)?;
        }
        self.synchronize()?;
        Ok(2.0 * (n as f64).powi(3) * reps as f64 / start.elapsed().as_secs_f64())
    }
}
