//! The NVRTC kernels for the element-wise parts of both optimizers, the functions loaded from them,
//! and their launch shape.

use cudarc::driver::{CudaContext, CudaFunction, LaunchConfig};

use crate::error::Result;

/// CUDA C compiled at run time, so the crate needs no toolkit to build.
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

/// The kernels of [`KERNELS`], compiled and loaded on one device.
#[derive(Debug)]
pub(super) struct Kernels {
    pub(super) muon_momentum: CudaFunction,
    pub(super) sum_squares: CudaFunction,
    pub(super) normalize_to_bf16: CudaFunction,
    pub(super) bf16_to_f32: CudaFunction,
    pub(super) apply_update: CudaFunction,
    pub(super) adamw: CudaFunction,
}

impl Kernels {
    /// Compiles [`KERNELS`] with NVRTC and loads every function on `ctx`.
    pub(super) fn compile(ctx: &std::sync::Arc<CudaContext>) -> Result<Self> {
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
        })
    }
}

/// One thread per element, in blocks of 256.
pub(super) fn elementwise(n: usize) -> LaunchConfig {
    let blocks = n.div_ceil(256).max(1) as u32;
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}
