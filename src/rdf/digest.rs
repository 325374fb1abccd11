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
    let mut hasher = Sha256::new();
    hasher.update(prev.as_bytes());
    let mut number = [0u8; 20];
    let digits = {
        let mut n = index;
        let mut at = number.len();
        loop {
            at -= 1;
            number[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break at;
            }
        }
    };
    for part in [
        b"\n".as_slice(),
        &number[digits..],
        b"\n",
        role.as_str().as_bytes(),
        b"\n",
        kind.as_str().as_bytes(),
        b"\n",
        content.as_bytes(),
    ] {
        hasher.update(part);
    }
    hex(&hasher.finalize())
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
