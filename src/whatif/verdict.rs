//! A comparison read out: each arm's figures against the baseline's (deltas), and the
//! one line naming the winner, built from the measured figures alone. A figure one
//! side did not measure is said to be so, never guessed.
//!
//! The winner is the arm ahead on the first of these that every arm measured: pass rate
//! (higher), whether it got through the recording, cost, tokens, steps, model time
//! (lower). Where no arm passed or none got through, there is no winner.

use super::stats::ArmStats;
use super::{ArmReport, CostStatus};
use crate::model::{ArmStatus, RunStatus};
use std::fmt;

/// A figure set against the baseline's; less of each is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    Steps,
    Tokens,
    Cost,
    Time,
}

impl Measure {
    /// Every measure, in the order they are shown.
    pub const ALL: [Measure; 4] = [
        Measure::Steps,
        Measure::Tokens,
        Measure::Cost,
        Measure::Time,
    ];

    /// Its key in markup (`data-delta`).
    pub fn key(self) -> &'static str {
        match self {
            Measure::Steps => "steps",
            Measure::Tokens => "tokens",
            Measure::Cost => "cost",
            Measure::Time => "time",
        }
    }
}

/// What an arm measured (or its mean over its samples), as deltas and verdicts read it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Measured {
    pub steps: Option<f64>,
    /// Input and output tokens.
    pub tokens: Option<f64>,
    /// In US dollars; `None` when unpriced or not measured.
    pub cost_usd: Option<f64>,
    /// The models' time (every call's latency, summed), in milliseconds.
    pub time_ms: Option<f64>,
    /// The share of judged samples that passed; `None` when nothing was judged.
    pub pass_rate: Option<f64>,
    /// Whether it got through the recording; `None` while it runs or over samples.
    pub reached_end: Option<bool>,
}

impl Measured {
    /// What one arm (or the recording) measured.
    pub fn of_arm(arm: &ArmReport) -> Self {
        let f = &arm.figures;
        let running = arm.status == ArmStatus::Run(RunStatus::Running);
        Measured {
            steps: Some(f.steps as f64),
            tokens: f
                .input_tokens
                .zip(f.output_tokens)
                .map(|(i, o)| (i + o) as f64),
            cost_usd: f.cost_usd.filter(|_| f.cost == CostStatus::Priced),
            time_ms: f.latency_ms.map(|l| l as f64),
            pass_rate: None,
            reached_end: (!running).then_some(f.reached_end),
        }
    }

    /// What an arm measured over its samples: the means.
    pub fn of_stats(stats: &ArmStats) -> Self {
        let mean = |s: &Option<super::Summary>| s.as_ref().map(|s| s.mean);
        Measured {
            steps: mean(&stats.steps),
            tokens: mean(&stats.tokens),
            cost_usd: mean(&stats.cost_usd),
            time_ms: mean(&stats.model_ms),
            pass_rate: stats.pass_rate,
            reached_end: None,
        }
    }

    fn get(&self, measure: Measure) -> Option<f64> {
        match measure {
            Measure::Steps => self.steps,
            Measure::Tokens => self.tokens,
            Measure::Cost => self.cost_usd,
            Measure::Time => self.time_ms,
        }
    }
}

/// How an arm's figure stands against the baseline's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Change {
    /// The baseline did not measure it: there is nothing to set the arm against.
    BaselineNotMeasured,
    /// The arm did not measure it.
    NotMeasured,
    /// The arm's less the baseline's (steps, tokens, milliseconds; dollars when the
    /// baseline cost nothing).
    By(f64),
    /// The arm's over the baseline's (cost).
    Times(f64),
}

/// Better, worse or even, as a delta or a verdict reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    Better,
    Worse,
    Even,
    /// One side did not measure it.
    Unknown,
}

impl Standing {
    /// Its key in markup (a class).
    pub fn key(self) -> &'static str {
        match self {
            Standing::Better => "better",
            Standing::Worse => "worse",
            Standing::Even => "even",
            Standing::Unknown => "unknown",
        }
    }
}

/// One figure of an arm against the baseline's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Delta {
    pub measure: Measure,
    pub change: Change,
}

impl Delta {
    /// Whether the arm is ahead (less is better for every measure).
    pub fn standing(&self) -> Standing {
        match self.change {
            Change::BaselineNotMeasured | Change::NotMeasured => Standing::Unknown,
            _ if self.is_even() => Standing::Even,
            Change::By(d) if d < 0.0 => Standing::Better,
            Change::Times(r) if r < 1.0 => Standing::Better,
            _ => Standing::Worse,
        }
    }

    /// Whether the difference is below what is shown (a step, a token, a tenth of a
    /// second, a cent of a percent of the cost).
    fn is_even(&self) -> bool {
        match (self.measure, self.change) {
            (Measure::Time, Change::By(ms)) => (ms / 100.0).round() == 0.0,
            (Measure::Cost, Change::By(usd)) => (usd * 1e6).round() == 0.0,
            (_, Change::By(d)) => (d * 10.0).round() == 0.0,
            (_, Change::Times(r)) => ((r - 1.0) * 100.0).round() == 0.0,
            _ => false,
        }
    }
}

/// Each measure of `arm` against `baseline`'s, in [`Measure::ALL`]'s order.
pub fn deltas(arm: &Measured, baseline: &Measured) -> Vec<Delta> {
    Measure::ALL
        .iter()
        .map(|&measure| {
            let change = match (arm.get(measure), baseline.get(measure)) {
                (_, None) => Change::BaselineNotMeasured,
                (None, Some(_)) => Change::NotMeasured,
                (Some(a), Some(b)) if measure == Measure::Cost && b > 0.0 => Change::Times(a / b),
                (Some(a), Some(b)) => Change::By(a - b),
            };
            Delta { measure, change }
        })
        .collect()
}

impl fmt::Display for Delta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let noun = self.measure.key();
        let sign = |d: f64| if d < 0.0 { "−" } else { "+" };
        match self.change {
            Change::BaselineNotMeasured => write!(f, "{noun}: not measured in the recording"),
            Change::NotMeasured => write!(f, "{noun}: not measured"),
            _ if self.is_even() => write!(f, "same {noun}"),
            Change::Times(r) => write!(f, "{} the cost", times(r)),
            Change::By(d) => match self.measure {
                Measure::Steps => {
                    let unit = if d.abs() == 1.0 { "step" } else { "steps" };
                    write!(f, "{}{} {unit}", sign(d), count(d.abs()))
                }
                Measure::Tokens => write!(f, "{}{} tokens", sign(d), count(d.abs())),
                Measure::Cost => write!(f, "{}${:.6}", sign(d), d.abs()),
                Measure::Time => write!(f, "{}{:.1} s", sign(d), d.abs() / 1000.0),
            },
        }
    }
}

/// What decided a verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Criterion {
    PassRate,
    ReachedEnd,
    Cost,
    Tokens,
    Steps,
    Time,
}

impl Criterion {
    /// In the order a verdict weighs them.
    const ALL: [Criterion; 6] = [
        Criterion::PassRate,
        Criterion::ReachedEnd,
        Criterion::Cost,
        Criterion::Tokens,
        Criterion::Steps,
        Criterion::Time,
    ];

    /// Its key in markup (`data-on`).
    pub fn key(self) -> &'static str {
        match self {
            Criterion::PassRate => "pass_rate",
            Criterion::ReachedEnd => "reached_end",
            Criterion::Cost => "cost",
            Criterion::Tokens => "tokens",
            Criterion::Steps => "steps",
            Criterion::Time => "time",
        }
    }

    /// The arm's value, higher being better.
    fn score(self, m: &Measured) -> Option<f64> {
        let less = |v: Option<f64>| v.map(|v| -v);
        match self {
            Criterion::PassRate => m.pass_rate,
            Criterion::ReachedEnd => m.reached_end.map(f64::from),
            Criterion::Cost => less(m.cost_usd),
            Criterion::Tokens => less(m.tokens),
            Criterion::Steps => less(m.steps),
            Criterion::Time => less(m.time_ms),
        }
    }

    /// A score at the resolution the verdict shows it (a cent of a point of pass rate,
    /// a millionth of a dollar, a tenth of a token or step, a tenth of a second), so
    /// two arms the page shows alike are alike to the verdict too.
    fn shown(self, score: f64) -> f64 {
        match self {
            Criterion::PassRate => (score * 100.0).round(),
            Criterion::ReachedEnd => score,
            Criterion::Cost => (score * 1e6).round(),
            Criterion::Tokens | Criterion::Steps => (score * 10.0).round(),
            Criterion::Time => (score / 100.0).round(),
        }
    }

    /// A value as the verdict shows it (`score`'s sign undone).
    fn show(self, score: f64) -> String {
        match self {
            Criterion::PassRate => format!("{score:.2}"),
            Criterion::ReachedEnd => String::new(),
            Criterion::Cost => format!("${:.6}", -score),
            Criterion::Tokens | Criterion::Steps => count(-score),
            Criterion::Time => format!("{:.1} s", -score / 1000.0),
        }
    }
}

/// Why a comparison names no winner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoWinner {
    /// An arm still runs.
    Running,
    /// The comparison has no arm but the recording.
    NoArms,
    /// Every arm was judged and none passed.
    NonePassed,
    /// No arm got through the recording.
    NoneReachedEnd,
    /// The arms measured the same on every figure they all measured.
    Tie,
}

/// The one-line verdict of a comparison.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// The winner, ahead of the runner-up (`None`: it is the only arm) `on` the first
    /// figure that told them apart, with its own figures against the recording.
    Winner {
        winner: String,
        runner_up: Option<String>,
        on: Option<Criterion>,
        /// The winner's and the runner-up's value of `on`.
        values: (f64, f64),
        against: Vec<Delta>,
    },
    NoWinner(NoWinner),
}

/// The verdict on `arms` (each arm's name and figures, in the comparison's order, the
/// recording left out) against the recording's figures; `running` while any arm runs.
pub fn verdict(arms: &[(&str, Measured)], baseline: &Measured, running: bool) -> Verdict {
    if running {
        return Verdict::NoWinner(NoWinner::Running);
    }
    if arms.is_empty() {
        return Verdict::NoWinner(NoWinner::NoArms);
    }
    let weighed: Vec<Criterion> = Criterion::ALL
        .into_iter()
        .filter(|c| arms.iter().all(|(_, m)| c.score(m).is_some()))
        .collect();
    let all = |c: Criterion, value: f64| arms.iter().all(|(_, m)| c.score(m) == Some(value));
    if weighed.contains(&Criterion::PassRate) && all(Criterion::PassRate, 0.0) {
        return Verdict::NoWinner(NoWinner::NonePassed);
    }
    if weighed.contains(&Criterion::ReachedEnd) && all(Criterion::ReachedEnd, 0.0) {
        return Verdict::NoWinner(NoWinner::NoneReachedEnd);
    }
    let key = |m: &Measured| -> Vec<f64> {
        weighed
            .iter()
            .map(|c| c.shown(c.score(m).unwrap_or(0.0)))
            .collect()
    };
    let mut ranked: Vec<&(&str, Measured)> = arms.iter().collect();
    // Stable: arms that tie keep the comparison's order.
    ranked.sort_by(|a, b| {
        key(&b.1)
            .iter()
            .zip(key(&a.1))
            .map(|(x, y)| x.total_cmp(&y))
            .find(|o| o.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let (winner, best) = ranked[0];
    let against = deltas(best, baseline);
    let Some((runner, second)) = ranked.get(1) else {
        return Verdict::Winner {
            winner: winner.to_string(),
            runner_up: None,
            on: None,
            values: (0.0, 0.0),
            against,
        };
    };
    let on = weighed
        .iter()
        .copied()
        .find(|c| c.score(best).map(|v| c.shown(v)) != c.score(second).map(|v| c.shown(v)));
    match on {
        None => Verdict::NoWinner(NoWinner::Tie),
        Some(c) => Verdict::Winner {
            winner: winner.to_string(),
            runner_up: Some(runner.to_string()),
            on: Some(c),
            values: (c.score(best).unwrap_or(0.0), c.score(second).unwrap_or(0.0)),
            against,
        },
    }
}

impl Verdict {
    /// The winner's name, if any.
    pub fn winner(&self) -> Option<&str> {
        match self {
            Verdict::Winner { winner, .. } => Some(winner),
            Verdict::NoWinner(_) => None,
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (winner, runner_up, on, values, against) = match self {
            Verdict::NoWinner(why) => {
                return f.write_str(match why {
                    NoWinner::Running => "No verdict yet: an arm is still running",
                    NoWinner::NoArms => "No verdict: the comparison has no arm",
                    NoWinner::NonePassed => "No winner: no arm passed",
                    NoWinner::NoneReachedEnd => "No winner: no arm got through the recording",
                    NoWinner::Tie => "No winner: the arms measured the same",
                })
            }
            Verdict::Winner {
                winner,
                runner_up,
                on,
                values,
                against,
            } => (winner, runner_up, on, values, against),
        };
        match (runner_up, on) {
            (Some(r), Some(Criterion::ReachedEnd)) => write!(
                f,
                "{winner} wins: it got through the recording and {r} did not"
            )?,
            (Some(r), Some(c)) => {
                let what = match c {
                    Criterion::PassRate => "pass rate",
                    other => other.key(),
                };
                write!(
                    f,
                    "{winner} wins on {what}: {} against {} for {r}",
                    c.show(values.0),
                    c.show(values.1)
                )?
            }
            _ => write!(f, "{winner} is the only arm")?,
        }
        let measured: Vec<String> = against
            .iter()
            .filter(|d| matches!(d.change, Change::By(_) | Change::Times(_)))
            .map(Delta::to_string)
            .collect();
        if !measured.is_empty() {
            write!(f, "; against the recording: {}", measured.join(", "))?;
        }
        Ok(())
    }
}

/// A count as shown: whole with thousands separated, else to a tenth (a mean).
fn count(v: f64) -> String {
    if (v - v.round()).abs() > 1e-9 {
        return format!("{v:.1}");
    }
    let digits = format!("{:.0}", v.abs());
    let mut out = String::new();
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(d);
    }
    if v < 0.0 {
        out.insert(0, '−');
    }
    out
}

/// A ratio as shown: `30×`, `1.5×`, `0.25×`.
fn times(r: f64) -> String {
    let text = if r >= 10.0 {
        format!("{r:.0}")
    } else if r >= 1.0 {
        format!("{r:.1}")
    } else {
        format!("{r:.2}")
    };
    let text = match text.contains('.') {
        true => text.trim_end_matches('0').trim_end_matches('.'),
        false => &text,
    };
    format!("{text}×")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(steps: f64, tokens: Option<f64>, cost: Option<f64>, time: Option<f64>) -> Measured {
        Measured {
            steps: Some(steps),
            tokens,
            cost_usd: cost,
            time_ms: time,
            pass_rate: None,
            reached_end: Some(true),
        }
    }

    fn shown(d: &[Delta]) -> Vec<String> {
        d.iter().map(Delta::to_string).collect()
    }

    #[test]
    fn deltas_are_computed_from_both_sides_and_never_invented() {
        let recording = m(4.0, Some(556.0), Some(0.000_2), Some(1_500.0));
        let arm = m(2.0, Some(1_795.0), Some(0.006), Some(2_700.0));
        let d = deltas(&arm, &recording);
        assert_eq!(
            shown(&d),
            ["−2 steps", "+1,239 tokens", "30× the cost", "+1.2 s"]
        );
        let standings: Vec<Standing> = d.iter().map(Delta::standing).collect();
        use Standing::*;
        assert_eq!(standings, [Better, Worse, Worse, Worse]);
        // The recording measured steps only: the rest is said to be unmeasured.
        let d = deltas(&arm, &m(4.0, None, None, None));
        assert_eq!(d[1].change, Change::BaselineNotMeasured);
        assert_eq!(
            shown(&d[1..]),
            [
                "tokens: not measured in the recording",
                "cost: not measured in the recording",
                "time: not measured in the recording"
            ]
        );
        // The arm lacking one, or matching the recording.
        let d = deltas(&m(5.0, None, Some(0.000_1), Some(1_520.0)), &recording);
        assert_eq!(
            shown(&d),
            [
                "+1 step",
                "tokens: not measured",
                "0.5× the cost",
                "same time"
            ]
        );
        assert_eq!(d[3].standing(), Even);
        let free = m(4.0, None, Some(0.0), None);
        assert_eq!(deltas(&free, &free)[2].to_string(), "same cost");
        assert_eq!(
            deltas(&m(4.0, None, Some(0.000_25), None), &free)[2].to_string(),
            "+$0.000250"
        );
    }

    #[test]
    fn the_verdict_weighs_pass_rate_then_the_end_then_cost_tokens_steps_and_time() {
        let recording = m(4.0, None, None, None);
        let mut same = m(4.0, Some(556.0), Some(0.000_592), Some(40.0));
        let mut other = m(3.0, Some(195.0), Some(0.006_3), Some(30.0));
        other.reached_end = Some(false);
        let v = verdict(
            &[("other", other.clone()), ("same", same.clone())],
            &recording,
            false,
        );
        assert_eq!(v.winner(), Some("same"));
        assert!(matches!(
            v,
            Verdict::Winner {
                on: Some(Criterion::ReachedEnd),
                ..
            }
        ));
        assert_eq!(
            v.to_string(),
            "same wins: it got through the recording and other did not; against the recording: same steps"
        );
        // Both through: the cost decides, though the dearer one used fewer tokens.
        other.reached_end = Some(true);
        let v = verdict(
            &[("same", same.clone()), ("other", other.clone())],
            &recording,
            false,
        );
        assert_eq!(
            v.to_string(),
            "same wins on cost: $0.000592 against $0.006300 for other; against the recording: same steps"
        );
        // Unpriced: the tokens decide.
        same.cost_usd = None;
        let v = verdict(
            &[("same", same.clone()), ("other", other.clone())],
            &recording,
            false,
        );
        assert!(matches!(
            v,
            Verdict::Winner {
                on: Some(Criterion::Tokens),
                ..
            }
        ));
        assert_eq!(v.winner(), Some("other"));
        assert!(
            v.to_string().starts_with(
                "other wins on tokens: 195 against 556 for same; against the recording: −1 step"
            ),
            "{v}"
        );
        // Pass rates come first, whatever the cost.
        let (mut pass, mut fail) = (same.clone(), other.clone());
        pass.pass_rate = Some(0.8);
        fail.pass_rate = Some(0.4);
        let v = verdict(
            &[("cheap", fail.clone()), ("good", pass)],
            &recording,
            false,
        );
        assert_eq!(v.winner(), Some("good"));
        assert!(
            v.to_string()
                .starts_with("good wins on pass rate: 0.80 against 0.40 for cheap"),
            "{v}"
        );
        fail.pass_rate = Some(0.0);
        let v = verdict(&[("a", fail.clone()), ("b", fail)], &recording, false);
        assert_eq!(v, Verdict::NoWinner(NoWinner::NonePassed));
    }

    #[test]
    fn no_winner_while_running_when_none_got_through_or_all_tie() {
        let recording = m(4.0, None, None, None);
        let mut stuck = m(2.0, None, None, None);
        stuck.reached_end = Some(false);
        let arms = [("a", stuck.clone()), ("b", stuck)];
        assert_eq!(
            verdict(&arms, &recording, true),
            Verdict::NoWinner(NoWinner::Running)
        );
        assert_eq!(
            verdict(&arms, &recording, false),
            Verdict::NoWinner(NoWinner::NoneReachedEnd)
        );
        assert_eq!(
            verdict(&[], &recording, false),
            Verdict::NoWinner(NoWinner::NoArms)
        );
        let even = m(4.0, Some(10.0), None, None);
        let v = verdict(
            &[("a", even.clone()), ("b", even.clone())],
            &recording,
            false,
        );
        assert_eq!(v, Verdict::NoWinner(NoWinner::Tie));
        // Apart by less than the page shows ($0.000412 and 1.2 s for both): a tie too.
        let close = [
            ("a", m(4.0, Some(10.0), Some(0.000_412_1), Some(1_210.0))),
            ("b", m(4.0, Some(10.0), Some(0.000_411_9), Some(1_190.0))),
        ];
        assert_eq!(
            verdict(&close, &recording, false),
            Verdict::NoWinner(NoWinner::Tie)
        );
        let v = verdict(&[("a", even)], &recording, false);
        assert_eq!(
            v.to_string(),
            "a is the only arm; against the recording: same steps"
        );
    }
}
