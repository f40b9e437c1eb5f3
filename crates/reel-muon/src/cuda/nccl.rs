//! NCCL collectives: [`NcclCommunicator`] behind the [`Communicator`] trait, the unique ids ranks
//! exchange to join, and the device-to-device gather the sharded optimizer uses.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};
use cudarc::nccl::{Comm, Id, ReduceOp};

use super::probe::nccl_available;
use crate::comm::{Communicator, Group, Topology};
use crate::error::{MuonError, Result};

/// All-gathers `buffer` over `comm`: member `m` contributes `counts[m]` elements at their offset,
/// and this rank (member `own`) has already put its part in place.
pub(super) fn gather_in_place(
    comm: &Comm,
    stream: &Arc<CudaStream>,
    buffer: &mut CudaSlice<f32>,
    counts: &[usize],
    own: usize,
) -> Result<()> {
    let offset: usize = counts[..own].iter().sum();
    let mine = offset..offset + counts[own];
    if counts.iter().all(|&c| c == counts[own]) {
        let staged = cuda!("copy", stream.clone_dtod(&buffer.slice(mine)))?;
        cuda!("ncclAllGather", comm.all_gather(&staged, buffer).map(drop))?;
    } else {
        // NCCL has no all-gather of uneven parts: one broadcast per member, rooted there.
        let mut start = 0;
        for (member, &count) in counts.iter().enumerate() {
            if count > 0 {
                let mut part = buffer.slice_mut(start..start + count);
                cuda!(
                    "ncclBroadcast",
                    comm.broadcast_in_place(&mut part, member as i32).map(drop)
                )?;
            }
            start += count;
        }
    }
    Ok(())
}

/// NCCL collectives behind the [`Communicator`] trait. Host buffers are staged through the device;
/// a trainer keeps its buffers on the GPU and calls the NCCL communicators ([`NcclCommunicator::world`],
/// [`NcclCommunicator::node`]) directly.
#[derive(Debug)]
pub struct NcclCommunicator {
    rank: usize,
    topology: Topology,
    world: Comm,
    node: Comm,
    pub(super) stream: Arc<CudaStream>,
}

/// A fresh NCCL unique id, as bytes to hand to the other ranks out of band (rank 0 creates the world's,
/// each node's first rank its node's).
pub fn nccl_unique_id() -> Result<Vec<u8>> {
    if !nccl_available() {
        return Err(MuonError::Cuda("NCCL library not found".into()));
    }
    let id = cuda!("ncclGetUniqueId", Id::new())?;
    Ok(id.internal().iter().map(|&c| c as u8).collect())
}

fn id_from_bytes(bytes: &[u8]) -> Result<Id> {
    let mut internal = [0 as std::ffi::c_char; 128];
    if bytes.len() != internal.len() {
        return Err(MuonError::Comm(format!(
            "NCCL id of {} bytes, expected 128",
            bytes.len()
        )));
    }
    for (dst, &src) in internal.iter_mut().zip(bytes) {
        *dst = src as std::ffi::c_char;
    }
    Ok(Id::uninit(internal))
}

impl NcclCommunicator {
    /// Joins the world communicator and this rank's node communicator on `stream`'s device.
    pub fn new(
        stream: Arc<CudaStream>,
        rank: usize,
        topology: Topology,
        world_id: &[u8],
        node_id: &[u8],
    ) -> Result<Self> {
        if !nccl_available() {
            return Err(MuonError::Cuda("NCCL library not found".into()));
        }
        if rank >= topology.world_size() {
            return Err(MuonError::Comm(format!(
                "rank {rank} in a world of {}",
                topology.world_size()
            )));
        }
        let world = cuda!(
            "ncclCommInitRank (world)",
            Comm::from_rank(
                stream.clone(),
                rank,
                topology.world_size(),
                id_from_bytes(world_id)?
            )
        )?;
        let local = rank % topology.per_node;
        let node = cuda!(
            "ncclCommInitRank (node)",
            Comm::from_rank(
                stream.clone(),
                local,
                topology.per_node,
                id_from_bytes(node_id)?
            )
        )?;
        Ok(Self {
            rank,
            topology,
            world,
            node,
            stream,
        })
    }

    /// The communicator over every rank.
    pub fn world(&self) -> &Comm {
        &self.world
    }

    /// The communicator over this node's ranks.
    pub fn node(&self) -> &Comm {
        &self.node
    }

    pub(super) fn comm(&self, group: Group) -> &Comm {
        match group {
            Group::World => &self.world,
            Group::Node => &self.node,
        }
    }

    /// Copies the collective's result back and waits for it.
    fn finish(&self, device: CudaSlice<f32>, host: &mut [f32]) -> Result<()> {
        cuda!("download", self.stream.memcpy_dtoh(&device, host))?;
        cuda!("synchronize", self.stream.synchronize())
    }
}

impl Communicator for NcclCommunicator {
    fn rank(&self) -> usize {
        self.rank
    }

    fn topology(&self) -> Topology {
        self.topology
    }

    fn all_gather(
        &mut self,
        group: Group,
        send: &[f32],
        counts: &[usize],
        recv: &mut [f32],
    ) -> Result<()> {
        let members = self.topology.members(group, self.rank);
        let own = self.rank - members.start;
        if !self
            .topology
            .gather_fits(group, self.rank, counts, send.len(), recv.len())
        {
            return Err(MuonError::Comm(
                "all_gather: counts do not match the buffers".into(),
            ));
        }
        let mut device = cuda!(
            "allocate",
            self.stream.alloc_zeros::<f32>(recv.len().max(1))
        )?;
        let offset: usize = counts[..own].iter().sum();
        if !send.is_empty() {
            let mut mine = device.slice_mut(offset..offset + send.len());
            cuda!("upload", self.stream.memcpy_htod(send, &mut mine))?;
        }
        gather_in_place(self.comm(group), &self.stream, &mut device, counts, own)?;
        self.finish(device, recv)
    }

    fn broadcast(&mut self, group: Group, root: usize, buf: &mut [f32]) -> Result<()> {
        let mut device = cuda!("upload", self.stream.clone_htod(buf))?;
        let root =
            i32::try_from(root).map_err(|_| MuonError::Comm(format!("broadcast root {root}")))?;
        cuda!(
            "ncclBroadcast",
            self.comm(group)
                .broadcast_in_place(&mut device, root)
                .map(drop)
        )?;
        self.finish(device, buf)
    }

    fn reduce_scatter(&mut self, group: Group, send: &[f32], recv: &mut [f32]) -> Result<()> {
        let staged = cuda!("upload", self.stream.clone_htod(send))?;
        let mut device = cuda!("allocate", self.stream.alloc_zeros::<f32>(recv.len()))?;
        cuda!(
            "ncclReduceScatter",
            self.comm(group)
                .reduce_scatter(&staged, &mut device, &ReduceOp::Sum)
                .map(drop)
        )?;
        self.finish(device, recv)
    }

    fn all_reduce(&mut self, group: Group, buf: &mut [f32]) -> Result<()> {
        let mut device = cuda!("upload", self.stream.clone_htod(buf))?;
        cuda!(
            "ncclAllReduce",
            self.comm(group)
                .all_reduce_in_place(&mut device, &ReduceOp::Sum)
                .map(drop)
        )?;
        self.finish(device, buf)
    }

    fn barrier(&mut self, group: Group) -> Result<()> {
        let mut token = cuda!("allocate", self.stream.alloc_zeros::<f32>(1))?;
        cuda!(
            "ncclAllReduce",
            self.comm(group)
                .all_reduce_in_place(&mut token, &ReduceOp::Sum)
                .map(drop)
        )?;
        cuda!("synchronize", self.stream.synchronize())
    }
}
