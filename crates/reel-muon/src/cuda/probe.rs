//! Whether the CUDA libraries can be loaded: cudarc panics on a missing symbol, so every entry
//! point checks these first.

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
