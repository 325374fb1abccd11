//! Sessions and their turns: `new`, `append`, `replay`, `show`, `list`, `search`,
//! `reindex`, `delete`.

use super::{emit, print_json, render, utf8, CliResult, Out};
use clap::Args;
use forktrail::{
    DeleteOptions, Kind, NewSession, NewTurn, Role, SearchQuery, SessionId, SessionOrder,
    SessionQuery, Store, MAX_PAGE,
};
use serde_json::json;
use std::io::Read;
use std::path::PathBuf;

/// A principal's name, checked as the store checks it.
fn principal(text: &str) -> Result<String, forktrail::Error> {
    forktrail::Agent::principal(text.to_string()).map(|_| text.to_string())
}

#[derive(Args)]
pub(super) struct NewArgs {
    /// The session id (default: a fresh UUID v7).
    #[arg(long)]
    id: Option<SessionId>,
    /// A title for the session (stored as dcterms:title).
    #[arg(long)]
    title: Option<String>,
    /// Who the session runs for (default: anonymous).
    #[arg(long, value_parser = principal)]
    principal: Option<String>,
    /// Print {"session": ID}.
    #[arg(long)]
    json: bool,
}

impl NewArgs {
    pub(super) fn run(self, out: Out, store: &Store) -> CliResult {
        let session = store.create_session(NewSession {
            id: self.id.map(String::from),
            title: self.title,
            principal: self.principal,
        })?;
        let reply = json!({ "session": session });
        emit(out, self.json, &reply, |out, _| writeln!(out, "{session}"))
    }
}

#[derive(Args)]
pub(super) struct AppendArgs {
    /// The session to append to.
    session: SessionId,
    /// system, user, assistant or tool.
    #[arg(long)]
    role: Role,
    /// The content (may be empty).
    #[arg(long, conflicts_with = "file")]
    content: Option<String>,
    /// Read the content from this file (must be UTF-8).
    #[arg(long)]
    file: Option<PathBuf>,
    /// message (default), tool_call, usage, compaction, note or fork_result.
    #[arg(long, default_value = "message")]
    kind: Kind,
    /// The model that generated the turn.
    #[arg(long)]
    model: Option<String>,
    /// The speaker's name (e.g. a tool's).
    #[arg(long)]
    name: Option<String>,
    /// The tool call this tool turn answers.
    #[arg(long)]
    tool_call_id: Option<String>,
    /// The tool calls of an assistant turn, as JSON.
    #[arg(long)]
    tool_calls: Option<String>,
    /// The runtime's own record of the turn, as JSON, kept and returned as given.
    #[arg(long)]
    payload: Option<String>,
    /// Print {"session": ID, "index": N}.
    #[arg(long)]
    json: bool,
}

impl AppendArgs {
    pub(super) fn run(self, out: Out, store: &Store) -> CliResult {
        let content = match (self.content, &self.file) {
            (Some(text), _) => text,
            (None, Some(path)) => {
                let bytes = std::fs::read(path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                utf8(bytes, &path.display().to_string())?
            }
            (None, None) => {
                let mut bytes = Vec::new();
                std::io::stdin()
                    .read_to_end(&mut bytes)
                    .map_err(|e| format!("cannot read standard input: {e}"))?;
                utf8(bytes, "standard input")?
            }
        };
        let turn = NewTurn {
            model: self.model,
            name: self.name,
            tool_call_id: self.tool_call_id,
            tool_calls: self.tool_calls,
            payload: self.payload,
            ..NewTurn::new(self.role, content).kind(self.kind)
        };
        let index = store.append(&self.session, turn)?;
        let reply = json!({ "session": self.session, "index": index });
        emit(out, self.json, &reply, |out, _| writeln!(out, "{index}"))
    }
}

#[derive(Args)]
pub(super) struct ReplayArgs {
    /// The session to replay.
    session: SessionId,
    /// The last index to print (inclusive).
    #[arg(long)]
    up_to: Option<u64>,
    /// A JSON array of {index, role, content, branch} records.
    #[arg(long, conflicts_with = "jsonl")]
    json: bool,
    /// One JSON record per line.
    #[arg(long)]
    jsonl: bool,
}

impl ReplayArgs {
    pub(super) fn run(self, out: Out, store: &Store) -> CliResult {
        if self.json {
            print_json(out, &store.replay(&self.session, self.up_to)?)
        } else if self.jsonl {
            for r in &store.replay(&self.session, self.up_to)? {
                let line = serde_json::to_string(r)?;
                writeln!(out, "{line}")?;
            }
            Ok(())
        } else {
            // Full turns, so tool calls show.
            Ok(render::turns(out, &store.load(&self.session, self.up_to)?)?)
        }
    }
}

#[derive(Args)]
pub(super) struct ShowArgs {
    /// The session to show.
    session: SessionId,
    /// Print the facts as a JSON object.
    #[arg(long)]
    json: bool,
}

impl ShowArgs {
    pub(super) fn run(self, out: Out, store: &Store) -> CliResult {
        emit(out, self.json, &store.info(&self.session)?, render::show)
    }
}

#[derive(Args)]
pub(super) struct ListArgs {
    /// Sessions per page (default 50, at most 1,000).
    #[arg(long)]
    limit: Option<usize>,
    /// Go on where a page ended: the cursor it printed.
    #[arg(long, conflicts_with = "all")]
    cursor: Option<String>,
    /// Every page, printed as it comes (with --json: one JSON object per line).
    #[arg(long)]
    all: bool,
    /// activity: newest activity first (a session that gains a turn moves up);
    /// created: newest first, each session once however they grow.
    #[arg(long, default_value = "activity")]
    order: SessionOrder,
    /// Only the sessions of this principal.
    #[arg(long)]
    principal: Option<String>,
    /// Only sessions with an own turn attributed to this model.
    #[arg(long)]
    model: Option<String>,
    /// Only roots (each with its fork count; with --order activity, by its whole
    /// family's newest activity).
    #[arg(long)]
    roots: bool,
    /// Only the direct children of this session.
    #[arg(long)]
    parent: Option<SessionId>,
    /// Only the sessions of this session's family: its root and every fork below.
    #[arg(long)]
    family: Option<SessionId>,
    /// Only sessions active at or after this time (RFC 3339: 2026-11-01T00:00:00Z).
    #[arg(long)]
    since: Option<String>,
    /// Print the page as JSON: {"sessions", "total", "next"}.
    #[arg(long)]
    json: bool,
}

impl ListArgs {
    fn query(&self, cursor: Option<String>) -> SessionQuery {
        SessionQuery {
            limit: self.limit.or(self.all.then_some(MAX_PAGE)),
            cursor,
            order: self.order,
            principal: self.principal.clone(),
            model: self.model.clone(),
            roots: self.roots,
            parent: self.parent.as_ref().map(ToString::to_string),
            family: self.family.as_ref().map(ToString::to_string),
            since: self.since.clone(),
        }
    }

    pub(super) fn run(self, out: Out, store: &Store) -> CliResult {
        if !self.all {
            let page = store.sessions(&self.query(self.cursor.clone()))?;
            emit(out, self.json, &page, render::session_page)?;
            if let (Some(next), false) = (&page.next, self.json) {
                eprintln!(
                    "{} of {} sessions; next page: forktrail list --cursor {next} (with the \
                     same filters), or --all",
                    page.sessions.len(),
                    page.total
                );
            }
            return Ok(());
        }
        let mut cursor = None;
        let mut first = true;
        loop {
            let page = store.sessions(&self.query(cursor))?;
            if self.json {
                for s in &page.sessions {
                    writeln!(out, "{}", serde_json::to_string(s)?)?;
                }
            } else {
                render::session_rows(out, &page.sessions, first)?;
            }
            first = false;
            match page.next {
                Some(next) => cursor = Some(next),
                None => return Ok(()),
            }
        }
    }
}

#[derive(Args)]
pub(super) struct SearchArgs {
    /// Words (every one must occur) and "phrases" in quotes, over turn contents, titles,
    /// branch labels and models.
    #[arg(required = true)]
    text: Vec<String>,
    /// Hits per page (default 50, at most 1,000).
    #[arg(long)]
    limit: Option<usize>,
    /// Go on where a page of hits ended.
    #[arg(long)]
    cursor: Option<String>,
    /// Print {"hits": [{"session", "index", "role", "snippet", "highlights", "score",
    /// …}], "total", "next"}.
    #[arg(long)]
    json: bool,
}

impl SearchArgs {
    pub(super) fn run(self, out: Out, store: &Store) -> CliResult {
        let page = store.search(&SearchQuery {
            text: self.text.join(" "),
            limit: self.limit,
            cursor: self.cursor,
        })?;
        emit(out, self.json, &page, render::search_page)?;
        if let (Some(next), false) = (&page.next, self.json) {
            eprintln!(
                "{} of {} hits; next page: --cursor {next}",
                page.hits.len(),
                page.total
            );
        }
        Ok(())
    }
}

#[derive(Args)]
pub(super) struct ReindexArgs {
    /// Print {"sessions", "turns", "millis"}.
    #[arg(long)]
    json: bool,
}

impl ReindexArgs {
    pub(super) fn run(self, out: Out, store: &Store) -> CliResult {
        let progress = |done: u64, total: u64| eprint!("\rindexed {done} of {total} sessions");
        let report = store.reindex((!self.json).then_some(&progress as &dyn Fn(u64, u64)))?;
        if !self.json && report.sessions > 0 {
            eprintln!();
        }
        emit(out, self.json, &report, |out, r| {
            writeln!(
                out,
                "rebuilt the catalog: {} sessions, {} turns in {} ms",
                r.sessions, r.turns, r.millis
            )
        })
    }
}

#[derive(Args)]
pub(super) struct UpgradeArgs {
    /// Print {"from", "to", "sessions", "turns"}.
    #[arg(long)]
    json: bool,
}

impl UpgradeArgs {
    pub(super) fn run(self, out: Out, store: &Store) -> CliResult {
        // A store on disk was brought up when it was opened: say what that did.
        let report = match store.upgrade_report() {
            Some(report) => report.clone(),
            None => store.upgrade_digests()?,
        };
        emit(out, self.json, &report, |out, r| match r.upgraded() {
            true => writeln!(
                out,
                "upgraded the digests from version {} to {}: {} turns rewritten in {} sessions",
                r.from, r.to, r.turns, r.sessions
            ),
            false => writeln!(out, "the digests are of version {} already", r.to),
        })
    }
}

#[derive(Args)]
pub(super) struct PopArgs {
    /// The session whose last turn goes.
    session: SessionId,
    /// Print {"session": ID, "popped": TURN or null}.
    #[arg(long)]
    json: bool,
}

impl PopArgs {
    pub(super) fn run(self, out: Out, store: &Store) -> CliResult {
        let popped = store.pop(&self.session)?;
        let reply = json!({ "session": self.session, "popped": popped });
        emit(out, self.json, &reply, |out, _| match &popped {
            Some(turn) => writeln!(out, "removed turn {} ({})", turn.index, turn.role),
            None => writeln!(out, "session {} has no turns", self.session),
        })
    }
}

#[derive(Args)]
pub(super) struct DeleteArgs {
    /// The session to delete.
    session: SessionId,
    #[command(flatten)]
    options: DeleteOptions,
    /// Print {"deleted", "sessions", "own_turns", "dry_run"} ("would_delete" with
    /// --dry-run).
    #[arg(long)]
    json: bool,
}

impl DeleteArgs {
    pub(super) fn run(self, out: Out, store: &Store) -> CliResult {
        let dry_run = self.options.dry_run;
        let plan = store.delete_with(&self.session, self.options)?;
        emit(out, self.json, &plan, |out, plan| {
            render::delete(out, plan, dry_run)
        })
    }
}
