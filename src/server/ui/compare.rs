//! The web UI's compare form: the models to compare from a turn, among the server's
//! model endpoints, and an estimate first, as the what-if form does.
//!
//! Comparisons run in the background, outside the request slots (an arm may take
//! minutes); the comparison's page (`comparison.rs`) follows them.

use super::comparison::dollars;
use super::shell::{self, not_offered, Page};
use crate::html::{self};
use crate::model::{SessionId, SessionInfo, Turn};
use crate::server::{writing, ApiError, AppState, Shared};
use crate::whatif::{Arm, CompareOptions, ComparePlan, Price, DEFAULT_MAX_STEPS};
use axum::body::Bytes;
use axum::extract::{Path, Query};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// How many arms the form offers.
const ARM_SLOTS: usize = 4;

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
    /// the order the server offers them, offering the tools the recording called.
    fn first(at: u64, info: &SessionInfo, endpoints: &[String], tools: Option<&Value>) -> Self {
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
            tools: tools
                .and_then(|t| serde_json::to_string_pretty(t).ok())
                .unwrap_or_default(),
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
        let max_tokens = match shell::given(&self.max_tokens) {
            None => None,
            Some(text) => Some(text.parse::<u32>().map_err(|_| {
                bad(format!(
                    "max tokens {text:?} is not a whole number above zero"
                ))
            })?),
        };
        let tools = match shell::given(&self.tools) {
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
            let model = shell::given(&typed.model)
                .ok_or_else(|| bad(format!("arm {n} is ticked but names no model")))?;
            let endpoint = shell::given(&typed.endpoint).unwrap_or_else(|| offered[0].clone());
            if !offered.contains(&endpoint) {
                return Err(not_offered(&endpoint, offered));
            }
            if let Some(text) = shell::given(&typed.price) {
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
        let max_steps = match shell::given(&self.max_steps) {
            None => None,
            Some(text) => Some(
                text.parse::<u64>()
                    .map_err(|_| bad(format!("max steps {text:?} is not a whole number")))?,
            ),
        };
        let budget_usd = match shell::given(&self.budget) {
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

#[derive(Deserialize, Default)]
pub(super) struct AtQuery {
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
    shell::read(state, move |store| {
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
pub(super) async fn compare_form(
    state: Shared,
    Path(id): Path<String>,
    Query(q): Query<AtQuery>,
) -> Page {
    let state = state.0;
    let id = shell::session_id(&state, &id)?;
    let at = q.at.trim().parse::<u64>().map_err(|_| {
        shell::error_page(
            &state,
            ApiError::bad_request(format!("turn index {:?} is not a whole number", q.at)),
        )
    })?;
    let (info, context) = session_at(&state, &id, Some(at)).await?;
    if context.is_none() {
        let error = crate::Error::IndexOutOfRange {
            session: id.to_string(),
            index: at.into(),
            valid: format!(
                "1..={} (the models need at least one turn of context)",
                info.length
            ),
        };
        let mut error = ApiError::from(error);
        error.message = naming(&error.message, &info);
        return Err(shell::error_page(&state, error));
    }
    let session = id.clone();
    let tools = shell::read(&state, move |store| {
        Ok(crate::whatif::recorded_tools(&store.load(&session, None)?))
    })
    .await?;
    let fields = Fields::first(at, &info, &shell::endpoints(&state), tools.as_ref());
    Ok(form_page(&state, &info, context.as_ref(), &fields, None))
}

/// `POST /ui/sessions/{id}/compare`: the estimate (nothing sent, nothing written), then,
/// confirmed, the comparison begun and run in the background, followed on its page.
/// Errors show on the form, with what was typed.
pub(super) async fn compare(
    state: Shared,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Page {
    let state = state.0;
    let id = shell::session_id(&state, &id)?;
    let fields = Fields::parse(&body).map_err(|e| {
        shell::error_page(
            &state,
            ApiError::bad_request(format!("the form does not parse: {e}")),
        )
    })?;
    let (info, context) = session_at(&state, &id, fields.at.trim().parse().ok()).await?;
    let failed =
        |error: ApiError| form_page(&state, &info, context.as_ref(), &fields, Some(&error));
    if fields.edit {
        return Ok(form_page(&state, &info, context.as_ref(), &fields, None));
    }
    shell::token_given(&state, &headers, &fields.token).map_err(failed)?;
    let options = fields
        .options(&shell::endpoints(&state), state.config.allow_remote_models)
        .map_err(failed)?;
    let session = id.clone();
    if !fields.confirm {
        let plan = writing(&state, move |s| s.plan_comparison(&session, &options))
            .await
            .map_err(failed)?;
        return Ok(estimate_page(&state, &info, &plan, &fields));
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

/// The compare form, filled with `fields`, and the error that sent it back if any (the
/// page then has its status).
fn form_page(
    state: &AppState,
    info: &SessionInfo,
    context: Option<&Turn>,
    fields: &Fields,
    error: Option<&ApiError>,
) -> Response {
    let id = &info.session;
    let name = info.title.as_deref().unwrap_or(&info.branch);
    let offered = shell::endpoints(state);
    let at = fields.at.trim();
    let body = html! {
        h1 { "Compare models on " a href=(format!("/ui/sessions/{id}")) { (name) } " from turn " (at) }
        p { "Each ticked model answers turn " (at) " from the exact context before it, then \
             carries on through the rest of the recording: its tool calls are answered from the \
             recorded results (never executed), and the recorded user turns are fed in order. \
             The recording itself is the baseline." }
        @if let Some(turn) = context {
            p.meta { "The context ends with turn " (turn.index) " (" (turn.role.as_str()) "): "
                (html::first_line(&turn.content, 120)) }
        }
        @if let Some(e) = error {
            p.error role="alert" data-code=(e.code) { (naming(&e.message, info)) }
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
                textarea #compare-tools name="tools" aria-describedby="compare-tools-note"
                    placeholder="none offered: the models answer in text" { (fields.tools) }
                p.meta.note #compare-tools-note { "OpenAI tool definitions. The form offers the \
                    tools the recording called, each argument typed from what it was given, so \
                    that a model can call what the agent called; empty it to offer none." }
                label for="compare-again" { "Run again" }
                span {
                    input #compare-again name="again" type="checkbox" value="1" checked[fields.again];
                    " even if this exact comparison ran before"
                }
                (shell::token_field("compare-token"))
                button type="submit" { "Estimate the comparison" }
            }
        }
    };
    let status = error.map_or(StatusCode::OK, |e| e.status);
    shell::page(
        state,
        status,
        &format!("compare models on {name} from {at}"),
        body,
    )
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

/// An error's `message` naming the session by its title or branch label where it named
/// its id: a sentence to read, the id staying in the page's links and small print.
fn naming(message: &str, info: &SessionInfo) -> String {
    let name = info.title.as_deref().unwrap_or(&info.branch);
    message.replace(
        &format!("session {}", info.session),
        &format!("session “{name}”"),
    )
}

/// The dry run's estimate, arm by arm, and the button that begins the comparison.
fn estimate_page(
    state: &AppState,
    info: &SessionInfo,
    plan: &ComparePlan,
    fields: &Fields,
) -> Response {
    let id = &plan.session;
    let name = info.title.as_deref().unwrap_or(&info.branch);
    let body = html! {
        h1 { "Estimate: compare models on " a href=(format!("/ui/sessions/{id}")) { (name) } " from turn " (plan.at) }
        p.meta { "Session " code { (id) } ". Nothing has been sent or written yet." }
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
            (shell::token_field("compare-confirm-token"))
            button type="submit" name="confirm" value="1" { "Run the comparison" }
            button type="submit" name="edit" value="1" { "Change the choices" }
        }
    };
    shell::page(
        state,
        StatusCode::OK,
        &format!("compare models on {name} from {}: estimate", plan.at),
        body,
    )
}
