//! Per-arm statistics over samples: a pass rate with its 95 % Wilson score interval,
//! and for each figure its mean, median and the 95 % confidence interval of its mean
//! (Student's t). An LLM's answer is a sample: one run per arm says little.

use serde::Serialize;

/// z for a two-sided 95 % interval.
const Z95: f64 = 1.959_963_984_540_054;

/// Student's t for a two-sided 95 % interval, by degrees of freedom 1..=30.
const T95: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// The 95 % Wilson score interval of `passes` successes in `n` trials: `None` for no
/// trial.
///
/// ```
/// let (lo, hi) = forktrail::wilson_interval(2, 2).unwrap();
/// assert_eq!(hi, 1.0);
/// assert!((lo - 0.3424).abs() < 1e-4);
/// ```
pub fn wilson_interval(passes: u64, n: u64) -> Option<(f64, f64)> {
    if n == 0 {
        return None;
    }
    let (n, p) = (n as f64, passes as f64 / n as f64);
    let z2 = Z95 * Z95;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = Z95 / (1.0 + z2 / n) * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    Some(((centre - half).max(0.0), (centre + half).min(1.0)))
}

/// A figure over an arm's samples.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// The samples that reported it.
    pub n: u64,
    pub mean: f64,
    pub median: f64,
    /// The 95 % confidence interval of the mean (Student's t); the mean itself for one
    /// sample.
    pub low: f64,
    pub high: f64,
}

impl Summary {
    /// The summary of `values` (`None` when there are none).
    ///
    /// ```
    /// let s = forktrail::Summary::of(&[2.0, 4.0, 9.0]).unwrap();
    /// assert_eq!((s.mean, s.median), (5.0, 4.0));
    /// ```
    pub fn of(values: &[f64]) -> Option<Self> {
        if values.is_empty() {
            return None;
        }
        let n = values.len();
        let mean = values.iter().sum::<f64>() / n as f64;
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let median = match n % 2 {
            1 => sorted[n / 2],
            _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
        };
        let half = if n < 2 {
            0.0
        } else {
            let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            let t = T95.get(n - 2).copied().unwrap_or(Z95);
            t * (var / n as f64).sqrt()
        };
        Some(Self {
            n: n as u64,
            mean,
            median,
            low: mean - half,
            high: mean + half,
        })
    }
}

/// One arm over its samples.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ArmStats {
    pub name: String,
    pub baseline: bool,
    /// Its samples (runs), ended or not.
    pub samples: u64,
    /// Samples a verify command judged.
    pub judged: u64,
    pub passed: u64,
    /// `passed / judged`; `None` when nothing was judged.
    pub pass_rate: Option<f64>,
    /// The 95 % Wilson interval of the pass rate.
    pub pass_interval: Option<(f64, f64)>,
    pub steps: Option<Summary>,
    pub turns: Option<Summary>,
    pub tool_calls: Option<Summary>,
    /// Input and output tokens.
    pub tokens: Option<Summary>,
    pub cost_usd: Option<Summary>,
    /// The models' time: every call's latency, summed.
    pub model_ms: Option<Summary>,
    /// The sample's whole time, agent and tools included (experiments).
    pub wall_ms: Option<Summary>,
}

/// Each arm of `arms` (a comparison's, the recording first) over its samples, in the
/// order the arms first appear. The recording's own entry counts only when its arm has
/// no sample of its own.
pub(crate) fn of_arms(arms: &[super::ArmReport]) -> Vec<ArmStats> {
    let mut names: Vec<&str> = Vec::new();
    for arm in arms {
        if !names.contains(&arm.name.as_str()) {
            names.push(&arm.name);
        }
    }
    names
        .into_iter()
        .map(|name| {
            let all: Vec<&super::ArmReport> = arms.iter().filter(|a| a.name == name).collect();
            let runs: Vec<&super::ArmReport> =
                all.iter().copied().filter(|a| a.run.is_some()).collect();
            let entries = if runs.is_empty() { all.clone() } else { runs };
            arm_stats(name, all[0].baseline, &entries)
        })
        .collect()
}

fn arm_stats(name: &str, baseline: bool, entries: &[&super::ArmReport]) -> ArmStats {
    use crate::model::Verdict;
    let judged: Vec<bool> = entries
        .iter()
        .filter_map(|a| a.outcome.as_ref())
        .filter(|o| o.verdict != Verdict::NotJudged)
        .map(|o| o.verdict == Verdict::Pass)
        .collect();
    let passed = judged.iter().filter(|p| **p).count() as u64;
    let of = |f: &dyn Fn(&super::ArmReport) -> Option<f64>| {
        Summary::of(&entries.iter().filter_map(|a| f(a)).collect::<Vec<_>>())
    };
    let n = judged.len() as u64;
    ArmStats {
        name: name.to_string(),
        baseline,
        samples: entries.iter().filter(|a| a.run.is_some()).count() as u64,
        judged: n,
        passed,
        pass_rate: (n > 0).then(|| passed as f64 / n as f64),
        pass_interval: wilson_interval(passed, n),
        steps: of(&|a| Some(a.figures.steps as f64)),
        turns: of(&|a| Some(a.figures.turns as f64)),
        tool_calls: of(&|a| Some(a.figures.tool_calls as f64)),
        tokens: of(&|a| {
            let f = &a.figures;
            Some((f.input_tokens? + f.output_tokens?) as f64)
        }),
        cost_usd: of(&|a| a.figures.cost_usd),
        model_ms: of(&|a| a.figures.latency_ms.map(|l| l as f64)),
        wall_ms: of(&|a| a.outcome.as_ref().map(|o| o.wall_ms as f64)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against values computed by hand from the formulas (and published tables).
    #[test]
    fn wilson_and_t_intervals_match_hand_computation() {
        // 0 of 2: [0, 0.6576]; 1 of 2: [0.0945, 0.9055]; 8 of 10: [0.4902, 0.9433].
        let close = |a: f64, b: f64| (a - b).abs() < 5e-4;
        let (lo, hi) = wilson_interval(0, 2).unwrap();
        assert!(close(lo, 0.0) && close(hi, 0.6576), "{lo} {hi}");
        let (lo, hi) = wilson_interval(1, 2).unwrap();
        assert!(close(lo, 0.0945) && close(hi, 0.9055), "{lo} {hi}");
        let (lo, hi) = wilson_interval(8, 10).unwrap();
        assert!(close(lo, 0.4902) && close(hi, 0.9433), "{lo} {hi}");
        assert_eq!(wilson_interval(0, 0), None);
        // 3, 5, 7: mean 5, s = 2, t(2) = 4.303, half = 4.303 * 2 / sqrt(3) = 4.9687.
        let s = Summary::of(&[7.0, 3.0, 5.0]).unwrap();
        assert!(
            close(s.low, 5.0 - 4.9687) && close(s.high, 5.0 + 4.9687),
            "{s:?}"
        );
        let one = Summary::of(&[4.0]).unwrap();
        assert_eq!((one.low, one.high, one.median), (4.0, 4.0, 4.0));
        assert_eq!(Summary::of(&[1.0, 2.0, 3.0, 10.0]).unwrap().median, 2.5);
    }
}
