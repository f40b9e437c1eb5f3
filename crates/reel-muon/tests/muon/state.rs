//! Saving, loading and re-sharding optimizer state.

use crate::common::{run_ranks, tiny_transformer};
use reel_muon::state::{OptimizerState, load_sharded};
use reel_muon::{
    AdamWConfig, Muon, MuonConfig, MuonError, ParamSpec, ShardedMuon, Strategy, Topology,
};

fn config() -> (MuonConfig, AdamWConfig) {
    crate::common::test_config()
}

fn initial_params(specs: &[ParamSpec]) -> Vec<Vec<f32>> {
    crate::common::seeded_tensors(specs, 500)
}

fn grads(specs: &[ParamSpec], step: u64) -> Vec<Vec<f32>> {
    crate::common::seeded_tensors(specs, 104_729 * step)
}

#[test]
fn sharded_state_reloads_on_other_world_sizes_and_strategies() {
    let specs = tiny_transformer(16, 2, 40);
    let (muon, adamw) = config();

    // Reference: four uninterrupted steps on one device.
    let mut reference = initial_params(&specs);
    let mut single = Muon::new(specs.clone(), muon, adamw).expect("optimizer");
    for step in 0..4 {
        single
            .step(&mut reference, &grads(&specs, step))
            .expect("step");
    }

    // Two steps hybrid on 2 nodes × 2, checkpoint, then two more steps on other layouts.
    let dir = tempfile::tempdir().expect("tempdir");
    let halfway = run_ranks(Topology::new(2, 2).expect("topology"), |comm| {
        let mut optimizer = ShardedMuon::new(specs.clone(), Strategy::Hybrid, comm, muon, adamw)
            .expect("optimizer");
        let mut params = initial_params(&specs);
        for step in 0..2 {
            optimizer
                .step(&mut params, &grads(&specs, step))
                .expect("step");
        }
        optimizer.save_shard(dir.path()).expect("save");
        params
    });
    let merged = load_sharded(dir.path()).expect("load");
    assert_eq!(merged.step, 2);
    assert_eq!(merged.params.len(), specs.len());

    for (strategy, nodes, per_node) in [
        (Strategy::Global, 1, 8),
        (Strategy::Global, 2, 1),
        (Strategy::Single, 1, 1),
    ] {
        let ranks = run_ranks(Topology::new(nodes, per_node).expect("topology"), |comm| {
            let mut optimizer =
                ShardedMuon::new(specs.clone(), strategy, comm, muon, adamw).expect("optimizer");
            optimizer.import_state(&merged).expect("import");
            let mut params = halfway[0].clone();
            for step in 2..4 {
                optimizer
                    .step(&mut params, &grads(&specs, step))
                    .expect("step");
            }
            params
        });
        for params in ranks {
            for ((got, want), spec) in params.iter().zip(&reference).zip(&specs) {
                assert!(
                    got.iter()
                        .zip(want)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{strategy} on {nodes}×{per_node}: {} differs after reload",
                    spec.name
                );
            }
        }
    }
}

#[test]
fn single_file_round_trip() {
    let specs = tiny_transformer(8, 1, 10);
    let (muon, adamw) = config();
    let mut optimizer = Muon::new(specs.clone(), muon, adamw).expect("optimizer");
    let mut params = initial_params(&specs);
    optimizer
        .step(&mut params, &grads(&specs, 0))
        .expect("step");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.safetensors");
    optimizer.export_state().save(&path, &specs).expect("save");
    let loaded = OptimizerState::load(&path).expect("load");
    assert_eq!(loaded, optimizer.export_state());
}

#[test]
fn damaged_files_are_named_in_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("rank-00000.safetensors");
    std::fs::write(&path, b"not a safetensors file").expect("write");
    let err = OptimizerState::load(&path).expect_err("garbage");
    assert!(matches!(err, MuonError::BadFile { .. }), "{err}");
    assert!(err.to_string().contains("rank-00000.safetensors"), "{err}");

    let empty = tempfile::tempdir().expect("tempdir");
    assert!(load_sharded(empty.path()).is_err());

    // State missing for an owned parameter.
    let specs = tiny_transformer(8, 1, 10);
    let mut optimizer = Muon::new(specs, config().0, config().1).expect("optimizer");
    let err = optimizer
        .import_state(&OptimizerState::default())
        .expect_err("empty state");
    assert!(err.to_string().contains("embed"), "{err}");
}
