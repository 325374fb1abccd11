//! Validated names, turns, records and option structs.

pub(crate) mod tool_call;

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
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
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

impl TryFrom<String> for SessionId {
    type Error = Error;
    fn try_from(s: String) -> Result<Self> {
        Self::new(s)
    }
}

impl From<SessionId> for String {
    fn from(id: SessionId) -> String {
        id.0
    }
}

impl PartialEq<str> for SessionId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for SessionId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for SessionId {
    fn eq(&self, other: &String) -> bool {
        self.0 == *other
    }
}

impl PartialEq<SessionId> for &str {
    fn eq(&self, other: &SessionId) -> bool {
        *self == other.0
    }
}

/// A session id reads as the text it is: `&id` goes where a `&str` is asked for.
impl std::ops::Deref for SessionId {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for SessionId {
    fn as_ref(&self) -> &str {
        &self.0
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

/// An enum stored and printed by name: `as_str`, `NAMES`, `FromStr` (an unknown name
/// is the error given), `Display`, and serde through the name.
macro_rules! named {
    (
        $(#[$meta:meta])*
        pub enum $ty:ident { $($(#[$vmeta:meta])* $variant:ident = $name:literal),* $(,)? }
        unknown($text:ident) => $err:expr
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(into = "&'static str", try_from = "String")]
        pub enum $ty {
            $($(#[$vmeta])* $variant),*
        }

        impl $ty {
            /// Every name, in order.
            pub const NAMES: &'static [&'static str] = &[$($name),*];

            /// The name as stored and printed.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $name),*
                }
            }
        }

        impl FromStr for $ty {
            type Err = Error;
            fn from_str($text: &str) -> Result<Self> {
                match $text {
                    $($name => Ok($ty::$variant),)*
                    _ => Err($err),
                }
            }
        }

        impl TryFrom<String> for $ty {
            type Error = Error;
            fn try_from(text: String) -> Result<Self> {
                text.parse()
            }
        }

        impl From<$ty> for &'static str {
            fn from(value: $ty) -> Self {
                value.as_str()
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl PartialEq<&str> for $ty {
            fn eq(&self, name: &&str) -> bool {
                self.as_str() == *name
            }
        }
    };
}

named! {
    /// The role of a turn.
    pub enum Role {
        System = "system",
        User = "user",
        Assistant = "assistant",
        Tool = "tool",
    }
    unknown(text) => Error::InvalidRole { value: text.into() }
}

named! {
    /// What a turn is; `message` unless said otherwise.
    #[derive(Default)]
    pub enum Kind {
        #[default]
        Message = "message",
        ToolCall = "tool_call",
        Usage = "usage",
        Compaction = "compaction",
        Note = "note",
        ForkResult = "fork_result",
    }
    unknown(text) => Error::InvalidKind { value: text.into() }
}

impl Kind {
    /// Whether this is the default kind, `message` (which records and quads leave out).
    pub fn is_message(&self) -> bool {
        *self == Kind::Message
    }
}

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
    /// The runtime's own record of the turn, as a JSON text kept and returned as given
    /// (an OpenAI Agents SDK item, say), so that a runtime reads back exactly what it
    /// wrote. The digest covers it (by its SHA-256), as it covers `tool_calls`.
    pub payload: Option<String>,
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
            payload: None,
        }
    }

    /// A turn whose role and kind are given by name, as the REST API takes them; an
    /// unknown name is [`Error::InvalidRole`] or [`Error::InvalidKind`].
    ///
    /// ```
    /// use forktrail::{Kind, NewTurn, Role};
    /// let turn = NewTurn::parse("user", "note", "remember this")?;
    /// assert_eq!((turn.role, turn.kind), (Role::User, Kind::Note));
    /// assert!(NewTurn::parse("robot", "message", "x").is_err());
    /// # Ok::<(), forktrail::Error>(())
    /// ```
    pub fn parse(role: &str, kind: &str, content: impl Into<String>) -> Result<Self> {
        Ok(Self::new(role.parse()?, content).kind(kind.parse()?))
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

    /// Sets the runtime's own record of the turn (a JSON text).
    pub fn payload(mut self, json: impl Into<String>) -> Self {
        self.payload = Some(json.into());
        self
    }
}

impl From<&Turn> for NewTurn {
    /// The turn as it would be written again: what it says, not where or when.
    fn from(t: &Turn) -> Self {
        Self {
            role: t.role,
            content: t.content.clone(),
            kind: t.kind,
            name: t.name.clone(),
            tool_call_id: t.tool_call_id.clone(),
            tool_calls: t.tool_calls.clone(),
            model: t.model.clone(),
            payload: t.payload.clone(),
        }
    }
}

/// A stored turn, as loaded. It serializes with `tool_calls` and `payload` as the JSON
/// they hold (not as text), as the REST API and the MCP server return it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Turn {
    pub index: u64,
    pub role: Role,
    pub kind: Kind,
    pub content: String,
    pub name: Option<String>,
    pub tool_call_id: Option<String>,
    #[serde(serialize_with = "json_text")]
    pub tool_calls: Option<String>,
    pub model: Option<String>,
    /// See [`NewTurn::payload`].
    #[serde(serialize_with = "json_text")]
    pub payload: Option<String>,
    /// The session that owns (stored) this turn.
    pub session: SessionId,
    /// The branch label of the session the turn was first written on.
    pub branch: String,
    pub created_at: Option<String>,
    /// SHA-256 chained over the predecessor's digest, see [`crate::turn_digest`].
    pub digest: String,
}

/// Which fields a turn's digest covers. A store records the version its digests were
/// made with (`ft:digestVersion` on `{base}store`); a store of an older version is
/// brought to the current one when it is opened (`Store::upgrade_digests`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(into = "u8")]
pub enum DigestVersion {
    /// Role, kind and content only: two histories that differ only in a tool call's
    /// arguments, its id, a tool result's call or a payload digest alike.
    V1 = 1,
    /// Everything that makes a turn what the model saw or said: role, kind, content,
    /// the speaker's or tool's name, the tool call a result answers, the tool calls
    /// (canonical: name, id, arguments with sorted keys, in call order) and the payload.
    /// A turn with none of the last four digests as in version 1.
    #[default]
    V2 = 2,
}

impl DigestVersion {
    /// The version this code writes.
    pub const CURRENT: DigestVersion = DigestVersion::V2;

    /// The version a stored number names.
    pub fn from_number(n: u64) -> Option<Self> {
        match n {
            1 => Some(Self::V1),
            2 => Some(Self::V2),
            _ => None,
        }
    }

    /// The number stored for it.
    pub fn number(self) -> u8 {
        self as u8
    }
}

impl From<DigestVersion> for u8 {
    fn from(v: DigestVersion) -> u8 {
        v.number()
    }
}

impl std::fmt::Display for DigestVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.number())
    }
}

/// What [`Store::upgrade_digests`](crate::Store::upgrade_digests) did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct UpgradeReport {
    /// The version the store's digests were made with.
    pub from: DigestVersion,
    /// The version they are made with now.
    pub to: DigestVersion,
    /// Sessions whose digests were rewritten.
    pub sessions: usize,
    /// Turns whose digest was rewritten.
    pub turns: u64,
}

impl UpgradeReport {
    /// Whether the store was brought from an older version.
    pub fn upgraded(&self) -> bool {
        self.from != self.to
    }
}

/// The plain record replay returns: one per turn, in order. `{index, role, content,
/// branch}`, and what else makes the turn what the model saw or said where the turn has
/// it: its `kind` when it is not a message, the speaker's or tool's `name`, the
/// `tool_call_id` a result answers and the `tool_calls` an assistant turn makes (as
/// JSON), so that two histories that differ only in a call's arguments replay apart.
/// It deserializes too, so the JSON and JSONL replays (`replay --json`, `export --format
/// jsonl`) read back.
///
/// ```
/// use forktrail::{ReplayRecord, Role};
/// let record = ReplayRecord::new(0, Role::User, "hi", "main");
/// assert_eq!(
///     serde_json::to_string(&record)?,
///     r#"{"index":0,"role":"user","content":"hi","branch":"main"}"#
/// );
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayRecord {
    pub index: u64,
    pub role: Role,
    pub content: String,
    pub branch: String,
    #[serde(default, skip_serializing_if = "Kind::is_message")]
    pub kind: Kind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// The tool calls, a JSON text (written as the JSON it holds).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "json_text",
        deserialize_with = "json_text_in"
    )]
    pub tool_calls: Option<String>,
}

impl ReplayRecord {
    /// A record of a plain message turn.
    pub fn new(
        index: u64,
        role: Role,
        content: impl Into<String>,
        branch: impl Into<String>,
    ) -> Self {
        Self {
            index,
            role,
            content: content.into(),
            branch: branch.into(),
            kind: Kind::Message,
            name: None,
            tool_call_id: None,
            tool_calls: None,
        }
    }

    /// The record of `turn` at `index`, in `branch`.
    pub fn of(index: u64, turn: &NewTurn, branch: impl Into<String>) -> Self {
        Self {
            index,
            role: turn.role,
            content: turn.content.clone(),
            branch: branch.into(),
            kind: turn.kind,
            name: turn.name.clone(),
            tool_call_id: turn.tool_call_id.clone(),
            tool_calls: turn.tool_calls.clone(),
        }
    }
}

/// A JSON value read back as the text [`json_text`] wrote it from: a string as itself,
/// anything else as JSON text.
fn json_text_in<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> std::result::Result<Option<String>, D::Error> {
    Ok(
        match Option::<serde_json::Value>::deserialize(deserializer)? {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::String(s)) => Some(s),
            Some(other) => Some(other.to_string()),
        },
    )
}

/// A JSON text written as the JSON it holds (as a string if it is not JSON).
fn json_text<S: serde::Serializer>(
    text: &Option<String>,
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    match text
        .as_deref()
        .map(serde_json::from_str::<serde_json::Value>)
    {
        Some(Ok(value)) => value.serialize(serializer),
        _ => text.serialize(serializer),
    }
}

impl From<&Turn> for ReplayRecord {
    fn from(t: &Turn) -> Self {
        Self {
            index: t.index,
            role: t.role,
            content: t.content.clone(),
            branch: t.branch.clone(),
            kind: t.kind,
            name: t.name.clone(),
            tool_call_id: t.tool_call_id.clone(),
            tool_calls: t.tool_calls.clone(),
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

/// Validates a name used as an anchor name or request id (the branch-label rules).
pub(crate) fn check_key(what: &'static str, value: &str) -> Result<()> {
    check_name(value, LABEL_MAX).map_err(|reason| Error::InvalidName {
        what,
        value: value.to_string(),
        reason,
    })
}

/// A named point in a session: its length when the anchor was set.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AnchorInfo {
    pub name: String,
    /// The session that set the anchor (an ancestor, for inherited anchors).
    pub session: SessionId,
    /// The session's length when the anchor was set: a fork point.
    pub at_index: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<serde_json::Value>,
    pub created_at: Option<String>,
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

/// What a merge did (or, for a dry run, would do).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MergePlan {
    pub child: SessionId,
    pub into: SessionId,
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
    pub a: SessionId,
    pub b: SessionId,
    /// The deepest session both chains share, if their lineage meets.
    pub common_ancestor: Option<SessionId>,
    /// The number of leading turns both histories share (equal digests).
    pub common_prefix: u64,
    /// How the shared prefix was found.
    pub found_by: FoundBy,
    /// The turns of `a` from `common_prefix` on.
    pub a_tail: Vec<ReplayRecord>,
    pub b_tail: Vec<ReplayRecord>,
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

/// What a delete did (or, for a dry run, would do). As JSON a dry run names the ids
/// `would_delete`, not `deleted`, and says `"dry_run": true`: nothing was deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeletePlan {
    /// The deleted sessions' ids: the named one first, then its descendants, parents
    /// before children.
    pub deleted: Vec<SessionId>,
    /// The same sessions with what each held.
    pub sessions: Vec<DeletedSession>,
    /// Turns removed, over all of them (inherited turns are not theirs to remove).
    pub own_turns: u64,
    /// Whether this is a plan only and nothing was deleted.
    pub dry_run: bool,
}

impl Serialize for DeletePlan {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut plan = serializer.serialize_struct("DeletePlan", 4)?;
        let ids = if self.dry_run {
            "would_delete"
        } else {
            "deleted"
        };
        plan.serialize_field(ids, &self.deleted)?;
        plan.serialize_field("sessions", &self.sessions)?;
        plan.serialize_field("own_turns", &self.own_turns)?;
        plan.serialize_field("dry_run", &self.dry_run)?;
        plan.end()
    }
}

/// One session a delete removes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeletedSession {
    pub session: SessionId,
    pub branch: String,
    pub parent: Option<SessionId>,
    pub own_turns: u64,
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

/// What a detach did (or, for a dry run, would do).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DetachPlan {
    pub session: SessionId,
    /// The parent whose link is dropped.
    pub parent: SessionId,
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
    pub session: SessionId,
    pub branch: String,
    pub from: u64,
    pub to: u64,
}

/// A descendant of a detached session: its depth before and after.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MovedSession {
    pub session: SessionId,
    pub depth_before: u64,
    pub depth_after: u64,
}

/// How [`SessionDiff`] found what two sessions share.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FoundBy {
    /// Their chains meet: a common ancestor.
    Lineage,
    /// No common ancestor, but equal digests (e.g. after a detach).
    Digest,
    /// Nothing is shared.
    None,
}

/// What a fork did (or, for a dry run, would do).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ForkPlan {
    pub session: SessionId,
    pub parent: SessionId,
    pub forked_at_index: u64,
    pub branch: String,
    pub fork_root: SessionId,
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
    pub session: SessionId,
    pub branch: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub principal: Option<String>,
    pub parent: Option<SessionId>,
    pub forked_at_index: Option<u64>,
    pub fork_root: SessionId,
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
    /// For the fork of a what-if run: the run, its comparison and how it ended
    /// (`Store::info` only). A run that is not `complete` did not reach the end of the
    /// recording.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub what_if: Option<WhatIfInfo>,
}

/// The what-if run a fork holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WhatIfInfo {
    pub comparison: String,
    pub run: String,
    pub arm: String,
    pub status: RunStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
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
    /// The session the source says launched it, by the source's own id (kept as the
    /// source wrote it: it need not name a session in this store).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spawned_in_session: Option<String>,
}

/// A turn, by the session that stores it and its index.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TurnRef {
    pub session: SessionId,
    pub index: u64,
}

named! {
    /// Where a regeneration job is.
    pub enum JobStatus {
        /// Recorded, the model called or about to be.
        Running = "running",
        /// The answer is recorded in its fork.
        Complete = "complete",
        /// The call or the answer failed; nothing but the status is written.
        Failed = "failed",
        /// Stopped by a caller; nothing but the status is written.
        Cancelled = "cancelled",
    }
    unknown(text) => Error::Corrupt {
        session: "(a regeneration job)".into(),
        detail: format!("unknown job status {text:?}"),
    }
}

named! {
    /// Where a what-if run is: `running` until it ends, then why it ended. A run that
    /// ended keeps every step it committed; only `complete` reached the end of the
    /// recorded user turns.
    pub enum RunStatus {
        /// Steps are being taken (or the process taking them died: resume it).
        Running = "running",
        /// Every recorded user turn after the fork point was answered.
        Complete = "complete",
        /// The model called a tool the recording holds no answer to.
        UnansweredToolCall = "unanswered_tool_call",
        /// The run took its most steps.
        MaxSteps = "max_steps",
        /// The next call could have passed the comparison's money cap.
        BudgetExhausted = "budget_exhausted",
        /// A call or its answer failed.
        Failed = "failed",
        /// Stopped by a caller.
        Cancelled = "cancelled",
    }
    unknown(text) => Error::Corrupt {
        session: "(a what-if run)".into(),
        detail: format!("unknown run status {text:?}"),
    }
}

named! {
    /// Where a comparison is: `running` while any of its runs is, else `ended`.
    pub enum ComparisonStatus {
        /// A run is taking steps (or the process taking them died: resume it).
        Running = "running",
        /// Every run ended.
        Ended = "ended",
    }
    unknown(text) => Error::InvalidInput(format!("unknown comparison status {text:?}"))
}

/// Where an arm of a comparison is: the baseline is the session as recorded, another
/// arm is where its run is. Written as one name: `recorded`, or the run status's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArmStatus {
    /// The baseline: the turns as recorded.
    Recorded,
    /// An arm's run.
    Run(RunStatus),
}

impl ArmStatus {
    /// The name as printed and served.
    pub fn as_str(self) -> &'static str {
        match self {
            ArmStatus::Recorded => "recorded",
            ArmStatus::Run(status) => status.as_str(),
        }
    }
}

impl Serialize for ArmStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl fmt::Display for ArmStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for ArmStatus {
    fn eq(&self, name: &&str) -> bool {
        self.as_str() == *name
    }
}

/// What one model call cost and took, as the endpoint reported it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CallFigures {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cached_tokens: Option<u64>,
    pub latency_ms: u64,
    pub finish_reason: Option<String>,
    /// From the given prices and the reported usage; `None` when unpriced or unmeasured.
    pub cost_usd: Option<f64>,
    /// What the budget counted: the cost, or the call's upper bound when the endpoint
    /// reported no usage.
    pub charged_usd: f64,
}

/// A regeneration job.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Job {
    pub job: String,
    pub status: JobStatus,
    pub session: SessionId,
    pub at: u64,
    pub model: String,
    pub endpoint: String,
    pub reason: String,
    /// The fork holding the answer, once complete.
    pub fork: Option<SessionId>,
    pub created_at: Option<String>,
    pub completed_at: Option<String>,
    pub error: Option<String>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub latency_ms: Option<u64>,
    /// SHA-256 of the exact request body (stored whole as `ft:requestBody`).
    pub request_digest: String,
    /// The money cap the call was held to, in US dollars.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_usd: Option<f64>,
    /// True when an identical earlier request's job is returned instead of a new call.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reused: bool,
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
    pub session: SessionId,
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
    pub session: SessionId,
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
    /// How many children are left out ([`crate::Store::tree_within`]'s limit).
    #[serde(skip_serializing_if = "is_zero")]
    pub more_children: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Args, FromArgMatches};
    use serde_json::json;

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

    #[test]
    fn a_session_id_reads_as_its_text_and_rejects_bad_ones() {
        let id = SessionId::new("a.b:c-1").unwrap();
        assert_eq!(&*id, "a.b:c-1");
        assert_eq!(id, "a.b:c-1");
        assert_eq!(serde_json::to_value(&id).unwrap(), json!("a.b:c-1"));
        assert_eq!(
            serde_json::from_value::<SessionId>(json!("x")).unwrap(),
            "x"
        );
        assert!(serde_json::from_value::<SessionId>(json!("x y")).is_err());
        assert!("x y".parse::<SessionId>().is_err());
    }
}
