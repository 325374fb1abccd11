//! Requests must be meant for this server, and writes must come from its own pages.
//!
//! **DNS rebinding.** A web page on `attacker.test` can point its own name at
//! 127.0.0.1 and then read a loopback `forktrail serve` as if it were its own origin;
//! the only trace is the `Host` header, which still says `attacker.test`. So `Host`
//! must be a loopback name (`localhost`, `*.localhost`), an IP address (a page reached
//! by its address has no name to rebind), or a name given with `--allow-host`.
//!
//! **Cross-site writes.** A form on another site can POST to the server; a browser
//! says so in `Sec-Fetch-Site` and `Origin`. A write (any method but GET, HEAD and
//! OPTIONS) whose `Sec-Fetch-Site` is not `same-origin` or `none`, or whose `Origin`
//! is not this server's, is refused whatever token it carries. Clients that are not
//! browsers send neither header and are not affected.

use super::{ApiError, ServerConfig, Shared};
use axum::extract::Request;
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The middleware: refuses what [`check`] refuses, before any handler runs.
pub(super) async fn guard(state: Shared, request: Request, next: Next) -> Response {
    match check(&state.config, request.method(), request.headers()) {
        Ok(()) => next.run(request).await,
        Err(e) => e.into_response(),
    }
}

/// Whether a request with `method` and `headers` may reach the server.
pub(super) fn check(
    config: &ServerConfig,
    method: &Method,
    headers: &HeaderMap,
) -> Result<(), ApiError> {
    let text = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    // HTTP/1.0 clients may send no Host; every browser sends one.
    let host = text(header::HOST);
    if let Some(host) = host {
        let name = host_name(host);
        if !allowed(config, name) {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "host_not_allowed",
                format!(
                    "requests must name this server, not {name:?} (a guard against DNS \
                     rebinding); if clients reach it by that name, serve with \
                     --allow-host {name}"
                ),
            ));
        }
    }
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return Ok(());
    }
    let cross = |why: String| {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "cross_site",
            format!("a write from another site is refused: {why}"),
        ))
    };
    if let Some(site) = text(header::HeaderName::from_static("sec-fetch-site")) {
        if !matches!(site, "same-origin" | "none") {
            return cross(format!("the browser says it comes from a {site} page"));
        }
    }
    if let Some(origin) = foreign_origin(headers) {
        return cross(format!("its origin {origin} is not this server"));
    }
    Ok(())
}

/// The request's `Origin`, when it has one that is not this server (the authority its
/// `Host` names).
pub(super) fn foreign_origin(headers: &HeaderMap) -> Option<&str> {
    let text = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    let origin = match headers.get(header::ORIGIN) {
        None => return None,
        Some(value) => value.to_str().unwrap_or("(not text)"),
    };
    let authority = origin
        .split_once("://")
        .map(|(_, rest)| rest.trim_end_matches('/'));
    let same = match (authority, text(header::HOST)) {
        (Some(authority), Some(host)) => authority.eq_ignore_ascii_case(host),
        _ => false,
    };
    (!same).then_some(origin)
}

/// The host name of a `Host` header: without its port, an IPv6 address without its
/// brackets, without a trailing dot.
fn host_name(host: &str) -> &str {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(v6),
        None => host.rsplit_once(':').map_or(host, |(name, port)| {
            if port.chars().all(|c| c.is_ascii_digit()) {
                name
            } else {
                host
            }
        }),
    };
    name.strip_suffix('.').unwrap_or(name)
}

fn allowed(config: &ServerConfig, name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower == "localhost"
        || lower.ends_with(".localhost")
        || name.parse::<std::net::IpAddr>().is_ok()
        || config
            .allowed_hosts
            .iter()
            .any(|h| h == "*" || h.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn loopback_names_and_addresses_pass_other_names_only_when_allowed() {
        let config = ServerConfig::default();
        for host in [
            "localhost:7878",
            "LOCALHOST",
            "app.localhost:80",
            "127.0.0.1:7878",
            "[::1]:7878",
            "192.0.2.7",
            "localhost.",
        ] {
            assert!(
                check(&config, &Method::GET, &headers(&[("host", host)])).is_ok(),
                "{host}"
            );
        }
        for host in [
            "attacker.test",
            "127.0.0.1.nip.io:7878",
            "localhost.attacker.test",
        ] {
            let err = check(&config, &Method::GET, &headers(&[("host", host)])).unwrap_err();
            assert_eq!(err.code, "host_not_allowed", "{host}");
        }
        let config = ServerConfig {
            allowed_hosts: vec!["forktrail.lan".into()],
            ..ServerConfig::default()
        };
        let ok = headers(&[("host", "Forktrail.lan:7878")]);
        assert!(check(&config, &Method::GET, &ok).is_ok());
        let other = headers(&[("host", "other.lan")]);
        assert!(check(&config, &Method::GET, &other).is_err());
    }

    #[test]
    fn writes_from_other_sites_are_refused_and_same_origin_ones_pass() {
        let config = ServerConfig::default();
        let post = |pairs: &[(&'static str, &str)]| check(&config, &Method::POST, &headers(pairs));
        assert!(
            post(&[("host", "127.0.0.1:7878")]).is_ok(),
            "no browser headers"
        );
        assert!(post(&[
            ("host", "127.0.0.1:7878"),
            ("origin", "http://127.0.0.1:7878"),
            ("sec-fetch-site", "same-origin"),
        ])
        .is_ok());
        for pairs in [
            &[
                ("host", "127.0.0.1:7878"),
                ("origin", "https://evil.example"),
            ][..],
            &[("host", "127.0.0.1:7878"), ("sec-fetch-site", "cross-site")][..],
            &[("host", "localhost:7878"), ("sec-fetch-site", "same-site")][..],
            &[
                ("host", "localhost:7878"),
                ("origin", "http://localhost:3000"),
            ][..],
            &[("host", "localhost:7878"), ("origin", "null")][..],
        ] {
            assert_eq!(post(pairs).unwrap_err().code, "cross_site", "{pairs:?}");
        }
        // Reads are not writes: a cross-site GET of a page is only a navigation.
        let get = headers(&[("host", "localhost"), ("sec-fetch-site", "cross-site")]);
        assert!(check(&config, &Method::GET, &get).is_ok());
    }
}
