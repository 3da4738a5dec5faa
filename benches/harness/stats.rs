//! Summaries of repeated measurements: the median is the figure, min and max show the spread.

/// Repeated measurements of one thing.
#[derive(Clone, Debug, Default)]
pub struct Samples(pub Vec<f64>);

impl Samples {
    /// True when nothing was measured.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many measurements there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Adds one measurement.
    pub fn push(&mut self, v: f64) {
        self.0.push(v);
    }

    fn sorted(&self) -> Vec<f64> {
        let mut v = self.0.clone();
        v.sort_by(f64::total_cmp);
        v
    }

    /// The median (mean of the middle two for an even count); `None` when empty.
    pub fn median(&self) -> Option<f64> {
        let v = self.sorted();
        let n = v.len();
        match n {
            0 => None,
            _ if n % 2 == 1 => Some(v[n / 2]),
            _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
        }
    }

    /// The smallest measurement.
    pub fn min(&self) -> Option<f64> {
        self.sorted().first().copied()
    }

    /// The largest measurement.
    pub fn max(&self) -> Option<f64> {
        self.sorted().last().copied()
    }
}

/// A duration in seconds, shown in the unit that keeps three significant digits readable.
pub fn fmt_secs(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{:.1} µs", s * 1e6)
    }
}

/// A size in KiB, shown in MiB.
pub fn fmt_kib(kib: f64) -> String {
    format!("{:.1} MiB", kib / 1024.0)
}

/// A ratio such as `12.3×`.
pub fn fmt_ratio(r: f64) -> String {
    if r >= 100.0 {
        format!("{r:.0}×")
    } else if r >= 10.0 {
        format!("{r:.1}×")
    } else {
        format!("{r:.2}×")
    }
}
