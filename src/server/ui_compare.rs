//! The web UI's what-if comparisons: the form that begins one from a turn (the models
//! to compare, among the server's model endpoints; an estimate first, as the what-if
//! form does), and a comparison's page: its figures with the arms as columns, then the
//! turns side by side from the fork point, each arm's first divergence marked.
//!
//! Comparisons run in the background, outside the request slots (an arm may take
//! minutes); the page reloads itself each second while any arm runs.

// A handler's error is the page itself (see `ui.rs`).
#![allow(clippy::result_large_err)]

use super::ui::{self, Page};
use super::{writing, ApiError, AppState, Shared};
use crate::html::{self, Links};
use crate::model::{SessionId, SessionInfo, Turn};
use crate::whatif::{
    Arm, ArmReport, Cell, CompareOptions, ComparePlan, Comparison, CostStatus, Price, BASELINE,
    DEFAULT_MAX_STEPS,
};
use axum::body::Bytes;
use axum::extract::{Path, Query};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use maud::{html, Markup};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// How many arms the form offers.
const ARM_SLOTS: usize = 4;

pub(super) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/ui/sessions/{id}/compare", get(compare_form).post(compare))
        .route("/ui/comparisons/{id}", get(comparison))
        .route("/ui/comparisons/{id}/cancel", post(cancel))
}

/// One arm of the form, as typed.
#[derive(Clone, Debug, Default)]
struct ArmFields {
    chosen: bool,
    model: String,
    endpoint: String,
    /// `IN/OUT` or `IN/OUT/CACHED`, US dollars per million tokens.
    price: String,
}

/// The compare form, as typed: kept whole, so that an error or the estimate shows it
/// back unchanged.
#[derive(Clone, Debug, Default)]
struct Fields {
    at: String,
    arms: Vec<ArmFields>,
    max_steps: String,
    max_tokens: String,
    budget: String,
    tools: String,
    again: bool,
    /// Set: begin the comparison; empty: show the estimate.
    confirm: bool,
    /// Set: show the form again with these values.
    edit: bool,
    token: String,
}

impl Fields {
    /// The form as first shown: the session's own models ticked, on the endpoints in
    /// the order the server offers them.
    fn first(at: u64, info: &SessionInfo, endpoints: &[String]) -> Self {
        let arms = (0..ARM_SLOTS)
            .map(|n| {
                let model = info.models.get(n).cloned().unwrap_or_default();
                ArmFields {
                    chosen: !model.is_empty(),
                    model,
                    endpoint: endpoints[n % endpoints.len()].clone(),
                    price: String::new(),
                }
            })
            .collect();
        Self {
            at: at.to_string(),
            arms,
            max_steps: DEFAULT_MAX_STEPS.to_string(),
            ..Default::default()
        }
    }

    /// A posted form: fields named `arm-N`, `model-N`, `endpoint-N`, `price-N` for
    /// arm N (1-based), and the shared ones; others are ignored.
    fn parse(body: &Bytes) -> Result<Self, String> {
        let pairs: Vec<(String, String)> =
            serde_urlencoded::from_bytes(body).map_err(|e| e.to_string())?;
        let mut f = Fields {
            arms: vec![ArmFields::default(); ARM_SLOTS],
            ..Default::default()
        };
        for (key, value) in pairs {
            match key.as_str() {
                "at" => f.at = value,
                "max_steps" => f.max_steps = value,
                "max_tokens" => f.max_tokens = value,
                "budget" => f.budget = value,
                "tools" => f.tools = value,
                "again" => f.again = !value.is_empty(),
                "confirm" => f.confirm = !value.is_empty(),
                "edit" => f.edit = !value.is_empty(),
                "token" => f.token = value,
                _ => {
                    let Some((field, n)) = key.rsplit_once('-') else {
                        continue;
                    };
                    let Some(arm) = n
                        .parse::<usize>()
                        .ok()
                        .and_then(|n| f.arms.get_mut(n.checked_sub(1)?))
                    else {
                        continue;
                    };
                    match field {
                        "arm" => arm.chosen = !value.is_empty(),
                        "model" => arm.model = value,
                        "endpoint" => arm.endpoint = value,
                        "price" => arm.price = value,
                        _ => {}
                    }
                }
            }
        }
        Ok(f)
    }

    /// The comparison these fields ask for, checked against the endpoints the server
    /// offers; the store checks the rest (fork point, names, remote rules, budget).
    fn options(&self, offered: &[String], allow_remote: bool) -> Result<CompareOptions, ApiError> {
        let bad = ApiError::bad_request;
        let at = self
            .at
            .trim()
            .parse()
            .map_err(|_| bad(format!("turn index {:?} is not a whole number", self.at)))?;
        let max_tokens = match ui::given(&self.max_tokens) {
            None => None,
            Some(text) => Some(text.parse::<u32>().map_err(|_| {
                bad(format!(
                    "max tokens {text:?} is not a whole number above zero"
                ))
            })?),
        };
        let tools = match ui::given(&self.tools) {
            None => None,
            Some(text) => match serde_json::from_str::<serde_json::Value>(&text) {
                Ok(tools) if tools.is_array() => Some(tools),
                Ok(_) => {
                    return Err(bad(
                        "the tools are not a JSON array of tool definitions".into()
                    ))
                }
                Err(e) => return Err(bad(format!("the tools are not JSON: {e}"))),
            },
        };
        let mut arms = Vec::new();
        let mut prices: BTreeMap<String, Price> = BTreeMap::new();
        for (n, typed) in self.arms.iter().enumerate().filter(|(_, a)| a.chosen) {
            let n = n + 1;
            let model = ui::given(&typed.model)
                .ok_or_else(|| bad(format!("arm {n} is ticked but names no model")))?;
            let endpoint = ui::given(&typed.endpoint).unwrap_or_else(|| offered[0].clone());
            if !offered.contains(&endpoint) {
                return Err(not_offered(&endpoint, offered));
            }
            if let Some(text) = ui::given(&typed.price) {
                let (_, price) = Price::parse(&format!("{model}={text}")).map_err(|_| {
                    bad(format!(
                        "arm {n}: price {text:?} is not IN/OUT or IN/OUT/CACHED, in US \
                         dollars per million tokens"
                    ))
                })?;
                if prices
                    .insert(model.clone(), price)
                    .is_some_and(|p| p != price)
                {
                    return Err(bad(format!(
                        "model {model:?} is given two different prices: give it one"
                    )));
                }
            }
            arms.push(Arm {
                model,
                endpoint: Some(endpoint),
                tools: tools.clone(),
                max_tokens,
                ..Default::default()
            });
        }
        if arms.is_empty() {
            return Err(bad(
                "no model is ticked: tick at least one arm to compare".into()
            ));
        }
        let max_steps = match ui::given(&self.max_steps) {
            None => None,
            Some(text) => Some(
                text.parse::<u64>()
                    .map_err(|_| bad(format!("max steps {text:?} is not a whole number")))?,
            ),
        };
        let budget_usd = match ui::given(&self.budget) {
            None => None,
            Some(text) => Some(
                text.trim_start_matches('$')
                    .parse::<f64>()
                    .ok()
                    .filter(|b| b.is_finite())
                    .ok_or_else(|| bad(format!("budget {text:?} is not an amount of dollars")))?,
            ),
        };
        Ok(CompareOptions {
            at,
            arms,
            max_steps,
            prices,
            budget_usd,
            allow_remote,
            again: self.again,
            ..Default::default()
        })
    }

    /// Every field but the token, as hidden inputs (the estimate's confirm form).
    fn hidden(&self) -> Markup {
        html! {
            input type="hidden" name="at" value=(self.at);
            @for (n, arm) in self.arms.iter().enumerate() {
                @let n = n + 1;
                @if arm.chosen { input type="hidden" name=(format!("arm-{n}")) value="1"; }
                input type="hidden" name=(format!("model-{n}")) value=(arm.model);
                input type="hidden" name=(format!("endpoint-{n}")) value=(arm.endpoint);
                input type="hidden" name=(format!("price-{n}")) value=(arm.price);
            }
            input type="hidden" name="max_steps" value=(self.max_steps);
            input type="hidden" name="max_tokens" value=(self.max_tokens);
            input type="hidden" name="budget" value=(self.budget);
            input type="hidden" name="tools" value=(self.tools);
            @if self.again { input type="hidden" name="again" value="1"; }
        }
    }
}

/// The what-if form's refusal of an endpoint the server does not offer.
pub(super) fn not_offered(endpoint: &str, offered: &[String]) -> ApiError {
    ApiError::new(
        StatusCode::FORBIDDEN,
        "endpoint_not_allowed",
        format!(
            "endpoint {endpoint:?} is not one this server offers ({}); start it with \
             --model-endpoint to add one",
            offered.join(", ")
        ),
    )
}

#[derive(Deserialize, Default)]
struct AtQuery {
    #[serde(default)]
    at: String,
}

/// The session, and the last turn of the context at `at` when `at` is a valid fork
/// point (`1..=length`).
async fn session_at(
    state: &Arc<AppState>,
    id: &SessionId,
    at: Option<u64>,
) -> Result<(SessionInfo, Option<Turn>), Response> {
    let id = id.clone();
    ui::read(state, move |store| {
        let info = store.info(&id)?;
        let context = match at {
            Some(at) if (1..=info.length).contains(&at) => {
                store.load_range(&id, at - 1, at - 1)?.pop()
            }
            _ => None,
        };
        Ok((info, context))
    })
    .await
}

/// `GET /ui/sessions/{id}/compare?at=K`: the form that compares models answering turn
/// K onwards.
async fn compare_form(state: Shared, Path(id): Path<String>, Query(q): Query<AtQuery>) -> Page {
    let state = state.0;
    let id = ui::session_id(&state, &id)?;
    let at = q.at.trim().parse::<u64>().map_err(|_| {
        ui::error_page(
            &state,
            ApiError::bad_request(format!("turn index {:?} is not a whole number", q.at)),
        )
    })?;
    let (info, context) = session_at(&state, &id, Some(at)).await?;
    if context.is_none() {
        return Err(ui::error_page(
            &state,
            crate::Error::IndexOutOfRange {
                session: id.to_string(),
                index: at.into(),
                valid: format!(
                    "1..={} (the models need at least one turn of context)",
                    info.length
                ),
            }
            .into(),
        ));
    }
    let fields = Fields::first(at, &info, &ui::endpoints(&state));
    Ok(form_page(
        &state,
        StatusCode::OK,
        &info,
        context.as_ref(),
        &fields,
        None,
    ))
}

/// `POST /ui/sessions/{id}/compare`: the estimate (nothing sent, nothing written), then,
/// confirmed, the comparison begun and run in the background, followed on its page.
/// Errors show on the form, with what was typed.
async fn compare(state: Shared, Path(id): Path<String>, headers: HeaderMap, body: Bytes) -> Page {
    let state = state.0;
    let id = ui::session_id(&state, &id)?;
    let fields = Fields::parse(&body).map_err(|e| {
        ui::error_page(
            &state,
            ApiError::bad_request(format!("the form does not parse: {e}")),
        )
    })?;
    let (info, context) = session_at(&state, &id, fields.at.trim().parse().ok()).await?;
    let failed = |error: ApiError| {
        form_page(
            &state,
            error.status,
            &info,
            context.as_ref(),
            &fields,
            Some(&error),
        )
    };
    if fields.edit {
        return Ok(form_page(
            &state,
            StatusCode::OK,
            &info,
            context.as_ref(),
            &fields,
            None,
        ));
    }
    ui::token_given(&state, &headers, &fields.token).map_err(failed)?;
    let options = fields
        .options(&ui::endpoints(&state), state.config.allow_remote_models)
        .map_err(failed)?;
    let session = id.clone();
    if !fields.confirm {
        let plan = writing(&state, move |s| s.plan_comparison(&session, &options))
            .await
            .map_err(failed)?;
        return Ok(estimate_page(&state, &plan, &fields));
    }
    let begun = writing(&state, move |s| s.begin_comparison(&session, &options))
        .await
        .map_err(failed)?;
    // An identical earlier comparison is shown as it is: it ran, or runs, already.
    if !begun.reused {
        let store = Arc::clone(&state.store);
        let id = begun.comparison.clone();
        tokio::task::spawn_blocking(move || {
            // A run's own failure is stored on it; this is one before any run began.
            if let Err(e) = store.run_comparison(&id, 1) {
                eprintln!("comparison {id} stopped: {e}");
            }
        });
    }
    let to = format!(
        "/ui/comparisons/{}{}",
        begun.comparison,
        if begun.reused { "?reused=1" } else { "" }
    );
    Ok(Redirect::to(&to).into_response())
}

/// The compare form, filled with `fields`, and the error that sent it back if any.
fn form_page(
    state: &AppState,
    status: StatusCode,
    info: &SessionInfo,
    context: Option<&Turn>,
    fields: &Fields,
    error: Option<&ApiError>,
) -> Response {
    let id = &info.session;
    let offered = ui::endpoints(state);
    let at = fields.at.trim();
    let body = html! {
        h1 { "Compare models on " a href=(format!("/ui/sessions/{id}")) { (info.branch) } " from turn " (at) }
        p { "Each ticked model answers turn " (at) " from the exact context before it, then \
             carries on through the rest of the recording: its tool calls are answered from the \
             recorded results (never executed), and the recorded user turns are fed in order. \
             The recording itself is the baseline." }
        @if let Some(turn) = context {
            p.meta { "The context ends with turn " (turn.index) " (" (turn.role.as_str()) "): "
                (html::first_line(&turn.content, 120)) }
        }
        @if let Some(e) = error {
            p.error role="alert" data-code=(e.code) { (e.message) }
            p.meta { "Nothing was changed." }
        }
        form.compare method="post" action=(format!("/ui/sessions/{id}/compare")) {
            input type="hidden" name="at" value=(fields.at);
            fieldset.arms {
                legend { "Models to compare" }
                @for (n, arm) in fields.arms.iter().enumerate() {
                    (arm_fieldset(n + 1, arm, &offered))
                }
            }
            div.form-grid {
                label for="compare-max-steps" { "Max steps per arm" }
                input #compare-max-steps name="max_steps" type="number" min="1" value=(fields.max_steps);
                label for="compare-max-tokens" { "Max tokens per answer" }
                input #compare-max-tokens name="max_tokens" type="number" min="1"
                    value=(fields.max_tokens) placeholder="the endpoint's";
                label for="compare-budget" { "Budget (US dollars)" }
                input #compare-budget name="budget" inputmode="decimal" value=(fields.budget)
                    placeholder="no cap (required off this machine)";
                label for="compare-tools" { "Tools (JSON)" }
                textarea #compare-tools name="tools"
                    placeholder="none offered: the models answer in text" { (fields.tools) }
                label for="compare-again" { "Run again" }
                span {
                    input #compare-again name="again" type="checkbox" value="1" checked[fields.again];
                    " even if this exact comparison ran before"
                }
                (ui::token_field("compare-token"))
                button type="submit" { "Estimate the comparison" }
            }
        }
    };
    ui::page(state, status, &format!("compare {id} from {at}"), body)
}

/// Arm `n` of the form: ticked or not, its model, endpoint and price.
fn arm_fieldset(n: usize, arm: &ArmFields, offered: &[String]) -> Markup {
    let field = |name: &str| format!("compare-{name}-{n}");
    html! {
        fieldset.arm {
            legend {
                input id=(field("arm")) name=(format!("arm-{n}")) type="checkbox" value="1" checked[arm.chosen];
                " " label for=(field("arm")) { "Arm " (n) }
            }
            label for=(field("model")) { "Model" }
            input id=(field("model")) name=(format!("model-{n}")) value=(arm.model)
                placeholder="a model the endpoint serves";
            label for=(field("endpoint")) { "Endpoint" }
            select id=(field("endpoint")) name=(format!("endpoint-{n}")) {
                @for e in offered { option value=(e) selected[*e == arm.endpoint] { (e) } }
            }
            label for=(field("price")) { "Price" }
            input id=(field("price")) name=(format!("price-{n}")) value=(arm.price)
                placeholder="IN/OUT in $ per million tokens (optional)";
        }
    }
}

/// The dry run's estimate, arm by arm, and the button that begins the comparison.
fn estimate_page(state: &AppState, plan: &ComparePlan, fields: &Fields) -> Response {
    let id = &plan.session;
    let body = html! {
        h1 { "Comparison estimate for " a href=(format!("/ui/sessions/{id}")) { (id) } " from turn " (plan.at) }
        p.meta { "Nothing has been sent or written yet." }
        table.plan {
            thead { tr {
                th scope="col" { "Arm" } th scope="col" { "Model" } th scope="col" { "Endpoint" }
                th scope="col" { "Steps (at most)" } th scope="col" { "Input tokens per call" }
                th scope="col" { "Output tokens per call" } th scope="col" { "Estimated cost" }
            } }
            tbody {
                @for arm in &plan.arms {
                    tr {
                        th scope="row" { (arm.name) }
                        td { (arm.model) }
                        td { (arm.endpoint) @if arm.remote { " (off this machine)" } }
                        td.number { (arm.estimated_steps) }
                        td.number { (arm.estimated_input_tokens_per_call) }
                        td.number { (arm.estimated_output_tokens_per_call) }
                        td.number { @match arm.estimated_usd { Some(usd) => (dollars(usd)), None => "unpriced" } }
                    }
                }
            }
        }
        dl.facts.estimate {
            dt { "Max steps per arm" } dd { (plan.max_steps) }
            dt { "Estimated total" } dd {
                @if plan.arms.iter().any(|a| a.estimated_usd.is_some()) {
                    (dollars(plan.estimated_usd)) " (the priced arms)"
                } @else { "unpriced: no arm has a price" }
            }
            dt { "Budget" } dd { @match plan.budget_usd { Some(b) => (dollars(b)), None => "no cap" } }
            dt { "Estimated how" } dd.meta { (plan.estimate_method) }
        }
        form.write method="post" action=(format!("/ui/sessions/{id}/compare")) {
            (fields.hidden())
            (ui::token_field("compare-confirm-token"))
            button type="submit" name="confirm" value="1" { "Run the comparison" }
            button type="submit" name="edit" value="1" { "Change the choices" }
        }
    };
    ui::page(
        state,
        StatusCode::OK,
        &format!("compare {id} from {}: estimate", plan.at),
        body,
    )
}

#[derive(Deserialize, Default)]
struct ShownQuery {
    /// Set when the form found an identical earlier comparison.
    #[serde(default)]
    reused: String,
}

/// `GET /ui/comparisons/{id}`: the figures (arms as columns, the baseline first), then
/// the turns from the fork point side by side, the shared prefix folded. Reloads itself
/// each second while an arm runs.
async fn comparison(state: Shared, Path(id): Path<String>, Query(q): Query<ShownQuery>) -> Page {
    let state = state.0;
    let (c, info, recorded) = ui::read(&state, move |store| {
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
    let body = html! {
        h1 { "Comparison on " a href=(format!("/ui/sessions/{}", c.session)) { (info.branch) } " from turn " (c.at) }
        p.meta { "Comparison " code { (c.comparison) } }
        p { "Status: " strong #comparison-status data-status=(c.status) { (c.status) }
            @if running { span.meta { " (this page reloads each second)" } } }
        @if !q.reused.is_empty() {
            p.meta { "This exact comparison had been asked before: here it is. Tick \
                      “Run again” on the form to ask the models anew." }
        }
        dl.facts {
            dt { "Session" } dd { a href=(format!("/ui/sessions/{}", c.session)) { (info.branch) }
                " " span.meta { "(" (c.session) ")" } " from turn " (c.at) }
            @if let Some(at) = &c.created_at { dt { "Created" } dd { (at) } }
            dt { "Max steps per arm" } dd { (c.max_steps) }
            dt { "Budget" } dd { @match c.budget_usd { Some(b) => (dollars(b)), None => "no cap" } }
            dt { "Charged so far" } dd { (dollars(c.charged_usd)) }
        }
        @if running && state.config.token.is_some() {
            form.write method="post" action=(format!("/ui/comparisons/{}/cancel", c.comparison)) {
                (ui::token_field("cancel-comparison-token"))
                button type="submit" { "Cancel the running arms" }
            }
        }
        h2 { "Figures" }
        (figures_table(&c))
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
    let mut response = ui::page(
        &state,
        StatusCode::OK,
        &format!("comparison {}", c.comparison),
        body,
    );
    if running {
        response
            .headers_mut()
            .insert(header::REFRESH, HeaderValue::from_static("1"));
    }
    Ok(response)
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

fn dollars(usd: f64) -> String {
    format!("${usd:.6}")
}

type Figure = (&'static str, &'static str, fn(&ArmReport) -> Markup);

/// The rows of the figures table: heading, key (`data-figure`), value.
const FIGURES: [Figure; 15] = [
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
    ("Reached the end", "reached_end", |a| {
        html! { @if a.figures.reached_end { "yes" } @else { "no" } }
    }),
];

/// The figures, one column per arm (the baseline first), one row per figure.
fn figures_table(c: &Comparison) -> Markup {
    html! {
        table.compare.figures #figures {
            thead { tr { th scope="col" { "Figure" } @for arm in &c.arms { (arm_heading(arm)) } } }
            tbody {
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
        table.compare.turns #turns {
            thead { tr { th scope="col" { "Turn" } @for arm in &c.arms { (arm_heading(arm)) } } }
            tbody {
                @for i in c.at..end {
                    tr data-index=(i) {
                        th scope="row" { "#" (i) }
                        td.cell data-arm=(BASELINE) {
                            @match (baseline.get(&i), after.iter().find(|t| t.index == i)) {
                                (Some(cell), _) => (cell_markup(cell, false)),
                                (None, Some(turn)) => (turn_markup(turn)),
                                (None, None) => {}
                            }
                        }
                        @for arm in &arms { (arm_cell(arm, i)) }
                    }
                }
            }
        }
        @if end == c.at { p.meta { "No turns after the fork point yet." } }
    }
}

/// Arm `arm`'s turn at index `i` (empty when it has none), marked where it diverges.
fn arm_cell(arm: &ArmReport, i: u64) -> Markup {
    let row = arm.diff.iter().find(|r| r.index == i);
    let diverges = arm.figures.first_divergence == Some(i);
    let same = row.is_some_and(|r| r.same);
    html! {
        td.cell.diverges[diverges] data-arm=(arm.name) {
            @if diverges { p.marker { "◆ diverges here" } }
            @match row.and_then(|r| r.arm.as_ref()) {
                Some(cell) => (cell_markup(cell, same)),
                None => { @if diverges { span.meta { "no turn: the arm ended before this one" } } }
            }
        }
    }
}

/// A turn as a diff shows it: role, kind, content, tool calls.
fn cell_markup(cell: &Cell, same: bool) -> Markup {
    html! {
        div.meta {
            span.role { (cell.role) }
            @if cell.kind != "message" { " · " (cell.kind) }
            @if same { " · " span.same { "as recorded" } }
        }
        (html::content(&cell.content))
        @if !cell.tool_calls.is_empty() {
            ul.calls { @for call in &cell.tool_calls { li { code { "→\u{a0}" (call) } } } }
        }
    }
}

/// A recorded turn no arm's diff shows.
fn turn_markup(turn: &Turn) -> Markup {
    html! {
        div.meta { span.role { (turn.role.as_str()) } }
        (html::content(&turn.content))
        @if let Some(calls) = &turn.tool_calls { (html::tool_calls(calls)) }
    }
}

#[derive(Deserialize)]
struct TokenForm {
    #[serde(default)]
    token: String,
}

/// `POST /ui/comparisons/{id}/cancel`: stops the running arms (each keeps the steps it
/// committed).
async fn cancel(state: Shared, Path(id): Path<String>, headers: HeaderMap, body: Bytes) -> Page {
    let state = state.0;
    let f: TokenForm = ui::form(&state, &body)?;
    ui::may_write(&state, &headers, &f.token)?;
    let c = ui::write(&state, move |store| store.cancel_comparison(&id)).await?;
    Ok(Redirect::to(&format!("/ui/comparisons/{}", c.comparison)).into_response())
}
