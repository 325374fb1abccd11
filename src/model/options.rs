//! What a caller asks for: the options of a new session, a fork, a merge, a delete and
//! a detach (at once the CLI's flags and the REST bodies), and the limits a store
//! keeps.

use super::names::SessionId;
use super::turn::NewTurn;
use serde::Deserialize;

/// The deepest a fork chain may be: a root has depth 0, its fork depth 1, and so on.
pub const MAX_FORK_DEPTH: usize = 32;

/// How large each free-text field of a write may be, in bytes. One policy, kept by the
/// [`Store`](crate::Store), so the CLI, REST, MCP, the web UI and imports refuse the
/// same things with the same message.
///
/// ```
/// use forktrail::{Limits, NewSession, Store};
/// let store = Store::in_memory()?.with_limits(Limits { field_bytes: 8, ..Limits::default() });
/// let title = Some("a title longer than eight bytes".to_string());
/// let err = store.create_session(NewSession { title, ..NewSession::default() }).unwrap_err();
/// assert!(err.to_string().contains("over the limit of 8 bytes"));
/// # Ok::<(), forktrail::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Turn content, tool calls (whose arguments may carry whole files) and merge
    /// summaries. Default 32 MiB.
    pub content_bytes: usize,
    /// JSON state: an anchor's state, a turn's payload. Default 1 MiB.
    pub state_bytes: usize,
    /// What a person or a runtime names: titles, fork reasons, tool names, tool call
    /// ids, models, principals, anchor names. Default 8 KiB.
    pub field_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            content_bytes: 32 << 20,
            state_bytes: 1 << 20,
            field_bytes: 8 << 10,
        }
    }
}

/// Which of the [`Limits`] a field falls under.
#[derive(Clone, Copy, Debug)]
pub(crate) enum SizeClass {
    Content,
    State,
    Field,
}

impl Limits {
    /// Refuses `value` of field `field` (of `session`) when it is over its limit.
    pub(crate) fn check(
        &self,
        session: &str,
        field: &'static str,
        size: SizeClass,
        value: Option<&str>,
    ) -> crate::Result<()> {
        let (limit, option) = match size {
            SizeClass::Content => (self.content_bytes, "--max-content-bytes"),
            SizeClass::State => (self.state_bytes, "--max-state-bytes"),
            SizeClass::Field => (self.field_bytes, "--max-field-bytes"),
        };
        match value {
            Some(v) if v.len() > limit => Err(crate::Error::TooLarge {
                field,
                session: session.to_string(),
                bytes: v.len(),
                limit,
                option,
            }),
            _ => Ok(()),
        }
    }

    /// Checks every free-text field of `turn`.
    pub(crate) fn check_turn(&self, session: &str, turn: &NewTurn) -> crate::Result<()> {
        use SizeClass::*;
        self.check(session, "turn content", Content, Some(&turn.content))?;
        self.check(session, "tool_calls", Content, turn.tool_calls.as_deref())?;
        self.check(session, "payload", State, turn.payload.as_deref())?;
        self.check(session, "name", Field, turn.name.as_deref())?;
        self.check(session, "tool_call_id", Field, turn.tool_call_id.as_deref())?;
        self.check(session, "model", Field, turn.model.as_deref())
    }
}

/// Options of a new root session.
#[derive(Clone, Debug, Default)]
pub struct NewSession {
    /// The id; a UUID v7 when absent.
    pub id: Option<String>,
    pub title: Option<String>,
    /// Who the session runs for; `anonymous` when absent.
    pub principal: Option<String>,
}

/// Options of a fork: the CLI's `fork` flags (clap) and the JSON body of
/// `POST /sessions/{id}/fork` (serde, every field optional) are both this struct, and
/// [`ForkOptions::request_text`] names every field, so a new option reaches all three
/// or does not compile.
#[derive(Clone, Debug, Default, Deserialize, clap::Args)]
#[serde(default, deny_unknown_fields)]
pub struct ForkOptions {
    /// The fork point K: the fork inherits turns 0..K-1 (default: the parent's length).
    #[arg(long, value_parser = turn_index, allow_negative_numbers = true, conflicts_with = "anchor")]
    pub at: Option<u64>,
    /// Fork at this anchor (the parent's own, or an ancestor's within what it inherits).
    #[arg(long)]
    pub anchor: Option<String>,
    /// The branch label (default: fork-<8 hex>); unique among the parent's children.
    #[arg(long)]
    pub label: Option<String>,
    /// Why the fork is made (recorded in its provenance).
    #[arg(long)]
    pub reason: Option<String>,
    /// Who forks (default: the parent's principal).
    #[arg(long)]
    pub principal: Option<String>,
    /// The fork's session id (default: a fresh UUID v7).
    #[arg(long)]
    pub id: Option<String>,
    /// Store a short summary of the inherited prefix on the fork (turns per role, tool
    /// calls, models, the last user request).
    #[arg(long)]
    pub summarize: bool,
    /// Make the fork idempotent: a retry with the same id and options returns the same
    /// fork; the same id with other options is an error.
    #[arg(long)]
    pub request_id: Option<String>,
    /// Print the plan and write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// A turn index as a flag gives it: a whole number, 0 or more.
fn turn_index(text: &str) -> std::result::Result<u64, String> {
    text.parse()
        .map_err(|_| format!("{text:?} is not a turn index (a whole number, 0 or more)"))
}

impl ForkOptions {
    /// What a fork request asked for, as given (not as resolved), as one canonical text
    /// whose SHA-256 is the request digest: a retry matches even after the parent has
    /// grown. Every option is named here, so a
    /// new one does not compile until it is placed: in the digest if it changes the
    /// fork; the request id is the key itself, and a dry run writes nothing.
    pub(crate) fn request_text(&self, parent: &SessionId) -> String {
        let ForkOptions {
            at,
            anchor,
            label,
            reason,
            principal,
            id,
            summarize,
            request_id: _,
            dry_run: _,
        } = self;
        let fields = serde_json::json!([
            parent.as_str(),
            at,
            anchor,
            label,
            reason,
            principal,
            id,
            summarize
        ]);
        fields.to_string()
    }
}

/// Options of a merge-back: the CLI's `merge` flags and the JSON body of
/// `POST /sessions/{id}/merge`.
#[derive(Clone, Debug, Default, Deserialize, clap::Args)]
#[serde(default, deny_unknown_fields)]
pub struct MergeOptions {
    /// The session to append the result to (default: the child's parent).
    #[arg(long)]
    pub into: Option<SessionId>,
    /// The summary (default: the child's last assistant turn).
    #[arg(long)]
    pub summary: Option<String>,
    /// Print the plan and write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// Options of a delete: the CLI's `delete` flags and the query of
/// `DELETE /sessions/{id}`.
#[derive(Clone, Copy, Debug, Default, Deserialize, clap::Args)]
#[serde(default, deny_unknown_fields)]
pub struct DeleteOptions {
    /// Delete the whole subtree in one transaction (without it a session with children
    /// is refused).
    #[arg(long)]
    pub cascade: bool,
    /// Print what would be deleted (or why it is refused) and write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// Options of a detach: the CLI's `detach` flags and the JSON body of
/// `POST /sessions/{id}/detach`.
#[derive(Clone, Copy, Debug, Default, Deserialize, clap::Args)]
#[serde(default, deny_unknown_fields)]
pub struct DetachOptions {
    /// Print what would be copied and which descendants would move up; write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Args, FromArgMatches};
    use serde_json::json;
    use std::fmt;

    /// The fields a struct's serde derive knows, from the error `deny_unknown_fields`
    /// gives for a field it does not.
    fn serde_fields<T: serde::de::DeserializeOwned + fmt::Debug>() -> Vec<String> {
        let err = serde_json::from_value::<T>(json!({ "no_such_option": 1 })).unwrap_err();
        let text = err.to_string();
        let list = text.split_once("expected one of ").unwrap().1;
        list.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect()
    }

    /// Each fork option is a CLI flag and a REST body field that mean the same, and is
    /// in the request digest unless it is the request id (the key itself) or dry run
    /// (which writes nothing): a new option that misses one of these fails here.
    #[test]
    fn every_fork_option_reaches_the_cli_rest_and_the_request_digest() {
        let parent = SessionId::new("p").unwrap();
        let command = ForkOptions::augment_args(clap::Command::new("fork").no_binary_name(true));
        let flags: Vec<String> = command
            .get_arguments()
            .map(|a| a.get_id().to_string())
            .collect();
        assert_eq!(
            flags,
            serde_fields::<ForkOptions>(),
            "CLI flags vs REST fields"
        );
        let default = ForkOptions::default();
        for arg in command.get_arguments() {
            let name = arg.get_id().as_str();
            let takes_value = arg.get_action().takes_values();
            let (text, value) = match (takes_value, name) {
                (false, _) => (None, json!(true)),
                (true, "at") => (Some("3"), json!(3)),
                (true, _) => (Some("x1"), json!("x1")),
            };
            let mut argv = vec![format!("--{}", arg.get_long().unwrap())];
            argv.extend(text.map(str::to_string));
            let matches = command.clone().try_get_matches_from(&argv).unwrap();
            let from_cli = ForkOptions::from_arg_matches(&matches).unwrap();
            let from_rest: ForkOptions = serde_json::from_value(json!({ name: value })).unwrap();
            assert_eq!(format!("{from_cli:?}"), format!("{from_rest:?}"), "{name}");
            assert_ne!(
                format!("{from_cli:?}"),
                format!("{default:?}"),
                "{name} unset"
            );
            let in_digest = from_cli.request_text(&parent) != default.request_text(&parent);
            let exempt = ["request_id", "dry_run"].contains(&name);
            assert_eq!(in_digest, !exempt, "{name}: in the request digest?");
        }
    }
}
