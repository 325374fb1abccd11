//! The web UI's comparison page: a one-line verdict naming the winner, its figures with
//! the arms as columns (each against the baseline's), then the turns side by side from
//! the fork point, each arm's first divergence marked (in anything, and in tool calls
//! apart) and the words it changed highlighted; and its cancel.
//!
//! The page reloads itself each second while any arm runs.

use super::shell::{self, Page, TokenForm};
use crate::engine::diff::word_diff;
use crate::html::{self, Links};
use crate::model::Turn;
use crate::server::Shared;
use crate::whatif::verdict::{self, Delta, Measured, Verdict};
use crate::whatif::{ArmReport, Cell, Comparison, CostStatus, BASELINE};
use axum::body::Bytes;
use axum::extract::{Path, Query};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect};
use maud::{html, Markup};
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Deserialize, Default)]
pub(super) struct ShownQuery {
    /// Set when the form found an identical earlier comparison.
    #[serde(default)]
    reused: String,
}

/// `GET /ui/comparisons/{id}`: the figures (arms as columns, the baseline first), then
/// the turns from the fork point side by side, the shared prefix folded. Reloads itself
/// each second while an arm runs.
pub(super) async fn comparison(
    state: Shared,
    Path(id): Path<String>,
    Query(q): Query<ShownQuery>,
) -> Page {
    let state = state.0;
    let (c, info, recorded) = shell::read(&state, move |store| {
        let c = store.comparison(&id)?;
        let info = store.info(&c.session)?;
        let recorded = store.load(&c.session, None)?;
        Ok((c, info, recorded))
    })
    .await?;
    let running = c.status == crate::model::ComparisonStatus::Running;
    let at = c.at as usize;
    let (prefix, after) = recorded.split_at(at.min(recorded.len()));
    // A page of the shared prefix at most, as the session's own pages hold.
    let shown = &prefix[prefix.len().saturating_sub(html::PAGE as usize)..];
    let name = info.title.as_deref().unwrap_or(&info.branch);
    let body = html! {
        h1 { "Comparison on " a href=(format!("/ui/sessions/{}", c.session)) { (name) } " from turn " (c.at) }
        p.meta { "Comparison " code { (c.comparison) } }
        p { "Status: " strong #comparison-status data-status=(c.status) { (c.status) }
            @if running { span.meta { " (this page reloads each second)" } } }
        (verdict_line(&c))
        @if !q.reused.is_empty() {
            p.meta { "This exact comparison had been asked before: here it is. Tick \
                      “Run again” on the form to ask the models anew." }
        }
        dl.facts {
            dt { "Session" } dd { a href=(format!("/ui/sessions/{}", c.session)) { (name) }
                " " span.meta { "(" (c.session) ")" } " from turn " (c.at) }
            @if let Some(at) = &c.created_at { dt { "Created" } dd { (html::when(at)) } }
            dt { "Max steps per arm" } dd { (c.max_steps) }
            dt { "Budget" } dd { @match c.budget_usd { Some(b) => (dollars(b)), None => "no cap" } }
            dt { "Charged so far" } dd { (dollars(c.charged_usd)) }
        }
        @if running && state.config.token.is_some() {
            form.write method="post" action=(format!("/ui/comparisons/{}/cancel", c.comparison)) {
                (shell::token_field("cancel-comparison-token"))
                button type="submit" { "Cancel the running arms" }
            }
        }
        @if let Some(e) = &c.experiment {
            h2 { "Experiment" }
            dl.facts {
                dt { "Agent" } dd { code { (e.agent) } }
                dt { "Verify" } dd { code { (e.verify) } " (exit 0 is a pass)" }
                dt { "Sandbox" } dd { (e.sandbox)
                    @if e.sandbox == crate::model::Sandbox::None { " " strong { "— the agent's tools ran with the user's rights" } } }
                dt { "On drift" } dd { (e.on_drift) }
            }
        }
        @if c.samples > 1 || c.experiment.is_some() {
            (sampled(&c))
        } @else {
            h2 { "Figures" }
            (figures_table(&c))
        }
        h2 { "Turns" }
        @if !prefix.is_empty() {
            details.prefix {
                summary { (prefix.len()) " shared turns (#0–#" (prefix.len() - 1) "): the context every arm answered from" }
                @if shown.len() < prefix.len() {
                    p.meta { "The last " (shown.len()) " are shown; " a href=(format!("/ui/sessions/{}", c.session)) { "the session" } " has them all." }
                }
                ol.turns start=(prefix.len() - shown.len()) {
                    @for turn in shown { (html::turn_item(&info, turn, Links::Server, html! {}, html! {})) }
                }
            }
        }
        (turns_table(&c, after))
    };
    let mut response = shell::page(
        &state,
        StatusCode::OK,
        &format!("comparison on {name} from turn {}", c.at),
        body,
    );
    if running {
        response
            .headers_mut()
            .insert(header::REFRESH, HeaderValue::from_static("1"));
    }
    Ok(response)
}

/// The verdict: the winner and what decided it, from the measured figures only (over
/// samples, their means, pass rates first).
fn verdict_line(c: &Comparison) -> Markup {
    let running = c.status == crate::model::ComparisonStatus::Running;
    let v = if c.samples > 1 || c.experiment.is_some() {
        let baseline = c.stats.iter().find(|a| a.baseline).map(Measured::of_stats);
        let arms: Vec<(&str, Measured)> = c
            .stats
            .iter()
            .filter(|a| !a.baseline)
            .map(|a| (a.name.as_str(), Measured::of_stats(a)))
            .collect();
        verdict::verdict(&arms, &baseline.unwrap_or_default(), running)
    } else {
        let baseline = c.arms.iter().find(|a| a.baseline).map(Measured::of_arm);
        let arms: Vec<(&str, Measured)> = c
            .arms
            .iter()
            .filter(|a| !a.baseline)
            .map(|a| (a.name.as_str(), Measured::of_arm(a)))
            .collect();
        verdict::verdict(&arms, &baseline.unwrap_or_default(), running)
    };
    let on = match &v {
        Verdict::Winner { on, .. } => on.map(|c| c.key()),
        Verdict::NoWinner(_) => None,
    };
    html! {
        p.verdict #verdict data-winner=[v.winner()] data-on=[on] {
            span.label { "Verdict: " } (v.to_string())
        }
    }
}

/// Each measure of an arm against the baseline's, ahead or behind in words.
fn deltas_list(deltas: &[Delta]) -> Markup {
    html! {
        ul.deltas {
            @for d in deltas {
                li class=(d.standing().key()) data-delta=(d.measure.key()) { (d.to_string()) }
            }
        }
    }
}

/// A summary as read: the mean, and with more than one sample its median and the 95 %
/// interval of the mean.
fn summary(s: &Option<crate::whatif::Summary>, show: fn(f64) -> String) -> Markup {
    match s {
        Some(s) if s.n > 1 => html! {
            (show(s.mean)) br;
            span.meta { "median " (show(s.median)) ", 95% " (show(s.low.max(0.0))) "–" (show(s.high)) }
        },
        Some(s) => html! { (show(s.mean)) },
        None => unmeasured(),
    }
}

/// Each arm over its samples (pass rate with its 95 % Wilson interval, figures with
/// theirs), then every sample.
fn sampled(c: &Comparison) -> Markup {
    let count = |v: f64| format!("{v:.1}");
    let whole = |v: f64| format!("{v:.0}");
    let secs = |v: f64| format!("{:.1} s", v / 1000.0);
    let recording = c
        .stats
        .iter()
        .find(|a| a.baseline)
        .map(Measured::of_stats)
        .unwrap_or_default();
    html! {
        h2 { "Arms over their samples" }
        div.scroll {
        table.stats {
            thead { tr {
                th scope="col" { "Arm" } th scope="col" { "Samples" }
                th scope="col" { "Pass rate (95% Wilson interval)" } th scope="col" { "Steps" }
                th scope="col" { "Tokens" } th scope="col" { "Cost" } th scope="col" { "Wall time" }
                th scope="col" { "Against the recording" }
            } }
            tbody {
                @for a in &c.stats {
                    tr data-arm=(a.name) {
                        th scope="row" { (a.name) }
                        td { @if a.baseline && a.samples == 0 { "the recording" } @else { (a.samples) } }
                        td data-pass-rate=[a.pass_rate] {
                            @match (a.pass_rate, a.pass_interval) {
                                (Some(rate), Some((lo, hi))) => {
                                    strong { (format!("{rate:.2}")) } " (" (a.passed) " of " (a.judged) ")"
                                    br; span.meta.interval { (format!("{lo:.2}–{hi:.2}")) }
                                }
                                _ => span.meta { "not judged" },
                            }
                        }
                        td { (summary(&a.steps, count)) }
                        td { (summary(&a.tokens, whole)) }
                        td { (summary(&a.cost_usd, dollars)) }
                        td { (summary(&a.wall_ms, secs)) }
                        td data-figure="against_baseline" {
                            @if a.baseline { span.meta { "(the baseline)" } }
                            @else { (deltas_list(&verdict::deltas(&Measured::of_stats(a), &recording))) }
                        }
                    }
                }
            }
        }
        }
        h2 { "Samples" }
        div.scroll {
        table.samples {
            thead { tr {
                th scope="col" { "Arm" } th scope="col" { "Sample" } th scope="col" { "Status" }
                th scope="col" { "Verdict" } th scope="col" { "Steps" } th scope="col" { "Tokens in + out" }
                th scope="col" { "Cost" } th scope="col" { "Wall time" } th scope="col" { "Diverges at" }
                th scope="col" { "Drift" }
            } }
            tbody {
                @for a in c.arms.iter().filter(|a| a.sample.is_some()) {
                    @let o = a.outcome.as_ref();
                    tr data-arm=(a.name) data-sample=[a.sample] {
                        th scope="row" { (a.name) }
                        td { @match &a.session {
                            Some(s) => a href=(format!("/ui/sessions/{s}")) { "#" (a.sample.unwrap_or(0)) },
                            None => { "#" (a.sample.unwrap_or(0)) },
                        } }
                        td { (a.status) @if let Some(d) = &a.detail { div.detail { (d) } } }
                        td data-verdict=[o.map(|o| o.verdict.as_str())] {
                            @match o { Some(o) => {
                                strong { (o.verdict) }
                                @if !o.verify_output.is_empty() {
                                    details { summary { "verify output" } pre { (o.verify_output) } }
                                }
                            }, None => "–" }
                        }
                        td { (a.figures.steps) }
                        td { @match (a.figures.input_tokens, a.figures.output_tokens) {
                            (Some(i), Some(o)) => { (i) " + " (o) }, _ => (unmeasured()) } }
                        td { @match a.figures.cost_usd { Some(c) => (dollars(c)), None => (unmeasured()) } }
                        td { @match o { Some(o) => (secs(o.wall_ms as f64)), None => "–" } }
                        td { @match a.figures.first_divergence { Some(i) => (i), None => "–" } }
                        td { @match o.and_then(|o| o.drift.as_ref()) {
                            Some(d) => { "call " (d.call) ", turn " (d.index) div.detail { (d.detail) } },
                            None => "–",
                        } }
                    }
                }
            }
        }
        }
    }
}

/// An arm's column heading: its name, its session, where it diverges.
fn arm_heading(arm: &ArmReport) -> Markup {
    html! {
        th scope="col" data-arm=(arm.name) {
            @match &arm.session {
                Some(s) => a href=(format!("/ui/sessions/{s}")) { (arm.name) },
                None => (arm.name),
            }
            br;
            span.meta.divergence {
                @if arm.baseline { "the recording" }
                @else {
                    @match arm.figures.first_divergence {
                        Some(i) => { "diverges at " (i) }
                        None if arm.status == crate::model::ArmStatus::Run(crate::model::RunStatus::Running) => "as recorded so far",
                        None => "as recorded throughout",
                    }
                }
            }
            @if !arm.baseline {
                br;
                span.meta.calls-divergence {
                    @match arm.figures.first_tool_call_divergence {
                        Some(i) => { "other tool calls from " (i) }
                        None => "the recorded tool calls",
                    }
                }
            }
        }
    }
}

/// A figure the endpoint did not report.
fn unmeasured() -> Markup {
    html! { span.unmeasured { "not measured" } }
}

fn measured(value: Option<u64>, unit: &str) -> Markup {
    match value {
        Some(v) => html! { (v) (unit) },
        None => unmeasured(),
    }
}

pub(super) fn dollars(usd: f64) -> String {
    format!("${usd:.6}")
}

type Figure = (&'static str, &'static str, fn(&ArmReport) -> Markup);

/// The rows of the figures table: heading, key (`data-figure`), value.
const FIGURES: [Figure; 17] = [
    ("Status", "status", |a| {
        html! {
            strong { (a.status) }
            @if let Some(d) = &a.detail { div.detail { (d) } }
        }
    }),
    ("Model", "model", |a| match (&a.model, &a.endpoint) {
        (Some(m), Some(e)) => html! { (m) " " span.meta { "at " (e) } },
        (Some(m), None) => html! { (m) },
        _ => html! { "as recorded" },
    }),
    (
        "Steps (model calls)",
        "steps",
        |a| html! { (a.figures.steps) },
    ),
    (
        "Turns after the fork point",
        "turns",
        |a| html! { (a.figures.turns) },
    ),
    ("Tool calls", "tool_calls", |a| {
        html! {
            (a.figures.tool_calls)
            @if !a.figures.tool_names.is_empty() {
                ": " (a.figures.tool_names.join(" → "))
            }
        }
    }),
    (
        "Answered from the recording",
        "answered_from_recording",
        |a| measured(a.figures.answered_from_recording, ""),
    ),
    ("Unanswered tool calls", "unanswered_tool_calls", |a| {
        measured(a.figures.unanswered_tool_calls, "")
    }),
    ("Input tokens", "input_tokens", |a| {
        measured(a.figures.input_tokens, "")
    }),
    ("Output tokens", "output_tokens", |a| {
        measured(a.figures.output_tokens, "")
    }),
    ("Cached input tokens", "cached_tokens", |a| {
        measured(a.figures.cached_tokens, "")
    }),
    ("Latency", "latency_ms", |a| {
        measured(a.figures.latency_ms, " ms")
    }),
    ("Cost", "cost", |a| {
        match (a.figures.cost, a.figures.cost_usd) {
            (CostStatus::Priced, Some(usd)) => html! { (dollars(usd)) },
            (CostStatus::Unpriced, _) => html! { "unpriced" },
            _ => unmeasured(),
        }
    }),
    ("Finish reasons", "finish_reasons", |a| {
        if !a.figures.finish_reasons.is_empty() {
            html! { (a.figures.finish_reasons.join(", ")) }
        } else if a.baseline {
            unmeasured()
        } else {
            html! { "none" }
        }
    }),
    ("First divergence", "first_divergence", |a| {
        match (a.baseline, a.figures.first_divergence) {
            (true, _) => html! { "(the baseline)" },
            (false, Some(i)) => html! { "turn " (i) },
            (false, None) => html! { "none: as recorded" },
        }
    }),
    ("First other words", "first_text_divergence", |a| {
        match (a.baseline, a.figures.first_text_divergence) {
            (true, _) => html! { "(the baseline)" },
            (false, Some(i)) => html! { "turn " (i) },
            (false, None) => html! { "none: as recorded" },
        }
    }),
    (
        "First other tool call",
        "first_tool_call_divergence",
        |a| match (a.baseline, a.figures.first_tool_call_divergence) {
            (true, _) => html! { "(the baseline)" },
            (false, Some(i)) => html! { "turn " (i) },
            (false, None) => html! { "none: the recorded calls" },
        },
    ),
    ("Reached the end", "reached_end", |a| {
        html! { @if a.figures.reached_end { "yes" } @else { "no" } }
    }),
];

/// The figures, one column per arm (the baseline first), one row per figure; first each
/// arm against the baseline.
fn figures_table(c: &Comparison) -> Markup {
    let recording = c
        .arms
        .iter()
        .find(|a| a.baseline)
        .map(Measured::of_arm)
        .unwrap_or_default();
    html! {
        div.scroll {
        table.compare.figures #figures {
            thead { tr { th scope="col" { "Figure" } @for arm in &c.arms { (arm_heading(arm)) } } }
            tbody {
                tr data-figure="against_baseline" {
                    th scope="row" { "Against the recording" }
                    @for arm in &c.arms {
                        td data-arm=(arm.name) data-figure="against_baseline" {
                            @if arm.baseline { "(the baseline)" }
                            @else { (deltas_list(&verdict::deltas(&Measured::of_arm(arm), &recording))) }
                        }
                    }
                }
                @for (label, key, value) in FIGURES {
                    tr data-figure=(key) {
                        th scope="row" { (label) }
                        @for arm in &c.arms {
                            td class=[is_number(key).then_some("number")] data-arm=(arm.name) data-figure=(key) { (value(arm)) }
                        }
                    }
                }
            }
        }
        }
    }
}

fn is_number(key: &str) -> bool {
    matches!(
        key,
        "steps"
            | "turns"
            | "answered_from_recording"
            | "unanswered_tool_calls"
            | "input_tokens"
            | "output_tokens"
            | "cached_tokens"
            | "latency_ms"
            | "cost"
    )
}

/// The turns from the fork point, one row per index, one column per arm: the baseline's
/// recorded turns (`after`), then each arm's, its first divergence marked.
fn turns_table(c: &Comparison, after: &[Turn]) -> Markup {
    let arms: Vec<&ArmReport> = c.arms.iter().filter(|a| !a.baseline).collect();
    // The baseline's turns as every diff shows them (tool calls canonical); the
    // recording itself where no arm's diff reaches.
    let mut baseline: BTreeMap<u64, &Cell> = BTreeMap::new();
    for row in arms.iter().flat_map(|a| &a.diff) {
        if let Some(cell) = &row.baseline {
            baseline.entry(row.index).or_insert(cell);
        }
    }
    let end = arms
        .iter()
        .flat_map(|a| a.diff.last().map(|r| r.index + 1))
        .chain(after.last().map(|t| t.index + 1))
        .max()
        .unwrap_or(c.at);
    html! {
        div.scroll {
        table.compare.turns #turns {
            thead { tr { th scope="col" { "Turn" } @for arm in &c.arms { (arm_heading(arm)) } } }
            tbody {
                @for i in c.at..end {
                    tr data-index=(i) {
                        th scope="row" { "#" (i) }
                        td.cell data-arm=(BASELINE) {
                            @match (baseline.get(&i), after.iter().find(|t| t.index == i)) {
                                (Some(cell), _) => (cell_markup(cell, false, None)),
                                (None, Some(turn)) => (turn_markup(turn)),
                                (None, None) => {}
                            }
                        }
                        @for arm in &arms { (arm_cell(arm, i)) }
                    }
                }
            }
        }
        }
        @if end == c.at { p.meta { "No turns after the fork point yet." } }
    }
}

/// Arm `arm`'s turn at index `i` (empty when it has none), marked where it diverges and
/// where its tool calls first differ, the words it changed from the baseline's marked.
fn arm_cell(arm: &ArmReport, i: u64) -> Markup {
    let row = arm.diff.iter().find(|r| r.index == i);
    let diverges = arm.figures.first_divergence == Some(i);
    let calls = arm.figures.first_tool_call_divergence == Some(i);
    let same = row.is_some_and(|r| r.same);
    let changed = row.and_then(|r| match (&r.baseline, &r.arm) {
        (Some(b), Some(a)) if b.content != a.content && !a.content.is_empty() => {
            word_diff(&b.content, &a.content).map(|(_, ours)| ours)
        }
        _ => None,
    });
    html! {
        td.cell.diverges[diverges].calls-diverge[calls] data-arm=(arm.name) {
            @if diverges { p.marker { "◆ diverges here" } }
            @if calls { p.marker.calls { "◆ first other tool call" } }
            @match row.and_then(|r| r.arm.as_ref()) {
                Some(cell) => (cell_markup(cell, same, changed.as_deref())),
                None => {
                    @if diverges { span.meta { "no turn: the arm ended before this one" } }
                    @else if calls { span.meta { "no call: the recording makes one here" } }
                }
            }
        }
    }
}

/// A turn as a diff shows it: role, kind, content (its words marked where `changed`
/// has them), tool calls.
fn cell_markup(cell: &Cell, same: bool, changed: Option<&[(bool, String)]>) -> Markup {
    html! {
        div.meta {
            span.role { (cell.role) }
            @if cell.kind != "message" { " · " (cell.kind) }
            @if same { " · " span.same { "as recorded" } }
        }
        @match changed {
            Some(runs) => div.content { div.text.words {
                @for (changed, text) in runs {
                    @if *changed { span.added { (text) } } @else { (text) }
                }
            } },
            None => @if cell.role == "tool" { div.data { (html::content(&cell.content)) } } @else { (html::content(&cell.content)) },
        }
        @if !cell.tool_calls.is_empty() {
            ul.calls { @for call in &cell.tool_calls { li { code { "→\u{a0}" (call) } } } }
        }
    }
}

/// A recorded turn no arm's diff shows.
fn turn_markup(turn: &Turn) -> Markup {
    html! {
        div.meta { span.role { (turn.role.as_str()) } }
        @if turn.role == crate::model::Role::Tool { div.data { (html::content(&turn.content)) } }
        @else { (html::content(&turn.content)) }
        @if let Some(calls) = &turn.tool_calls { (html::tool_calls(calls)) }
    }
}

/// `POST /ui/comparisons/{id}/cancel`: stops the running arms (each keeps the steps it
/// committed).
pub(super) async fn cancel(
    state: Shared,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Page {
    let state = state.0;
    let f: TokenForm = shell::form(&state, &body)?;
    shell::may_write(&state, &headers, &f.token)?;
    let c = shell::write(&state, move |store| store.cancel_comparison(&id)).await?;
    Ok(Redirect::to(&format!("/ui/comparisons/{}", c.comparison)).into_response())
}
