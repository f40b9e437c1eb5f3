//! Sharded Muon: which rank updates which parameter, and how the results reach everyone.
//!
//! Every rank holds full parameters and the fully reduced gradients (the data-parallel all-reduce has
//! already happened). Each parameter has one *owner* per gather group; only owners keep its optimizer
//! state and run its update, then an all-gather hands the new values to the rest of the group.
//!
//! * [`Strategy::Single`]: every rank updates every parameter (one device, or fully redundant).
//! * [`Strategy::Global`]: owners spread over all ranks; the all-gather spans the whole job, across
//!   InfiniBand.
//! * [`Strategy::Hybrid`]: owners spread over the ranks of a node and every node repeats the same work;
//!   the all-gather stays on the node (NVLink).
//!
//! Owners are balanced by update FLOPs, largest first onto the least-loaded rank. The update of a
//! parameter is the same computation whoever runs it, so all strategies and world sizes produce
//! bit-identical parameters.

use crate::comm::{Communicator, Group, Topology};
use crate::error::{MuonError, Result};
use crate::optimizer::{AdamWConfig, Muon, MuonConfig, ParamSpec};

/// How optimizer work is split over ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// No split: every rank updates everything.
    Single,
    /// Owners over all ranks; gather over the world.
    Global,
    /// Owners over the ranks of each node; gather within the node; nodes redundant.
    Hybrid,
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Single => "single",
            Self::Global => "global",
            Self::Hybrid => "hybrid",
        })
    }
}

/// Assigns each cost to one of `bins` bins: largest first onto the least-loaded bin (ties: lowest
/// bin, then lowest index), the LPT rule. Returns the bin of every item.
pub fn balance(costs: &[f64], bins: usize) -> Vec<usize> {
    let bins = bins.max(1);
    let mut order: Vec<usize> = (0..costs.len()).collect();
    order.sort_by(|&a, &b| costs[b].total_cmp(&costs[a]).then(a.cmp(&b)));
    let mut load = vec![0.0f64; bins];
    let mut assignment = vec![0; costs.len()];
    for item in order {
        let bin = (0..bins)
            .min_by(|&x, &y| load[x].total_cmp(&load[y]).then(x.cmp(&y)))
            .unwrap_or(0);
        load[bin] += costs[item];
        assignment[item] = bin;
    }
    assignment
}

/// The owner layout of a strategy on a topology.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardPlan {
    strategy: Strategy,
    topology: Topology,
    /// Owner of each parameter as an index within its gather group (`0` for `Single`).
    member: Vec<usize>,
}

impl ShardPlan {
    /// Balances `specs` for `strategy` on `topology`.
    pub fn new(
        specs: &[ParamSpec],
        strategy: Strategy,
        topology: Topology,
        ns_steps: usize,
    ) -> Self {
        let costs: Vec<f64> = specs.iter().map(|s| s.update_flops(ns_steps)).collect();
        let member = match strategy {
            Strategy::Single => vec![0; specs.len()],
            Strategy::Global => balance(&costs, topology.world_size()),
            Strategy::Hybrid => balance(&costs, topology.per_node),
        };
        Self {
            strategy,
            topology,
            member,
        }
    }

    /// The strategy.
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// The topology.
    pub fn topology(&self) -> Topology {
        self.topology
    }

    /// The collective group results are gathered over, if any.
    pub fn gather_group(&self) -> Option<Group> {
        match self.strategy {
            Strategy::Single => None,
            Strategy::Global => Some(Group::World),
            Strategy::Hybrid => Some(Group::Node),
        }
    }

    /// Whether `rank` updates parameter `index`.
    pub fn owns(&self, rank: usize, index: usize) -> bool {
        match self.gather_group() {
            None => true,
            Some(group) => self.topology.members(group, rank).start + self.member[index] == rank,
        }
    }

    /// The group member (index within the gather group) that updates parameter `index`.
    pub fn member_of(&self, index: usize) -> usize {
        self.member[index]
    }

    /// The gather group and this rank's index within it, if results are gathered.
    pub(crate) fn gather_position(&self, rank: usize) -> Option<(Group, usize)> {
        let group = self.gather_group()?;
        Some((group, rank - self.topology.members(group, rank).start))
    }

    /// Who holds what under this plan, seen from `rank`.
    pub(crate) fn layout(&self, specs: &[ParamSpec], rank: usize) -> OwnerLayout {
        let owned = (0..specs.len()).map(|i| self.owns(rank, i)).collect();
        let by_member = self.owned_by_member();
        let counts = by_member
            .iter()
            .map(|indices| indices.iter().map(|&i| specs[i].numel()).sum())
            .collect();
        OwnerLayout {
            owned,
            by_member,
            counts,
        }
    }

    /// Parameter indices owned by each member of a gather group, in parameter order.
    fn owned_by_member(&self) -> Vec<Vec<usize>> {
        let size = match self.strategy {
            Strategy::Single => 1,
            Strategy::Global => self.topology.world_size(),
            Strategy::Hybrid => self.topology.per_node,
        };
        let mut owned = vec![Vec::new(); size];
        for (index, &member) in self.member.iter().enumerate() {
            owned[member].push(index);
        }
        owned
    }
}

/// A plan's ownership as one rank uses it.
#[derive(Clone, Debug)]
pub(crate) struct OwnerLayout {
    /// Whether this rank updates each parameter.
    pub owned: Vec<bool>,
    /// Parameter indices owned by each member of the gather group, in parameter order.
    pub by_member: Vec<Vec<usize>>,
    /// Elements each member sends per step.
    pub counts: Vec<usize>,
}

/// Muon on one rank of a sharded job.
#[derive(Debug)]
pub struct ShardedMuon<C> {
    optimizer: Muon,
    plan: ShardPlan,
    comm: C,
    /// Parameters owned by each gather-group member, and how many elements each member sends.
    owned_by_member: Vec<Vec<usize>>,
    counts: Vec<usize>,
}

impl<C: Communicator> ShardedMuon<C> {
    /// Plans `strategy` on `comm`'s topology and creates this rank's share of the optimizer.
    pub fn new(
        specs: Vec<ParamSpec>,
        strategy: Strategy,
        comm: C,
        muon: MuonConfig,
        adamw: AdamWConfig,
    ) -> Result<Self> {
        let plan = ShardPlan::new(&specs, strategy, comm.topology(), muon.newton_schulz.steps);
        Self::with_plan(specs, plan, comm, muon, adamw)
    }

    /// Uses a given plan (its topology must be the communicator's).
    pub fn with_plan(
        specs: Vec<ParamSpec>,
        plan: ShardPlan,
        comm: C,
        muon: MuonConfig,
        adamw: AdamWConfig,
    ) -> Result<Self> {
        if plan.topology() != comm.topology() {
            return Err(MuonError::Config(format!(
                "plan for {:?} on a communicator of {:?}",
                plan.topology(),
                comm.topology()
            )));
        }
        let layout = plan.layout(&specs, comm.rank());
        let optimizer = Muon::with_owned(specs, &layout.owned, muon, adamw)?;
        Ok(Self {
            optimizer,
            plan,
            comm,
            owned_by_member: layout.by_member,
            counts: layout.counts,
        })
    }

    /// This rank's share of the optimizer (its state covers only owned parameters).
    pub fn optimizer(&self) -> &Muon {
        &self.optimizer
    }

    pub(crate) fn optimizer_mut(&mut self) -> &mut Muon {
        &mut self.optimizer
    }

    /// The plan.
    pub fn plan(&self) -> &ShardPlan {
        &self.plan
    }

    /// The communicator (for instance to read its byte counters).
    pub fn comm(&self) -> &C {
        &self.comm
    }

    /// Elements each member of the gather group sends per step, in group order.
    pub fn gather_counts(&self) -> &[usize] {
        &self.counts
    }

    /// One step: update owned parameters, then all-gather so every rank holds every new value.
    pub fn step<P, G>(&mut self, params: &mut [P], grads: &[G]) -> Result<()>
    where
        P: AsMut<[f32]> + Send,
        G: AsRef<[f32]> + Sync,
    {
        self.optimizer.step(params, grads)?;
        let Some((group, own)) = self.plan.gather_position(self.comm.rank()) else {
            return Ok(());
        };
        let mut send = Vec::with_capacity(self.counts[own]);
        for &i in &self.owned_by_member[own] {
            send.extend_from_slice(params[i].as_mut());
        }
        let mut recv = vec![0.0; self.counts.iter().sum()];
        self.comm
            .all_gather(group, &send, &self.counts, &mut recv)?;
        let mut offset = 0;
        for (member, indices) in self.owned_by_member.iter().enumerate() {
            if member == own {
                offset += self.counts[member];
                continue;
            }
            for &i in indices {
                let param = params[i].as_mut();
                param.copy_from_slice(&recv[offset..offset + param.len()]);
                offset += param.len();
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn balance_puts_largest_first_on_least_loaded() {
        let assignment = balance(&[1.0, 8.0, 4.0, 4.0, 2.0], 2);
        // 8 → bin 0; 4 → bin 1; 4 → bin 1 (4 < 8); 2 → bin 0 (8 = 8, lowest bin); 1 → bin 1 (9 < 10).
        assert_eq!(assignment, vec![1, 0, 1, 1, 0]);
    }
}
