//! The statistics of the study report: score intervals for proportions and their differences,
//! Fisher's exact test on 2×2 tables, and a t interval for a mean.
//!
//! Everything is at the 95% level. Score intervals are used rather than the textbook
//! `p ± z·se` because the study's rates are often near 0 or 1 on few trials, where the simple
//! interval is too narrow and can leave [0, 1]; Wilson's interval keeps its coverage there and
//! is defined at 0 and at n (Newcombe 1998, "Two-sided confidence intervals for the single
//! proportion").

use serde::Serialize;

/// The 97.5% point of the standard normal distribution: a two-sided 95% interval.
pub const Z_975: f64 = 1.959_963_984_540_054;

/// A count out of a total, the share it is and its 95% Wilson score interval.
///
/// With a total of 0 there is no share and no interval: the fields are `None` (empty CSV cells,
/// `null` in JSON), never a made-up 0.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Rate {
    /// The events counted.
    pub count: u64,
    /// The trials or calls they are counted among.
    pub total: u64,
    /// `count / total`.
    pub value: Option<f64>,
    /// Lower end of the 95% Wilson interval.
    pub low: Option<f64>,
    /// Upper end of the 95% Wilson interval.
    pub high: Option<f64>,
}

impl Rate {
    /// The rate of `count` in `total` with its Wilson interval. A count above the total is a
    /// caller's bug; it is clamped so the interval stays inside [0, 1].
    pub fn new(count: u64, total: u64) -> Rate {
        let count = count.min(total);
        match wilson(count, total) {
            Some((low, high)) => Rate {
                count,
                total,
                value: Some(count as f64 / total as f64),
                low: Some(low),
                high: Some(high),
            },
            None => Rate {
                count,
                total,
                value: None,
                low: None,
                high: None,
            },
        }
    }
}

/// The 95% Wilson score interval of `x` successes in `n` trials, `None` when `n` is 0.
///
/// The interval is the set of p whose score test does not reject at 5%: centre
/// `(p̂ + z²/2n) / (1 + z²/n)`, half-width `z/(1 + z²/n) · √(p̂(1−p̂)/n + z²/4n²)`. The ends
/// are clamped to [0, 1] against rounding (at x = 0 the lower end is exactly 0).
pub fn wilson(x: u64, n: u64) -> Option<(f64, f64)> {
    wilson_at(x, n, Z_975)
}

/// The Wilson score interval at the normal quantile `z` (1.96 for 95%): the report's intervals
/// are [`wilson`]'s; other levels are for checks that look at many intervals at once.
pub fn wilson_at(x: u64, n: u64, z: f64) -> Option<(f64, f64)> {
    if n == 0 {
        return None;
    }
    let n = n as f64;
    let p = (x as f64 / n).min(1.0);
    let z2 = z * z;
    let denom = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denom;
    let half = z / denom * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    let low = if x == 0 { 0.0 } else { centre - half };
    let high = if x as f64 >= n { 1.0 } else { centre + half };
    Some((low.clamp(0.0, 1.0), high.clamp(0.0, 1.0)))
}

/// A difference of two proportions with its interval and exact test.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Difference {
    /// `p1 − p2`.
    pub diff: f64,
    /// Lower end of the 95% Newcombe hybrid score interval.
    pub low: f64,
    /// Upper end of the 95% Newcombe hybrid score interval.
    pub high: f64,
    /// Two-sided Fisher exact test of the 2×2 table `[[x1, n1−x1], [x2, n2−x2]]`.
    pub p_value: f64,
}

/// Compares `x1/n1` with `x2/n2`; `None` when either total is 0 (nothing to compare).
pub fn difference(x1: u64, n1: u64, x2: u64, n2: u64) -> Option<Difference> {
    let (low, high) = newcombe(x1, n1, x2, n2)?;
    let (x1, x2) = (x1.min(n1), x2.min(n2));
    Some(Difference {
        diff: x1 as f64 / n1 as f64 - x2 as f64 / n2 as f64,
        low,
        high,
        p_value: fisher_two_sided(x1, n1 - x1, x2, n2 - x2),
    })
}

/// Newcombe's hybrid score interval (his method 10, 1998) for `p1 − p2`, from the Wilson
/// intervals `(l1, u1)` and `(l2, u2)` of each proportion:
/// `d − √((p1−l1)² + (u2−p2)²)` to `d + √((u1−p1)² + (p2−l2)²)`. `None` when a total is 0.
pub fn newcombe(x1: u64, n1: u64, x2: u64, n2: u64) -> Option<(f64, f64)> {
    newcombe_at(x1, n1, x2, n2, Z_975)
}

/// Newcombe's interval built from Wilson intervals at the normal quantile `z` (see
/// [`wilson_at`]).
pub fn newcombe_at(x1: u64, n1: u64, x2: u64, n2: u64, z: f64) -> Option<(f64, f64)> {
    let (l1, u1) = wilson_at(x1, n1, z)?;
    let (l2, u2) = wilson_at(x2, n2, z)?;
    let p1 = x1.min(n1) as f64 / n1 as f64;
    let p2 = x2.min(n2) as f64 / n2 as f64;
    let d = p1 - p2;
    let low = d - ((p1 - l1).powi(2) + (u2 - p2).powi(2)).sqrt();
    let high = d + ((u1 - p1).powi(2) + (p2 - l2).powi(2)).sqrt();
    Some((low.max(-1.0), high.min(1.0)))
}

/// `ln n!`: summed exactly for small n, Stirling's series (to the n⁻⁵ term, relative error far
/// below f64's precision there) above, so counts in the millions cost nothing and never
/// overflow the way `n!` itself would.
pub fn ln_factorial(n: u64) -> f64 {
    const EXACT_UP_TO: u64 = 256;
    if n <= EXACT_UP_TO {
        return (2..=n).map(|i| (i as f64).ln()).sum();
    }
    let x = n as f64;
    let x2 = x * x;
    x * x.ln() - x + 0.5 * (2.0 * std::f64::consts::PI * x).ln() + 1.0 / (12.0 * x)
        - 1.0 / (360.0 * x * x2)
        + 1.0 / (1260.0 * x * x2 * x2)
}

/// The two-sided p-value of Fisher's exact test on the 2×2 table `[[a, b], [c, d]]`.
///
/// With the margins fixed, the top-left cell is hypergeometric; the p-value sums the
/// probabilities of every table at most as likely as the one observed (the convention of R's
/// `fisher.test`, with the same relative tolerance of 10⁻⁷ so tables tied with the observed one
/// by rounding are counted). Probabilities are computed from log-factorials, so large counts
/// neither overflow nor lose the observed table's probability to underflow in a ratio. An
/// empty table, or one with an empty margin, has p = 1.
pub fn fisher_two_sided(a: u64, b: u64, c: u64, d: u64) -> f64 {
    let (r1, r2, c1) = (a + b, c + d, a + c);
    let n = r1 + r2;
    if n == 0 {
        return 1.0;
    }
    // ln of the probability of top-left cell x with these margins.
    let constant = ln_factorial(r1) + ln_factorial(r2) + ln_factorial(c1) + ln_factorial(n - c1)
        - ln_factorial(n);
    let ln_p = |x: u64| {
        constant
            - ln_factorial(x)
            - ln_factorial(r1 - x)
            - ln_factorial(c1 - x)
            - ln_factorial(r2 + x - c1)
    };
    let lo = c1.saturating_sub(r2);
    let hi = r1.min(c1);
    let observed = ln_p(a);
    let cutoff = observed + (1.0 + 1e-7_f64).ln();
    let p: f64 = (lo..=hi)
        .map(ln_p)
        .filter(|&l| l <= cutoff)
        .map(f64::exp)
        .sum();
    p.min(1.0)
}

/// The mean of some values with its 95% t interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Mean {
    /// How many values.
    pub n: u64,
    /// Their mean (`None` for none).
    pub mean: Option<f64>,
    /// Their sample standard deviation (`None` for fewer than two).
    pub sd: Option<f64>,
    /// `mean − t·sd/√n` (`None` for fewer than two values).
    pub low: Option<f64>,
    /// `mean + t·sd/√n`.
    pub high: Option<f64>,
}

/// The mean of `values` with `mean ± t(0.975, n−1)·sd/√n` (see [`t_975`] for the quantile).
pub fn mean_interval(values: &[f64]) -> Mean {
    let n = values.len();
    if n == 0 {
        return Mean {
            n: 0,
            mean: None,
            sd: None,
            low: None,
            high: None,
        };
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    if n < 2 {
        return Mean {
            n: n as u64,
            mean: Some(mean),
            sd: None,
            low: None,
            high: None,
        };
    }
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let sd = var.sqrt();
    let half = t_975(n as u64 - 1) * sd / (n as f64).sqrt();
    Mean {
        n: n as u64,
        mean: Some(mean),
        sd: Some(sd),
        low: Some(mean - half),
        high: Some(mean + half),
    }
}

/// The 97.5% quantiles of Student's t for 1 to 30 degrees of freedom (published tables, to
/// nine decimals).
const T_975: [f64; 30] = [
    12.706_204_736,
    4.302_652_730,
    3.182_446_305,
    2.776_445_105,
    2.570_581_836,
    2.446_911_851,
    2.364_624_252,
    2.306_004_135,
    2.262_157_163,
    2.228_138_852,
    2.200_985_160,
    2.178_812_830,
    2.160_368_656,
    2.144_786_688,
    2.131_449_546,
    2.119_905_299,
    2.109_815_578,
    2.100_922_040,
    2.093_024_054,
    2.085_963_447,
    2.079_613_845,
    2.073_873_068,
    2.068_657_610,
    2.063_898_562,
    2.059_538_553,
    2.055_529_439,
    2.051_830_516,
    2.048_407_142,
    2.045_229_642,
    2.042_272_456,
];

/// The 97.5% quantile of Student's t with `df` degrees of freedom: the table above up to 30,
/// then the Cornish–Fisher expansion of t in the normal quantile z to the ν⁻³ term (Abramowitz
/// & Stegun 26.7.5), which is within 10⁻⁵ of the exact quantile from 31 degrees of freedom on
/// and tends to z. `df` 0 has no quantile; it is treated as 1 (the widest).
pub fn t_975(df: u64) -> f64 {
    if df <= 30 {
        return T_975[df.max(1) as usize - 1];
    }
    let z = Z_975;
    let v = df as f64;
    let (z3, z5, z7) = (z.powi(3), z.powi(5), z.powi(7));
    z + (z3 + z) / (4.0 * v)
        + (5.0 * z5 + 16.0 * z3 + 3.0 * z) / (96.0 * v * v)
        + (3.0 * z7 + 19.0 * z5 + 17.0 * z3 - 15.0 * z) / (384.0 * v * v * v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[track_caller]
    fn assert_interval(got: Option<(f64, f64)>, want: (f64, f64)) {
        let (lo, hi) = got.expect("an interval");
        assert!(
            close(lo, want.0, 5e-5) && close(hi, want.1, 5e-5),
            "got ({lo:.5}, {hi:.5}), want {want:?}"
        );
    }

    // Newcombe (1998), "Two-sided confidence intervals for the single proportion", Table I,
    // method 3 (score, no continuity correction).
    #[test]
    fn wilson_matches_newcombes_single_proportion_examples() {
        assert_interval(wilson(81, 263), (0.2553, 0.3662));
        assert_interval(wilson(15, 148), (0.0624, 0.1605));
        assert_interval(wilson(0, 20), (0.0, 0.1611));
        assert_interval(wilson(1, 29), (0.0061, 0.1718));
        assert_interval(wilson(0, 10), (0.0, 0.2775));
    }

    #[test]
    fn wilson_edges_all_successes_and_no_trials() {
        assert_eq!(wilson(0, 0), None);
        let (lo, hi) = wilson(10, 10).expect("interval");
        assert!(close(lo, 0.7225, 5e-5) && hi == 1.0, "{lo} {hi}");
        let r = Rate::new(0, 0);
        assert_eq!((r.value, r.low, r.high), (None, None, None));
        let r = Rate::new(3, 4);
        assert_eq!(r.value, Some(0.75));
        assert!(r.low.is_some_and(|l| l < 0.75) && r.high.is_some_and(|h| h > 0.75));
    }

    // Newcombe (1998), "Interval estimation for the difference between independent
    // proportions", Table II, method 10 (hybrid score, no continuity correction).
    #[test]
    fn newcombe_matches_his_published_examples() {
        assert_interval(newcombe(56, 70, 48, 80), (0.0524, 0.3339));
        assert_interval(newcombe(9, 10, 3, 10), (0.1705, 0.8090));
        assert_interval(newcombe(6, 7, 2, 7), (0.0582, 0.8062));
        assert_interval(newcombe(5, 56, 0, 29), (-0.0381, 0.1926));
        assert_interval(newcombe(0, 10, 0, 20), (-0.1611, 0.2775));
        assert_interval(newcombe(10, 10, 0, 20), (0.6791, 1.0));
        assert_eq!(newcombe(1, 0, 1, 2), None);
    }

    #[test]
    fn fisher_matches_published_p_values() {
        // Fisher's lady tasting tea: 3 of 4 cups right each way.
        assert!(close(fisher_two_sided(3, 1, 1, 3), 0.4857, 5e-5));
        // The dieting example of the Wikipedia article on the test: 1/9 against 11/3.
        assert!(close(fisher_two_sided(1, 9, 11, 3), 0.002759, 5e-6));
        // A table the same as its margins expect: p = 1.
        assert!(close(fisher_two_sided(5, 5, 5, 5), 1.0, 1e-12));
        assert_eq!(fisher_two_sided(0, 0, 0, 0), 1.0);
        assert!(close(fisher_two_sided(0, 0, 3, 4), 1.0, 1e-12));
    }

    #[test]
    fn fisher_stays_finite_and_ordered_on_large_counts() {
        // Large tables: a tiny p that must not become NaN or 0 by overflow, and symmetric.
        let p = fisher_two_sided(60_000, 40_000, 50_000, 50_000);
        assert!(p.is_finite() && (0.0..1e-100).contains(&p), "{p}");
        let same = fisher_two_sided(50_000, 50_000, 50_000, 50_000);
        assert!(close(same, 1.0, 1e-6), "{same}");
        let a = fisher_two_sided(510, 490, 490, 510);
        let b = fisher_two_sided(490, 510, 510, 490);
        assert!(close(a, b, 1e-9) && a > 0.3 && a < 0.6, "{a} {b}");
    }

    #[test]
    fn stirling_agrees_with_the_exact_sum_where_they_meet() {
        let exact: f64 = (2..=300u64).map(|i| (i as f64).ln()).sum();
        assert!(close(ln_factorial(300), exact, 1e-9 * exact));
        assert_eq!(ln_factorial(0), 0.0);
        assert_eq!(ln_factorial(1), 0.0);
    }

    #[test]
    fn t_quantiles_from_table_and_expansion() {
        assert!(close(t_975(1), 12.7062, 1e-4));
        assert!(close(t_975(10), 2.2281, 1e-4));
        // Published values past the table.
        assert!(close(t_975(40), 2.021_075, 2e-5));
        assert!(close(t_975(60), 2.000_298, 2e-5));
        assert!(close(t_975(120), 1.979_930, 2e-5));
        assert!(close(t_975(1_000_000), Z_975, 1e-5));
    }

    #[test]
    fn mean_interval_of_a_known_sample() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, sample sd √(32/7).
        let m = mean_interval(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!(m.mean, Some(5.0));
        let sd = (32.0f64 / 7.0).sqrt();
        assert!(m.sd.is_some_and(|s| close(s, sd, 1e-12)));
        let half = 2.364_624_252 * sd / 8f64.sqrt();
        assert!(m.low.is_some_and(|l| close(l, 5.0 - half, 1e-9)));
        assert!(m.high.is_some_and(|h| close(h, 5.0 + half, 1e-9)));
        let one = mean_interval(&[3.0]);
        assert_eq!((one.mean, one.low), (Some(3.0), None));
        assert_eq!(mean_interval(&[]).mean, None);
    }

    #[test]
    fn difference_of_equal_rates_is_centred_and_not_significant() {
        let d = difference(5, 10, 5, 10).expect("comparable");
        assert_eq!(d.diff, 0.0);
        assert!(d.low < 0.0 && d.high > 0.0 && close(d.p_value, 1.0, 1e-9));
        assert_eq!(difference(0, 0, 1, 1), None);
    }
}
