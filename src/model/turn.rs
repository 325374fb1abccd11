//! Turns: their roles and kinds, a turn to append, a stored turn, the record replay
//! returns, and which fields a turn's digest covers.

use super::names::{named, SessionId};
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

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
