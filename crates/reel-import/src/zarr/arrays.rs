//! A replay buffer's storage and arrays through zarrs: a folder or a `.zip` (a zarr
//! ZipStore, as UMI publishes), each array's element type, and an episode's rows read as
//! numbers or pictures.

use std::path::Path;
use std::sync::Arc;

use zarrs::array::chunk_cache::{ChunkCache, ChunkCacheDecodedLruSizeLimit};
use zarrs::array::codec::api::CodecOptions;
use zarrs::array::{Array, ArrayCreateError, ArrayError, ArraySubset, ElementOwned};
use zarrs::filesystem::FilesystemStore;
use zarrs::plugin::{ExtensionName, ZarrVersion};
use zarrs::storage::{ReadableListableStorage, ReadableStorageTraits, StorageError, StoreKey};

use crate::{Error, Result};

/// Decoded chunks kept per array, so that episodes sharing a chunk (a buffer chunked
/// across episodes, or one chunk for a whole low-dimensional array) decode it once, not
/// once per episode; bounded, so memory does not grow with the buffer.
const CHUNK_CACHE_BYTES: u64 = 64 << 20;

/// Opens the buffer at `path`: a folder, or a `.zip` holding one.
pub(super) fn open_storage(path: &Path) -> Result<ReadableListableStorage> {
    let missing = |e: std::io::Error| Error::Read {
        path: path.display().to_string(),
        source: e,
    };
    let meta = std::fs::metadata(path).map_err(missing)?;
    let bad = |e: &dyn std::fmt::Display| Error::dataset(path.display(), e.to_string());
    if meta.is_dir() {
        let store = FilesystemStore::new(path).map_err(|e| bad(&e))?;
        return Ok(Arc::new(store));
    }
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(Error::dataset(path.display(), "not a folder or a zip file"));
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    let folder = Arc::new(FilesystemStore::new(parent).map_err(|e| bad(&e))?);
    let key = StoreKey::new(name.to_string_lossy()).map_err(|e| bad(&e))?;
    let zip = zarrs_zip::ZipStorageAdapter::new(folder, key)
        .map_err(|e| Error::dataset(path.display(), format!("not a zip file: {e}")))?;
    Ok(Arc::new(zip))
}

/// A Zarr array's element type, as far as Reel reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dtype {
    Bool,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F16,
    BF16,
    F32,
    F64,
}

impl Dtype {
    /// From the Zarr v3 name zarrs gives every data type (`float32`…; v2's `<f4` maps to it).
    pub(super) fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "bool" => Self::Bool,
            "int8" => Self::I8,
            "int16" => Self::I16,
            "int32" => Self::I32,
            "int64" => Self::I64,
            "uint8" => Self::U8,
            "uint16" => Self::U16,
            "uint32" => Self::U32,
            "uint64" => Self::U64,
            "float16" => Self::F16,
            "bfloat16" => Self::BF16,
            "float32" => Self::F32,
            "float64" => Self::F64,
            _ => return None,
        })
    }

    /// Bytes an element takes, decoded.
    pub(super) fn size(self) -> u64 {
        match self {
            Self::Bool | Self::I8 | Self::U8 => 1,
            Self::I16 | Self::U16 | Self::F16 | Self::BF16 => 2,
            Self::I32 | Self::U32 | Self::F32 => 4,
            Self::I64 | Self::U64 | Self::F64 => 8,
        }
    }
}

/// One array of the buffer, opened: what an episode's rows are read through.
pub(super) struct ZarrArray {
    /// Its path in the buffer (`data/img`).
    pub path: String,
    /// Where the buffer is, for errors.
    pub buffer: String,
    pub shape: Vec<u64>,
    /// Its data type's Zarr name (`float32`, `uint8`, `string`…).
    pub type_name: String,
    /// Its element type, when Reel reads it.
    pub dtype: Option<Dtype>,
    /// Its codecs by name (`blosc`, `imagecodecs_jpegxl`…), for `--list`.
    pub codecs: Vec<String>,
    cache: ChunkCacheDecodedLruSizeLimit,
}

impl ZarrArray {
    /// Opens the array at `path`. The disk's errors are the environment's; the rest
    /// (missing or unreadable metadata, a codec or data type zarrs lacks) the buffer's.
    pub(super) fn open(
        storage: &ReadableListableStorage,
        path: &str,
        buffer: &str,
    ) -> Result<Self> {
        let readable: Arc<dyn ReadableStorageTraits> = storage.clone();
        let location = format!("{buffer}/{path}");
        let array = Array::open(readable, &format!("/{path}")).map_err(|e| match e {
            ArrayCreateError::StorageError(StorageError::IOError(io)) => Error::Read {
                path: location.clone(),
                source: std::io::Error::new(io.kind(), io.to_string()),
            },
            other => Error::dataset(&location, other.to_string()),
        })?;
        let type_name = array
            .data_type()
            .name(ZarrVersion::V3)
            .map_or_else(|| array.data_type().to_string(), |n| n.into_owned());
        let dtype = Dtype::from_name(&type_name);
        let codecs = codec_names(&array);
        Ok(Self {
            path: path.to_owned(),
            buffer: buffer.to_owned(),
            shape: array.shape().to_vec(),
            type_name,
            dtype,
            codecs,
            cache: ChunkCacheDecodedLruSizeLimit::new(Arc::new(array), CHUNK_CACHE_BYTES),
        })
    }

    /// Values in a row: the product of the dimensions after the first.
    pub(super) fn row_width(&self) -> u64 {
        self.shape[1..].iter().product()
    }

    /// The array's name and where it is, for errors.
    pub(super) fn location(&self) -> String {
        format!("{}/{}", self.buffer, self.path)
    }

    /// Rows `rows` as numbers, one `Vec` a row. Integers past 2^53, which an f64 does not
    /// hold exactly, are an error rather than rounded.
    pub(super) fn numbers(&self, rows: std::ops::Range<u64>) -> Result<Vec<Vec<f64>>> {
        let width = self.row_width() as usize;
        let values = self.values_f64(rows.clone())?;
        if values.len() != (rows.end - rows.start) as usize * width {
            return Err(self.bad(format!("rows {rows:?}: {} values", values.len())));
        }
        Ok(values.chunks(width.max(1)).map(<[f64]>::to_vec).collect())
    }

    /// Rows `rows` as 8-bit samples: bytes as stored for `uint8`; other numbers must be
    /// whole and 0-255 (Diffusion Policy stores pictures as float32 so).
    pub(super) fn samples(&self, rows: std::ops::Range<u64>) -> Result<Vec<u8>> {
        match self.dtype {
            Some(Dtype::U8) => self.retrieve::<u8>(rows),
            // Float32 pictures straight to bytes: no f64 copy of an episode's pictures.
            Some(Dtype::F32) => self
                .retrieve::<f32>(rows)?
                .into_iter()
                .map(|v| self.sample(f64::from(v)))
                .collect(),
            _ => self
                .values_f64(rows)?
                .into_iter()
                .map(|v| self.sample(v))
                .collect(),
        }
    }

    fn sample(&self, v: f64) -> Result<u8> {
        if v.fract() == 0.0 && (0.0..=255.0).contains(&v) {
            Ok(v as u8)
        } else {
            Err(self.bad(format!(
                "a picture's sample {v} is not a whole number 0-255 (8-bit pictures stored as numbers)"
            )))
        }
    }

    fn values_f64(&self, rows: std::ops::Range<u64>) -> Result<Vec<f64>> {
        let dtype = self
            .dtype
            .ok_or_else(|| self.bad(format!("a `{}` array is not read", self.type_name)))?;
        Ok(match dtype {
            Dtype::Bool => convert(self.retrieve::<bool>(rows)?, |v| f64::from(u8::from(v))),
            Dtype::I8 => convert(self.retrieve::<i8>(rows)?, f64::from),
            Dtype::I16 => convert(self.retrieve::<i16>(rows)?, f64::from),
            Dtype::I32 => convert(self.retrieve::<i32>(rows)?, f64::from),
            Dtype::U8 => convert(self.retrieve::<u8>(rows)?, f64::from),
            Dtype::U16 => convert(self.retrieve::<u16>(rows)?, f64::from),
            Dtype::U32 => convert(self.retrieve::<u32>(rows)?, f64::from),
            Dtype::F16 => convert(self.retrieve::<half::f16>(rows)?, f64::from),
            Dtype::BF16 => convert(self.retrieve::<half::bf16>(rows)?, f64::from),
            Dtype::F32 => convert(self.retrieve::<f32>(rows)?, f64::from),
            Dtype::F64 => self.retrieve::<f64>(rows)?,
            Dtype::I64 => self.whole(self.retrieve::<i64>(rows)?, i128::from)?,
            Dtype::U64 => self.whole(self.retrieve::<u64>(rows)?, i128::from)?,
        })
    }

    /// 64-bit integers as f64, each checked to be held exactly.
    fn whole<T: Copy + std::fmt::Display>(
        &self,
        values: Vec<T>,
        wide: impl Fn(T) -> i128,
    ) -> Result<Vec<f64>> {
        values
            .into_iter()
            .map(|v| {
                let float = wide(v) as f64;
                if float as i128 == wide(v) {
                    Ok(float)
                } else {
                    Err(self.bad(format!(
                        "{v} is past 2^53: a 64-bit float would not hold it exactly"
                    )))
                }
            })
            .collect()
    }

    fn retrieve<T: ElementOwned>(&self, rows: std::ops::Range<u64>) -> Result<Vec<T>> {
        let mut ranges = vec![rows.clone()];
        ranges.extend(self.shape[1..].iter().map(|&d| 0..d));
        let subset = ArraySubset::new_with_ranges(&ranges);
        self.cache
            .retrieve_array_subset::<Vec<T>>(&subset, &CodecOptions::default())
            .map_err(|e| self.read_error(&rows, e))
    }

    fn bad(&self, reason: String) -> Error {
        Error::dataset(self.location(), reason)
    }

    /// A failed read: the disk's errors are the environment's (fail the run), the rest —
    /// a chunk that does not decode — the episode's.
    fn read_error(&self, rows: &std::ops::Range<u64>, e: ArrayError) -> Error {
        let io = match &e {
            ArrayError::StorageError(StorageError::IOError(io)) => Some(io),
            _ => None,
        };
        match io {
            Some(io) if io.kind() != std::io::ErrorKind::InvalidData => Error::Read {
                path: self.location(),
                source: std::io::Error::new(io.kind(), io.to_string()),
            },
            _ => self.bad(format!("steps {}..{}: {e}", rows.start, rows.end)),
        }
    }
}

fn convert<T>(values: Vec<T>, f: impl Fn(T) -> f64) -> Vec<f64> {
    values.into_iter().map(f).collect()
}

/// The codecs of an array by name: Zarr v2's filters and compressor ids, v3's codec names.
fn codec_names(array: &Array<dyn ReadableStorageTraits>) -> Vec<String> {
    let Ok(metadata) = serde_json::to_value(array.metadata()) else {
        return Vec::new();
    };
    let id = |v: &serde_json::Value, field: &str| v[field].as_str().map(str::to_owned);
    if let Some(codecs) = metadata["codecs"].as_array() {
        return codecs.iter().filter_map(|c| id(c, "name")).collect();
    }
    let mut names: Vec<String> = metadata["filters"]
        .as_array()
        .map(|f| f.iter().filter_map(|c| id(c, "id")).collect())
        .unwrap_or_default();
    names.extend(id(&metadata["compressor"], "id"));
    names
}
