//! reel-landing's integration tests, one binary: landing formats written by independent
//! tools, recorded video, damaged landing files, bad input, and packed episodes read back
//! by Reel and by the Python `mcap` library and ffmpeg.

#![allow(clippy::unwrap_used)] // Tests fail loudly by design.

mod bad_input;
mod damaged;
mod formats;
mod pack_read;
mod python_compat;
mod recorded_video;
