//! Sharded strategies on simulated clusters: bit-identical parameters, state only on owners, and the
//! bytes each rank receives.

use crate::common::{run_ranks, tiny_transformer};
use reel_muon::cost::{Gpu, predict};
use reel_muon::{
    AdamWConfig, Communicator, Group, Muon, MuonConfig, ParamSpec, ShardedMuon, Strategy, Topology,
    in_process_cluster,
};

const STEPS: u64 = 3;

fn config() -> (MuonConfig, AdamWConfig) {
    crate::common::test_config()
}

fn initial_params(specs: &[ParamSpec]) -> Vec<Vec<f32>> {
    crate::common::seeded_tensors(specs, 1000)
}

/// The reduced gradients of step `step`, the same on every rank.
fn grads(specs: &[ParamSpec], step: u64) -> Vec<Vec<f32>> {
    crate::common::seeded_tensors(specs, 7919 * step)
}

fn single_reference(specs: &[ParamSpec]) -> Vec<Vec<f32>> {
    let (muon, adamw) = config();
    let mut optimizer = Muon::new(specs.to_vec(), muon, adamw).expect("optimizer");
    let mut params = initial_params(specs);
    for step in 0..STEPS {
        optimizer
            .step(&mut params, &grads(specs, step))
            .expect("step");
    }
    params
}

struct RankResult {
    params: Vec<Vec<f32>>,
    owned: Vec<bool>,
    state_bytes: usize,
    received: reel_muon::ByteCount,
}

fn run_cluster(specs: &[ParamSpec], strategy: Strategy, topology: Topology) -> Vec<RankResult> {
    let (muon, adamw) = config();
    run_ranks(topology, |comm| {
        let mut optimizer =
            ShardedMuon::new(specs.to_vec(), strategy, comm, muon, adamw).expect("optimizer");
        let mut params = initial_params(specs);
        for step in 0..STEPS {
            optimizer
                .step(&mut params, &grads(specs, step))
                .expect("step");
        }
        RankResult {
            params,
            owned: (0..specs.len())
                .map(|i| optimizer.optimizer().owns(i))
                .collect(),
            state_bytes: optimizer.optimizer().state_bytes(),
            received: optimizer.comm().bytes_received(),
        }
    })
}

fn topologies() -> Vec<Topology> {
    [(1, 1), (1, 2), (1, 4), (1, 8), (2, 1), (2, 2), (2, 4)]
        .into_iter()
        .map(|(n, g)| Topology::new(n, g).expect("topology"))
        .collect()
}

#[test]
fn every_strategy_and_world_size_is_bit_identical_to_single() {
    let specs = tiny_transformer(16, 2, 40);
    let reference = single_reference(&specs);
    let total_state: usize = Muon::new(specs.clone(), config().0, config().1)
        .expect("optimizer")
        .state_bytes();
    for topology in topologies() {
        for strategy in [Strategy::Single, Strategy::Global, Strategy::Hybrid] {
            let ranks = run_cluster(&specs, strategy, topology);
            for (rank, result) in ranks.iter().enumerate() {
                for ((spec, got), want) in specs.iter().zip(&result.params).zip(&reference) {
                    let same = got
                        .iter()
                        .zip(want)
                        .all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(
                        same,
                        "{strategy} on {topology:?}: rank {rank} differs in {}",
                        spec.name
                    );
                }
            }
            // Each parameter has exactly one owner per gather group; state lives only there.
            let copies = match strategy {
                Strategy::Single => topology.world_size(),
                Strategy::Global => 1,
                Strategy::Hybrid => topology.nodes,
            };
            for (index, spec) in specs.iter().enumerate() {
                let owners = ranks.iter().filter(|r| r.owned[index]).count();
                assert_eq!(
                    owners, copies,
                    "{strategy} on {topology:?}: owners of {}",
                    spec.name
                );
            }
            let held: usize = ranks.iter().map(|r| r.state_bytes).sum();
            assert_eq!(held, copies * total_state, "{strategy} on {topology:?}");
        }
    }
}

#[test]
fn bytes_received_match_the_plan_and_the_cost_model() {
    let specs = tiny_transformer(16, 2, 40);
    let topology = Topology::new(2, 4).expect("topology");
    let hw = Gpu::H100.hardware(8);
    for strategy in [Strategy::Global, Strategy::Hybrid] {
        let ranks = run_cluster(&specs, strategy, topology);
        let comm = in_process_cluster(topology)
            .into_iter()
            .next()
            .expect("rank 0");
        let plan =
            ShardedMuon::new(specs.clone(), strategy, comm, config().0, config().1).expect("plan");
        let counts = plan.gather_counts();
        for (rank, result) in ranks.iter().enumerate() {
            let group = match strategy {
                Strategy::Global => Group::World,
                _ => Group::Node,
            };
            let members = topology.members(group, rank);
            let (mut intra, mut inter) = (0, 0);
            for (member, &count) in counts.iter().enumerate() {
                let from = members.start + member;
                if from == rank {
                    continue;
                }
                if topology.node_of(from) == topology.node_of(rank) {
                    intra += 4 * count as u64 * STEPS;
                } else {
                    inter += 4 * count as u64 * STEPS;
                }
            }
            assert_eq!(result.received.intra_node, intra, "{strategy}, rank {rank}");
            assert_eq!(result.received.inter_node, inter, "{strategy}, rank {rank}");
        }
        if strategy == Strategy::Hybrid {
            assert!(ranks.iter().all(|r| r.received.inter_node == 0));
        }
        // Averaged over ranks, what was counted is what the cost model predicts.
        let mean = ranks.iter().map(|r| r.received.total() as f64).sum::<f64>()
            / ranks.len() as f64
            / STEPS as f64;
        let predicted = predict(&specs, topology, &hw, strategy, 5).received_per_rank;
        assert!(
            (mean - predicted).abs() < 1e-6 * predicted,
            "{strategy}: counted {mean}, predicted {predicted}"
        );
    }
}

#[test]
fn collectives_of_the_in_process_backend() {
    let topology = Topology::new(2, 2).expect("topology");
    std::thread::scope(|scope| {
        for mut comm in in_process_cluster(topology) {
            scope.spawn(move || {
                let rank = comm.rank() as f32;
                let mut sum = vec![rank, 1.0];
                comm.all_reduce(Group::World, &mut sum).expect("all_reduce");
                assert_eq!(sum, vec![6.0, 4.0]);

                let mut node_sum = vec![rank];
                comm.all_reduce(Group::Node, &mut node_sum)
                    .expect("all_reduce");
                let expected = if comm.rank() < 2 { 1.0 } else { 5.0 };
                assert_eq!(node_sum, vec![expected]);

                let mut buf = if comm.rank() == 3 {
                    vec![9.0, 8.0]
                } else {
                    vec![0.0, 0.0]
                };
                comm.broadcast(Group::World, 3, &mut buf)
                    .expect("broadcast");
                assert_eq!(buf, vec![9.0, 8.0]);

                let send: Vec<f32> = (0..4).map(|i| rank * 10.0 + i as f32).collect();
                let mut part = vec![0.0];
                comm.reduce_scatter(Group::World, &send, &mut part)
                    .expect("reduce_scatter");
                // Σ_r (10r + i) = 60 + 4i for segment i = rank.
                assert_eq!(part, vec![60.0 + 4.0 * comm.rank() as f32]);

                // Member i of a node sends i + 1 elements.
                let local = comm.rank() % 2;
                let mut gathered = vec![0.0; 3];
                comm.all_gather(Group::Node, &vec![rank; local + 1], &[1, 2], &mut gathered)
                    .expect("all_gather");
                let first = (comm.rank() / 2 * 2) as f32;
                assert_eq!(gathered, vec![first, first + 1.0, first + 1.0]);
                comm.barrier(Group::World).expect("barrier");

                // Mismatched lengths are an error on every member, not a hang.
                let len = if comm.rank() == 0 { 1 } else { 2 };
                let mut out = vec![0.0; 8];
                assert!(
                    comm.all_gather(Group::World, &vec![0.0; len], &[2, 2, 2, 2], &mut out)
                        .is_err()
                );
            });
        }
    });
}

#[test]
fn shapes_files_load_with_their_sizes() {
    let testdata = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata");
    for (file, low, high) in [
        ("shapes-small.toml", 30e6, 40e6),
        ("shapes-1.2b.toml", 1.2e9, 1.4e9),
        ("shapes-2.5b.toml", 2.5e9, 2.7e9),
    ] {
        let model = reel_muon::cost::ModelShapes::load(&testdata.join(file)).expect(file);
        let n = model.numel() as f64;
        assert!((low..high).contains(&n), "{file}: {n} parameters");
        let muon = model
            .params
            .iter()
            .filter(|p| p.kind == reel_muon::ParamKind::Muon)
            .count();
        assert!(muon >= 48, "{file}: {muon} Muon matrices");
    }
}
