//! Step 3: derived signals on the state grid.

use reel_mcap::{Sample, SignalKind, SignalStream};

use crate::resample::GridSignal;

/// Topic of the derived joint velocities (rad/s).
pub const VELOCITY_TOPIC: &str = "/derived/joint_velocity";
/// Topic of the derived joint accelerations (rad/s²).
pub const ACCELERATION_TOPIC: &str = "/derived/joint_acceleration";

/// Joint velocities and accelerations from the resampled joint positions (fields ending
/// in `.position` of the state streams), by central differences on the grid. Differences
/// never span a gap: each run of consecutive grid points is differenced on its own, and
/// runs shorter than three points yield nothing.
pub fn derive_signals(signals: &[GridSignal], group: &str) -> Vec<SignalStream> {
    let mut out = Vec::new();
    for signal in signals.iter().filter(|s| s.kind == SignalKind::State) {
        let columns: Vec<usize> = signal
            .fields
            .iter()
            .enumerate()
            .filter(|(_, f)| f.ends_with(".position"))
            .map(|(i, _)| i)
            .collect();
        if columns.is_empty() {
            continue;
        }
        let joint = |suffix: &str| -> Vec<String> {
            columns
                .iter()
                .map(|&i| signal.fields[i].replace(".position", suffix))
                .collect()
        };
        let dt = signal.period_ns as f64 / 1e9;
        let mut velocity = Vec::new();
        let mut acceleration = Vec::new();
        let samples = &signal.samples;
        let mut start = 0;
        while start < samples.len() {
            let mut end = start + 1;
            while end < samples.len()
                && samples[end].log_time - samples[end - 1].log_time == signal.period_ns
            {
                end += 1;
            }
            let run = &samples[start..end];
            if run.len() >= 3 {
                let q = |k: usize, c: usize| run[k].values[c];
                for k in 0..run.len() {
                    // One-sided at the ends of a run, central inside.
                    let (a, b, span) = match k {
                        0 => (0, 1, 1.0),
                        k if k == run.len() - 1 => (k - 1, k, 1.0),
                        k => (k - 1, k + 1, 2.0),
                    };
                    let m = k.clamp(1, run.len() - 2);
                    let v = columns
                        .iter()
                        .map(|&c| (q(b, c) - q(a, c)) / (span * dt))
                        .collect();
                    let acc = columns
                        .iter()
                        .map(|&c| (q(m + 1, c) - 2.0 * q(m, c) + q(m - 1, c)) / (dt * dt))
                        .collect();
                    let t = run[k].log_time;
                    let at = |values| Sample {
                        log_time: t,
                        publish_time: t,
                        stamp_ns: t,
                        values,
                    };
                    velocity.push(at(v));
                    acceleration.push(at(acc));
                }
            }
            start = end;
        }
        let suffix = if signals
            .iter()
            .filter(|s| s.kind == SignalKind::State)
            .count()
            > 1
        {
            signal.topic.replace('/', "_")
        } else {
            String::new()
        };
        out.push(SignalStream {
            topic: format!("{VELOCITY_TOPIC}{suffix}"),
            group: group.to_owned(),
            kind: SignalKind::Signal,
            fields: joint(".velocity"),
            source_schema: format!("reel.derived.velocity({})", signal.topic),
            samples: velocity,
        });
        out.push(SignalStream {
            topic: format!("{ACCELERATION_TOPIC}{suffix}"),
            group: group.to_owned(),
            kind: SignalKind::Signal,
            fields: joint(".acceleration"),
            source_schema: format!("reel.derived.acceleration({})", signal.topic),
            samples: acceleration,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_a_parabola_exactly_and_never_across_gaps() {
        // q = t² on a 100 Hz grid with a gap: v = 2t, a = 2.
        let period = 10_000_000u64;
        let times: Vec<u64> = (0..50).chain(60..70).map(|k| k * period).collect();
        let samples = times
            .iter()
            .map(|&t| {
                let s = t as f64 / 1e9;
                Sample {
                    log_time: t,
                    publish_time: t,
                    stamp_ns: t,
                    values: vec![s * s, 7.0],
                }
            })
            .collect();
        let grid = GridSignal {
            topic: "/joint_states".into(),
            kind: SignalKind::State,
            fields: vec!["a.position".into(), "a.velocity".into()],
            source_schema: String::new(),
            period_ns: period,
            samples,
            grid_points: 70,
            invalid_samples: 0,
            gaps: vec![(49 * period, 60 * period)],
        };
        let derived = derive_signals(&[grid], "proprio");
        assert_eq!(derived.len(), 2);
        let (v, a) = (&derived[0], &derived[1]);
        assert_eq!(v.topic, VELOCITY_TOPIC);
        assert_eq!(v.fields, ["a.velocity"]);
        assert_eq!(a.fields, ["a.acceleration"]);
        assert_eq!(v.samples.len(), 60);
        for s in &v.samples[1..49] {
            let t = s.log_time as f64 / 1e9;
            assert!((s.values[0] - 2.0 * t).abs() < 1e-9, "{t}: {:?}", s.values);
        }
        assert!(a.samples.iter().all(|s| (s.values[0] - 2.0).abs() < 1e-6));
        // The first sample after the gap is differenced within its own run.
        let after = v
            .samples
            .iter()
            .find(|s| s.log_time == 60 * period)
            .expect("run");
        assert!((after.values[0] - (0.61f64.powi(2) - 0.36) / 0.01).abs() < 1e-9);
    }
}
