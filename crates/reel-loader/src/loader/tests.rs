//! A worker that panics must end the epoch with [`LoaderError::WorkerLost`] at once, not
//! leave the consumer waiting for a batch that never comes.

use std::sync::mpsc;
use std::time::Duration;

use crate::test_fixture::fixture;
use crate::{LoaderError, LoaderOptions, LoaderState, Shuffle};

/// Long enough for a slow machine, short enough that a stalled consumer fails the test.
const STALL: Duration = Duration::from_secs(30);

/// What the consumer saw: batches delivered, the error, whether the iterator then ended,
/// and its state.
type Seen = (Vec<u64>, Option<LoaderError>, bool, LoaderState);

#[test]
fn a_panicking_worker_surfaces_at_once_as_worker_lost() {
    let f = fixture(1, 4.0);
    // (workers, prefetch, batch whose worker panics): the others wait at the prefetch
    // limit for a consumer that waits for the lost batch.
    for (workers, prefetch, lost_batch) in [(4, 2, 3), (3, 1, 0), (1, 1, 2), (2, 4, 1)] {
        let options = LoaderOptions {
            batch_size: 2,
            workers,
            prefetch,
            shuffle: Shuffle::Global,
            ..LoaderOptions::default()
        };
        let loader = f.loader(options);
        loader.panic_on_batch(lost_batch);
        let (tx, rx) = mpsc::channel::<Seen>();
        let consumer = std::thread::spawn(move || {
            let mut batches = loader.epoch(0).expect("epoch");
            assert!(batches.total_batches() > lost_batch + workers as u64);
            let mut delivered = Vec::new();
            let error = loop {
                match batches.next() {
                    Some(Ok(batch)) => delivered.push(batch.index),
                    Some(Err(e)) => break Some(e),
                    None => break None,
                }
            };
            let ended = batches.next().is_none();
            let state = batches.state();
            // Dropping joins the workers: that must not stall either.
            drop(batches);
            let _ = tx.send((delivered, error, ended, state));
        });
        let (delivered, error, ended, state) = rx.recv_timeout(STALL).unwrap_or_else(|_| {
            panic!("{workers} workers, prefetch {prefetch}: stalled after a worker panicked")
        });
        consumer.join().expect("consumer thread");
        match error {
            Some(LoaderError::WorkerLost { batch, reason }) => {
                assert_eq!(batch, lost_batch);
                assert_eq!(reason, format!("injected fault in batch {lost_batch}"));
            }
            other => panic!("expected WorkerLost, got {other:?}"),
        }
        assert!(ended, "the iterator ends after WorkerLost");
        // Batches before the lost one, in order, possibly not all of them.
        assert!(delivered.len() as u64 <= lost_batch);
        assert_eq!(delivered, (0..delivered.len() as u64).collect::<Vec<_>>());
        assert_eq!(state, LoaderState::at(0, delivered.len() as u64));
    }
}

#[test]
fn worker_lost_names_the_batch_and_the_panic() {
    let lost = LoaderError::WorkerLost {
        batch: 7,
        reason: "index out of bounds".to_string(),
    };
    assert_eq!(
        lost.to_string(),
        "loader worker lost building batch 7: index out of bounds"
    );
}

#[test]
fn epoch_size_counts_what_an_epoch_delivers_and_open_episode_reads_a_row() {
    let f = fixture(2, 3.0);
    for (shuffle, drop_last) in [
        (Shuffle::Global, false),
        (Shuffle::Global, true),
        (Shuffle::Locality { run: 4 }, false),
    ] {
        for rank in 0..2 {
            let loader = f.loader(LoaderOptions {
                batch_size: 3,
                rank,
                world: 2,
                shuffle,
                drop_last,
                ..LoaderOptions::default()
            });
            let size = loader.epoch_size(1).expect("epoch size");
            let batches: Vec<_> = loader
                .epoch(1)
                .expect("epoch")
                .map(|b| b.expect("batch"))
                .collect();
            assert_eq!(
                size.batches,
                batches.len() as u64,
                "{shuffle:?} rank {rank}"
            );
            let samples: u64 = batches.iter().map(|b| b.len() as u64).sum();
            if drop_last {
                assert_eq!(samples, size.batches * 3);
            } else {
                assert_eq!(samples, size.samples);
            }
        }
    }
    let loader = f.loader(LoaderOptions::default());
    let episode = loader.open_episode(0, 1).expect("row 1");
    let uri = loader
        .manifest()
        .episode(1)
        .expect("row")
        .uri()
        .expect("uri");
    assert!(
        episode.name().ends_with(&*uri),
        "{} vs {uri}",
        episode.name()
    );
    assert!(episode.metadata().contains_key("episode"));
    assert!(loader.open_episode(0, 2).is_err() && loader.open_episode(1, 0).is_err());
}
