//! The turn digest chain, SHA-256 in hex, and the time stamps forktrail writes.

use crate::model::tool_call::canonical_calls;
pub use crate::model::DigestVersion;
use crate::model::{Kind, NewTurn, Role, Turn};
use crate::vocab::xsd;
use oxigraph::model::Literal;
use sha2::{Digest, Sha256};

/// A turn's payload as a digest sees it: the text, or the SHA-256 (hex) of the text, which
/// is all the record index keeps of it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum PayloadRef<'a> {
    Text(&'a str),
    Sha256(&'a str),
}

/// What a turn's digest covers, borrowed from wherever the turn is held.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DigestFields<'a> {
    pub(crate) role: Role,
    pub(crate) kind: Kind,
    pub(crate) content: &'a str,
    pub(crate) name: Option<&'a str>,
    pub(crate) tool_call_id: Option<&'a str>,
    pub(crate) tool_calls: Option<&'a str>,
    pub(crate) payload: Option<PayloadRef<'a>>,
}

/// `From` a turn as written (`NewTurn`) and as loaded (`Turn`): both hold every field
/// the digest covers, under the same names.
macro_rules! digest_fields_from {
    ($($turn:ty),*) => {$(
        impl<'a> From<&'a $turn> for DigestFields<'a> {
            fn from(t: &'a $turn) -> Self {
                Self {
                    role: t.role,
                    kind: t.kind,
                    content: &t.content,
                    name: t.name.as_deref(),
                    tool_call_id: t.tool_call_id.as_deref(),
                    tool_calls: t.tool_calls.as_deref(),
                    payload: t.payload.as_deref().map(PayloadRef::Text),
                }
            }
        }
    )*};
}

digest_fields_from!(NewTurn, Turn);

/// The digest of `turn` at `index` after the turn whose digest is `prev` (the empty
/// string for index 0; a fork's first turn chains onto the parent's turn at `k - 1`), so
/// that equal digests mean equal histories. SHA-256, in lowercase hex, over
/// `prev "\n" index "\n" role "\n" kind extras "\n" content`, where `extras` is, for
/// each of `name`, `tool_call_id`, `tool_calls` (canonical) and `payload` (its SHA-256)
/// that the turn has, `";" field "=" length ":" value`; a turn without them has no extras
/// and digests as version 1 did. Time and attribution are left out: they say when and by
/// whom, not what, and a recorded history replayed by another model is still the same
/// history.
///
/// ```
/// use forktrail::{turn_digest, NewTurn, Role};
/// let first = turn_digest("", 0, &NewTurn::new(Role::User, "hi"));
/// let call = |day: &str| {
///     NewTurn::new(Role::Assistant, "")
///         .tool_calls(format!(r#"[{{"id":"1","function":{{"name":"search","arguments":"{{\"day\":\"{day}\"}}"}}}}]"#))
/// };
/// assert_eq!(first.len(), 64);
/// assert_ne!(turn_digest(&first, 1, &call("friday")), turn_digest(&first, 1, &call("sunday")));
/// ```
pub fn turn_digest(prev: &str, index: u64, turn: &NewTurn) -> String {
    digest_of(prev, index, &DigestFields::from(turn))
}

/// [`turn_digest`] of borrowed fields, in the current version.
pub(crate) fn digest_of(prev: &str, index: u64, turn: &DigestFields<'_>) -> String {
    digest_as(DigestVersion::CURRENT, prev, index, turn)
}

/// How an OpenTelemetry import names a turn of a conversation (its source id): the
/// digest of the history up to it, chained over the names before it, but without the
/// payload and the name, which the spans of one conversation report differently (the
/// span that answered carries the payload and the model; a later span's input repeats
/// the turn without them; a tool's name comes from its call or from its span).
pub(crate) fn history_name(prev: &str, index: u64, turn: &DigestFields<'_>) -> String {
    let bare = DigestFields {
        name: None,
        payload: None,
        ..*turn
    };
    digest_of(prev, index, &bare)
}

/// The digest of `turn` as `version` defines it.
pub(crate) fn digest_as(
    version: DigestVersion,
    prev: &str,
    index: u64,
    turn: &DigestFields<'_>,
) -> String {
    let mut hasher = Sha256::new();
    hasher.update(prev.as_bytes());
    hasher.update(b"\n");
    let mut number = [0u8; 20];
    hasher.update(decimal(index, &mut number));
    hasher.update(b"\n");
    hasher.update(turn.role.as_str().as_bytes());
    hasher.update(b"\n");
    hasher.update(turn.kind.as_str().as_bytes());
    if version >= DigestVersion::V2 {
        // Kind names hold no `;` and each value is length-prefixed, so the text hashed
        // is read back one way only: no content can pass for a field.
        let mut field = |name: &str, value: &str| {
            hasher.update(format!(";{name}={}:", value.len()).as_bytes());
            hasher.update(value.as_bytes());
        };
        if let Some(name) = turn.name {
            field("name", name);
        }
        if let Some(id) = turn.tool_call_id {
            field("tool_call_id", id);
        }
        if let Some(calls) = turn.tool_calls {
            match canonical_calls(calls) {
                Some(canonical) => field("tool_calls", &canonical),
                None => field("tool_calls_text", calls),
            }
        }
        match turn.payload {
            Some(PayloadRef::Text(text)) => field("payload_sha256", &payload_sha256(text)),
            Some(PayloadRef::Sha256(sha)) => field("payload_sha256", sha),
            None => {}
        }
    }
    hasher.update(b"\n");
    hasher.update(turn.content.as_bytes());
    hex(&hasher.finalize())
}

/// `n` in decimal, written into the end of `buf` (a digest is made per turn on every
/// check of the record index: no allocation).
fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[at..];
        }
    }
}

/// The SHA-256 (hex) of a payload, which the record index keeps instead of the payload.
pub(crate) fn payload_sha256(payload: &str) -> String {
    sha256_hex(&[payload.as_bytes()])
}

/// SHA-256 over the concatenated `parts`, in lowercase hex.
pub(crate) fn sha256_hex(parts: &[&[u8]]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part);
    }
    hex(&hasher.finalize())
}

/// Lowercase hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

/// The current time as an `xsd:dateTime` literal (UTC, milliseconds).
pub(crate) fn now() -> Literal {
    let text = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    Literal::new_typed_literal(text, xsd::DATE_TIME)
}

/// A stored `xsd:dateTime` as an instant, for ordering: Oxigraph writes it back in
/// canonical form (`.900Z` as `.9Z`), so the text does not sort by time.
pub(crate) fn instant(text: Option<&str>) -> Option<chrono::DateTime<chrono::FixedOffset>> {
    text.and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
}
