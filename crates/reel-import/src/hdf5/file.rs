//! Reading HDF5 files: opening one, and reading its datasets as rows of values or as
//! pictures (raw RGB or ALOHA's padded JPEG bytes) and its root attributes as JSON.

use std::path::Path;

use bytes::Bytes;
use hdf5::types::VarLenUnicode;
use hdf5_metno as hdf5;
use ndarray::s;
use reel_landing::LandingImage;

use crate::{Error, Result};

pub(super) fn open(path: &Path) -> Result<hdf5::File> {
    if !path.is_file() {
        return Err(Error::dataset(path.display(), "missing"));
    }
    hdf5::File::open(path)
        .map_err(|e| Error::dataset(path.display(), format!("not a readable HDF5 file: {e}")))
}

pub(super) fn h5_err(path: &Path, object: &str, e: hdf5::Error) -> Error {
    Error::dataset(path.display(), format!("{object}: {e}"))
}

/// A numeric dataset as rows of values (a 1-d dataset is one value a row).
pub(super) fn rows(path: &Path, ds: &hdf5::Dataset, name: &str) -> Result<Vec<Vec<f64>>> {
    let shape = ds.shape();
    let values: Vec<f64> = ds.read_raw::<f64>().map_err(|e| h5_err(path, name, e))?;
    match shape[..] {
        [t] => Ok(values.into_iter().take(t).map(|v| vec![v]).collect()),
        [_, width] if width > 0 => Ok(values.chunks_exact(width).map(<[f64]>::to_vec).collect()),
        _ => Err(Error::dataset(
            path.display(),
            format!("{name} has shape {shape:?}, not (frames,) or (frames, values)"),
        )),
    }
}

/// A camera dataset: (T, H, W, 3) uint8 raw pictures, or (T, padded) uint8 of JPEG bytes
/// padded with zeros (ALOHA's compressed recordings).
pub(super) fn pictures(
    path: &Path,
    ds: &hdf5::Dataset,
    name: &str,
    period_ns: u64,
) -> Result<Vec<(u64, LandingImage)>> {
    let shape = ds.shape();
    match shape[..] {
        [t, h, w, 3] => (0..t)
            .map(|i| {
                let frame = ds
                    .read_slice::<u8, _, ndarray::Ix3>(s![i, .., .., ..])
                    .map_err(|e| h5_err(path, name, e))?;
                let data: Vec<u8> = frame.iter().copied().collect();
                Ok((
                    i as u64 * period_ns,
                    LandingImage::Rgb {
                        width: w,
                        height: h,
                        data: Bytes::from(data),
                    },
                ))
            })
            .collect(),
        [t, _] => (0..t)
            .map(|i| {
                let row = ds
                    .read_slice_1d::<u8, _>(s![i, ..])
                    .map_err(|e| h5_err(path, name, e))?;
                let bytes: Vec<u8> = row.iter().copied().collect();
                // The padding is zeros after JPEG's end-of-image marker.
                let end = bytes
                    .windows(2)
                    .rposition(|w| w == [0xff, 0xd9])
                    .ok_or_else(|| {
                        Error::dataset(
                            path.display(),
                            format!("{name} frame {i} is not a JPEG picture (no end marker)"),
                        )
                    })?;
                Ok((
                    i as u64 * period_ns,
                    LandingImage::Jpeg(Bytes::from(bytes[..end + 2].to_vec())),
                ))
            })
            .collect(),
        _ => Err(Error::dataset(
            path.display(),
            format!(
                "{name} has shape {shape:?}, not (frames, height, width, 3) or (frames, JPEG bytes)"
            ),
        )),
    }
}

/// The file's root attributes as JSON text (numbers, strings, booleans), for the record.
pub(super) fn root_attributes(file: &hdf5::File) -> String {
    let mut out = serde_json::Map::new();
    for name in file.attr_names().unwrap_or_default() {
        let Ok(attr) = file.attr(&name) else { continue };
        let value = if let Ok(b) = attr.read_scalar::<bool>() {
            serde_json::Value::Bool(b)
        } else if let Ok(v) = attr.read_scalar::<f64>() {
            serde_json::json!(v)
        } else if let Ok(s) = attr.read_scalar::<VarLenUnicode>() {
            serde_json::Value::String(s.as_str().to_owned())
        } else {
            continue;
        };
        out.insert(name, value);
    }
    serde_json::Value::Object(out).to_string()
}
