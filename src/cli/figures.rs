//! The text of comparisons and experiments: the figures of each arm side by side, each
//! arm over its samples (pass rate with its 95 % Wilson interval, each figure's mean,
//! median and interval) and every sample, the list of comparisons, and a plan.

use super::render::{count, table, table_or};
use forktrail::{ArmReport, ComparePlan, Comparison, CostStatus};
use std::io::{self, Write};

/// A figure, or `not measured` where the store has none.
fn measured(figure: Option<impl ToString>) -> String {
    figure.map_or_else(|| "not measured".into(), |f| f.to_string())
}

/// Dollars as a comparison prints them: `$0.001234`.
fn usd(amount: f64) -> String {
    format!("${amount:.6}")
}

/// A list of names, or `none`.
fn listed(names: &[String]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// A run's figure; `-` for the baseline, where it does not apply.
fn applies(arm: &ArmReport, figure: Option<u64>) -> String {
    if arm.baseline {
        "-".into()
    } else {
        measured(figure)
    }
}

/// The figures of a comparison, one row per figure and one column per arm (the baseline
/// first).
fn figure_rows(arms: &[ArmReport]) -> Vec<Vec<String>> {
    type Figure = fn(&ArmReport) -> String;
    let rows: [(&str, Figure); 18] = [
        ("status", |a| a.status.to_string()),
        ("steps", |a| a.figures.steps.to_string()),
        ("turns", |a| a.figures.turns.to_string()),
        ("assistant turns", |a| a.figures.assistant_turns.to_string()),
        ("tool calls", |a| a.figures.tool_calls.to_string()),
        ("tool sequence", |a| listed(&a.figures.tool_names)),
        // The baseline is the recording: answering from it does not apply.
        ("from recording", |a| {
            applies(a, a.figures.answered_from_recording)
        }),
        ("unanswered", |a| {
            applies(a, a.figures.unanswered_tool_calls)
        }),
        ("input tokens", |a| measured(a.figures.input_tokens)),
        ("output tokens", |a| measured(a.figures.output_tokens)),
        ("cached tokens", |a| measured(a.figures.cached_tokens)),
        ("latency (total ms)", |a| measured(a.figures.latency_ms)),
        ("cost", |a| match (a.figures.cost, a.figures.cost_usd) {
            (CostStatus::Priced, Some(cost)) => usd(cost),
            (CostStatus::Unpriced, _) => "unpriced".into(),
            _ => "not measured".into(),
        }),
        ("finish reasons", |a| {
            if a.baseline && a.figures.finish_reasons.is_empty() {
                "not measured".into()
            } else {
                listed(&a.figures.finish_reasons)
            }
        }),
        ("first divergence", |a| {
            a.figures
                .first_divergence
                .map_or_else(|| "none".into(), |i| i.to_string())
        }),
        ("first other words", |a| {
            a.figures
                .first_text_divergence
                .map_or_else(|| "none".into(), |i| i.to_string())
        }),
        ("first other tool call", |a| {
            a.figures
                .first_tool_call_divergence
                .map_or_else(|| "none".into(), |i| i.to_string())
        }),
        ("reached end", |a| {
            if a.figures.reached_end { "yes" } else { "no" }.into()
        }),
    ];
    rows.iter()
        .map(|(label, figure)| {
            std::iter::once(label.to_string())
                .chain(arms.iter().map(figure))
                .collect()
        })
        .collect()
}

/// A comparison: what it compared, its figures side by side, and why arms stopped.
pub fn comparison(out: &mut dyn Write, c: &Comparison) -> io::Result<()> {
    let what = match c.experiment {
        Some(_) => "experiment",
        None => "comparison",
    };
    writeln!(out, "{what}  {} ({})", c.comparison, c.status)?;
    writeln!(
        out,
        "session     {} from index {}, at most {} per arm",
        c.session,
        c.at,
        count(c.max_steps, "step", "steps")
    )?;
    let budget = c.budget_usd.map_or_else(|| "none".into(), usd);
    writeln!(out, "budget      {budget}, {} charged", usd(c.charged_usd))?;
    if c.reused {
        writeln!(
            out,
            "reused      an identical earlier comparison; no model was called (--again runs \
             anew)"
        )?;
    }
    if let Some(e) = &c.experiment {
        writeln!(out, "agent       {}", e.agent)?;
        writeln!(out, "verify      {}", e.verify)?;
        writeln!(out, "sandbox     {} (on drift: {})", e.sandbox, e.on_drift)?;
    }
    writeln!(out)?;
    if c.samples > 1 || c.experiment.is_some() {
        return sampled(out, c);
    }
    let mut headers = vec![""];
    headers.extend(c.arms.iter().map(|a| a.name.as_str()));
    write!(out, "{}", table(&headers, &figure_rows(&c.arms)))?;
    writeln!(out)?;
    for arm in c.arms.iter().filter(|a| !a.baseline) {
        let run = arm.run.as_deref().unwrap_or_default();
        let session = arm.session.as_ref().map_or("", |s| s.as_str());
        writeln!(out, "arm {}: run {run}, session {session}", arm.name)?;
    }
    for arm in &c.arms {
        if arm.baseline
            || matches!(
                arm.status,
                forktrail::ArmStatus::Run(
                    forktrail::RunStatus::Complete | forktrail::RunStatus::Running
                )
            )
        {
            continue;
        }
        match &arm.detail {
            Some(detail) => writeln!(out, "arm {} stopped {}: {detail}", arm.name, arm.status)?,
            None => writeln!(out, "arm {} stopped {}", arm.name, arm.status)?,
        }
    }
    Ok(())
}

/// A comparison with samples: each arm over its samples (pass rate with its 95 %
/// Wilson interval; each figure's mean, median and the 95 % interval of the mean), then
/// every sample.
fn sampled(out: &mut dyn Write, c: &Comparison) -> io::Result<()> {
    let summary = |s: &Option<forktrail::Summary>, show: &dyn Fn(f64) -> String| match s {
        Some(s) if s.n > 1 => format!(
            "{} (median {}, 95% {}–{})",
            show(s.mean),
            show(s.median),
            show(s.low.max(0.0)),
            show(s.high)
        ),
        Some(s) => show(s.mean),
        None => "-".into(),
    };
    let n = |v: f64| format!("{v:.1}");
    let ms = |v: f64| format!("{:.1} s", v / 1000.0);
    let rows: Vec<Vec<String>> = c
        .stats
        .iter()
        .map(|a| {
            let pass = match (a.pass_rate, a.pass_interval) {
                (Some(rate), Some((lo, hi))) => format!(
                    "{}/{} = {:.2} (95% {:.2}–{:.2})",
                    a.passed, a.judged, rate, lo, hi
                ),
                _ => "not judged".into(),
            };
            vec![
                a.name.clone(),
                match (a.baseline, a.samples) {
                    (true, 0) => "recorded".into(),
                    (_, n) => n.to_string(),
                },
                pass,
                summary(&a.steps, &n),
                summary(&a.tokens, &|v| format!("{v:.0}")),
                summary(&a.cost_usd, &|v| usd(v)),
                summary(&a.wall_ms, &ms),
            ]
        })
        .collect();
    let headers = [
        "ARM",
        "SAMPLES",
        "PASS RATE",
        "STEPS",
        "TOKENS",
        "COST",
        "WALL",
    ];
    write!(out, "{}", table(&headers, &rows))?;
    writeln!(out)?;
    let rows: Vec<Vec<String>> = c
        .arms
        .iter()
        .filter(|a| a.sample.is_some())
        .map(|a| {
            let f = &a.figures;
            let o = a.outcome.as_ref();
            vec![
                a.name.clone(),
                a.sample.map_or(String::new(), |s| s.to_string()),
                a.status.to_string(),
                o.map_or("-".into(), |o| o.verdict.to_string()),
                f.steps.to_string(),
                match (f.input_tokens, f.output_tokens) {
                    (Some(i), Some(o)) => format!("{i}+{o}"),
                    _ => "-".into(),
                },
                f.cost_usd.map_or("-".into(), usd),
                o.map_or("-".into(), |o| ms(o.wall_ms as f64)),
                f.first_divergence.map_or("-".into(), |d| d.to_string()),
                o.and_then(|o| o.drift.as_ref()).map_or(String::new(), |d| {
                    format!("call {}, turn {}", d.call, d.index)
                }),
                a.session.as_ref().map_or(String::new(), |s| s.to_string()),
            ]
        })
        .collect();
    let headers = [
        "ARM",
        "SAMPLE",
        "STATUS",
        "VERDICT",
        "STEPS",
        "TOKENS IN+OUT",
        "COST",
        "WALL",
        "DIVERGES AT",
        "DRIFT",
        "SESSION",
    ];
    write!(out, "{}", table(&headers, &rows))?;
    for a in c.arms.iter().filter(|a| a.sample.is_some()) {
        if let Some(d) = a.outcome.as_ref().and_then(|o| o.drift.as_ref()) {
            writeln!(
                out,
                "{} sample {}: the environment diverged at call {} (turn {}): {}",
                a.name,
                a.sample.unwrap_or(0),
                d.call,
                d.index,
                d.detail
            )?;
        }
    }
    Ok(())
}

/// `comparisons`: one line per comparison.
pub fn comparisons(out: &mut dyn Write, all: &[Comparison]) -> io::Result<()> {
    let rows: Vec<Vec<String>> = all
        .iter()
        .map(|c| {
            let arms: Vec<String> = c
                .arms
                .iter()
                .filter(|a| !a.baseline)
                .map(|a| format!("{} {}", a.name, a.status))
                .collect();
            vec![
                c.comparison.clone(),
                format!("{}@{}", c.session, c.at),
                c.status.to_string(),
                arms.join(", "),
                c.created_at.clone().unwrap_or_default(),
            ]
        })
        .collect();
    let headers = ["COMPARISON", "FROM", "STATUS", "ARMS", "CREATED"];
    table_or(out, "no comparisons", &headers, &rows)
}

/// `compare --dry-run`: each arm's estimate, the total and the budget.
pub fn compare_plan(out: &mut dyn Write, p: &ComparePlan) -> io::Result<()> {
    writeln!(
        out,
        "would compare session {} from index {}: {}, at most {} each; nothing is called or \
         written",
        p.session,
        p.at,
        count(p.arms.len() as u64, "arm", "arms"),
        count(p.max_steps, "step", "steps")
    )?;
    let rows: Vec<Vec<String>> = p
        .arms
        .iter()
        .map(|a| {
            vec![
                a.name.clone(),
                a.provider.as_str().into(),
                a.model.clone(),
                a.endpoint.clone(),
                if a.remote { "yes" } else { "no" }.into(),
                a.estimated_steps.to_string(),
                format!(
                    "~{} in, ~{} out",
                    a.estimated_input_tokens_per_call, a.estimated_output_tokens_per_call
                ),
                a.estimated_usd.map_or_else(|| "unpriced".into(), usd),
            ]
        })
        .collect();
    let headers = [
        "ARM",
        "PROVIDER",
        "MODEL",
        "ENDPOINT",
        "REMOTE",
        "STEPS",
        "TOKENS PER CALL",
        "ESTIMATED COST",
    ];
    write!(out, "{}", table(&headers, &rows))?;
    let unpriced = p.arms.iter().filter(|a| a.estimated_usd.is_none()).count();
    let total = match unpriced {
        0 => usd(p.estimated_usd),
        n => format!(
            "{} ({} unpriced: give --price MODEL=IN/OUT)",
            usd(p.estimated_usd),
            count(n as u64, "arm", "arms")
        ),
    };
    writeln!(out, "total       {total}")?;
    let budget = p
        .budget_usd
        .map_or_else(|| "none (--budget-usd)".into(), usd);
    writeln!(out, "budget      {budget}")?;
    writeln!(out, "estimate    {}", p.estimate_method)
}
