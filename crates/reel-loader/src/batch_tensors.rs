//! A batch's tensors while a worker fills it, by what they hold: the per-sample tensors
//! (anchor, episode row, source), then each stream's data, times and mask, in the spec's
//! order (cameras, depth cameras, numeric streams). Filling addresses a stream by its
//! index; the flat order the batch hands out is decided here alone.

use std::sync::Arc;

use crate::batch::{DType, Tensor};
use crate::host::BufferPool;
use crate::resolve::{CameraPlan, DepthPlan, Plans, ProprioPlan};
use crate::spec::{DepthTensorUnit, Layout};

/// One stream's tensors: `<name>` `[n, k, …]`, `<name>.time_ns` `[n, k]` and `<name>.mask`
/// `[n, k]`, for `k` elements per sample.
pub(crate) struct StreamTensors {
    pub data: Tensor,
    pub time_ns: Tensor,
    pub mask: Tensor,
}

impl StreamTensors {
    fn new(name: &str, data_shape: Vec<usize>, dtype: DType, memory: &Arc<BufferPool>) -> Self {
        let times_shape = data_shape[..2].to_vec();
        Self {
            data: Tensor::zeros(name.to_owned(), data_shape, dtype, memory),
            time_ns: Tensor::zeros(
                format!("{name}.time_ns"),
                times_shape.clone(),
                DType::I64,
                memory,
            ),
            mask: Tensor::zeros(format!("{name}.mask"), times_shape, DType::U8, memory),
        }
    }

    fn into_array(self) -> [Tensor; 3] {
        [self.data, self.time_ns, self.mask]
    }
}

/// Every tensor of a batch of `n` samples.
pub(crate) struct BatchTensors {
    pub anchor_ns: Tensor,
    pub episode_row: Tensor,
    pub source: Tensor,
    pub cameras: Vec<StreamTensors>,
    pub depths: Vec<StreamTensors>,
    pub proprio: Vec<StreamTensors>,
}

impl BatchTensors {
    /// How many tensors a batch of `plans` holds.
    pub(crate) fn count(plans: &Plans) -> usize {
        3 + 3 * (plans.cameras.len() + plans.depths.len() + plans.proprio.len())
    }

    /// Zeroed tensors for `n` samples of these streams.
    pub(crate) fn new(
        cameras: &[CameraPlan],
        depths: &[DepthPlan],
        proprio: &[ProprioPlan],
        n: usize,
        memory: &Arc<BufferPool>,
    ) -> Self {
        let per_sample = |name: &str| Tensor::zeros(name.into(), vec![n], DType::I64, memory);
        let cameras = cameras
            .iter()
            .map(|c| {
                let mut shape = vec![n, c.offsets_ns.len()];
                shape.extend(match c.layout {
                    Layout::Hwc => [c.height, c.width, 3],
                    Layout::Chw => [3, c.height, c.width],
                });
                StreamTensors::new(&c.name, shape, DType::U8, memory)
            })
            .collect();
        let depths = depths
            .iter()
            .map(|d| {
                let dtype = match d.unit {
                    DepthTensorUnit::Mm => DType::U16,
                    DepthTensorUnit::M => DType::F32,
                };
                let shape = vec![n, d.offsets_ns.len(), d.height, d.width];
                StreamTensors::new(&d.name, shape, dtype, memory)
            })
            .collect();
        let proprio = proprio
            .iter()
            .map(|p| {
                let shape = vec![n, p.offsets_ns.len(), p.fields];
                StreamTensors::new(&p.name, shape, DType::F32, memory)
            })
            .collect();
        Self {
            anchor_ns: per_sample("anchor_ns"),
            episode_row: per_sample("episode_row"),
            source: per_sample("source"),
            cameras,
            depths,
            proprio,
        }
    }

    /// The tensors in the batch's order.
    pub(crate) fn into_vec(self) -> Vec<Tensor> {
        let streams = self
            .cameras
            .into_iter()
            .chain(self.depths)
            .chain(self.proprio)
            .flat_map(StreamTensors::into_array);
        [self.anchor_ns, self.episode_row, self.source]
            .into_iter()
            .chain(streams)
            .collect()
    }
}
