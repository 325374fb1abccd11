//! HTTPS for remote SPARQL stores and model endpoints, in one place: rustls on ring (the
//! TLS stack ureq itself uses), trusting the system's roots **plus** the certificates of
//! the PEM file named by `$SSL_CERT_FILE` (and of the directories in `$SSL_CERT_DIR`).
//! That is how a private CA is trusted: its certificate is added, and public
//! certificates stay trusted.
//!
//! Every ureq agent forktrail makes goes through [`agent`]. The roots are read at the
//! first https connection (a plain http one reads no certificate), then kept while the
//! variables and the file they name stay as they were.
//!
//! A certificate `$SSL_CERT_FILE` lists is also trusted as itself. `openssl req -x509`
//! makes a CA certificate (basicConstraints CA:TRUE), and a server that presents one as
//! its own is refused by webpki whatever the roots hold (`CaUsedAsEndEntity`): its rule
//! is that a CA signs servers' certificates and is not one. [`Verifier`] accepts such a
//! certificate when it is byte for byte one the user listed, still valid for the host
//! and the time. Any other is refused with what is wrong and how to make a certificate
//! that works ([`untrusted`]).

use crate::error::{Error, Result};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
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

/// A client configuration trusting [`roots`], and each certificate of `cert_file` as
/// itself ([`Verifier`]).
fn build(cert_file: Option<&Path>, cert_dirs: &[PathBuf]) -> Result<ClientConfig> {
    let (roots, listed) = roots(cert_file, cert_dirs)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let setup = |e: &dyn std::fmt::Display| Error::InvalidInput(format!("TLS setup: {e}"));
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| setup(&e))?;
    if listed.is_empty() {
        return Ok(builder.with_root_certificates(roots).with_no_client_auth());
    }
    let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| setup(&e))?;
    Ok(builder
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Verifier { webpki, listed }))
        .with_no_client_auth())
}

/// The system's roots, the certificates of `cert_file` (which must hold at least one)
/// and those of `cert_dirs`; and apart, the certificates of `cert_file`.
fn roots(
    cert_file: Option<&Path>,
    cert_dirs: &[PathBuf],
) -> Result<(RootCertStore, Vec<CertificateDer<'static>>)> {
    let mut certs = system_roots(cert_file.is_some() || !cert_dirs.is_empty());
    for dir in cert_dirs {
        certs.extend(rustls_native_certs::load_certs_from_paths(None, Some(dir)).certs);
    }
    certs.sort_unstable_by(|a, b| a.as_ref().cmp(b.as_ref()));
    certs.dedup();
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(certs);
    let mut listed = Vec::new();
    if let Some(path) = cert_file {
        let bad = |why: String| {
            Error::InvalidInput(format!(
                "{CERT_FILE} names {}, which {why}; it must be a PEM file of the CA \
                 certificates to trust (added to the system's)",
                path.display()
            ))
        };
        for cert in
            CertificateDer::pem_file_iter(path).map_err(|e| bad(format!("cannot be read: {e}")))?
        {
            let cert = cert.map_err(|e| bad(format!("is not valid PEM: {e}")))?;
            roots
                .add(cert.clone())
                .map_err(|e| bad(format!("holds a certificate rustls cannot use: {e}")))?;
            listed.push(cert);
        }
        if listed.is_empty() {
            return Err(bad("holds no certificate".into()));
        }
    }
    Ok((roots, listed))
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
/// is wrong with the certificate and what to do. What came from outside in it is
/// already excerpted (`secrets::excerpt`): the advice is kept whole.
pub(crate) fn untrusted(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(rustls::Error::InvalidCertificate(why)) = e.downcast_ref::<rustls::Error>() {
            return Some(refusal(why, e));
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

/// The message for a certificate refused for `why` (`error` says it as rustls does).
/// Only a certificate that chains to no trusted root is a matter of `$SSL_CERT_FILE`;
/// the others are the certificate's own faults, and the remedy is another certificate.
fn refusal(why: &CertificateError, error: &dyn std::fmt::Display) -> String {
    let remedy = match why {
        CertificateError::Other(other) if ca_as_end_entity(other) => format!(
            "it is a CA certificate (basicConstraints CA:TRUE, which `openssl req -x509` \
             writes) used as the server's own, which rustls refuses unless it is trusted \
             as itself: add that very certificate to the PEM file {CERT_FILE} names, or \
             give the server a certificate signed by a CA, made with `openssl req -x509 \
             -newkey rsa:2048 -nodes -subj /CN=my-ca -keyout ca.key -out ca.pem` then \
             `openssl req -newkey rsa:2048 -nodes -subj /CN=HOST -addext \
             subjectAltName=DNS:HOST -keyout server.key | openssl x509 -req -CA ca.pem \
             -CAkey ca.key -copy_extensions copy -days 365 -out server.pem`, and set \
             {CERT_FILE} to ca.pem"
        ),
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            "it does not name the host of the URL: use a URL with a name the certificate \
             holds, or give the server a certificate for this host"
                .into()
        }
        CertificateError::Expired
        | CertificateError::ExpiredContext { .. }
        | CertificateError::NotValidYet
        | CertificateError::NotValidYetContext { .. } => {
            "it is outside its validity dates: renew it (or set this machine's clock right)".into()
        }
        _ => format!(
            "to trust a private CA, set {CERT_FILE} to a PEM file holding its certificate \
             (it is added to the system's roots)"
        ),
    };
    // rustls's words are cut as any error from outside is; the remedy is ours, whole.
    let said = crate::secrets::excerpt(&error.to_string());
    format!("the server's TLS certificate was refused ({said}); {remedy}")
}

/// Whether webpki refused a certificate for being a CA's presented as a server's own.
fn ca_as_end_entity(other: &rustls::OtherError) -> bool {
    matches!(
        other.0.downcast_ref::<webpki::Error>(),
        Some(webpki::Error::CaUsedAsEndEntity)
    )
}

/// webpki's checks, and one more way to pass them: the server's certificate is a CA
/// certificate that `$SSL_CERT_FILE` lists, byte for byte (see the module doc).
///
/// Whoever can present that certificate holds the CA's key, and with it could sign a
/// certificate for any host that these roots, which hold the CA, trust anyway: trusting
/// the CA's own certificate as a server's grants nothing more. Its dates are checked,
/// by webpki before the basicConstraints that refuse it (a test holds webpki to that
/// order), and its host name here, as webpki checks it after the chain; the handshake's
/// signature is checked by its key as for any certificate.
#[derive(Debug)]
struct Verifier {
    webpki: Arc<WebPkiServerVerifier>,
    /// The certificates of `$SSL_CERT_FILE`.
    listed: Vec<CertificateDer<'static>>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        let refused = match self.webpki.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Ok(verified) => return Ok(verified),
            Err(refused) => refused,
        };
        let listed = self.listed.iter().any(|cert| cert == end_entity);
        match &refused {
            rustls::Error::InvalidCertificate(CertificateError::Other(other))
                if listed && ca_as_end_entity(other) =>
            {
                let cert = ParsedCertificate::try_from(end_entity)?;
                rustls::client::verify_server_name(&cert, server_name)?;
                Ok(ServerCertVerified::assertion())
            }
            _ => Err(refused),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, signature)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, signature)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }

    fn root_hint_subjects(&self) -> Option<&[rustls::DistinguishedName]> {
        self.webpki.root_hint_subjects()
    }
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
        let (with_file, listed) = roots(Some(&pem), &[]).unwrap();
        assert_eq!(listed, [ca.cert.der().clone()]);
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

    /// A self-signed CA certificate for `localhost`, as `openssl req -x509` makes one
    /// (basicConstraints CA:TRUE), valid from 2025 to 2035; with `serial`.
    fn ca_for_localhost(key: &rcgen::KeyPair, serial: u64) -> rcgen::Certificate {
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.serial_number = Some(serial.into());
        params.not_before = rcgen::date_time_ymd(2025, 1, 1);
        params.not_after = rcgen::date_time_ymd(2035, 1, 1);
        params.self_signed(key).unwrap()
    }

    /// The verifier `build` makes for an `SSL_CERT_FILE` holding `listed`.
    fn verifier(dir: &Path, listed: &[&rcgen::Certificate]) -> Verifier {
        let pem = dir.join("listed.pem");
        std::fs::write(&pem, listed.iter().map(|c| c.pem()).collect::<String>()).unwrap();
        let (roots, listed) = roots(Some(&pem), &[]).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .unwrap();
        Verifier { webpki, listed }
    }

    fn at(year: i32) -> UnixTime {
        let days = (year - 1970) as u64 * 36525 / 100;
        UnixTime::since_unix_epoch(std::time::Duration::from_secs(days * 86_400))
    }

    fn check(
        verifier: &Verifier,
        cert: &CertificateDer<'_>,
        host: &str,
        when: UnixTime,
    ) -> std::result::Result<(), rustls::Error> {
        let name = ServerName::try_from(host.to_string()).unwrap();
        verifier
            .verify_server_cert(cert, &[], &name, &[], when)
            .map(|_| ())
    }

    #[test]
    fn a_listed_ca_certificate_is_trusted_as_itself_for_its_name_and_dates_only() {
        let dir = scratch("itself");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = ca_for_localhost(&key, 1);
        let verifier = verifier(&dir, &[&cert]);
        let cert = cert.der();
        check(&verifier, cert, "localhost", at(2030)).expect("trusted as itself");
        // Its name and dates still hold it: webpki reads the dates before the
        // basicConstraints that refuse it, and the name is checked here.
        let wrong_name = check(&verifier, cert, "example.com", at(2030)).unwrap_err();
        assert!(
            matches!(
                wrong_name,
                rustls::Error::InvalidCertificate(CertificateError::NotValidForNameContext { .. })
            ),
            "{wrong_name:?}"
        );
        for (year, why) in [(2040, "expired"), (2020, "not valid yet")] {
            let refused = check(&verifier, cert, "localhost", at(year)).unwrap_err();
            assert!(
                matches!(
                    refused,
                    rustls::Error::InvalidCertificate(
                        CertificateError::ExpiredContext { .. }
                            | CertificateError::NotValidYetContext { .. }
                    )
                ),
                "{why}: {refused:?}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_ca_certificate_not_listed_byte_for_byte_is_refused_saying_what_it_is() {
        let dir = scratch("not-listed");
        let key = rcgen::KeyPair::generate().unwrap();
        // The same key and name, another serial: another certificate.
        let listed = ca_for_localhost(&key, 1);
        let presented = ca_for_localhost(&key, 2);
        let verifier = verifier(&dir, &[&listed]);
        let refused = check(&verifier, presented.der(), "localhost", at(2030)).unwrap_err();
        let rustls::Error::InvalidCertificate(why) = &refused else {
            panic!("{refused:?}");
        };
        let message = refusal(why, &refused);
        for needed in [
            "CA certificate",
            "basicConstraints CA:TRUE",
            "SSL_CERT_FILE",
            "openssl req -x509",
            "openssl x509 -req -CA ca.pem",
        ] {
            assert!(message.contains(needed), "{needed}: {message}");
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
