//! The web UI: server-rendered HTML (maud, see `crate::html`), one CSS file and one
//! small script of our own, all in the binary: no build step, no CDN, no network.
//!
//! Every page has a shareable URL; every action is a plain form POST (the token then
//! travels in the form). With script, the token is typed once, kept in the tab's
//! session storage and sent as an `Authorization` header: no cookie, so no cross-site
//! request forgery. Writes go through the same store calls, and errors, as the REST API.

//!
//! | file | what |
//! | --- | --- |
//! | `shell.rs` | the page shell, error pages, store calls, what forms share |
//! | `sessions.rs` | the sessions page: trees, or search hits |
//! | `session.rs` | a session's playback and actions |
//! | `tree.rs` | a family's tree |
//! | `provenance.rs` | a turn's provenance |
//! | `actions.rs` | fork, anchor, merge-back, delete |
//! | `jobs.rs` | what-if jobs: the form, the job's page, cancel |
//! | `compose.rs` | the composer and Edit |
//! | `diff.rs` | two sessions side by side |
//! | `compare.rs` | the compare form and its estimate |
//! | `comparison.rs` | a comparison's page and cancel |
//! | `sparql.rs` | the SPARQL page |
//! | `ui.js` | the one script: the token, forms, following a page and an answer, the turns' keyboard stop |

// A handler's error is the error page itself, built once per failed request: boxing it
// would only add an allocation.
#![allow(clippy::result_large_err)]

mod actions;
mod compare;
mod comparison;
mod compose;
mod diff;
mod jobs;
mod provenance;
mod session;
mod sessions;
mod shell;
mod sparql;
mod tree;

use super::AppState;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use std::sync::Arc;

pub(super) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/", get(sessions::sessions))
        .route("/ui/sessions/{id}", get(session::playback))
        .route("/ui/sessions/{id}/tree", get(tree::tree))
        .route("/ui/sessions/{id}/after/{index}", get(session::turns_after))
        .route(
            "/ui/sessions/{id}/turns/{index}",
            get(provenance::provenance),
        )
        .route("/ui/sessions/{id}/fork", post(actions::fork))
        .route("/ui/sessions/{id}/whatif", post(jobs::what_if))
        .route("/ui/sessions/{id}/anchors", post(actions::anchor))
        .route("/ui/sessions/{id}/merge", post(actions::merge))
        .route("/ui/sessions/{id}/delete", post(actions::delete))
        .route("/ui/jobs/{job}", get(jobs::job))
        .route("/ui/jobs/{job}/cancel", post(jobs::cancel))
        .route("/ui/sparql", get(sparql::sparql))
        .route("/ui/style.css", get(shell::style))
        .route("/ui/app.js", get(shell::script))
        .route(
            "/ui/sessions/{id}/compare",
            get(compare::compare_form).post(compare::compare),
        )
        .route("/ui/comparisons/{id}", get(comparison::comparison))
        .route("/ui/comparisons/{id}/cancel", post(comparison::cancel))
        .route("/ui/sessions/{id}/append", post(compose::append))
        .route("/ui/sessions/{id}/edit", post(compose::edit))
        .route("/ui/sessions/{id}/recorded", post(compose::recorded))
        .route("/ui/diff", get(diff::diff))
        .layer(axum::middleware::from_fn(script_redirects))
}

/// A form the script sent (`X-Forktrail-Script`) is answered 204 with where to go in
/// `X-Forktrail-Location`, not with the redirect itself: `fetch` would follow it and
/// lose its `#fragment` (the turn, or the composer, to land on).
async fn script_redirects(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let script = request.headers().contains_key("x-forktrail-script");
    let response = next.run(request).await;
    if !script || !response.status().is_redirection() {
        return response;
    }
    match response.headers().get(header::LOCATION) {
        Some(location) => (
            StatusCode::NO_CONTENT,
            [("x-forktrail-location", location.clone())],
        )
            .into_response(),
        None => response,
    }
}
