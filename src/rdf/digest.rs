//! The turn digest chain, SHA-256 in hex, and the time stamps forktrail writes.

use crate::model::{Kind, Role};
use crate::vocab::xsd;
use oxigraph::model::Literal;
use sha2::{Digest, Sha256};

/// The digest of a turn: SHA-256, in lowercase hex, over
/// `prev "\n" index "\n" role "\n" kind "\n" content`, where `prev` is the digest of the
/// turn before it (the empty string for index 0). A fork's first turn chains onto the
/// parent's turn at `k - 1`, so equal digests mean equal histories.
///
/// ```
/// use forktrail::{turn_digest, Kind, Role};
/// let first = turn_digest("", 0, Role::User, Kind::Message, "hi");
/// let second = turn_digest(&first, 1, Role::Assistant, Kind::Message, "hello");
/// assert_eq!(first.len(), 64);
/// assert_ne!(first, second);
/// ```
pub fn turn_digest(prev: &str, index: u64, role: Role, kind: Kind, content: &str) -> String {
    sha256_hex(&[
        prev.as_bytes(),
        format!("\n{index}\n{role}\n{kind}\n").as_bytes(),
        content.as_bytes(),
    ])
}

/// SHA-256 over the concatenated `parts`, in lowercase hex.
pub(crate) fn sha256_hex(parts: &[&[u8]]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part);
    }
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
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
