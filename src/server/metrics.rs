//! `/metrics` in the Prometheus text exposition format: requests by route and status,
//! latency sums, queries running, and the store's size on disk.

use super::{AppState, Lane, Shared};
use axum::extract::{MatchedPath, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Request counters, by route pattern and status.
#[derive(Default)]
pub struct Metrics {
    by_route: Mutex<BTreeMap<(String, u16), (u64, f64)>>,
    /// `/mcp` requests by the protocol version their `MCP-Protocol-Version` names.
    by_mcp_version: Mutex<BTreeMap<&'static str, u64>>,
}

impl Metrics {
    /// Counts an `/mcp` request under the version it names: one of the versions the
    /// server speaks, `none` (an `initialize`, or a client of 2025-03-26 or earlier,
    /// sends no header) or `other`, so a client cannot make up labels.
    pub(super) fn count_mcp(&self, header: Option<&str>) {
        let label = header.map_or("none", crate::mcp::version_label);
        let mut map = self
            .by_mcp_version
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        *map.entry(label).or_default() += 1;
    }
}

pub(super) async fn track(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched".to_string(), |p| p.as_str().to_string());
    let start = Instant::now();
    let response = next.run(request).await;
    let seconds = start.elapsed().as_secs_f64();
    let mut map = state
        .metrics
        .by_route
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let entry = map.entry((route, response.status().as_u16())).or_default();
    entry.0 += 1;
    entry.1 += seconds;
    response
}

pub(super) async fn handler(state: Shared) -> Response {
    let mut out = String::new();
    out.push_str("# HELP forktrail_requests_total HTTP requests by route and status.\n");
    out.push_str("# TYPE forktrail_requests_total counter\n");
    let map = state
        .metrics
        .by_route
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    for ((route, status), (count, _)) in &map {
        let _ = writeln!(
            out,
            "forktrail_requests_total{{route=\"{route}\",status=\"{status}\"}} {count}"
        );
    }
    out.push_str("# HELP forktrail_request_duration_seconds_sum Time spent answering, by route and status.\n");
    out.push_str("# TYPE forktrail_request_duration_seconds_sum counter\n");
    for ((route, status), (_, seconds)) in &map {
        let _ = writeln!(
            out,
            "forktrail_request_duration_seconds_sum{{route=\"{route}\",status=\"{status}\"}} {seconds}"
        );
    }
    let (running, _) = state.admission.load(Lane::Query);
    out.push_str("# HELP forktrail_queries_running SPARQL queries running now.\n");
    out.push_str("# TYPE forktrail_queries_running gauge\n");
    let _ = writeln!(out, "forktrail_queries_running {running}");
    out.push_str("# HELP forktrail_lane_running Requests running now, by lane.\n");
    out.push_str("# TYPE forktrail_lane_running gauge\n");
    let lanes = [
        (Lane::Query, "query"),
        (Lane::Read, "read"),
        (Lane::Write, "write"),
    ];
    for (lane, name) in lanes {
        let _ = writeln!(
            out,
            "forktrail_lane_running{{lane=\"{name}\"}} {}",
            state.admission.load(lane).0
        );
    }
    out.push_str("# HELP forktrail_lane_waiting Requests waiting in line for a slot, by lane.\n");
    out.push_str("# TYPE forktrail_lane_waiting gauge\n");
    for (lane, name) in lanes {
        let _ = writeln!(
            out,
            "forktrail_lane_waiting{{lane=\"{name}\"}} {}",
            state.admission.load(lane).1
        );
    }
    let versions = state
        .metrics
        .by_mcp_version
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    out.push_str(
        "# HELP forktrail_mcp_requests_total /mcp requests by the protocol version they name.\n",
    );
    out.push_str("# TYPE forktrail_mcp_requests_total counter\n");
    for (version, count) in versions {
        let _ = writeln!(
            out,
            "forktrail_mcp_requests_total{{protocol_version=\"{version}\"}} {count}"
        );
    }
    if let Some(bytes) = state.store.disk_bytes() {
        out.push_str("# HELP forktrail_store_bytes Size of the store directory on disk.\n");
        out.push_str("# TYPE forktrail_store_bytes gauge\n");
        let _ = writeln!(out, "forktrail_store_bytes {bytes}");
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out).into_response()
}
