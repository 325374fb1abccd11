//! A session's write forms: fork, anchor, merge-back and delete.

use super::shell::{
    form, given, label_of, may_write, name_of, named_error_page, page, session_id, token_field,
    turn_index, write, Page,
};
use crate::error::Error;
use crate::html;
use crate::model::{DeleteOptions, ForkOptions, MergeOptions};
use crate::server::{ApiError, Shared};
use axum::body::Bytes;
use axum::extract::Path;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect};
use maud::html;
use serde::Deserialize;

#[derive(Deserialize)]
struct ForkForm {
    at: String,
    #[serde(default)]
    label: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    token: String,
}

/// `POST /ui/sessions/{id}/fork`: fork at the form's turn; on to the new branch.
pub(super) async fn fork(
    state: Shared,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Page {
    let state = state.0;
    let f: ForkForm = form(&state, &body)?;
    may_write(&state, &headers, &f.token)?;
    let id = session_id(&state, &id)?;
    let at = turn_index(&state, &f.at)?;
    let options = ForkOptions {
        at: Some(at),
        label: given(&f.label),
        reason: given(&f.reason),
        ..Default::default()
    };
    let plan = write(&state, move |store| store.fork(&id, options)).await?;
    // On to the new branch's end, where the composer continues it.
    let page = plan.forked_at_index.saturating_sub(1) / html::PAGE * html::PAGE;
    Ok(Redirect::to(&format!(
        "/ui/sessions/{}?from={page}#composer",
        plan.session
    ))
    .into_response())
}

#[derive(Deserialize)]
struct AnchorForm {
    name: String,
    #[serde(default)]
    token: String,
}

/// `POST /ui/sessions/{id}/anchors`: a named fork point at the session's length.
pub(super) async fn anchor(
    state: Shared,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Page {
    let state = state.0;
    let f: AnchorForm = form(&state, &body)?;
    may_write(&state, &headers, &f.token)?;
    let id = session_id(&state, &id)?;
    let session = id.clone();
    write(&state, move |store| {
        store.anchor(&session, f.name.trim(), None)
    })
    .await?;
    Ok(Redirect::to(&format!("/ui/sessions/{id}")).into_response())
}

#[derive(Deserialize)]
struct MergeForm {
    #[serde(default)]
    summary: String,
    #[serde(default)]
    confirm: String,
    #[serde(default)]
    token: String,
}

/// `POST /ui/sessions/{id}/merge`: the preview (what would be appended where), then,
/// confirmed, the merge.
pub(super) async fn merge(
    state: Shared,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Page {
    let state = state.0;
    let f: MergeForm = form(&state, &body)?;
    may_write(&state, &headers, &f.token)?;
    let id = session_id(&state, &id)?;
    let options = MergeOptions {
        into: None,
        summary: given(&f.summary),
        dry_run: f.confirm.is_empty(),
    };
    let dry_run = options.dry_run;
    let child = id.clone();
    let plan = write(&state, move |store| store.merge(&child, options)).await?;
    if !dry_run {
        let to = format!(
            "/ui/sessions/{}?from={}#turn-{}",
            plan.into,
            plan.index / html::PAGE * html::PAGE,
            plan.index
        );
        return Ok(Redirect::to(&to).into_response());
    }
    Ok(page(
        &state,
        StatusCode::OK,
        "merge preview",
        html! {
            h1 { "Merge " (label_of(&state, &plan.child).await) " back" }
            p { "Appends turn " (plan.index) " to " (name_of(&state, &plan.into).await)
                ", covering turns " (plan.first) "–" (plan.last) " of the fork (" code { (plan.reference) } "):" }
            (html::content(&plan.content))
            form.write method="post" action=(format!("/ui/sessions/{id}/merge")) {
                input type="hidden" name="summary" value=(f.summary);
                (token_field("merge-confirm-token"))
                button type="submit" name="confirm" value="1" { "Merge" }
            }
        },
    ))
}

#[derive(Deserialize)]
struct DeleteForm {
    #[serde(default)]
    cascade: String,
    #[serde(default)]
    confirm: String,
    #[serde(default)]
    token: String,
}

/// `POST /ui/sessions/{id}/delete`: the preview (what would go, or the children it is
/// refused on, with the cascade offered), then, confirmed, the delete.
pub(super) async fn delete(
    state: Shared,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Page {
    let state = state.0;
    let f: DeleteForm = form(&state, &body)?;
    may_write(&state, &headers, &f.token)?;
    let id = session_id(&state, &id)?;
    let cascade = !f.cascade.is_empty();
    let options = DeleteOptions {
        cascade,
        dry_run: f.confirm.is_empty(),
    };
    let target = id.clone();
    // Refused for its children, the delete is answered with them: told by the error's
    // kind, which only the store's own result carries.
    let outcome = write(&state, move |store| Ok(store.delete_with(&target, options))).await?;
    let form_for = |cascade: bool, confirm: bool, label: &str| {
        html! {
            form.write method="post" action=(format!("/ui/sessions/{id}/delete")) {
                @if cascade { input type="hidden" name="cascade" value="1"; }
                (token_field(if confirm { "delete-confirm-token" } else { "delete-cascade-token" }))
                button type="submit" name=[confirm.then_some("confirm")] value=[confirm.then_some("1")] { (label) }
            }
        }
    };
    let name = label_of(&state, &id).await;
    let body = match outcome {
        Ok(_) if !options.dry_run => return Ok(Redirect::to("/").into_response()),
        Ok(plan) => html! {
            h1 { "Delete " (name) "?" }
            p.meta { "Session " span.id { (id) } }
            p { "This deletes " (plan.deleted.len()) " session" @if plan.deleted.len() != 1 { "s" }
                " and " (plan.own_turns) " turns they own:" }
            ul.deleted { @for s in &plan.sessions { li { (s.branch) " " span.id { (s.session) } ", " (s.own_turns) " own turns" } } }
            (form_for(cascade, true, "Delete"))
        },
        Err(e @ Error::HasChildren { .. }) => {
            let e = ApiError::from(e);
            let children = write(&state, {
                let id = id.clone();
                move |store| store.branches(&id)
            })
            .await?;
            html! {
                h1 { "Delete " (name) "?" }
                p.meta { "Session " span.id { (id) } }
                p.error data-code=(e.code) { "Refused: it has " (children.len()) " children, which would lose their history:" }
                ul.children { @for c in &children {
                    li { a href=(format!("/ui/sessions/{}", c.session)) { (c.branch) } " " span.id { (c.session) } }
                } }
                (form_for(true, false, "Preview deleting the whole subtree"))
            }
        }
        Err(e) => return Err(named_error_page(&state, e.into()).await),
    };
    Ok(page(&state, StatusCode::OK, "delete preview", body))
}
