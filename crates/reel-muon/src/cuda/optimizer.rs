//! [`CudaMuon`]: Muon with auxiliary AdamW, f32 master weights and all state on one GPU.

use std::collections::BTreeMap;

use cudarc::driver::{CudaSlice, CudaView, CudaViewMut, PushKernelArg};

use super::device::CudaDevice;
use super::kernels::elementwise;
use crate::error::{MuonError, Result};
use crate::optimizer::{AdamWConfig, MuonConfig, ParamKind, ParamSpec};

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
    /// [`ShardedCudaMuon`](super::ShardedCudaMuon)).
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
                let mut launch = stream.launch_builder(&self.device.kernels.muon_momentum);
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
                let mut launch = stream.launch_builder(&self.device.kernels.apply_update);
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
                let mut launch = stream.launch_builder(&self.device.kernels.adamw);
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
