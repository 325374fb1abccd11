//! Validated names, turns, records and option structs.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The deepest a fork chain may be: a root has depth 0, its fork depth 1, and so on.
pub const MAX_FORK_DEPTH: usize = 32;

const ID_MAX: usize = 128;
const LABEL_MAX: usize = 64;
const MODEL_MAX: usize = 256;

fn id_charset_ok(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')
}

fn check_name(value: &str, max: usize) -> std::result::Result<(), String> {
    if value.is_empty() {
        return Err("must not be empty".into());
    }
    if value.chars().count() > max {
        return Err(format!("longer than {max} characters"));
    }
    if let Some(c) = value.chars().find(|c| !id_charset_ok(*c)) {
        return Err(format!(
            "character {c:?} is not allowed (use A-Z a-z 0-9 . _ : -)"
        ));
    }
    // `.` and `..` are path segments a URL normaliser rewrites (`/sessions/..` is not the
    // session `..`), and IRIs ending in them are rewritten the same way.
    if value.chars().all(|c| c == '.') {
        return Err("must not be made only of dots".into());
    }
    Ok(())
}

/// A session id: 1–128 characters of `A-Z a-z 0-9 . _ : -`, not only dots.
///
/// ```
/// use forktrail::SessionId;
/// assert!("run-42".parse::<SessionId>().is_ok());
/// assert!("x> } ; DROP ALL ; #".parse::<SessionId>().is_err());
/// assert!("..".parse::<SessionId>().is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(String);

impl SessionId {
    /// Validates `value` as a session id.
    pub fn new(value: impl Into<String>) -> Result<Self> {
        let value = value.into();
        match check_name(&value, ID_MAX) {
            Ok(()) => Ok(Self(value)),
            Err(reason) => Err(Error::InvalidId { value, reason }),
        }
    }

    /// A fresh UUID v7 id (time-ordered, lowercase, hyphenated).
    pub fn generate() -> Self {
        Self(uuid::Uuid::now_v7().to_string())
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for SessionId {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::new(s)
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A branch label: 1–64 characters of `A-Z a-z 0-9 . _ : -`, unique among siblings.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Label(String);

impl Label {
    /// The label of every root session.
    pub const MAIN: &'static str = "main";

    /// Validates `value` as a branch label.
    pub fn new(value: impl Into<String>) -> Result<Self> {
        let value = value.into();
        match check_name(&value, LABEL_MAX) {
            Ok(()) => Ok(Self(value)),
            Err(reason) => Err(Error::InvalidName {
                what: "branch label",
                value,
                reason,
            }),
        }
    }

    /// The label as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Who acts: a principal (same charset as ids) or a model (`model/<name>`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Agent {
    /// A person or service on whose behalf a session runs.
    Principal(String),
    /// The model that generated a turn.
    Model(String),
    /// The tool whose result a `tool` turn carries (from the turn's name).
    Tool(String),
}

impl Agent {
    /// Validates a principal name (1–128 characters of `A-Z a-z 0-9 . _ : -`, not only dots).
    pub fn principal(name: impl Into<String>) -> Result<Self> {
        let name = name.into();
        match check_name(&name, ID_MAX) {
            Ok(()) => Ok(Agent::Principal(name)),
            Err(reason) => Err(Error::InvalidName {
                what: "principal",
                value: name,
                reason,
            }),
        }
    }

    /// Validates a model name (1–256 characters, no control characters or white space).
    pub fn model(name: impl Into<String>) -> Result<Self> {
        Self::software("model name", name.into()).map(Agent::Model)
    }

    /// Validates a tool name (same rules as a model name).
    pub fn tool(name: impl Into<String>) -> Result<Self> {
        Self::software("tool name", name.into()).map(Agent::Tool)
    }

    fn software(what: &'static str, name: String) -> Result<String> {
        let reason = if name.is_empty() {
            Some("must not be empty".to_string())
        } else if name.chars().count() > MODEL_MAX {
            Some(format!("longer than {MODEL_MAX} characters"))
        } else {
            name.chars()
                .find(|c| c.is_control() || c.is_whitespace())
                .map(|c| format!("character {c:?} is not allowed"))
        };
        match reason {
            None => Ok(name),
            Some(reason) => Err(Error::InvalidName {
                what,
                value: name,
                reason,
            }),
        }
    }

    /// The bare name.
    pub fn name(&self) -> &str {
        match self {
            Agent::Principal(n) | Agent::Model(n) | Agent::Tool(n) => n,
        }
    }
}

/// The role of a turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

impl Role {
    /// The role as stored and printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

impl FromStr for Role {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "system" => Role::System,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            _ => return Err(Error::InvalidRole { value: s.into() }),
        })
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a turn is; `message` unless said otherwise.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    #[default]
    Message,
    ToolCall,
    Usage,
    Compaction,
    Note,
    ForkResult,
}

impl Kind {
    /// The kind as stored and printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Message => "message",
            Kind::ToolCall => "tool_call",
            Kind::Usage => "usage",
            Kind::Compaction => "compaction",
            Kind::Note => "note",
            Kind::ForkResult => "fork_result",
        }
    }
}

impl FromStr for Kind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "message" => Kind::Message,
            "tool_call" => Kind::ToolCall,
            "usage" => Kind::Usage,
            "compaction" => Kind::Compaction,
            "note" => Kind::Note,
            "fork_result" => Kind::ForkResult,
            _ => return Err(Error::InvalidKind { value: s.into() }),
        })
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A turn to append.
///
/// ```
/// use forktrail::{NewTurn, Role};
/// let turn = NewTurn::new(Role::Assistant, "Paris.").model("qwen2.5-7b");
/// assert_eq!(turn.content, "Paris.");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewTurn {
    pub role: Role,
    pub content: String,
    pub kind: Kind,
    /// The speaker's name (e.g. a tool's name).
    pub name: Option<String>,
    /// The tool call a `tool` turn answers.
    pub tool_call_id: Option<String>,
    /// The tool calls an assistant turn makes, as a JSON text.
    pub tool_calls: Option<String>,
    /// The model that generated the turn; the turn is attributed to it.
    pub model: Option<String>,
}

impl NewTurn {
    /// A `message` turn with the given role and content.
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            kind: Kind::Message,
            name: None,
            tool_call_id: None,
            tool_calls: None,
            model: None,
        }
    }

    /// Sets the kind.
    pub fn kind(mut self, kind: Kind) -> Self {
        self.kind = kind;
        self
    }

    /// Sets the model that generated the turn.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Sets the speaker's name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets the tool call id a tool result answers.
    pub fn tool_call_id(mut self, id: impl Into<String>) -> Self {
        self.tool_call_id = Some(id.into());
        self
    }

    /// Sets the tool calls (a JSON text) an assistant turn makes.
    pub fn tool_calls(mut self, json: impl Into<String>) -> Self {
        self.tool_calls = Some(json.into());
        self
    }
}

/// A stored turn, as loaded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Turn {
    pub index: u64,
    pub role: Role,
    pub kind: Kind,
    pub content: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The session that owns (stored) this turn.
    pub session: String,
    /// The branch label of the session the turn was first written on.
    pub branch: String,
    pub created_at: Option<String>,
    /// SHA-256 chained over the predecessor's digest, see [`crate::turn_digest`].
    pub digest: String,
}

/// The plain record replay returns: one per turn, in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayRecord {
    pub index: u64,
    pub role: Role,
    pub content: String,
    pub branch: String,
}

impl From<&Turn> for ReplayRecord {
    fn from(t: &Turn) -> Self {
        Self {
            index: t.index,
            role: t.role,
            content: t.content.clone(),
            branch: t.branch.clone(),
        }
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

/// Options of a fork. Deserializes from the JSON body of `POST /sessions/{id}/fork`
/// (every field optional).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ForkOptions {
    /// The fork point `k`: the child inherits turns `0..k`. Default: the parent's length.
    pub at: Option<i64>,
    /// Fork at this anchor of the parent (its own or an ancestor's within the inherited
    /// prefix) instead of at an index.
    pub anchor: Option<String>,
    /// The branch label; `fork-<8 hex>` when absent.
    pub label: Option<String>,
    /// Why the fork was made (recorded on the fork activity).
    pub reason: Option<String>,
    /// Who forks; the parent's principal when absent.
    pub principal: Option<String>,
    /// The child's id; a UUID v7 when absent.
    pub id: Option<String>,
    /// Store a short deterministic summary of the inherited prefix on the fork.
    pub summarize: bool,
    /// A caller's key that makes the fork idempotent: a retry with the same key and the
    /// same options returns the fork made the first time.
    pub request_id: Option<String>,
    /// Validate and return the plan, write nothing.
    pub dry_run: bool,
}

/// Validates a name used as an anchor name or request id (the branch-label rules).
pub(crate) fn check_key(what: &'static str, value: &str) -> Result<()> {
    check_name(value, LABEL_MAX).map_err(|reason| Error::InvalidName {
        what,
        value: value.to_string(),
        reason,
    })
}

/// A named point in a session: its length when the anchor was set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AnchorInfo {
    pub name: String,
    /// The session that set the anchor (an ancestor, for inherited anchors).
    pub session: String,
    /// The session's length when the anchor was set: a fork point.
    pub at_index: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<serde_json::Value>,
    pub created_at: Option<String>,
}

/// Options of a merge-back.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MergeOptions {
    /// The session that gains the result turn; the child's parent when absent.
    pub into: Option<String>,
    /// The summary; the child's last assistant turn when absent.
    pub summary: Option<String>,
    /// Validate and return the plan, write nothing.
    pub dry_run: bool,
}

/// What a merge did (or, for a dry run, would do).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MergePlan {
    pub child: String,
    pub into: String,
    /// The index of the `fork_result` turn in `into` (its length before the merge).
    pub index: u64,
    /// The child's own turns the merge covers, inclusive.
    pub first: u64,
    pub last: u64,
    /// `CHILD@k:turns:a-b`.
    pub reference: String,
    /// The content of the `fork_result` turn.
    pub content: String,
}

/// How two sessions relate and where they part.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SessionDiff {
    pub a: String,
    pub b: String,
    /// The deepest session both chains share, if their lineage meets.
    pub common_ancestor: Option<String>,
    /// The number of leading turns both histories share (equal digests).
    pub common_prefix: u64,
    /// `lineage` when the chains meet, `digest` when only digests show the shared
    /// prefix (e.g. after a detach), `none` when nothing is shared.
    pub found_by: &'static str,
    /// The turns of `a` from `common_prefix` on.
    pub a_tail: Vec<ReplayRecord>,
    pub b_tail: Vec<ReplayRecord>,
}

/// Options of a delete. Deserializes from the query of `DELETE /sessions/{id}`.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DeleteOptions {
    /// Delete the whole subtree; without it a session with children is refused.
    pub cascade: bool,
    /// Validate and return the plan, write nothing.
    pub dry_run: bool,
}

/// What a delete did (or, for a dry run, would do).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeletePlan {
    /// The deleted sessions' ids: the named one first, then its descendants, parents
    /// before children.
    pub deleted: Vec<String>,
    /// The same sessions with what each held.
    pub sessions: Vec<DeletedSession>,
    /// Turns removed, over all of them (inherited turns are not theirs to remove).
    pub own_turns: u64,
}

/// One session a delete removes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeletedSession {
    pub session: String,
    pub branch: String,
    pub parent: Option<String>,
    pub own_turns: u64,
}

/// Options of a detach. Deserializes from the JSON body of `POST /sessions/{id}/detach`.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DetachOptions {
    /// Validate and return the plan, write nothing.
    pub dry_run: bool,
}

/// What a detach did (or, for a dry run, would do).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DetachPlan {
    pub session: String,
    /// The parent whose link is dropped.
    pub parent: String,
    /// Inherited turns copied into the session: indices `0..copied_turns`.
    pub copied_turns: u64,
    /// Where the copies come from, one span per ancestor, in index order.
    pub copied_from: Vec<TurnSpan>,
    /// The session's descendants, whose depth and fork root change with it.
    pub moved_up: Vec<MovedSession>,
}

/// Turns `from..to` (exclusive) stored by one session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TurnSpan {
    pub session: String,
    pub branch: String,
    pub from: u64,
    pub to: u64,
}

/// A descendant of a detached session: its depth before and after.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MovedSession {
    pub session: String,
    pub depth_before: u64,
    pub depth_after: u64,
}

/// What a fork did (or, for a dry run, would do).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ForkPlan {
    pub session: String,
    pub parent: String,
    pub forked_at_index: u64,
    pub branch: String,
    pub fork_root: String,
    pub depth: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// True when a `request_id` retry returned the fork made the first time.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reused: bool,
}

/// Facts about one session, without its turns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SessionInfo {
    pub session: String,
    pub branch: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub principal: Option<String>,
    pub parent: Option<String>,
    pub forked_at_index: Option<u64>,
    pub fork_root: String,
    pub depth: usize,
    /// Number of turns, inherited ones included (the next index).
    pub length: u64,
    pub own_turns: u64,
    pub created_at: Option<String>,
    /// The digest of the last turn (inherited or own): equal heads, equal histories.
    pub head_digest: Option<String>,
    /// The operational summary of the inherited prefix stored by `fork --summarize`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Turns inherited from ancestors (`length - own_turns`).
    pub inherited_turns: u64,
    /// Bytes of content of own and inherited turns (`Store::info` only; `list` leaves
    /// them out, since they need every turn).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub own_content_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inherited_content_bytes: Option<u64>,
    /// The models the session's own turns are attributed to (`Store::info` only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
    /// Token totals of the regenerations that produced this session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<TokenTotals>,
    /// For a sub-agent's transcript: which agent, and what launched it (`Store::info`
    /// only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subagent: Option<SubAgentInfo>,
}

/// The sub-agent whose transcript a session holds, and the launch it records.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SubAgentInfo {
    /// The id the tool gave the sub-agent.
    pub agent_id: String,
    /// The session and index of the turn whose tool call launched it; `None` while the
    /// launch is unresolved (that turn is not in the store).
    pub spawned_by: Option<TurnRef>,
    /// The id of the launching tool call, as the source names it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// The session the source says launched it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spawned_in_session: Option<String>,
}

/// A turn, by the session that stores it and its index.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TurnRef {
    pub session: String,
    pub index: u64,
}

/// Input and output tokens, as the model endpoints reported them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TokenTotals {
    pub input: u64,
    pub output: u64,
}

/// A direct child of a session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BranchInfo {
    pub session: String,
    pub branch: String,
    pub forked_at_index: u64,
    pub created_at: Option<String>,
    pub own_turns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// A session and its descendants.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TreeNode {
    pub session: String,
    pub branch: String,
    pub forked_at_index: Option<u64>,
    pub length: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<TokenTotals>,
    pub children: Vec<TreeNode>,
}
