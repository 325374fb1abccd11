//! Validated names: session ids, branch labels, agents, the keys of anchors and
//! requests; and `named!`, which declares an enum stored and printed by name.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

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

/// Validates a name used as an anchor name or request id (the branch-label rules).
pub(crate) fn check_key(what: &'static str, value: &str) -> Result<()> {
    check_name(value, LABEL_MAX).map_err(|reason| Error::InvalidName {
        what,
        value: value.to_string(),
        reason,
    })
}

/// An enum stored and printed by name: `as_str`, `NAMES`, `FromStr` (an unknown name
/// is the error given), `Display`, `== "name"`, and serde through the name. The other
/// files of `model` take it as `super::names::named`.
macro_rules! named {
    (
        $(#[$meta:meta])*
        pub enum $ty:ident { $($(#[$vmeta:meta])* $variant:ident = $name:literal),* $(,)? }
        unknown($text:ident) => $err:expr
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[derive(::serde::Serialize, ::serde::Deserialize)]
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

        impl ::std::str::FromStr for $ty {
            type Err = $crate::error::Error;
            fn from_str($text: &str) -> $crate::error::Result<Self> {
                match $text {
                    $($name => Ok($ty::$variant),)*
                    _ => Err($err),
                }
            }
        }

        impl TryFrom<String> for $ty {
            type Error = $crate::error::Error;
            fn try_from(text: String) -> $crate::error::Result<Self> {
                text.parse()
            }
        }

        impl From<$ty> for &'static str {
            fn from(value: $ty) -> Self {
                value.as_str()
            }
        }

        $crate::model::names::shown_by_name!($ty);
    };
}

pub(super) use named;

/// `Display` and `== "name"` for a type whose `as_str(self)` gives its name: every
/// `named!` enum, and the statuses that are written as one name but hold more.
macro_rules! shown_by_name {
    ($ty:ty) => {
        impl ::std::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
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

pub(super) use shown_by_name;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
