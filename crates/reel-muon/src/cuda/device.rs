//! [`CudaDevice`]: one GPU's context, stream, cuBLAS handle and kernels, and host transfers.

use std::sync::Arc;

use cudarc::cublas::CudaBlas;
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, PushKernelArg};

use super::kernels::{Kernels, elementwise};
use super::probe::available;
use crate::error::{MuonError, Result};

/// A GPU with its stream, cuBLAS handle and compiled kernels.
#[derive(Debug)]
pub struct CudaDevice {
    pub(super) stream: Arc<CudaStream>,
    pub(super) blas: CudaBlas,
    pub(super) kernels: Kernels,
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
        let kernels = Kernels::compile(&ctx)?;
        Ok(Self {
            stream,
            blas,
            kernels,
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
    /// Widens raw bf16 bits to f32 on the device.
    pub fn bf16_to_f32(&self, x: &CudaSlice<u16>) -> Result<CudaSlice<f32>> {
        let n = x.len();
        let mut out = cuda!("allocate", self.stream.alloc_zeros::<f32>(n))?;
        let n_i64 = n as i64;
        // SAFETY: both buffers hold `n` elements.
        unsafe {
            let mut launch = self.stream.launch_builder(&self.kernels.bf16_to_f32);
            launch.arg(x).arg(&mut out).arg(&n_i64);
            cuda!("bf16_to_f32", launch.launch(elementwise(n)))?;
        }
        Ok(out)
    }
}
