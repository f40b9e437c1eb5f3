//! CUDA backend (feature `cuda`): bf16 Newton–Schulz through cuBLAS, f32 master weights and optimizer
//! state on the device, NVRTC kernels for the element-wise parts, and NCCL collectives.
//!
//! The CUDA libraries are loaded at run time (cudarc's dynamic loading), so this module builds with
//! no GPU and no toolkit; call [`available`] before anything else, because cudarc panics when a symbol
//! it needs cannot be loaded.
//!
//! Layout: a row-major `rows × cols` matrix is, to column-major cuBLAS, its transpose. Newton–Schulz
//! runs on whichever orientation is wide without moving data, by choosing the transpose flags. Matrices
//! of one shape are stacked and orthogonalised with strided-batched GEMMs. GEMMs read and write bf16
//! and accumulate in f32 (`cublasGemmStridedBatchedEx`, `CUBLAS_COMPUTE_32F`) with f32 `alpha`/`beta`,
//! so the quintic's coefficients are not rounded to bf16.

use std::collections::BTreeMap;
use std::sync::Arc;

use cudarc::cublas::{CudaBlas, result as blas, sys as blas_sys};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr,
    DevicePtrMut, LaunchConfig, PushKernelArg,
};
use cudarc::nccl::{Comm, Id, ReduceOp};

use crate::comm::{Communicator, Group, Topology};
use crate::error::{MuonError, Result};
use crate::newton_schulz::NewtonSchulz;
use crate::optimizer::{AdamWConfig, MuonConfig, ParamKind, ParamSpec};
use crate::shard::{ShardPlan, Strategy};

/// Whether the driver, cuBLAS and NVRTC libraries can be loaded.
pub fn available() -> bool {
    // SAFETY: these only try to open the shared libraries.
    unsafe {
        cudarc::driver::sys::is_culib_present()
            && cudarc::cublas::sys::is_culib_present()
            && cudarc::nvrtc::sys::is_culib_present()
    }
}

/// Whether NCCL can be loaded as well.
pub fn nccl_available() -> bool {
    // SAFETY: only tries to open the shared library.
    available() && unsafe { cudarc::nccl::sys::is_culib_present() }
}

fn cuda_err(what: &str) -> impl Fn(&dyn std::fmt::Debug) -> MuonError + '_ {
    move |e| MuonError::Cuda(format!("{what}: {e:?}"))
}

macro_rules! cuda {
    ($what:expr, $e:expr) => {
        $e.map_err(|e| cuda_err($what)(&e))
    };
}

const KERNELS: &str = r#"
__device__ unsigned short f32_to_bf16(float x) {
    unsigned int b = __float_as_uint(x);
    if ((b & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((b >> 16) | 0x40u);
    b += 0x7fffu + ((b >> 16) & 1u);
    return (unsigned short)(b >> 16);
}
__device__ float bf16_to_f32(unsigned short h) { return __uint_as_float(((unsigned int)h) << 16); }

extern "C" __global__ void muon_momentum(float* buf, const float* grad, float* dir, float beta, int nesterov, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    float g = grad[i];
    float m = beta * buf[i] + (1.0f - beta) * g;
    buf[i] = m;
    dir[i] = nesterov ? (1.0f - beta) * g + beta * m : m;
}

// One block of 256 threads per matrix; f64 accumulation like the CPU reference.
extern "C" __global__ void sum_squares(const float* x, double* out, long long per_matrix) {
    __shared__ double partial[256];
    const float* m = x + blockIdx.x * per_matrix;
    double s = 0.0;
    for (long long i = threadIdx.x; i < per_matrix; i += blockDim.x) { double v = m[i]; s += v * v; }
    partial[threadIdx.x] = s;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) partial[threadIdx.x] += partial[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}

extern "C" __global__ void normalize_to_bf16(const float* x, const double* sumsq, unsigned short* y, long long per_matrix, long long n, float eps) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    float norm = (float)sqrt(sumsq[i / per_matrix]);
    y[i] = f32_to_bf16(x[i] * (1.0f / fmaxf(norm, eps)));
}

extern "C" __global__ void bf16_to_f32_kernel(const unsigned short* x, float* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = bf16_to_f32(x[i]);
}

extern "C" __global__ void apply_update(float* p, const unsigned short* u, float decay, float lr, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) p[i] = p[i] * decay - lr * bf16_to_f32(u[i]);
}

extern "C" __global__ void adamw(float* p, const float* g, float* m, float* v, float b1, float b2, float decay,
                                 float step_size, float bias2_sqrt, float eps, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    float gi = g[i];
    float mi = b1 * m[i] + (1.0f - b1) * gi;
    float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * decay - step_size * mi / (sqrtf(vi) / bias2_sqrt + eps);
}
"#;

fn elementwise(n: usize) -> LaunchConfig {
    let blocks = n.div_ceil(256).max(1) as u32;
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// A GPU with its stream, cuBLAS handle and compiled kernels.
#[derive(Debug)]
pub struct CudaDevice {
    stream: Arc<CudaStream>,
    blas: CudaBlas,
    muon_momentum: CudaFunction,
    sum_squares: CudaFunction,
    normalize_to_bf16: CudaFunction,
    bf16_to_f32: CudaFunction,
    apply_update: CudaFunction,
    adamw: CudaFunction,
}

impl CudaDevice {
    /// Opens GPU `ordinal` and compiles the kernels with NVRTC.
    pub fn new(ordinal: usize) -> Result<Self> {
        if !available() {
            return Err(MuonError::Cuda(
                "CUDA driver, cuBLAS or NVRTC library not found".into(),
            ));
        }
        let ctx = cuda!("open device", CudaContext::new(ordinal))?;
        let stream = ctx.default_stream();
        let blas = cuda!("cuBLAS handle", CudaBlas::new(stream.clone()))?;
        let ptx = cuda!("compile kernels", cudarc::nvrtc::compile_ptx(KERNELS))?;
        let module = cuda!("load kernels", ctx.load_module(ptx))?;
        let load = |name: &str| cuda!(name, module.load_function(name));
        Ok(Self {
            muon_momentum: load("muon_momentum")?,
            sum_squares: load("sum_squares")?,
            normalize_to_bf16: load("normalize_to_bf16")?,
            bf16_to_f32: load("bf16_to_f32_kernel")?,
            apply_update: load("apply_update")?,
            adamw: load("adamw")?,
            stream,
            blas,
        })
    }

    /// The stream every operation runs on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Copies host data to a new device buffer.
    pub fn upload(&self, data: &[f32]) -> Result<CudaSlice<f32>> {
        cuda!("upload", self.stream.clone_htod(data))
    }

    /// Copies a device buffer back to the host.
    pub fn download(&self, data: &CudaSlice<f32>) -> Result<Vec<f32>> {
        cuda!("download", self.stream.clone_dtoh(data))
    }

    /// Waits for all queued work.
    pub fn synchronize(&self) -> Result<()> {
        cuda!("synchronize", self.stream.synchronize())
    }

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
            let mut launch = self.stream.launch_builder(&self.sum_squares);
            launch.arg(input).arg(&mut sumsq).arg(&per_matrix_i64);
            let cfg = LaunchConfig {
                grid_dim: (batch as u32, 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            };
            cuda!("sum_squares", launch.launch(cfg))?;
            let mut launch = self.stream.launch_builder(&self.normalize_to_bf16);
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

    /// Widens raw bf16 bits to f32 on the device.
    pub fn bf16_to_f32(&self, x: &CudaSlice<u16>) -> Result<CudaSlice<f32>> {
        let n = x.len();
        let mut out = cuda!("allocate", self.stream.alloc_zeros::<f32>(n))?;
        let n_i64 = n as i64;
        // SAFETY: both buffers hold `n` elements.
        unsafe {
            let mut launch = self.stream.launch_builder(&self.bf16_to_f32);
            launch.arg(x).arg(&mut out).arg(&n_i64);
            cuda!("bf16_to_f32", launch.launch(elementwise(n)))?;
        }
        Ok(out)
    }
}

/// Matrices of one shape, stacked so Newton–Schulz runs as one batched call.
#[derive(Debug)]
struct ShapeGroup {
    rows: usize,
    cols: usize,
    /// Parameter indices, in stacking order.
    members: Vec<usize>,
    params: CudaSlice<f32>,
    momentum: CudaSlice<f32>,
    grads: CudaSlice<f32>,
    direction: CudaSlice<f32>,
}

#[derive(Debug)]
struct AdamWParam {
    index: usize,
    param: CudaSlice<f32>,
    grad: CudaSlice<f32>,
    exp_avg: CudaSlice<f32>,
    exp_avg_sq: CudaSlice<f32>,
}

/// Where a parameter lives on the device.
#[derive(Clone, Copy, Debug)]
enum Slot {
    /// Member `member` of the stacked shape group `group`.
    Stacked {
        group: usize,
        member: usize,
    },
    Adamw(usize),
    /// Not updated here (another rank owns it): values only.
    Held(usize),
}

/// Muon with auxiliary AdamW, every parameter and all state resident on one GPU.
#[derive(Debug)]
pub struct CudaMuon {
    device: CudaDevice,
    specs: Vec<ParamSpec>,
    muon: MuonConfig,
    adamw: AdamWConfig,
    groups: Vec<ShapeGroup>,
    adamw_params: Vec<AdamWParam>,
    held: Vec<CudaSlice<f32>>,
    slots: Vec<Slot>,
    step: u64,
}

impl CudaMuon {
    /// Uploads `params` (host, one buffer per spec) and allocates zeroed state.
    pub fn new(
        device: CudaDevice,
        specs: Vec<ParamSpec>,
        params: &[Vec<f32>],
        muon: MuonConfig,
        adamw: AdamWConfig,
    ) -> Result<Self> {
        let owned = vec![true; specs.len()];
        Self::with_owned(device, specs, params, &owned, muon, adamw)
    }

    /// Like [`CudaMuon::new`], but keeps state for and updates only the parameters marked in
    /// `owned`; the others are held on the device for a gather to overwrite (see
    /// [`ShardedCudaMuon`]).
    pub fn with_owned(
        device: CudaDevice,
        specs: Vec<ParamSpec>,
        params: &[Vec<f32>],
        owned: &[bool],
        muon: MuonConfig,
        adamw: AdamWConfig,
    ) -> Result<Self> {
        if params.len() != specs.len() || owned.len() != specs.len() {
            return Err(MuonError::Config(format!(
                "{} parameters and {} ownership flags for {} specs",
                params.len(),
                owned.len(),
                specs.len()
            )));
        }
        let mut by_shape: BTreeMap<(usize, usize), Vec<usize>> = BTreeMap::new();
        let mut adamw_params = Vec::new();
        let mut held = Vec::new();
        let mut slots = vec![Slot::Held(0); specs.len()];
        let zeros = |n: usize| cuda!("allocate", device.stream.alloc_zeros::<f32>(n));
        for (index, (spec, param)) in specs.iter().zip(params).enumerate() {
            spec.validate()?;
            if param.len() != spec.numel() {
                return Err(MuonError::shape(
                    &spec.name,
                    format!("{} elements for shape {:?}", param.len(), spec.shape),
                ));
            }
            if !owned[index] {
                slots[index] = Slot::Held(held.len());
                held.push(device.upload(param)?);
                continue;
            }
            if spec.kind == ParamKind::Adamw {
                slots[index] = Slot::Adamw(adamw_params.len());
            }
            match spec.kind {
                ParamKind::Muon => by_shape.entry(spec.matrix_dims()).or_default().push(index),
                ParamKind::Adamw => adamw_params.push(AdamWParam {
                    index,
                    param: device.upload(param)?,
                    grad: zeros(spec.numel())?,
                    exp_avg: zeros(spec.numel())?,
                    exp_avg_sq: zeros(spec.numel())?,
                }),
            }
        }
        let mut groups = Vec::new();
        for ((rows, cols), members) in by_shape {
            for (member, &index) in members.iter().enumerate() {
                let group = groups.len();
                slots[index] = Slot::Stacked { group, member };
            }
            let stacked: Vec<f32> = members
                .iter()
                .flat_map(|&i| params[i].iter().copied())
                .collect();
            let n = stacked.len();
            groups.push(ShapeGroup {
                rows,
                cols,
                members,
                params: device.upload(&stacked)?,
                momentum: zeros(n)?,
                grads: zeros(n)?,
                direction: zeros(n)?,
            });
        }
        Ok(Self {
            device,
            specs,
            muon,
            adamw,
            groups,
            adamw_params,
            held,
            slots,
            step: 0,
        })
    }

    /// The parameter specs, in order.
    pub fn specs(&self) -> &[ParamSpec] {
        &self.specs
    }

    /// The device memory of parameter `index`.
    fn param_view(&self, index: usize) -> CudaView<'_, f32> {
        match self.slots[index] {
            Slot::Stacked { group, member } => {
                let g = &self.groups[group];
                let per = g.rows * g.cols;
                g.params.slice(member * per..(member + 1) * per)
            }
            Slot::Adamw(j) => self.adamw_params[j].param.as_view(),
            Slot::Held(j) => self.held[j].as_view(),
        }
    }

    /// Copies parameters `indices`, in order and back to back, into `dst` (device to device).
    pub fn pack_params(&self, indices: &[usize], dst: &mut CudaViewMut<'_, f32>) -> Result<()> {
        let mut at = 0;
        for &i in indices {
            let src = self.param_view(i);
            let n = src.len();
            if at + n > dst.len() {
                return Err(MuonError::Comm("pack_params: buffer too small".into()));
            }
            let mut part = dst.slice_mut(at..at + n);
            cuda!("copy", self.device.stream.memcpy_dtod(&src, &mut part))?;
            at += n;
        }
        Ok(())
    }

    /// Overwrites parameters `indices`, in order and back to back, from `src` (device to device).
    pub fn unpack_params(&mut self, indices: &[usize], src: &CudaView<'_, f32>) -> Result<()> {
        let stream = self.device.stream.clone();
        let mut at = 0;
        for &i in indices {
            let n = self.specs[i].numel();
            if at + n > src.len() {
                return Err(MuonError::Comm("unpack_params: buffer too small".into()));
            }
            let part = src.slice(at..at + n);
            match self.slots[i] {
                Slot::Stacked { group, member } => {
                    let g = &mut self.groups[group];
                    let per = g.rows * g.cols;
                    let mut dst = g.params.slice_mut(member * per..(member + 1) * per);
                    cuda!("copy", stream.memcpy_dtod(&part, &mut dst))?;
                }
                Slot::Adamw(j) => {
                    cuda!(
                        "copy",
                        stream.memcpy_dtod(&part, &mut self.adamw_params[j].param)
                    )?;
                }
                Slot::Held(j) => {
                    cuda!("copy", stream.memcpy_dtod(&part, &mut self.held[j]))?;
                }
            }
            at += n;
        }
        Ok(())
    }

    /// The device.
    pub fn device(&self) -> &CudaDevice {
        &self.device
    }

    /// One step with host gradients (uploaded here; a trainer would write the device buffers directly).
    pub fn step<G: AsRef<[f32]>>(&mut self, grads: &[G]) -> Result<()> {
        if grads.len() != self.specs.len() {
            return Err(MuonError::Config(format!(
                "{} gradients for {} parameters",
                grads.len(),
                self.specs.len()
            )));
        }
        for (spec, grad) in self.specs.iter().zip(grads) {
            if grad.as_ref().len() != spec.numel() {
                return Err(MuonError::shape(
                    &spec.name,
                    format!("{} gradient elements", grad.as_ref().len()),
                ));
            }
        }
        self.step += 1;
        let stream = self.device.stream.clone();
        for group in &mut self.groups {
            let stacked: Vec<f32> = group
                .members
                .iter()
                .flat_map(|&i| grads[i].as_ref().iter().copied())
                .collect();
            cuda!(
                "upload gradients",
                stream.memcpy_htod(&stacked, &mut group.grads)
            )?;
            let n = stacked.len();
            let (n_i64, nesterov) = (n as i64, i32::from(self.muon.nesterov));
            // SAFETY: all four buffers hold `n` elements.
            unsafe {
                let mut launch = stream.launch_builder(&self.device.muon_momentum);
                launch
                    .arg(&mut group.momentum)
                    .arg(&group.grads)
                    .arg(&mut group.direction)
                    .arg(&self.muon.momentum)
                    .arg(&nesterov)
                    .arg(&n_i64);
                cuda!("muon_momentum", launch.launch(elementwise(n)))?;
            }
            let update = self.device.newton_schulz(
                &self.muon.newton_schulz,
                &group.direction,
                group.members.len(),
                group.rows,
                group.cols,
            )?;
            let decay = 1.0 - self.muon.lr * self.muon.weight_decay;
            let lr = self.muon.lr * self.muon.adjust_lr.ratio(group.rows, group.cols);
            // SAFETY: `params` and `update` hold `n` elements.
            unsafe {
                let mut launch = stream.launch_builder(&self.device.apply_update);
                launch
                    .arg(&mut group.params)
                    .arg(&update)
                    .arg(&decay)
                    .arg(&lr)
                    .arg(&n_i64);
                cuda!("apply_update", launch.launch(elementwise(n)))?;
            }
        }
        let (b1, b2) = self.adamw.betas;
        let exponent = self.step.min(i32::MAX as u64) as i32;
        let decay = 1.0 - self.adamw.lr * self.adamw.weight_decay;
        let step_size = self.adamw.lr / (1.0 - b1.powi(exponent));
        let bias2_sqrt = (1.0 - b2.powi(exponent)).sqrt();
        for p in &mut self.adamw_params {
            cuda!(
                "upload gradients",
                stream.memcpy_htod(grads[p.index].as_ref(), &mut p.grad)
            )?;
            let n = p.param.len();
            let n_i64 = n as i64;
            // SAFETY: all buffers hold `n` elements.
            unsafe {
                let mut launch = stream.launch_builder(&self.device.adamw);
                launch
                    .arg(&mut p.param)
                    .arg(&p.grad)
                    .arg(&mut p.exp_avg)
                    .arg(&mut p.exp_avg_sq)
                    .arg(&b1)
                    .arg(&b2)
                    .arg(&decay)
                    .arg(&step_size)
                    .arg(&bias2_sqrt)
                    .arg(&self.adamw.eps)
                    .arg(&n_i64);
                cuda!("adamw", launch.launch(elementwise(n)))?;
            }
        }
        Ok(())
    }

    /// Copies every parameter back to the host, in spec order.
    pub fn download_params(&self) -> Result<Vec<Vec<f32>>> {
        let mut out = vec![Vec::new(); self.specs.len()];
        for group in &self.groups {
            let stacked = self.device.download(&group.params)?;
            let per = group.rows * group.cols;
            for (k, &i) in group.members.iter().enumerate() {
                out[i] = stacked[k * per..(k + 1) * per].to_vec();
            }
        }
        for p in &self.adamw_params {
            out[p.index] = self.device.download(&p.param)?;
        }
        for (index, slot) in self.slots.iter().enumerate() {
            if let Slot::Held(j) = *slot {
                out[index] = self.device.download(&self.held[j])?;
            }
        }
        Ok(out)
    }
}

/// [`CudaMuon`] on one rank of a sharded job ([`ShardPlan`]): each rank updates the parameters it
/// owns, then NCCL gathers the new values device to device within the plan's gather group (the
/// world for [`Strategy::Global`], the node for [`Strategy::Hybrid`]). Optimizer state exists only
/// on owners. Same plan and same arithmetic as [`crate::ShardedMuon`], on the GPU.
#[derive(Debug)]
pub struct ShardedCudaMuon {
    optimizer: CudaMuon,
    plan: ShardPlan,
    comm: NcclCommunicator,
    owned_by_member: Vec<Vec<usize>>,
    counts: Vec<usize>,
}

impl ShardedCudaMuon {
    /// Plans `strategy` on `comm`'s topology and uploads this rank's share. `comm` must run on
    /// `device`'s stream, so collectives and kernels stay ordered.
    pub fn new(
        device: CudaDevice,
        specs: Vec<ParamSpec>,
        params: &[Vec<f32>],
        strategy: Strategy,
        comm: NcclCommunicator,
        muon: MuonConfig,
        adamw: AdamWConfig,
    ) -> Result<Self> {
        if !Arc::ptr_eq(&comm.stream, &device.stream) {
            return Err(MuonError::Config(
                "the NCCL communicator must use the device's stream".into(),
            ));
        }
        let plan = ShardPlan::new(&specs, strategy, comm.topology(), muon.newton_schulz.steps);
        let layout = plan.layout(&specs, comm.rank());
        let optimizer = CudaMuon::with_owned(device, specs, params, &layout.owned, muon, adamw)?;
        Ok(Self {
            optimizer,
            plan,
            comm,
            owned_by_member: layout.by_member,
            counts: layout.counts,
        })
    }

    /// The plan.
    pub fn plan(&self) -> &ShardPlan {
        &self.plan
    }

    /// This rank's optimizer (state for owned parameters only).
    pub fn optimizer(&self) -> &CudaMuon {
        &self.optimizer
    }

    /// Copies every parameter back to the host, in spec order.
    pub fn download_params(&self) -> Result<Vec<Vec<f32>>> {
        self.optimizer.download_params()
    }

    /// One step: update owned parameters, then gather so every rank of the group holds every
    /// new value.
    pub fn step<G: AsRef<[f32]>>(&mut self, grads: &[G]) -> Result<()> {
        self.optimizer.step(grads)?;
        let Some((group, own)) = self.plan.gather_position(self.comm.rank()) else {
            return Ok(());
        };
        let starts: Vec<usize> = self
            .counts
            .iter()
            .scan(0, |at, &c| {
                let start = *at;
                *at += c;
                Some(start)
            })
            .collect();
        let total: usize = self.counts.iter().sum();
        let stream = self.optimizer.device.stream.clone();
        let mut gathered = cuda!("allocate", stream.alloc_zeros::<f32>(total.max(1)))?;
        let mine = starts[own]..starts[own] + self.counts[own];
        self.optimizer
            .pack_params(&self.owned_by_member[own], &mut gathered.slice_mut(mine))?;
        gather_in_place(
            self.comm.comm(group),
            &stream,
            &mut gathered,
            &self.counts,
            own,
        )?;
        for (member, indices) in self.owned_by_member.iter().enumerate() {
            if member != own && !indices.is_empty() {
                let range = starts[member]..starts[member] + self.counts[member];
                self.optimizer
                    .unpack_params(indices, &gathered.slice(range))?;
            }
        }
        Ok(())
    }
}

/// All-gathers `buffer` over `comm`: member `m` contributes `counts[m]` elements at their offset,
/// and this rank (member `own`) has already put its part in place.
fn gather_in_place(
    comm: &Comm,
    stream: &Arc<CudaStream>,
    buffer: &mut CudaSlice<f32>,
    counts: &[usize],
    own: usize,
) -> Result<()> {
    let offset: usize = counts[..own].iter().sum();
    let mine = offset..offset + counts[own];
    if counts.iter().all(|&c| c == counts[own]) {
        let staged = cuda!("copy", stream.clone_dtod(&buffer.slice(mine)))?;
        cuda!("ncclAllGather", comm.all_gather(&staged, buffer).map(drop))?;
    } else {
        // NCCL has no all-gather of uneven parts: one broadcast per member, rooted there.
        let mut start = 0;
        for (member, &count) in counts.iter().enumerate() {
            if count > 0 {
                let mut part = buffer.slice_mut(start..start + count);
                cuda!(
                    "ncclBroadcast",
                    comm.broadcast_in_place(&mut part, member as i32).map(drop)
                )?;
            }
            start += count;
        }
    }
    Ok(())
}

/// NCCL collectives behind the [`Communicator`] trait. Host buffers are staged through the device;
/// a trainer keeps its buffers on the GPU and calls the NCCL communicators ([`NcclCommunicator::world`],
/// [`NcclCommunicator::node`]) directly.
#[derive(Debug)]
pub struct NcclCommunicator {
    rank: usize,
    topology: Topology,
    world: Comm,
    node: Comm,
    stream: Arc<CudaStream>,
}

/// A fresh NCCL unique id, as bytes to hand to the other ranks out of band (rank 0 creates the world's,
/// each node's first rank its node's).
pub fn nccl_unique_id() -> Result<Vec<u8>> {
    if !nccl_available() {
        return Err(MuonError::Cuda("NCCL library not found".into()));
    }
    let id = cuda!("ncclGetUniqueId", Id::new())?;
    Ok(id.internal().iter().map(|&c| c as u8).collect())
}

fn id_from_bytes(bytes: &[u8]) -> Result<Id> {
    let mut internal = [0 as std::ffi::c_char; 128];
    if bytes.len() != internal.len() {
        return Err(MuonError::Comm(format!(
            "NCCL id of {} bytes, expected 128",
            bytes.len()
        )));
    }
    for (dst, &src) in internal.iter_mut().zip(bytes) {
        *dst = src as std::ffi::c_char;
    }
    Ok(Id::uninit(internal))
}

impl NcclCommunicator {
    /// Joins the world communicator and this rank's node communicator on `stream`'s device.
    pub fn new(
        stream: Arc<CudaStream>,
        rank: usize,
        topology: Topology,
        world_id: &[u8],
        node_id: &[u8],
    ) -> Result<Self> {
        if !nccl_available() {
            return Err(MuonError::Cuda("NCCL library not found".into()));
        }
        if rank >= topology.world_size() {
            return Err(MuonError::Comm(format!(
                "rank {rank} in a world of {}",
                topology.world_size()
            )));
        }
        let world = cuda!(
            "ncclCommInitRank (world)",
            Comm::from_rank(
                stream.clone(),
                rank,
                topology.world_size(),
                id_from_bytes(world_id)?
            )
        )?;
        let local = rank % topology.per_node;
        let node = cuda!(
            "ncclCommInitRank (node)",
            Comm::from_rank(
                stream.clone(),
                local,
                topology.per_node,
                id_from_bytes(node_id)?
            )
        )?;
        Ok(Self {
            rank,
            topology,
            world,
            node,
            stream,
        })
    }

    /// The communicator over every rank.
    pub fn world(&self) -> &Comm {
        &self.world
    }

    /// The communicator over this node's ranks.
    pub fn node(&self) -> &Comm {
        &self.node
    }

    fn comm(&self, group: Group) -> &Comm {
        match group {
            Group::World => &self.world,
            Group::Node => &self.node,
        }
    }

    /// Copies the collective's result back and waits for it.
    fn finish(&self, device: CudaSlice<f32>, host: &mut [f32]) -> Result<()> {
        cuda!("download", self.stream.memcpy_dtoh(&device, host))?;
        cuda!("synchronize", self.stream.synchronize())
    }
}

impl Communicator for NcclCommunicator {
    fn rank(&self) -> usize {
        self.rank
    }

    fn topology(&self) -> Topology {
        self.topology
    }

    fn all_gather(
        &mut self,
        group: Group,
        send: &[f32],
        counts: &[usize],
        recv: &mut [f32],
    ) -> Result<()> {
        let members = self.topology.members(group, self.rank);
        let own = self.rank - members.start;
        if counts.len() != members.len()
            || counts[own] != send.len()
            || counts.iter().sum::<usize>() != recv.len()
        {
            return Err(MuonError::Comm(
                "all_gather: counts do not match the buffers".into(),
            ));
        }
        let mut device = cuda!(
            "allocate",
            self.stream.alloc_zeros::<f32>(recv.len().max(1))
        )?;
        let offset: usize = counts[..own].iter().sum();
        if !send.is_empty() {
            let mut mine = device.slice_mut(offset..offset + send.len());
            cuda!("upload", self.stream.memcpy_htod(send, &mut mine))?;
        }
        gather_in_place(self.comm(group), &self.stream, &mut device, counts, own)?;
        self.finish(device, recv)
    }

    fn broadcast(&mut self, group: Group, root: usize, buf: &mut [f32]) -> Result<()> {
        let mut device = cuda!("upload", self.stream.clone_htod(buf))?;
        let root =
            i32::try_from(root).map_err(|_| MuonError::Comm(format!("broadcast root {root}")))?;
        cuda!(
            "ncclBroadcast",
            self.comm(group)
                .broadcast_in_place(&mut device, root)
                .map(drop)
        )?;
        self.finish(device, buf)
    }

    fn reduce_scatter(&mut self, group: Group, send: &[f32], recv: &mut [f32]) -> Result<()> {
        let staged = cuda!("upload", self.stream.clone_htod(send))?;
        let mut device = cuda!("allocate", self.stream.alloc_zeros::<f32>(recv.len()))?;
        cuda!(
            "ncclReduceScatter",
            self.comm(group)
                .reduce_scatter(&staged, &mut device, &ReduceOp::Sum)
                .map(drop)
        )?;
        self.finish(device, recv)
    }

    fn all_reduce(&mut self, group: Group, buf: &mut [f32]) -> Result<()> {
        let mut device = cuda!("upload", self.stream.clone_htod(buf))?;
        cuda!(
            "ncclAllReduce",
            self.comm(group)
                .all_reduce_in_place(&mut device, &ReduceOp::Sum)
                .map(drop)
        )?;
        self.finish(device, buf)
    }

    fn barrier(&mut self, group: Group) -> Result<()> {
        let mut token = cuda!("allocate", self.stream.alloc_zeros::<f32>(1))?;
        cuda!(
            "ncclAllReduce",
            self.comm(group)
                .all_reduce_in_place(&mut token, &ReduceOp::Sum)
                .map(drop)
        )?;
        cuda!("synchronize", self.stream.synchronize())
    }
}
