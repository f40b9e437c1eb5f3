//! [`ShardedCudaMuon`]: [`crate::ShardedMuon`]'s plan on the GPU, gathering with NCCL.

use std::sync::Arc;

use super::device::CudaDevice;
use super::nccl::{NcclCommunicator, gather_in_place};
use super::optimizer::CudaMuon;
use crate::comm::Communicator;
use crate::error::{MuonError, Result};
use crate::optimizer::{AdamWConfig, MuonConfig, ParamSpec};
use crate::shard::{ShardPlan, Strategy};

/// [`CudaMuon`] on one rank of a sharded job ([`ShardPlan`]): each rank updates the parameters it
/// owns, then NCCL gathers the new values device to device within the plan's gather group (the
/// world for [`Strategy::Global`], the node for [`Strategy::Hybrid`]). Optimizer state exists only
/// on owners. Same plan and same arithmetic as [`crate::ShardedMuon`], on the GPU.
#[derive(Debug)]
pub struct ShardedCudaMuon {
    optimizer: CudaMuon,
    plan: ShardPlan,
    comm: NcclCommunicator,
    owned_by_member: Vec<Vec<usize>>,
    counts: Vec<usize>,
}

impl ShardedCudaMuon {
    /// Plans `strategy` on `comm`'s topology and uploads this rank's share. `comm` must run on
    /// `device`'s stream, so collectives and kernels stay ordered.
    pub fn new(
        device: CudaDevice,
        specs: Vec<ParamSpec>,
        params: &[Vec<f32>],
        strategy: Strategy,
        comm: NcclCommunicator,
        muon: MuonConfig,
        adamw: AdamWConfig,
    ) -> Result<Self> {
        if !Arc::ptr_eq(&comm.stream, device.stream()) {
            return Err(MuonError::Config(
                "the NCCL communicator must use the device's stream".into(),
            ));
        }
        let plan = ShardPlan::new(&specs, strategy, comm.topology(), muon.newton_schulz.steps);
        let layout = plan.layout(&specs, comm.rank());
        let optimizer = CudaMuon::with_owned(device, specs, params, &layout.owned, muon, adamw)?;
        Ok(Self {
            optimizer,
            plan,
            comm,
            owned_by_member: layout.by_member,
            counts: layout.counts,
        })
    }

    /// The plan.
    pub fn plan(&self) -> &ShardPlan {
        &self.plan
    }

    /// This rank's optimizer (state for owned parameters only).
    pub fn optimizer(&self) -> &CudaMuon {
        &self.optimizer
    }

    /// Copies every parameter back to the host, in spec order.
    pub fn download_params(&self) -> Result<Vec<Vec<f32>>> {
        self.optimizer.download_params()
    }

    /// One step: update owned parameters, then gather so every rank of the group holds every
    /// new value.
    pub fn step<G: AsRef<[f32]>>(&mut self, grads: &[G]) -> Result<()> {
        self.optimizer.step(grads)?;
        let Some((group, own)) = self.plan.gather_position(self.comm.rank()) else {
            return Ok(());
        };
        let starts: Vec<usize> = self
            .counts
            .iter()
            .scan(0, |at, &c| {
                let start = *at;
                *at += c;
                Some(start)
            })
            .collect();
        let total: usize = self.counts.iter().sum();
        let stream = self.optimizer.device().stream().clone();
        let mut gathered = cuda!("allocate", stream.alloc_zeros::<f32>(total.max(1)))?;
        let mine = starts[own]..starts[own] + self.counts[own];
        self.optimizer
            .pack_params(&self.owned_by_member[own], &mut gathered.slice_mut(mine))?;
        gather_in_place(
            self.comm.comm(group),
            &stream,
            &mut gathered,
            &self.counts,
            own,
        )?;
        for (member, indices) in self.owned_by_member.iter().enumerate() {
            if member != own && !indices.is_empty() {
                let range = starts[member]..starts[member] + self.counts[member];
                self.optimizer
                    .unpack_params(indices, &gathered.slice(range))?;
            }
        }
        Ok(())
    }
}
