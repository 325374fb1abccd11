//! `/mcp`: the MCP server over Streamable HTTP, for hosts and agents that take MCP
//! servers by URL. The protocol is rmcp's [`StreamableHttpService`], stateless (no
//! `Mcp-Session-Id`; each POST carries its call, and the 2026-07-28 protocol has no
//! sessions at all), answering in JSON; the tools are those of `forktrail mcp`
//! ([`McpServer`]), run in the server's read and write lanes.
//!
//! Reads are open, as on the rest of the server. A request with the server's token
//! (`Authorization: Bearer`) may also write; a wrong token is refused (401) whatever it
//! asks, so a misconfigured client learns it at once. As the specification requires
//! against DNS rebinding, a request whose `Origin` is not this server is refused (403)
//! whatever its method; `Host` is checked for every route by [`super::host`].

use super::{authorize, blocking, host, writing, ApiError, AppState, Shared};
use crate::mcp::{Lanes, McpConfig, McpServer, Work, WriteGrant};
use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::sync::Arc;

/// The `/mcp` route, its access checked before rmcp sees a request.
pub(super) fn routes(state: &Arc<AppState>) -> Router<Arc<AppState>> {
    let hint = match state.config.token {
        Some(_) => "send the server's token: `Authorization: Bearer <token>`",
        None => "this server has no token: start `forktrail serve` with --token",
    };
    let config = McpConfig {
        allow_writes: false,
        allow_remote_models: state.config.allow_remote_models,
        query_timeout: state.config.query_timeout,
        model_endpoints: Some(state.config.model_endpoints.clone()),
        // Its clients are not its operator: no command of theirs runs here.
        allow_experiments: false,
    };
    let lanes = Arc::new(ServerLanes(Arc::clone(state)));
    let handler = McpServer::behind(Arc::clone(&state.store), config, hint, lanes);
    let http = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_max_request_body_bytes(state.config.max_body_bytes)
        // Host and Origin are checked by this server's own rules (with --allow-host).
        .disable_allowed_hosts()
        .disable_allowed_origins();
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(NeverSessionManager::default()),
        http,
    );
    Router::new()
        .route_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(state),
            access,
        ))
}

/// The server's read and write lanes, for tool calls.
struct ServerLanes(Arc<AppState>);

impl Lanes for ServerLanes {
    fn run(
        &self,
        writes: bool,
        work: Work,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send>> {
        let state = Arc::clone(&self.0);
        Box::pin(async move {
            let done = match writes {
                true => writing(&state, work).await,
                false => blocking(&state, work).await,
            };
            done.map_err(|e| e.message)
        })
    }
}

/// Refuses a foreign `Origin` and a wrong token; lets a request with the right token
/// write.
async fn access(state: Shared, mut request: Request, next: Next) -> Response {
    if let Some(origin) = host::foreign_origin(request.headers()) {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "cross_site",
            format!("MCP requests from another site are refused: its origin {origin} is not this server"),
        )
        .into_response();
    }
    let version = request.headers().get("mcp-protocol-version");
    state
        .metrics
        .count_mcp(version.map(|v| v.to_str().unwrap_or("")));
    let has_token = state.config.token.is_some();
    if has_token && request.headers().contains_key(header::AUTHORIZATION) {
        if let Err(e) = authorize(&state, request.headers()) {
            return e.into_response();
        }
        request.extensions_mut().insert(WriteGrant);
    }
    next.run(request).await
}
