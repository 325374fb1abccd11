//! The secrets this process holds, and the one way text from outside is made safe to
//! keep: [`excerpt`] (an endpoint's or a store's error, capped) and [`scrub`] (a model's
//! answer, whole). Both take every secret out before the text is stored, logged or
//! shown, so that an endpoint that echoes the request's `Authorization` or `x-api-key`
//! header cannot make forktrail hand a key to whoever reads the store.
//!
//! The secrets are read from the environment at each call (`$OPENAI_API_KEY`,
//! `$ANTHROPIC_API_KEY`, `$FORKTRAIL_TOKEN`, `$FORKTRAIL_STORE_TOKEN`,
//! `$FORKTRAIL_STORE_PASSWORD`), plus those a caller hands over in code ([`hold`]: the
//! server's token, a remote store's credentials and their Basic form). Each is also
//! looked for as JSON and URL encoding write it.
//!
//! ```
//! forktrail::secrets::hold("tok-a8f3c1d9e2");
//! let echoed = r#"{"error": "Incorrect API key provided: tok-a8f3c1d9e2"}"#;
//! assert_eq!(
//!     forktrail::secrets::excerpt(echoed),
//!     r#"{"error": "Incorrect API key provided: [redacted]"}"#
//! );
//! ```

use std::sync::Mutex;

/// What a secret is replaced with.
pub const REDACTED: &str = "[redacted]";

/// The most characters of outside text kept as an error message or detail: enough to
/// say what went wrong, not a copy of whatever the other side sent.
pub const EXCERPT_CHARS: usize = 500;

/// The most characters of an error message stored or returned: forktrail's own words
/// around an outside excerpt (the URL, what to do), which are not cut at
/// [`EXCERPT_CHARS`], but still a bound.
pub const MESSAGE_CHARS: usize = 2_000;

/// Secrets shorter than this are not looked for: no key or token is, and replacing a
/// short string everywhere would mangle every message.
pub const MIN_SECRET_CHARS: usize = 4;

/// The environment variables whose values are secrets.
pub const SECRET_VARIABLES: [&str; 5] = [
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "FORKTRAIL_TOKEN",
    "FORKTRAIL_STORE_TOKEN",
    "FORKTRAIL_STORE_PASSWORD",
];

/// Header names whose value is a credential, wherever an echo writes them: the value
/// that follows is redacted even when it is no secret this process holds (a gateway
/// may echo another client's key, or a key cut short).
const CREDENTIAL_NAMES: [&str; 4] = ["bearer", "basic", "x-api-key", "api-key"];

/// Secrets handed over in code, for as long as the process runs.
static HELD: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Adds `secret` to those taken out of outside text (from now on, for the life of the
/// process).
pub fn hold(secret: &str) {
    if secret.chars().count() < MIN_SECRET_CHARS {
        return;
    }
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    if !held.iter().any(|s| s == secret) {
        held.push(secret.to_string());
    }
}

/// `text` (a model's answer, say) with every secret this process holds replaced by
/// [`REDACTED`]; nothing else is changed and nothing is cut.
pub fn scrub(text: &str) -> String {
    let mut out = text.to_string();
    for secret in known() {
        if out.contains(&secret) {
            out = out.replace(&secret, REDACTED);
        }
    }
    out
}

/// `text` from outside (an error body, a transport error) as it may be kept: every
/// secret this process holds and every credential header value replaced by
/// [`REDACTED`], then cut to [`EXCERPT_CHARS`] characters. Scrubbed before it is cut,
/// so that no part of a secret survives at the cut.
pub fn excerpt(text: &str) -> String {
    cut(redact_credentials(&scrub(text)), EXCERPT_CHARS)
}

/// An error message as it is stored: every secret and credential header value
/// redacted as by [`excerpt`], cut at [`MESSAGE_CHARS`]. The outside text in it was
/// excerpted where it came in; this keeps the words forktrail put around it whole.
pub fn message(text: &str) -> String {
    cut(redact_credentials(&scrub(text)), MESSAGE_CHARS)
}

fn cut(text: String, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

/// Every secret, with the forms an echo may give it (JSON-escaped, percent-encoded),
/// longest first, so that a secret holding another is replaced whole.
fn known() -> Vec<String> {
    let mut plain: Vec<String> = HELD.lock().unwrap_or_else(|e| e.into_inner()).clone();
    plain.extend(
        SECRET_VARIABLES
            .iter()
            .filter_map(|v| std::env::var(v).ok())
            .filter(|s| s.chars().count() >= MIN_SECRET_CHARS),
    );
    let mut all = Vec::new();
    for secret in plain {
        let quoted = serde_json::to_string(&secret).unwrap_or_default();
        let json = quoted
            .strip_prefix('"')
            .and_then(|q| q.strip_suffix('"'))
            .unwrap_or_default()
            .to_string();
        let url: String = url::form_urlencoded::byte_serialize(secret.as_bytes()).collect();
        for form in [secret, json, url] {
            if !form.is_empty() && !all.contains(&form) {
                all.push(form);
            }
        }
    }
    all.sort_by_key(|s: &String| std::cmp::Reverse(s.len()));
    all
}

/// Where `name` next stands as a word of its own in `lower`, from byte `from` on (not
/// inside a longer word: `basically` is no `basic`).
fn next_name(lower: &str, from: usize, name: &str) -> Option<usize> {
    let mut at = from;
    while let Some(i) = lower[at..].find(name).map(|i| at + i) {
        let before = lower[..i].chars().next_back();
        let after = lower[i + name.len()..].chars().next();
        if !before.is_some_and(|c| c.is_ascii_alphanumeric())
            && !after.is_some_and(|c| c.is_ascii_alphanumeric())
        {
            return Some(i);
        }
        at = i + name.len();
    }
    None
}

/// Whether `c` may be part of a credential as headers carry them (RFC 6750's b64token,
/// and the key formats of the providers).
fn credential_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-._~+/=".contains(c)
}

/// `text` with the value after each credential name (`Bearer`, `Basic`, `x-api-key`,
/// `api-key`, any case, then separators such as `: = " '`) replaced by [`REDACTED`].
fn redact_credentials(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while at < text.len() {
        let found = CREDENTIAL_NAMES
            .iter()
            .filter_map(|name| next_name(&lower, at, name).map(|i| (i, name.len())))
            .min();
        let Some((start, len)) = found else {
            out.push_str(&text[at..]);
            break;
        };
        let name_end = start + len;
        let value_start = name_end
            + text[name_end..]
                .char_indices()
                .find(|(_, c)| !matches!(c, ' ' | ':' | '=' | '"' | '\'' | '\\'))
                .map_or(text.len() - name_end, |(i, _)| i);
        let value_end = value_start
            + text[value_start..]
                .char_indices()
                .find(|(_, c)| !credential_char(*c))
                .map_or(text.len() - value_start, |(i, _)| i);
        out.push_str(&text[at..value_start]);
        // A value of a few characters is a word, not a credential ("Bearer is missing").
        if text[value_start..value_end].chars().count() >= MIN_SECRET_CHARS + 4 {
            out.push_str(REDACTED);
        } else {
            out.push_str(&text[value_start..value_end]);
        }
        at = value_end.max(name_end);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_secret_is_replaced_plain_json_escaped_and_percent_encoded() {
        hold("k3y\"with/odd&chars");
        let text = r#"a k3y"with/odd&chars b "k3y\"with/odd&chars" c k3y%22with%2Fodd%26chars"#;
        let out = scrub(text);
        assert_eq!(out, r#"a [redacted] b "[redacted]" c [redacted]"#);
    }

    #[test]
    fn credential_headers_are_redacted_whatever_their_value() {
        let text = "seen: Authorization: Bearer sk-unknown-0123456789, \
                    {\"x-api-key\": \"sk-ant-zzzzzzzzzzzz\"}, Basic dXNlcjpwYXNzd29yZA==";
        let out = excerpt(text);
        assert_eq!(
            out,
            "seen: Authorization: Bearer [redacted], {\"x-api-key\": \"[redacted]\"}, \
             Basic [redacted]"
        );
        // Words are left alone.
        assert_eq!(
            excerpt("Bearer is missing; basically fine"),
            "Bearer is missing; basically fine"
        );
        assert_eq!(
            excerpt("basically: Basic dXNlcjpwYXNzd29yZA=="),
            "basically: Basic [redacted]"
        );
    }

    #[test]
    fn an_excerpt_is_cut_after_scrubbing_so_no_part_of_a_secret_survives_the_cut() {
        hold("secret-at-the-cut-0123456789");
        let text = format!(
            "{}secret-at-the-cut-0123456789",
            "x".repeat(EXCERPT_CHARS - 5)
        );
        let out = excerpt(&text);
        assert!(!out.contains("secret"), "{out}");
        assert_eq!(
            out.chars().count(),
            EXCERPT_CHARS + 1,
            "cut, with an ellipsis"
        );
    }

    #[test]
    fn a_message_keeps_its_own_words_around_an_excerpt_but_no_secret_and_is_bounded() {
        hold("secret-in-a-message-0123456789");
        let outside = format!("{} secret-in-a-message-0123456789", "y".repeat(900));
        let advice = "then set SSL_CERT_FILE to ca.pem";
        let out = message(&format!("refused ({}); {advice}", excerpt(&outside)));
        assert!(out.ends_with(advice), "{out}");
        assert!(!out.contains("secret-in"), "{out}");
        let held = message(&format!("{advice} Bearer secret-in-a-message-0123456789"));
        assert!(!held.contains("secret-in"), "{held}");
        let long = message(&"z".repeat(3 * MESSAGE_CHARS));
        assert_eq!(long.chars().count(), MESSAGE_CHARS + 1);
    }

    #[test]
    fn short_values_are_not_secrets() {
        hold("abc");
        assert_eq!(scrub("abc abc"), "abc abc");
    }
}
