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
//!
//! Files: `probe` (can the libraries be loaded), `kernels` (the NVRTC source and its launch
//! shapes), `device` ([`CudaDevice`]: context, stream, transfers), `newton_schulz` (batched bf16
//! GEMMs and the iteration on them), `optimizer` ([`CudaMuon`]), `sharded` ([`ShardedCudaMuon`]) and
//! `nccl` ([`NcclCommunicator`]).

/// Maps a cudarc error to [`crate::MuonError::Cuda`], naming the operation that failed.
macro_rules! cuda {
    ($what:expr, $e:expr) => {
        $e.map_err(|e| $crate::error::MuonError::Cuda(format!("{}: {e:?}", $what)))
    };
}

mod device;
mod kernels;
mod nccl;
mod newton_schulz;
mod optimizer;
mod probe;
mod sharded;

pub use device::CudaDevice;
pub use nccl::{NcclCommunicator, nccl_unique_id};
pub use optimizer::CudaMuon;
pub use probe::{available, nccl_available};
pub use sharded::ShardedCudaMuon;
