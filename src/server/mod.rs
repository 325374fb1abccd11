//! `forktrail serve`: a SPARQL 1.1 Protocol endpoint and a small REST API over one
//! store, on axum/tokio. Store calls run on blocking threads, never on the async ones.
//!
//! Safe by default: it binds loopback, is read-only unless started with a token, never
//! follows `SERVICE`, cancels queries past a time limit and answers them with an error
//! status before any body is sent (results are buffered), and runs at most N queries
//! at once.

mod admission;
mod host;
mod mcp;
mod metrics;
mod rest;
mod sparql;
mod ui;

use crate::error::Error;
use crate::store::Store;
use admission::{Admission, Lane};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub use metrics::Metrics;

/// How the server runs.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Where to listen; loopback unless told otherwise.
    pub bind: SocketAddr,
    /// Writes (`/update`, REST writes) need `Authorization: Bearer <token>`; without a
    /// token the server is read-only.
    pub token: Option<String>,
    /// Queries and updates past this are cancelled and answered with 503.
    pub query_timeout: Duration,
    /// Requests running at once in each lane (SPARQL queries, reads, writes); more
    /// wait in line (see `queue_wait`, `max_queued`).
    pub max_concurrent_queries: usize,
    /// How long a request waits in line for a slot before it is answered 503 with
    /// `Retry-After`.
    pub queue_wait: Duration,
    /// How many requests each lane's line holds; past that, 503 at once.
    pub max_queued: usize,
    /// Host names (besides loopback names, IP addresses and the bind address) that
    /// requests may name in `Host`: a name of this machine that clients use. Other
    /// names are refused, so that a web page cannot reach the server by rebinding its
    /// own name to this machine's address.
    pub allowed_hosts: Vec<String>,
    /// The largest request body accepted (413 beyond). The fields in it are held to
    /// the store's [`crate::Limits`], as on every surface.
    pub max_body_bytes: usize,
    /// Let `POST /sessions/{id}/regenerate` and `POST /sessions/{id}/compare` send
    /// context to endpoints off this machine (`allow_remote`); refused (403) otherwise.
    pub allow_remote_models: bool,
    /// The model endpoints the server offers: the web UI's what-if and comparisons
    /// choose among them, and REST and `/mcp` regenerations and comparisons may name no
    /// other (empty: each provider's default, `$OPENAI_BASE_URL` or the local Ollama
    /// port and `$ANTHROPIC_BASE_URL` or Anthropic's API; the web UI offers the first).
    pub model_endpoints: Vec<String>,
    /// The recording model proxy: `/proxy/anthropic` and `/proxy/openai` forward to
    /// these upstreams and record each call (none: no proxy).
    pub proxy: crate::proxy::ProxyConfig,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            bind: SocketAddr::from(([127, 0, 0, 1], 7878)),
            token: None,
            query_timeout: Duration::from_secs(30),
            max_concurrent_queries: 8,
            queue_wait: Duration::from_secs(10),
            max_queued: 1024,
            allowed_hosts: Vec::new(),
            max_body_bytes: 64 * 1024 * 1024,
            allow_remote_models: false,
            model_endpoints: Vec::new(),
            proxy: crate::proxy::ProxyConfig::default(),
        }
    }
}

/// What every handler shares.
pub(crate) struct AppState {
    pub(crate) store: Arc<Store>,
    pub(crate) config: ServerConfig,
    /// The lanes work waits in (queries, reads, writes), so that no kind of traffic
    /// takes another's slots.
    pub(crate) admission: Admission,
    pub(crate) metrics: Metrics,
    /// The model proxy, when the server has upstreams.
    pub(crate) proxy: Option<Arc<crate::proxy::ProxyState>>,
}

type Shared = State<Arc<AppState>>;

/// The routes, for embedding in another axum application or serving with [`serve`].
pub fn router(store: Arc<Store>, config: ServerConfig) -> Router {
    build(store, config).0
}

/// The routes and the state they share.
fn build(store: Arc<Store>, mut config: ServerConfig) -> (Router, Arc<AppState>) {
    // An empty token would let a request without any header through.
    config.token = config.token.filter(|t| !t.is_empty());
    // Outside text this server stores or shows never carries its token.
    if let Some(token) = &config.token {
        crate::secrets::hold(token);
    }
    let proxy = (!config.proxy.upstreams.is_empty())
        .then(|| crate::proxy::routes(Arc::clone(&store), config.proxy.clone()));
    let state = Arc::new(AppState {
        proxy: proxy.as_ref().map(|(_, state)| Arc::clone(state)),
        admission: Admission::new(
            config.max_concurrent_queries,
            config.max_queued,
            config.queue_wait,
        ),
        metrics: Metrics::default(),
        store,
        config: config.clone(),
    });
    let mut routes = Router::new();
    if let Some((proxied, _)) = proxy {
        routes = routes.nest_service("/proxy", proxied);
    }
    let router = routes
        .route("/health", get(|| async { "ok\n" }))
        .route("/metrics", get(metrics::handler))
        .merge(sparql::routes())
        .merge(rest::routes())
        .merge(ui::routes())
        .merge(mcp::routes(&state))
        .layer(DefaultBodyLimit::max(config.max_body_bytes))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            json_errors,
        ))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            metrics::track,
        ))
        // Outermost: a request naming a foreign host, or a cross-site write, is
        // refused before anything else sees it.
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            host::guard,
        ))
        .with_state(Arc::clone(&state));
    (router, state)
}

/// Every error leaves in the JSON shape `{"error", "message"}`, including those axum
/// answers itself (an unknown route, a wrong method, a body over the limit); the UI's
/// pages keep their HTML.
async fn json_errors(
    state: Shared,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let (method, path) = (request.method().clone(), request.uri().path().to_string());
    let response = next.run(request).await;
    let status = response.status();
    // JSON errors, and the UI's error pages, are already in their shape.
    let shaped = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/json") || t.starts_with("text/html"));
    // The proxy's answers are the upstream's (or in the shape of its API).
    let proxied = path.starts_with("/proxy/");
    if !(status.is_client_error() || status.is_server_error()) || shaped || proxied {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 64 * 1024)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .unwrap_or_default();
    let (code, message) = match status {
        StatusCode::NOT_FOUND => ("not_found", format!("no route {method} {path}")),
        StatusCode::METHOD_NOT_ALLOWED => (
            "method_not_allowed",
            format!("{path} does not take {method}"),
        ),
        StatusCode::PAYLOAD_TOO_LARGE => (
            "too_large",
            format!(
                "the request body is larger than the server accepts ({} bytes, \
                 --max-body-bytes)",
                state.config.max_body_bytes
            ),
        ),
        _ if text.is_empty() => (
            "error",
            status.canonical_reason().unwrap_or("error").to_string(),
        ),
        _ => ("error", text),
    };
    let mut reply = ApiError::new(status, code, message).into_response();
    for (name, value) in parts.headers.iter() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            reply.headers_mut().append(name.clone(), value.clone());
        }
    }
    reply
}

/// Serves `store` until the process gets SIGINT (Ctrl-C) or SIGTERM, then lets
/// requests in flight finish for up to [`SHUTDOWN_GRACE`]. `ready` is called with the bound
/// address once the listener is up (useful with port 0).
pub async fn serve(
    store: Arc<Store>,
    config: ServerConfig,
    ready: impl FnOnce(SocketAddr),
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(config.bind).await?;
    let addr = listener.local_addr()?;
    if !addr.ip().is_loopback() && config.token.as_deref().is_none_or(str::is_empty) {
        eprintln!(
            "warning: listening on {addr} without a token: the store is readable by anyone \
             who can reach this address (writes stay disabled)"
        );
    }
    ready(addr);
    // Answers go out as they are written: without TCP_NODELAY a response written in
    // parts (a head, then a streamed body) can wait 40 ms for the client's delayed ACK.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let (stopping, stopped) = tokio::sync::oneshot::channel::<()>();
    let (app, state) = build(store, config);
    let server = axum::serve(listener, app).with_graceful_shutdown(async {
        shutdown_signal().await;
        let _ = stopping.send(());
    });
    // Requests in flight get a few seconds after the signal, then the server stops
    // whatever they are doing (the caller drops the runtime without waiting for them).
    let served = tokio::select! {
        served = server => served,
        () = async {
            let _ = stopped.await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        } => Ok(()),
    };
    // Calls the proxy answered are recorded before the process ends.
    if let Some(proxy) = &state.proxy {
        let proxy = Arc::clone(proxy);
        let settled =
            tokio::task::spawn_blocking(move || proxy.recorder.settle(Duration::from_secs(60)))
                .await
                .unwrap_or(false);
        if !settled {
            eprintln!(
                "warning: some model calls were still being recorded when the server stopped"
            );
        }
    }
    served
}

/// How long requests in flight may run on after SIGINT or SIGTERM.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);

/// SIGINT (Ctrl-C) or, on Unix, SIGTERM.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        let terminated = async {
            match term.as_mut() {
                Some(term) => {
                    term.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            () = terminated => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Runs read `f` on a blocking thread with the store, holding a slot of the read lane
/// (waiting in line for one; 503 with `Retry-After` when the line is full or the wait
/// runs out).
pub(crate) async fn blocking<T: Send + 'static>(
    state: &Arc<AppState>,
    f: impl FnOnce(&Store) -> Result<T, Error> + Send + 'static,
) -> Result<T, ApiError> {
    run_in(state, Lane::Read, f).await
}

/// Runs write `f` (whose token was checked) as [`blocking`] does, in the write lane,
/// which no anonymous request can take.
pub(crate) async fn writing<T: Send + 'static>(
    state: &Arc<AppState>,
    f: impl FnOnce(&Store) -> Result<T, Error> + Send + 'static,
) -> Result<T, ApiError> {
    run_in(state, Lane::Write, f).await
}

async fn run_in<T: Send + 'static>(
    state: &Arc<AppState>,
    lane: Lane,
    f: impl FnOnce(&Store) -> Result<T, Error> + Send + 'static,
) -> Result<T, ApiError> {
    let permit = state.admission.enter(lane).await?;
    let store = Arc::clone(&state.store);
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        f(&store)
    })
    .await
    .map_err(|e| ApiError::internal(format!("worker failed: {e}")))?
    .map_err(ApiError::from)
}

/// A JSON error: `{"error": code, "message": text}` with a fitting status.
#[derive(Debug)]
pub(crate) struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) code: &'static str,
    pub(crate) message: String,
    /// The server was too busy to take the request: the answer says `Retry-After: 1`.
    pub(crate) retry_after: bool,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            retry_after: false,
        }
    }

    /// A refusal for want of a free slot (503 `busy`), to be retried shortly.
    pub(crate) fn busy(message: impl Into<String>) -> Self {
        Self {
            retry_after: true,
            ..Self::new(StatusCode::SERVICE_UNAVAILABLE, "busy", message)
        }
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    pub(crate) fn timeout(limit: Duration) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "timeout",
            format!("the query ran past the time limit of {limit:?} and was cancelled"),
        )
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        let (status, code) = match &e {
            Error::SessionNotFound { .. } => (StatusCode::NOT_FOUND, "session_not_found"),
            Error::ParentMissing { .. } => (StatusCode::CONFLICT, "parent_missing"),
            Error::IndexOutOfRange { .. } => (StatusCode::BAD_REQUEST, "index_out_of_range"),
            Error::ForkTooDeep { .. } => (StatusCode::CONFLICT, "fork_too_deep"),
            Error::ChainTooDeep { .. } => (StatusCode::CONFLICT, "chain_too_deep"),
            Error::CycleDetected { .. } => (StatusCode::CONFLICT, "cycle_detected"),
            Error::HasChildren { .. } => (StatusCode::CONFLICT, "has_children"),
            Error::InvalidId { .. } => (StatusCode::BAD_REQUEST, "invalid_id"),
            Error::InvalidName { .. } => (StatusCode::BAD_REQUEST, "invalid_name"),
            Error::InvalidRole { .. } => (StatusCode::BAD_REQUEST, "invalid_role"),
            Error::InvalidKind { .. } => (StatusCode::BAD_REQUEST, "invalid_kind"),
            Error::DuplicateLabel { .. } => (StatusCode::CONFLICT, "duplicate_label"),
            Error::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            Error::Busy { .. } => (StatusCode::CONFLICT, "busy"),
            Error::TooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "too_large"),
            Error::StorageFull { .. } => (StatusCode::INSUFFICIENT_STORAGE, "storage_full"),
            Error::InvalidInput(_) | Error::Parse { .. } => {
                (StatusCode::BAD_REQUEST, "invalid_input")
            }
            Error::Query(_) => (StatusCode::BAD_REQUEST, "query"),
            Error::Cancelled(_) => (StatusCode::SERVICE_UNAVAILABLE, "timeout"),
            Error::StoreLocked { .. } => (StatusCode::SERVICE_UNAVAILABLE, "store_locked"),
            Error::JobNotFound { .. } => (StatusCode::NOT_FOUND, "job_not_found"),
            Error::CallNotFound { .. } => (StatusCode::NOT_FOUND, "call_not_found"),
            Error::EndpointNotOffered { .. } => (StatusCode::FORBIDDEN, "endpoint_not_allowed"),
            _ => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        };
        Self::new(status, code, e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.code, "message": self.message });
        let mut response = (self.status, axum::Json(body)).into_response();
        if self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

/// Writes need the configured token: 403 when the server has none, 401 when the
/// request's is missing or wrong (compared in constant time).
pub(crate) fn authorize(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(expected) = &state.config.token else {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "read_only",
            "this server is read-only: start it with --token to allow writes",
        ));
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if given.is_some_and(|given| constant_time_eq(given.as_bytes(), expected.as_bytes())) {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "a valid `Authorization: Bearer <token>` header is required for writes",
        ))
    }
}

/// Compares without an early exit, so timing does not reveal a matching prefix.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for (i, x) in a.iter().enumerate() {
        diff |= (*x ^ b.get(i % b.len().max(1)).copied().unwrap_or(0)) as usize;
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn constant_time_eq_compares_whole_strings() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"secret"));
        assert!(!constant_time_eq(b"secret", b""));
        assert!(constant_time_eq(b"", b""));
    }
}
