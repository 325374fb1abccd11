//! HTTPS for remote SPARQL stores and model endpoints, in one place: rustls on ring (the
//! TLS stack ureq itself uses), trusting the system's roots **plus** the certificates of
//! the PEM file named by `$SSL_CERT_FILE` (and of the directories in `$SSL_CERT_DIR`).
//! That is how a private CA is trusted: its certificate is added, and public
//! certificates stay trusted.
//!
//! Every ureq agent forktrail makes goes through [`agent`]. The roots are read at the
//! first https connection (a plain http one reads no certificate), then kept while the
//! variables and the file they name stay as they were.

use crate::error::{Error, Result};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;
use ureq::TlsConnector;

const CERT_FILE: &str = "SSL_CERT_FILE";
const CERT_DIR: &str = "SSL_CERT_DIR";

/// `builder` with forktrail's TLS: rustls, the system's roots plus `$SSL_CERT_FILE`.
pub(crate) fn agent(builder: ureq::AgentBuilder) -> ureq::AgentBuilder {
    builder.tls_connector(Arc::new(Connector))
}

/// The TLS client configuration for the environment as it is now: built on first use and
/// again when `SSL_CERT_FILE`, `SSL_CERT_DIR` or the file's modification time change.
/// Fails with the variable and the path when `SSL_CERT_FILE` names a file that cannot be
/// read or holds no usable certificate.
pub(crate) fn client_config() -> Result<Arc<ClientConfig>> {
    type Key = (Option<OsString>, Option<OsString>, Option<SystemTime>);
    static BUILT: Mutex<Option<(Key, Arc<ClientConfig>)>> = Mutex::new(None);
    let file = std::env::var_os(CERT_FILE).filter(|f| !f.is_empty());
    let dirs = std::env::var_os(CERT_DIR).filter(|d| !d.is_empty());
    let modified = file
        .as_ref()
        .and_then(|f| std::fs::metadata(f).ok())
        .and_then(|m| m.modified().ok());
    let key = (file, dirs, modified);
    let mut built = BUILT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((held, config)) = built.as_ref() {
        if *held == key {
            return Ok(Arc::clone(config));
        }
    }
    let dirs: Vec<PathBuf> = key
        .1
        .as_ref()
        .map(|d| std::env::split_paths(d).collect())
        .unwrap_or_default();
    let config = Arc::new(build(key.0.as_deref().map(Path::new), &dirs)?);
    *built = Some((key, Arc::clone(&config)));
    Ok(config)
}

/// A client configuration trusting [`roots`].
fn build(cert_file: Option<&Path>, cert_dirs: &[PathBuf]) -> Result<ClientConfig> {
    let roots = roots(cert_file, cert_dirs)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::InvalidInput(format!("TLS setup: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// The system's roots, the certificates of `cert_file` (which must hold at least one)
/// and those of `cert_dirs`.
fn roots(cert_file: Option<&Path>, cert_dirs: &[PathBuf]) -> Result<RootCertStore> {
    let mut certs = system_roots(cert_file.is_some() || !cert_dirs.is_empty());
    for dir in cert_dirs {
        certs.extend(rustls_native_certs::load_certs_from_paths(None, Some(dir)).certs);
    }
    certs.sort_unstable_by(|a, b| a.as_ref().cmp(b.as_ref()));
    certs.dedup();
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(certs);
    if let Some(path) = cert_file {
        let bad = |why: String| {
            Error::InvalidInput(format!(
                "{CERT_FILE} names {}, which {why}; it must be a PEM file of the CA \
                 certificates to trust (added to the system's)",
                path.display()
            ))
        };
        let mut added = 0;
        for cert in
            CertificateDer::pem_file_iter(path).map_err(|e| bad(format!("cannot be read: {e}")))?
        {
            let cert = cert.map_err(|e| bad(format!("is not valid PEM: {e}")))?;
            roots
                .add(cert)
                .map_err(|e| bad(format!("holds a certificate rustls cannot use: {e}")))?;
            added += 1;
        }
        if added == 0 {
            return Err(bad("holds no certificate".into()));
        }
    }
    Ok(roots)
}

/// The system's trusted roots. With neither variable set, rustls-native-certs reads
/// the platform's store. With one set it reads only what they name, so the system's
/// certificate directories are read here instead (Linux and the BSDs; on macOS and
/// Windows the platform's store is then not read).
fn system_roots(variables_set: bool) -> Vec<CertificateDer<'static>> {
    if !variables_set {
        return rustls_native_certs::load_native_certs().certs;
    }
    #[allow(unused_mut)]
    let mut certs = Vec::new();
    #[cfg(all(unix, not(target_os = "macos")))]
    for dir in openssl_probe::candidate_cert_dirs() {
        certs.extend(rustls_native_certs::load_certs_from_paths(None, Some(dir)).certs);
    }
    certs
}

/// If `error` (or what caused it) is a failed check of a server's certificate: what
/// failed and how to trust a private CA.
pub(crate) fn untrusted(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(rustls::Error::InvalidCertificate(_)) = e.downcast_ref::<rustls::Error>() {
            return Some(format!(
                "the server's TLS certificate was refused ({e}); to trust a private CA, \
                 set {CERT_FILE} to a PEM file holding its certificate (it is added to \
                 the system's roots)"
            ));
        }
        // An io::Error's `source` skips the error it wraps: look at that one too.
        next = match e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => e.source(),
        };
    }
    None
}

/// ureq's TLS connector with [`client_config`], read at connection time.
struct Connector;

impl TlsConnector for Connector {
    fn connect(
        &self,
        dns_name: &str,
        io: Box<dyn ureq::ReadWrite>,
    ) -> std::result::Result<Box<dyn ureq::ReadWrite>, ureq::Error> {
        let config = client_config().map_err(|e| std::io::Error::other(e.to_string()))?;
        TlsConnector::connect(&config, dns_name, io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("forktrail-tls-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn ssl_cert_file_adds_its_certificates_to_the_systems_roots() {
        let dir = scratch("adds");
        let ca = rcgen::generate_simple_self_signed(vec!["private.example".to_string()]).unwrap();
        let pem = dir.join("ca.pem");
        std::fs::write(&pem, ca.cert.pem()).unwrap();
        let with_file = roots(Some(&pem), &[]).unwrap();
        // What would be trusted with SSL_CERT_FILE set, the file aside, and unset.
        let mut system = RootCertStore::empty();
        system.add_parsable_certificates(system_roots(true));
        let mut unset = RootCertStore::empty();
        unset.add_parsable_certificates(system_roots(false));
        assert_eq!(with_file.len(), system.len() + 1);
        // Where the system keeps its roots in a known directory, none is lost.
        if cfg!(target_os = "linux") && Path::new("/etc/ssl/certs").is_dir() {
            assert!(!unset.is_empty());
            assert!(
                system.len() >= unset.len(),
                "{} < {}",
                system.len(),
                unset.len()
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_cert_file_that_holds_no_certificate_is_named() {
        let dir = scratch("bad");
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "no certificate here\n").unwrap();
        for path in [empty.clone(), dir.join("missing.pem")] {
            let err = build(Some(&path), &[]).expect_err("refused").to_string();
            assert!(
                err.contains("SSL_CERT_FILE") && err.contains(&*path.to_string_lossy()),
                "{err}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
