//! Collectives between ranks: the [`Communicator`] trait, the cluster [`Topology`], and an in-process
//! backend (one thread per simulated rank) that also counts the bytes each rank receives.
//!
//! Buffers are host `f32` slices. Byte counts follow what ring algorithms move, which is what NCCL
//! does for large messages: an all-gather delivers every other member's part, an all-reduce
//! `2(s−1)/s` of the buffer, a reduce-scatter `(s−1)/s`, a broadcast the whole buffer on every non-root.

use std::sync::{Arc, Barrier, Mutex};

use crate::error::{MuonError, Result};

/// Nodes × devices per node. Ranks are numbered node-major: rank = node · per_node + local.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Topology {
    /// Number of nodes.
    pub nodes: usize,
    /// Devices (ranks) per node.
    pub per_node: usize,
}

impl Topology {
    /// A topology; both counts must be at least one.
    pub fn new(nodes: usize, per_node: usize) -> Result<Self> {
        if nodes == 0 || per_node == 0 {
            return Err(MuonError::Config(format!(
                "topology {nodes} nodes × {per_node} ranks per node"
            )));
        }
        Ok(Self { nodes, per_node })
    }

    /// Total ranks.
    pub fn world_size(&self) -> usize {
        self.nodes * self.per_node
    }

    /// The node a rank lives on.
    pub fn node_of(&self, rank: usize) -> usize {
        rank / self.per_node
    }

    /// Members of `group` as seen from `rank`, in group order.
    pub fn members(&self, group: Group, rank: usize) -> std::ops::Range<usize> {
        match group {
            Group::World => 0..self.world_size(),
            Group::Node => {
                let first = self.node_of(rank) * self.per_node;
                first..first + self.per_node
            }
        }
    }

    /// Whether an all-gather's buffers fit: one count per member of `group`, `rank`'s
    /// count the length of what it sends, and the counts summing to the receive length.
    pub(crate) fn gather_fits(
        &self,
        group: Group,
        rank: usize,
        counts: &[usize],
        send_len: usize,
        recv_len: usize,
    ) -> bool {
        let members = self.members(group, rank);
        counts.len() == members.len()
            && counts[rank - members.start] == send_len
            && counts.iter().sum::<usize>() == recv_len
    }
}

/// The set of ranks a collective runs over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Group {
    /// Every rank.
    World,
    /// The ranks on the caller's node.
    Node,
}

/// Collectives over a fixed set of ranks. Every member of a group must call the same collectives in the
/// same order with the same lengths.
pub trait Communicator {
    /// This rank, in `0..world_size`.
    fn rank(&self) -> usize;
    /// Nodes and ranks per node.
    fn topology(&self) -> Topology;
    /// Total ranks.
    fn world_size(&self) -> usize {
        self.topology().world_size()
    }
    /// Concatenates every member's `send` into `recv`, in group order. Member `i` sends `counts[i]`
    /// elements (counts may differ, as in MPI's allgatherv); `recv` holds their sum.
    fn all_gather(
        &mut self,
        group: Group,
        send: &[f32],
        counts: &[usize],
        recv: &mut [f32],
    ) -> Result<()>;
    /// Copies the buffer of group member `root` (an index within the group) to every member.
    fn broadcast(&mut self, group: Group, root: usize, buf: &mut [f32]) -> Result<()>;
    /// Sums `send` over members; member `i` receives segment `i` (`send.len() = size · recv.len()`).
    fn reduce_scatter(&mut self, group: Group, send: &[f32], recv: &mut [f32]) -> Result<()>;
    /// Sums `buf` over members, in place.
    fn all_reduce(&mut self, group: Group, buf: &mut [f32]) -> Result<()>;
    /// Waits for every member.
    fn barrier(&mut self, group: Group) -> Result<()>;
}

/// Bytes a rank has received, split by link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ByteCount {
    /// From ranks on the same node (NVLink on a GPU node).
    pub intra_node: u64,
    /// From ranks on other nodes (InfiniBand).
    pub inter_node: u64,
}

impl ByteCount {
    /// Both links together.
    pub fn total(&self) -> u64 {
        self.intra_node + self.inter_node
    }
}

/// One exchange area per group: contributions land in slots, two barriers fence each collective.
#[derive(Debug)]
struct Exchange {
    slots: Mutex<Vec<Vec<f32>>>,
    barrier: Barrier,
}

impl Exchange {
    fn new(size: usize) -> Arc<Self> {
        Arc::new(Self {
            slots: Mutex::new(vec![Vec::new(); size]),
            barrier: Barrier::new(size),
        })
    }
}

/// A rank of an in-process cluster: ranks are threads and collectives go through shared memory.
#[derive(Debug)]
pub struct InProcessComm {
    rank: usize,
    topology: Topology,
    world: Arc<Exchange>,
    node: Arc<Exchange>,
    received: ByteCount,
}

/// Creates the communicators of an in-process cluster, one per rank; move each into its own thread.
pub fn in_process_cluster(topology: Topology) -> Vec<InProcessComm> {
    let world = Exchange::new(topology.world_size());
    let nodes: Vec<_> = (0..topology.nodes)
        .map(|_| Exchange::new(topology.per_node))
        .collect();
    (0..topology.world_size())
        .map(|rank| InProcessComm {
            rank,
            topology,
            world: Arc::clone(&world),
            node: Arc::clone(&nodes[topology.node_of(rank)]),
            received: ByteCount::default(),
        })
        .collect()
}

impl InProcessComm {
    /// Bytes this rank has received so far.
    pub fn bytes_received(&self) -> ByteCount {
        self.received
    }

    fn exchange(&self, group: Group) -> &Exchange {
        match group {
            Group::World => &self.world,
            Group::Node => &self.node,
        }
    }

    /// Posts `send`, waits for all members, runs `read` over every contribution (in group order), and
    /// waits again so nobody posts the next collective's data before everyone has read.
    fn exchange_with<T>(
        &mut self,
        group: Group,
        send: Vec<f32>,
        read: impl FnOnce(&[Vec<f32>]) -> T,
    ) -> Result<T> {
        let members = self.topology.members(group, self.rank);
        let index = self.rank - members.start;
        let exchange = self.exchange(group);
        exchange.slots.lock().map_err(|_| poisoned())?[index] = send;
        exchange.barrier.wait();
        let result = {
            let slots = exchange.slots.lock().map_err(|_| poisoned())?;
            read(&slots)
        };
        exchange.barrier.wait();
        Ok(result)
    }

    fn count(&mut self, group: Group, from_member: usize, bytes: u64) {
        let from = self.topology.members(group, self.rank).start + from_member;
        if self.topology.node_of(from) == self.topology.node_of(self.rank) {
            self.received.intra_node += bytes;
        } else {
            self.received.inter_node += bytes;
        }
    }

    /// Counts `total` bytes received by a ring reduction, spread evenly over the other members so the
    /// split between links follows where they live.
    fn count_spread(&mut self, group: Group, total: f64) {
        let members = self.topology.members(group, self.rank);
        let others = members.len() - 1;
        if others == 0 {
            return;
        }
        let per_member = (total / others as f64).round() as u64;
        for member in 0..members.len() {
            if members.start + member != self.rank {
                self.count(group, member, per_member);
            }
        }
    }
}

fn poisoned() -> MuonError {
    MuonError::Comm("a peer thread panicked inside a collective".into())
}

fn lengths_disagree(what: &str) -> MuonError {
    MuonError::Comm(format!(
        "{what}: members passed buffers of different lengths"
    ))
}

impl Communicator for InProcessComm {
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
        let own = self.rank - self.topology.members(group, self.rank).start;
        if !self
            .topology
            .gather_fits(group, self.rank, counts, send.len(), recv.len())
        {
            // Still take part, so the peers fail instead of waiting forever.
            self.exchange_with(group, Vec::new(), |_| ())?;
            return Err(lengths_disagree("all_gather"));
        }
        let ok = self.exchange_with(group, send.to_vec(), |slots| {
            if slots.iter().zip(counts).any(|(s, &c)| s.len() != c) {
                return false;
            }
            let mut offset = 0;
            for slot in slots {
                recv[offset..offset + slot.len()].copy_from_slice(slot);
                offset += slot.len();
            }
            true
        })?;
        if !ok {
            return Err(lengths_disagree("all_gather"));
        }
        for (member, &count) in counts.iter().enumerate().filter(|&(m, _)| m != own) {
            self.count(group, member, 4 * count as u64);
        }
        Ok(())
    }

    fn broadcast(&mut self, group: Group, root: usize, buf: &mut [f32]) -> Result<()> {
        let members = self.topology.members(group, self.rank);
        if root >= members.len() {
            return Err(MuonError::Comm(format!(
                "broadcast root {root} outside a group of {}",
                members.len()
            )));
        }
        let own = self.rank - members.start;
        let send = if own == root {
            buf.to_vec()
        } else {
            Vec::new()
        };
        let ok = self.exchange_with(group, send, |slots| {
            if slots[root].len() != buf.len() {
                return false;
            }
            buf.copy_from_slice(&slots[root]);
            true
        })?;
        if !ok {
            return Err(lengths_disagree("broadcast"));
        }
        if own != root {
            self.count(group, root, 4 * buf.len() as u64);
        }
        Ok(())
    }

    fn reduce_scatter(&mut self, group: Group, send: &[f32], recv: &mut [f32]) -> Result<()> {
        let members = self.topology.members(group, self.rank);
        let (size, own, chunk) = (members.len(), self.rank - members.start, recv.len());
        let ok = self.exchange_with(group, send.to_vec(), |slots| {
            if slots.iter().any(|s| s.len() != size * chunk) {
                return false;
            }
            // Sum in member order on every rank, so results do not depend on who reduces.
            recv.fill(0.0);
            for slot in slots {
                for (r, v) in recv.iter_mut().zip(&slot[own * chunk..(own + 1) * chunk]) {
                    *r += v;
                }
            }
            true
        })?;
        if !ok {
            return Err(lengths_disagree("reduce_scatter"));
        }
        self.count_spread(
            group,
            4.0 * send.len() as f64 * (size - 1) as f64 / size as f64,
        );
        Ok(())
    }

    fn all_reduce(&mut self, group: Group, buf: &mut [f32]) -> Result<()> {
        let size = self.topology.members(group, self.rank).len();
        let ok = self.exchange_with(group, buf.to_vec(), |slots| {
            if slots.iter().any(|s| s.len() != buf.len()) {
                return false;
            }
            buf.fill(0.0);
            for slot in slots {
                for (b, v) in buf.iter_mut().zip(slot) {
                    *b += v;
                }
            }
            true
        })?;
        if !ok {
            return Err(lengths_disagree("all_reduce"));
        }
        self.count_spread(
            group,
            2.0 * 4.0 * buf.len() as f64 * (size - 1) as f64 / size as f64,
        );
        Ok(())
    }

    fn barrier(&mut self, group: Group) -> Result<()> {
        self.exchange(group).barrier.wait();
        Ok(())
    }
}
