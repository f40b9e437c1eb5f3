//! Batches as NumPy arrays that share memory with Reel's batch buffers: each array is a
//! view whose base is a [`TensorBuffer`] owning the buffer, so nothing is copied and the
//! buffer lives as long as any view of it.

use ndarray::{ArrayView, IxDyn};
use numpy::{Element, PyArray};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use reel_loader::{Batch, Skipped, Tensor, TensorData};

/// The memory of one batch tensor, owned on behalf of the NumPy arrays that view it.
#[pyclass(module = "reel._reel", frozen)]
#[derive(Debug)]
pub struct TensorBuffer {
    data: TensorData,
}

#[pymethods]
impl TensorBuffer {
    /// Address of the first element: every array viewing the buffer starts here.
    #[getter]
    fn address(&self) -> usize {
        self.data.as_bytes().as_ptr() as usize
    }

    /// Bytes in use.
    #[getter]
    fn nbytes(&self) -> usize {
        self.data.as_bytes().len()
    }

    /// Whether the buffer is page-locked host memory (for asynchronous GPU copies).
    #[getter]
    fn pinned(&self) -> bool {
        self.data.is_pinned()
    }

    fn __repr__(&self) -> String {
        format!(
            "TensorBuffer(nbytes={}, pinned={})",
            self.nbytes(),
            if self.pinned() { "True" } else { "False" }
        )
    }
}

/// A NumPy view of `tensor` whose base owns its buffer.
fn view<'py>(py: Python<'py>, tensor: Tensor) -> PyResult<Bound<'py, PyAny>> {
    let Tensor { shape, data, .. } = tensor;
    let owner = Bound::new(py, TensorBuffer { data })?;
    let array = match &owner.get().data {
        TensorData::U8(v) => borrow(&shape, v, &owner)?,
        TensorData::U16(v) => borrow(&shape, v, &owner)?,
        TensorData::F32(v) => borrow(&shape, v, &owner)?,
        TensorData::I64(v) => borrow(&shape, v, &owner)?,
    };
    Ok(array)
}

fn borrow<'py, T: Element>(
    shape: &[usize],
    elements: &[T],
    owner: &Bound<'py, TensorBuffer>,
) -> PyResult<Bound<'py, PyAny>> {
    let view = ArrayView::from_shape(IxDyn(shape), elements)
        .map_err(|e| crate::errors::bad_input(format!("tensor of shape {shape:?}: {e}")))?;
    // SAFETY: `elements` is the buffer `owner` holds; the array keeps `owner` alive as its
    // base, and nothing else mutates the buffer once the batch is handed over.
    let array = unsafe { PyArray::borrow_from_array(&view, owner.clone().into_any()) };
    Ok(array.into_any())
}

/// A batch as `(tensors, epoch, index, skipped)`: the tensors a dict of NumPy arrays by
/// name (with `<name>.mask` and `<name>.time_ns`), the skipped samples a list of dicts.
pub fn to_python<'py>(py: Python<'py>, batch: Batch) -> PyResult<Bound<'py, PyAny>> {
    let Batch {
        epoch,
        index,
        tensors,
        skipped,
    } = batch;
    let dict = PyDict::new(py);
    for tensor in tensors {
        let name = tensor.name.clone();
        dict.set_item(name, view(py, tensor)?)?;
    }
    let skipped_list = skipped_to_python(py, &skipped)?;
    Ok((dict, epoch, index, skipped_list)
        .into_pyobject(py)?
        .into_any())
}

/// Skipped samples as a list of dicts: `episode_id`, `uri`, `anchor_ns`, `reason`.
pub fn skipped_to_python<'py>(
    py: Python<'py>,
    skipped: &[Skipped],
) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for s in skipped {
        let item = PyDict::new(py);
        item.set_item("episode_id", &s.episode_id)?;
        item.set_item("uri", &s.uri)?;
        item.set_item("anchor_ns", s.anchor_ns)?;
        item.set_item("reason", &s.reason)?;
        list.append(item)?;
    }
    Ok(list)
}
