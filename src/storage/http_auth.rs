//! Credentials for a remote store's HTTP requests: a token as `Bearer`; a user and
//! password as Basic or Digest (RFC 7616: MD5, `qop=auth`), whichever the store asks for
//! in its first 401, then sent with every request (Virtuoso's `/sparql-auth` takes
//! Digest only).

use md5::{Digest as _, Md5};
use std::sync::Mutex;

/// Credentials sent with every request. `Debug` never prints them.
#[derive(Clone, Default)]
pub enum RemoteAuth {
    #[default]
    None,
    /// `Authorization: Bearer TOKEN` (`forktrail serve`, GraphDB, Stardog, …).
    Bearer(String),
    /// A user and password (`user`, `password`), sent as HTTP Basic or Digest, whichever
    /// the store asks for in its first 401 (so never before it asks).
    Password(String, String),
}

impl std::fmt::Debug for RemoteAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RemoteAuth::None => "None",
            RemoteAuth::Bearer(_) => "Bearer(…)",
            RemoteAuth::Password(..) => "Password(…)",
        })
    }
}

pub(crate) struct Credentials {
    kind: Kind,
    state: Mutex<State>,
}

enum Kind {
    None,
    Bearer(String),
    Password { user: String, password: String },
}

/// What the store asked for, once it has.
enum State {
    Unasked,
    Basic,
    Digest(Challenge),
}

struct Challenge {
    realm: String,
    nonce: String,
    opaque: Option<String>,
    /// `qop=auth` offered: the response then covers a client nonce and a count.
    qop_auth: bool,
    /// Requests made with this nonce.
    count: u32,
}

impl Credentials {
    pub(crate) fn new(auth: &RemoteAuth) -> Self {
        let kind = match auth {
            RemoteAuth::None => Kind::None,
            RemoteAuth::Bearer(token) => Kind::Bearer(token.clone()),
            RemoteAuth::Password(user, password) => Kind::Password {
                user: user.clone(),
                password: password.clone(),
            },
        };
        Self {
            kind,
            state: Mutex::new(State::Unasked),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The `Authorization` header of a `method` request to `uri` (path and query), if
    /// one is due: a token always; a password once the store has said how it wants it
    /// (so it never crosses the network in the clear to a store that takes Digest).
    pub(crate) fn header(&self, method: &str, uri: &str) -> Option<String> {
        let (user, password) = match &self.kind {
            Kind::None => return None,
            Kind::Bearer(token) => return Some(format!("Bearer {token}")),
            Kind::Password { user, password } => (user, password),
        };
        match &mut *self.state() {
            State::Unasked => None,
            State::Basic => Some(format!(
                "Basic {}",
                base64(format!("{user}:{password}").as_bytes())
            )),
            State::Digest(c) => {
                c.count += 1;
                let cnonce = uuid::Uuid::now_v7().simple().to_string();
                Some(digest_header(c, user, password, method, uri, &cnonce))
            }
        }
    }

    /// Learns from a 401's `WWW-Authenticate` how the store wants the password; whether
    /// sending the request again can help (not when the same credentials were just
    /// refused the same way).
    pub(crate) fn challenged(&self, www_authenticate: Option<&str>) -> bool {
        if !matches!(self.kind, Kind::Password { .. }) {
            return false;
        }
        let Some(header) = www_authenticate else {
            return false;
        };
        let (scheme, params) = header.trim().split_once(' ').unwrap_or((header, ""));
        let mut state = self.state();
        if scheme.eq_ignore_ascii_case("digest") {
            let params = parse_params(params);
            let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
            let (Some(realm), Some(nonce)) = (get("realm"), get("nonce")) else {
                return false;
            };
            let stale = get("stale").is_some_and(|s| s.eq_ignore_ascii_case("true"));
            // The nonce we used, refused without being stale: the password is wrong.
            if matches!(&*state, State::Digest(c) if c.nonce == nonce) && !stale {
                return false;
            }
            let retry = !matches!(&*state, State::Digest(_)) || stale;
            *state = State::Digest(Challenge {
                realm,
                nonce,
                opaque: get("opaque"),
                qop_auth: get("qop")
                    .is_some_and(|q| q.split(',').any(|q| q.trim().eq_ignore_ascii_case("auth"))),
                count: 0,
            });
            retry
        } else if scheme.eq_ignore_ascii_case("basic") {
            let retry = !matches!(&*state, State::Basic);
            *state = State::Basic;
            retry
        } else {
            false
        }
    }
}

fn md5_hex(text: &str) -> String {
    Md5::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn digest_header(
    c: &Challenge,
    user: &str,
    password: &str,
    method: &str,
    uri: &str,
    cnonce: &str,
) -> String {
    let ha1 = md5_hex(&format!("{user}:{}:{password}", c.realm));
    let ha2 = md5_hex(&format!("{method}:{uri}"));
    let quote = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
    let mut header = format!(
        "Digest username=\"{}\", realm=\"{}\", nonce=\"{}\", uri=\"{}\", algorithm=MD5",
        quote(user),
        quote(&c.realm),
        quote(&c.nonce),
        quote(uri)
    );
    let response = if c.qop_auth {
        let nc = format!("{:08x}", c.count);
        header.push_str(&format!(", qop=auth, nc={nc}, cnonce=\"{cnonce}\""));
        md5_hex(&format!("{ha1}:{}:{nc}:{cnonce}:auth:{ha2}", c.nonce))
    } else {
        md5_hex(&format!("{ha1}:{}:{ha2}", c.nonce))
    };
    header.push_str(&format!(", response=\"{response}\""));
    if let Some(opaque) = &c.opaque {
        header.push_str(&format!(", opaque=\"{}\"", quote(opaque)));
    }
    header
}

/// `name=value` pairs of a challenge, values quoted (with `\` escapes) or bare.
fn parse_params(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| *c == ',' || c.is_whitespace()).is_some() {}
        let name: String = std::iter::from_fn(|| chars.next_if(|c| *c != '=' && *c != ','))
            .collect::<String>()
            .trim()
            .to_ascii_lowercase();
        if name.is_empty() {
            return out;
        }
        if chars.next_if_eq(&'=').is_none() {
            continue;
        }
        let mut value = String::new();
        if chars.next_if_eq(&'"').is_some() {
            while let Some(c) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next()),
                    '"' => break,
                    c => value.push(c),
                }
            }
        } else {
            value = std::iter::from_fn(|| chars.next_if(|c| *c != ','))
                .collect::<String>()
                .trim()
                .to_string();
        }
        out.push((name, value));
    }
}

/// Standard base64 with padding, for HTTP Basic credentials.
pub(crate) fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_response_matches_the_rfc_2617_example() {
        let c = Challenge {
            realm: "testrealm@host.com".into(),
            nonce: "dcd98b7102dd2f0e8b11d0f600bfb0c093".into(),
            opaque: Some("5ccc069c403ebaf9f0171e9517f40e41".into()),
            qop_auth: true,
            count: 1,
        };
        let header = digest_header(
            &c,
            "Mufasa",
            "Circle Of Life",
            "GET",
            "/dir/index.html",
            "0a4f113b",
        );
        assert!(
            header.contains("response=\"6629fae49393a05397450978507c4ef1\""),
            "{header}"
        );
        assert!(header.contains("nc=00000001"), "{header}");
        assert!(header.contains("opaque=\"5ccc069c403ebaf9f0171e9517f40e41\""));
    }

    #[test]
    fn a_password_goes_out_only_as_the_store_asks_and_a_refusal_is_not_retried() {
        let creds = Credentials::new(&RemoteAuth::Password("u".into(), "s3cret".into()));
        assert_eq!(creds.header("POST", "/sparql"), None);
        let challenge = r#"Digest realm="SPARQL", domain="/sparql-auth", nonce="n1", opaque="o, x", stale="false", qop="auth", algorithm="MD5""#;
        assert!(creds.challenged(Some(challenge)));
        let header = creds.header("POST", "/sparql-auth").unwrap();
        assert!(header.starts_with("Digest username=\"u\", realm=\"SPARQL\", nonce=\"n1\""));
        assert!(header.contains("opaque=\"o, x\""), "{header}");
        assert!(
            !header.contains("s3cret") && !header.contains("czNjcmV0"),
            "{header}"
        );
        // The same nonce refused again: wrong password, no retry.
        assert!(!creds.challenged(Some(challenge)));
        // A stale nonce: retry with the new one.
        let fresh = r#"Digest realm="SPARQL", nonce="n2", stale="true", qop="auth""#;
        assert!(creds.challenged(Some(fresh)));
        assert!(creds.header("POST", "/x").unwrap().contains("nonce=\"n2\""));

        let basic = Credentials::new(&RemoteAuth::Password("u".into(), "p".into()));
        assert!(basic.challenged(Some("Basic realm=\"x\"")));
        assert_eq!(basic.header("POST", "/").unwrap(), "Basic dTpw");
        assert!(!basic.challenged(Some("Basic realm=\"x\"")));
        // A token is always sent and never retried.
        let token = Credentials::new(&RemoteAuth::Bearer("t".into()));
        assert_eq!(token.header("POST", "/").unwrap(), "Bearer t");
        assert!(!token.challenged(Some("Basic realm=\"x\"")));
    }

    #[test]
    fn base64_matches_the_rfc_4648_vectors() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(plain.as_bytes()), encoded, "{plain:?}");
        }
    }
}
