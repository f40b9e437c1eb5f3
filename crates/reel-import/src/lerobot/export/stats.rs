//! The statistics LeRobot keeps per feature (`meta/stats.json`): min, max, mean, std,
//! count and the 1/10/50/90/99 % quantiles, which its policies normalise with.

use serde_json::{Value, json};

/// The quantiles LeRobot records, by name.
const QUANTILES: [(&str, f64); 5] = [
    ("q01", 0.01),
    ("q10", 0.10),
    ("q50", 0.50),
    ("q90", 0.90),
    ("q99", 0.99),
];

/// A numeric feature's values, kept whole: quantiles need them sorted.
#[derive(Debug, Clone, Default)]
pub(crate) struct NumericStats {
    /// One column per value of the feature.
    columns: Vec<Vec<f64>>,
}

impl NumericStats {
    pub(crate) fn new(width: usize) -> Self {
        Self {
            columns: vec![Vec::new(); width],
        }
    }

    /// Adds one frame's values.
    pub(crate) fn push(&mut self, values: &[f32]) {
        for (column, &v) in self.columns.iter_mut().zip(values) {
            column.push(f64::from(v));
        }
    }

    pub(crate) fn merge(&mut self, other: Self) {
        for (mine, theirs) in self.columns.iter_mut().zip(other.columns) {
            mine.extend(theirs);
        }
    }

    /// LeRobot's stats object: each statistic a list with one entry per value.
    pub(crate) fn to_json(&self) -> Value {
        let mut sorted = self.columns.clone();
        for column in &mut sorted {
            column.sort_by(f64::total_cmp);
        }
        let per_value = |f: &dyn Fn(&[f64]) -> f64| -> Value {
            sorted.iter().map(|c| f(c)).collect::<Vec<f64>>().into()
        };
        let count = sorted.first().map_or(0, Vec::len);
        let mut stats = serde_json::Map::new();
        stats.insert(
            "min".into(),
            per_value(&|c| c.first().copied().unwrap_or(0.0)),
        );
        stats.insert(
            "max".into(),
            per_value(&|c| c.last().copied().unwrap_or(0.0)),
        );
        stats.insert("mean".into(), per_value(&|c| mean_std(c).0));
        stats.insert("std".into(), per_value(&|c| mean_std(c).1));
        stats.insert("count".into(), json!([count]));
        for (name, q) in QUANTILES {
            stats.insert(name.into(), per_value(&|c| quantile(c, q)));
        }
        Value::Object(stats)
    }
}

fn mean_std(values: &[f64]) -> (f64, f64) {
    if values.is_empty() {
        return (0.0, 0.0);
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt())
}

/// The `q` quantile of sorted values, interpolated between neighbours.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    match sorted.len() {
        0 => 0.0,
        n => {
            let at = q * (n - 1) as f64;
            let (low, high) = (at.floor() as usize, at.ceil() as usize);
            sorted[low] + (sorted[high] - sorted[low]) * (at - low as f64)
        }
    }
}

/// A camera's pixels per channel, as LeRobot reports them: values in [0, 1], each
/// statistic shaped `[3][1][1]`. Counted exactly, through a histogram of the 8-bit values.
#[derive(Debug, Clone)]
pub(crate) struct ImageStats {
    histograms: [[u64; 256]; 3],
    frames: u64,
}

impl Default for ImageStats {
    fn default() -> Self {
        Self {
            histograms: [[0; 256]; 3],
            frames: 0,
        }
    }
}

impl ImageStats {
    /// Adds one RGB frame.
    pub(crate) fn push(&mut self, rgb: &[u8]) {
        for pixel in rgb.chunks_exact(3) {
            for (channel, &v) in pixel.iter().enumerate() {
                self.histograms[channel][usize::from(v)] += 1;
            }
        }
        self.frames += 1;
    }

    pub(crate) fn merge(&mut self, other: &Self) {
        for (mine, theirs) in self.histograms.iter_mut().zip(&other.histograms) {
            for (a, b) in mine.iter_mut().zip(theirs) {
                *a += b;
            }
        }
        self.frames += other.frames;
    }

    pub(crate) fn to_json(&self) -> Value {
        let per_channel = |f: &dyn Fn(&[u64; 256]) -> f64| -> Value {
            self.histograms
                .iter()
                .map(|h| json!([[f(h)]]))
                .collect::<Vec<_>>()
                .into()
        };
        let total = |h: &[u64; 256]| h.iter().sum::<u64>();
        let mean = |h: &[u64; 256]| {
            let n = total(h).max(1) as f64;
            h.iter()
                .enumerate()
                .map(|(v, &c)| v as f64 / 255.0 * c as f64)
                .sum::<f64>()
                / n
        };
        let std = |h: &[u64; 256]| {
            let n = total(h).max(1) as f64;
            let m = mean(h);
            (h.iter()
                .enumerate()
                .map(|(v, &c)| (v as f64 / 255.0 - m).powi(2) * c as f64)
                .sum::<f64>()
                / n)
                .sqrt()
        };
        let at = |h: &[u64; 256], q: f64| {
            let want = (q * total(h) as f64).ceil().max(1.0) as u64;
            let mut seen = 0;
            for (v, &c) in h.iter().enumerate() {
                seen += c;
                if seen >= want {
                    return v as f64 / 255.0;
                }
            }
            1.0
        };
        let mut stats = serde_json::Map::new();
        stats.insert("min".into(), per_channel(&|h| at(h, 0.0)));
        stats.insert("max".into(), per_channel(&|h| at(h, 1.0)));
        stats.insert("mean".into(), per_channel(&mean));
        stats.insert("std".into(), per_channel(&std));
        stats.insert("count".into(), json!([self.frames]));
        for (name, q) in QUANTILES {
            stats.insert(name.into(), per_channel(&|h| at(h, q)));
        }
        Value::Object(stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_stats_are_per_value() {
        let mut stats = NumericStats::new(2);
        for i in 0..5 {
            stats.push(&[i as f32, 10.0]);
        }
        let json = stats.to_json();
        assert_eq!(json["min"], json!([0.0, 10.0]));
        assert_eq!(json["max"], json!([4.0, 10.0]));
        assert_eq!(json["mean"], json!([2.0, 10.0]));
        assert_eq!(json["q50"], json!([2.0, 10.0]));
        assert_eq!(json["q10"], json!([0.4, 10.0]));
        assert_eq!(json["count"], json!([5]));
        assert_eq!(json["std"][1], json!(0.0));
    }

    #[test]
    fn image_stats_are_per_channel_in_unit_range() {
        let mut stats = ImageStats::default();
        stats.push(&[0, 255, 51, 255, 255, 51]);
        let json = stats.to_json();
        assert_eq!(json["min"], json!([[[0.0]], [[1.0]], [[0.2]]]));
        assert_eq!(json["max"], json!([[[1.0]], [[1.0]], [[0.2]]]));
        assert_eq!(json["mean"][0], json!([[0.5]]));
        assert_eq!(json["std"][0], json!([[0.5]]));
        assert_eq!(json["count"], json!([1]));
    }
}
