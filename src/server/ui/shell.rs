//! The page shell every UI page is built in (the header, the security headers, error
//! pages), the store calls a handler makes, and what forms share: the token, a field's
//! text, a turn index, the session names and the model endpoints offered.

use crate::html::{self, Assets};
use crate::model::SessionId;
use crate::server::{authorize, blocking, writing, ApiError, AppState};
use axum::body::Bytes;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use maud::{html, Markup};
use oxigraph::model::Term;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::sync::Arc;

const SCRIPT: &str = include_str!("ui.js");

pub(super) type Page = Result<Response, Response>;

/// An HTML page with the headers every UI page carries: nothing but this origin's own
/// files may load or run, and no other site may frame it.
pub(super) fn page(state: &AppState, status: StatusCode, title: &str, body: Markup) -> Response {
    let writable = state.config.token.is_some();
    let header = html! {
        a href="/" { "forktrail" }
        nav { a href="/" { "Sessions" } a href="/ui/sparql" { "SPARQL" } }
        @if writable {
            form #token-form hidden {
                label for="token-input" { "Token" }
                input #token-input type="password" name="token" autocomplete="off";
                button type="submit" { "Use for writes" }
                span #token-status {}
                button #token-forget type="button" hidden { "Forget the token" }
            }
        } @else {
            span.meta { "read-only server" }
        }
    };
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; frame-ancestors 'none'",
            ),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "same-origin"),
        ],
        html::document(title, Assets::Linked { header }, body),
    )
        .into_response()
}

/// An error as a page: what went wrong (naming the session or index), and the way back.
pub(super) fn error_page(state: &AppState, error: ApiError) -> Response {
    error_page_naming(state, error, &[])
}

/// [`error_page`] with the ids of the sessions its message names (`(id, name)`).
fn error_page_naming(state: &AppState, error: ApiError, names: &[(String, String)]) -> Response {
    let heading = match error.status {
        StatusCode::NOT_FOUND => "Not found",
        StatusCode::UNAUTHORIZED => "Token needed",
        StatusCode::FORBIDDEN => "Not allowed",
        StatusCode::CONFLICT => "Refused",
        s if s.is_server_error() => "Server error",
        _ => "Bad request",
    };
    page(
        state,
        error.status,
        heading,
        html! {
            h1 { (heading) }
            p.error data-code=(error.code) { (error.message) }
            p.outcome { "Nothing was changed." }
            @if !names.is_empty() {
                p.meta { @for (n, (id, name)) in names.iter().enumerate() {
                    @if n > 0 { "; " } "“" (name) "” is " a.id href=(format!("/ui/sessions/{id}")) { (id) } } }
            }
            p { a href="/" { "All sessions" } }
        },
    )
}

/// Runs `f` with the store on a blocking thread; an error becomes an error page, the
/// sessions it names by id named as people know them (see [`named_error_page`]).
pub(super) async fn read<T: Send + 'static>(
    state: &Arc<AppState>,
    f: impl FnOnce(&crate::Store) -> crate::Result<T> + Send + 'static,
) -> Result<T, Response> {
    match blocking(state, f).await {
        Ok(value) => Ok(value),
        Err(e) => Err(named_error_page(state, e).await),
    }
}

/// Runs write `f` (after `may_write`) as `read` does, in the write lane.
pub(super) async fn write<T: Send + 'static>(
    state: &Arc<AppState>,
    f: impl FnOnce(&crate::Store) -> crate::Result<T> + Send + 'static,
) -> Result<T, Response> {
    match writing(state, f).await {
        Ok(value) => Ok(value),
        Err(e) => Err(named_error_page(state, e).await),
    }
}

/// The UUIDs in `text` (8-4-4-4-12 hex digits), each once, in order.
fn uuids_in(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let bytes = text.as_bytes();
    for start in 0..bytes.len().saturating_sub(35) {
        let candidate = &bytes[start..start + 36];
        let shaped = candidate.iter().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => *b == b'-',
            _ => b.is_ascii_hexdigit(),
        });
        let alone = |at: Option<&u8>| !at.is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'-');
        if shaped && alone(bytes.get(start + 36)) && (start == 0 || alone(bytes.get(start - 1))) {
            let id = String::from_utf8_lossy(candidate).into_owned();
            if !out.contains(&id) {
                out.push(id);
            }
        }
    }
    out
}

/// `text` with every session id in it replaced by the session's title or branch label
/// in quotes; the ids replaced and their names, for the small print. An id that names
/// no session stays as it is.
pub(super) async fn with_names(
    state: &Arc<AppState>,
    text: &str,
) -> (String, Vec<(String, String)>) {
    let ids = uuids_in(text);
    if ids.is_empty() {
        return (text.to_string(), Vec::new());
    }
    let names = blocking(state, move |store| {
        Ok(ids
            .into_iter()
            .filter_map(|id| {
                let info = store.info(&SessionId::new(&id).ok()?).ok()?;
                Some((id, info.title.unwrap_or(info.branch)))
            })
            .collect::<Vec<_>>())
    })
    .await
    .unwrap_or_default();
    let mut text = text.to_string();
    for (id, name) in &names {
        text = text.replace(id.as_str(), &format!("“{name}”"));
    }
    (text, names)
}

/// [`error_page`], the sessions its message names by id named by title or branch label
/// (the ids below, in small print).
pub(super) async fn named_error_page(state: &Arc<AppState>, mut error: ApiError) -> Response {
    let (message, names) = with_names(state, &error.message).await;
    error.message = message;
    error_page_naming(state, error, &names)
}

pub(super) fn session_id(state: &AppState, text: &str) -> Result<SessionId, Response> {
    SessionId::new(text).map_err(|e| error_page(state, e.into()))
}

pub(super) async fn style() -> Response {
    asset("text/css; charset=utf-8", html::STYLE)
}

pub(super) async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

fn asset(media_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, media_type),
            (header::CACHE_CONTROL, "max-age=300"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}

/// A form body. Every write form carries `token` (empty when the script sends it as a
/// header instead).
pub(super) fn form<T: DeserializeOwned>(state: &AppState, body: &Bytes) -> Result<T, Response> {
    serde_urlencoded::from_bytes(body).map_err(|e| {
        error_page(
            state,
            ApiError::bad_request(format!("the form does not parse: {e}")),
        )
    })
}

/// A write needs the token: in the `Authorization` header, or typed into the form.
pub(super) fn may_write(
    state: &AppState,
    headers: &HeaderMap,
    typed: &str,
) -> Result<(), Response> {
    token_given(state, headers, typed).map_err(|e| error_page(state, e))
}

/// [`may_write`]'s check, its error left for the caller to show.
pub(super) fn token_given(
    state: &AppState,
    headers: &HeaderMap,
    typed: &str,
) -> Result<(), ApiError> {
    let mut headers = headers.clone();
    if !headers.contains_key(header::AUTHORIZATION) && !typed.is_empty() {
        if let Ok(value) = HeaderValue::from_str(&format!("Bearer {typed}")) {
            headers.insert(header::AUTHORIZATION, value);
        }
    }
    authorize(state, &headers).map_err(|mut e| {
        if e.status == StatusCode::UNAUTHORIZED {
            e.message = match headers.contains_key(header::AUTHORIZATION) {
                true => {
                    "that token is not this server's: type the one `forktrail serve` was \
                         given (--token) or printed when it started"
                }
                false => {
                    "writes need this server's token: type it in the Token box at the \
                          top of the page (the one `forktrail serve` was given or printed)"
                }
            }
            .into();
        }
        e
    })
}

/// A form field's text, or `None` when left empty.
pub(super) fn given(text: &str) -> Option<String> {
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

pub(super) fn turn_index(state: &AppState, text: &str) -> Result<u64, Response> {
    text.trim().parse().map_err(|_| {
        error_page(
            state,
            ApiError::bad_request(format!("turn index {text:?} is not a whole number")),
        )
    })
}

/// The token field of a write form (hidden by the script once a token is kept).
pub(super) fn token_field(id: &str) -> Markup {
    html! {
        label.token-field for=(id) { "Token" }
        input.token-field id=(id) type="password" name="token" autocomplete="off";
    }
}

/// A form that carries nothing but the token.
#[derive(Deserialize)]
pub(super) struct TokenForm {
    #[serde(default)]
    pub(super) token: String,
}

/// Session `id`'s name for people (see [`named`]), read from the store; the id alone
/// if it cannot be read.
pub(super) async fn name_of(state: &Arc<AppState>, id: &SessionId) -> Markup {
    let read_id = id.clone();
    match read(state, move |store| store.info(&read_id)).await {
        Ok(info) => named(id, info.title.as_deref(), &info.branch),
        Err(_) => html! { a href=(format!("/ui/sessions/{id}")) { (id) } },
    }
}

/// Session `id`'s title, else its branch label (its id if it cannot be read).
pub(super) async fn label_of(state: &Arc<AppState>, id: &SessionId) -> String {
    let read_id = id.clone();
    match read(state, move |store| store.info(&read_id)).await {
        Ok(info) => info.title.unwrap_or(info.branch),
        Err(_) => id.to_string(),
    }
}

/// A session's name for people: its title, else its branch label, with the id after.
pub(super) fn named(id: &SessionId, title: Option<&str>, branch: &str) -> Markup {
    html! {
        a href=(format!("/ui/sessions/{id}")) { (title.unwrap_or(branch)) }
        " " span.id { (id) }
    }
}

/// The valid indices of a session of `length` turns, as errors name them.
pub(super) fn valid_range(length: u64) -> String {
    match length {
        0 => "none: the session has no turns".into(),
        n => format!("0..={}", n - 1),
    }
}

/// The model endpoints a what-if may use: the server's `--model-endpoint`s, else the
/// default one (`$OPENAI_BASE_URL`, else the local Ollama port).
pub(super) fn endpoints(state: &AppState) -> Vec<String> {
    if !state.config.model_endpoints.is_empty() {
        return state.config.model_endpoints.clone();
    }
    vec![std::env::var("OPENAI_BASE_URL")
        .ok()
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| crate::DEFAULT_ENDPOINT.to_string())]
}

/// The endpoint a form chose (the first offered when none), if the server offers it.
pub(super) fn offered_endpoint(state: &AppState, typed: &str) -> Result<String, Response> {
    let allowed = endpoints(state);
    let endpoint = given(typed).unwrap_or_else(|| allowed[0].clone());
    if allowed.contains(&endpoint) {
        return Ok(endpoint);
    }
    Err(error_page(state, not_offered(&endpoint, &allowed)))
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

/// A term as text: a literal's value, an IRI's text, anything else as N-Triples writes it.
pub(super) fn term_text(term: &Term) -> String {
    match term {
        Term::Literal(l) => l.value().to_string(),
        Term::NamedNode(n) => n.as_str().to_string(),
        other => other.to_string(),
    }
}
