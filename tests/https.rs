//! HTTPS to remote stores and model endpoints. A private CA and a server certificate
//! signed by it are made here; a TLS-terminating relay on 127.0.0.1 (what a hosted
//! store's or model's front end is) stands before a real Oxigraph server and before the
//! stub model. The trust rule, the system's roots plus `$SSL_CERT_FILE`, is checked both
//! ways: refused without the CA's PEM (with an error naming the URL and the remedy),
//! trusted with it, in this process and in the CLI.
//!
//! A certificate made by `openssl req -x509` (the openssl on the machine, run here) is a
//! CA certificate the server presents as its own: refused with what it is and how to
//! make one that works, trusted as itself once `SSL_CERT_FILE` lists it.
//!
//! `SSL_CERT_FILE` is process-wide: each test that sets it holds [`CERT_ENV`] while it
//! runs; the CLI runs get their environment of their own.

mod common;

use common::stub::{self, Mode};
use forktrail::{JobStatus, NewSession, NewTurn, RegenerateOptions, RemoteConfig, Role, Store};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Held by a test while it sets `SSL_CERT_FILE`, which every test of this process reads.
static CERT_ENV: Mutex<()> = Mutex::new(());

fn cert_env() -> MutexGuard<'static, ()> {
    CERT_ENV
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A private CA, a server certificate it signed for `localhost` and `127.0.0.1`, and
/// the CA's certificate as a PEM file (what a user points `SSL_CERT_FILE` at).
struct Pki {
    server: Arc<rustls::ServerConfig>,
    ca_pem: PathBuf,
    /// The PEM of another CA, which did not sign the server's certificate.
    other_ca_pem: PathBuf,
    /// A file that holds no certificate.
    not_pem: PathBuf,
    _dir: tempfile::TempDir,
}

fn new_ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

impl Pki {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ca = new_ca("forktrail test CA");
        let other = new_ca("some other CA");
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        let leaf = params.signed_by(&key, &ca).unwrap();
        let server = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .unwrap();
        let write = |name: &str, text: String| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        Self {
            server: Arc::new(server),
            ca_pem: write("ca.pem", ca.pem()),
            other_ca_pem: write("other-ca.pem", other.pem()),
            not_pem: write("not.pem", "no certificate in here\n".into()),
            _dir: dir,
        }
    }
}

/// A TLS-terminating relay on 127.0.0.1 in front of `backend` (plain TCP). Returns its
/// port and the count of handshakes it completed.
fn relay(config: Arc<rustls::ServerConfig>, backend: SocketAddr) -> (u16, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let handshakes = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&handshakes);
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let acceptor = tokio_rustls::TlsAcceptor::from(config);
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                let (acceptor, count) = (acceptor.clone(), Arc::clone(&count));
                tokio::spawn(async move {
                    // A client that refuses the certificate ends here.
                    let Ok(mut tls) = acceptor.accept(client).await else {
                        return;
                    };
                    count.fetch_add(1, Ordering::SeqCst);
                    let Ok(mut plain) = tokio::net::TcpStream::connect(backend).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
    });
    (port, handshakes)
}

/// The address of an `http://host:port/…` URL.
fn address(url: &str) -> SocketAddr {
    let rest = url.strip_prefix("http://").unwrap();
    rest.split('/').next().unwrap().parse().unwrap()
}

fn conversation(s: &Store) -> forktrail::SessionId {
    let id = s
        .create_session(NewSession {
            id: Some("trip".into()),
            ..Default::default()
        })
        .unwrap();
    for turn in [
        NewTurn::new(Role::User, "Train or plane to Amsterdam?"),
        NewTurn::new(Role::Assistant, "The train: 3h20 from Paris.").model("model-a"),
        NewTurn::new(Role::User, "And the price?"),
    ] {
        s.append(&id, turn).unwrap();
    }
    id
}

fn regenerate_on(s: &Store, id: &forktrail::SessionId, endpoint: &str) -> forktrail::Job {
    s.regenerate(
        id,
        &RegenerateOptions {
            at: 3,
            model: Some("model-b".into()),
            endpoint: Some(endpoint.into()),
            again: true,
            ..Default::default()
        },
    )
    .unwrap()
}

/// A one-arm comparison from the last user turn of `id`, on an Anthropic endpoint;
/// returns the arm.
fn compare_on(s: &Store, id: &forktrail::SessionId, endpoint: &str) -> forktrail::ArmReport {
    let arm = forktrail::Arm {
        model: "claude-x".into(),
        provider: forktrail::Provider::Anthropic,
        endpoint: Some(endpoint.into()),
        ..Default::default()
    };
    let options = forktrail::CompareOptions {
        at: 3,
        arms: vec![arm],
        again: true,
        ..Default::default()
    };
    s.compare(id, &options).unwrap().arms.pop().unwrap()
}

/// The CLI on `args`, with `SSL_CERT_FILE` as given (and nothing else of the kind).
fn cli(cert_file: Option<&PathBuf>, args: &[&str]) -> std::process::Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_forktrail"));
    command
        .args(args)
        .env_remove("SSL_CERT_FILE")
        .env_remove("SSL_CERT_DIR")
        .env_remove("FORKTRAIL_STORE");
    if let Some(file) = cert_file {
        command.env("SSL_CERT_FILE", file);
    }
    command.output().unwrap()
}

#[test]
fn https_stores_and_model_endpoints_trust_the_system_roots_plus_ssl_cert_file() {
    let Some(oxigraph) = common::OxigraphServer::start() else {
        return;
    };
    let pki = Pki::new();
    let (store_port, store_handshakes) =
        relay(Arc::clone(&pki.server), address(&oxigraph.query_url()));
    let url = format!("https://localhost:{store_port}/query");
    let model = stub::start(Mode::Echo);
    let (model_port, model_handshakes) = relay(Arc::clone(&pki.server), address(&model.url));
    let endpoint = format!("https://127.0.0.1:{model_port}/v1");
    // An Anthropic Messages stub behind the same kind of front end, for comparisons.
    let claude = stub::scripted(|_, _| {
        stub::Reply::ok(stub::anthropic_message(
            "claude-x",
            Some("By train, 49 EUR."),
            &[],
            (21, 5, 3),
            "end_turn",
        ))
    });
    let (claude_port, claude_handshakes) = relay(Arc::clone(&pki.server), address(&claude.url));
    let claude_endpoint = format!("https://127.0.0.1:{claude_port}");

    // This test starts from neither variable.
    let _env = cert_env();
    std::env::remove_var("SSL_CERT_FILE");
    std::env::remove_var("SSL_CERT_DIR");

    // Without SSL_CERT_FILE the private CA is not trusted: the first request fails,
    // naming the URL, what failed and the remedy.
    let refused = |why: &str| {
        let s = Store::remote(RemoteConfig::new(&url)).unwrap();
        let err = s.create_session(NewSession::default()).unwrap_err();
        let message = err.to_string();
        assert!(
            // The endpoint asked first: a write's lease goes to the update URL.
            (message.contains(&url) || message.contains(&url.replace("/query", "/update")))
                && message.contains("certificate")
                && message.contains("SSL_CERT_FILE"),
            "{why}: {message}"
        );
    };
    refused("no SSL_CERT_FILE");
    // A model endpoint likewise: the job fails with the same advice, the model unasked.
    let memory = Store::in_memory().unwrap();
    let trip = conversation(&memory);
    let job = regenerate_on(&memory, &trip, &endpoint);
    assert_eq!(job.status, JobStatus::Failed, "{job:?}");
    let error = job.error.clone().unwrap_or_default();
    assert!(
        error.contains(&endpoint) && error.contains("SSL_CERT_FILE"),
        "{error}"
    );
    assert!(model.requests().is_empty());
    // A comparison's arm likewise: the run fails naming the URL and the remedy, having
    // asked nothing.
    let arm_failed = compare_on(&memory, &trip, &claude_endpoint);
    assert_eq!(arm_failed.status, "failed", "{arm_failed:?}");
    let detail = arm_failed.detail.clone().unwrap_or_default();
    assert!(
        detail.contains(&claude_endpoint)
            && detail.contains("certificate")
            && detail.contains("SSL_CERT_FILE"),
        "{detail}"
    );
    assert!(claude.requests().is_empty());

    // SSL_CERT_FILE adds what it holds, nothing else: another CA does not help.
    std::env::set_var("SSL_CERT_FILE", &pki.other_ca_pem);
    refused("another CA's PEM");
    // A file that holds no certificate is named before any request.
    std::env::set_var("SSL_CERT_FILE", &pki.not_pem);
    let message = Store::remote(RemoteConfig::new(&url))
        .err()
        .expect("a bad SSL_CERT_FILE is refused")
        .to_string();
    assert!(
        message.contains("SSL_CERT_FILE") && message.contains(&*pki.not_pem.to_string_lossy()),
        "{message}"
    );
    assert_eq!(store_handshakes.load(Ordering::SeqCst), 0);
    assert_eq!(model_handshakes.load(Ordering::SeqCst), 0);
    assert_eq!(claude_handshakes.load(Ordering::SeqCst), 0);

    // With the CA's PEM, the store over https works: what is written replays as written,
    // from this store and from a fresh one on the same URL.
    std::env::set_var("SSL_CERT_FILE", &pki.ca_pem);
    let s = Store::remote(RemoteConfig::new(&url)).unwrap();
    let trip = conversation(&s);
    let replay = s.replay(&trip, None).unwrap();
    let written: Vec<_> = replay.iter().map(|r| r.content.as_str()).collect();
    assert_eq!(
        written,
        [
            "Train or plane to Amsterdam?",
            "The train: 3h20 from Paris.",
            "And the price?"
        ]
    );
    let again = Store::remote(RemoteConfig::new(&url)).unwrap();
    assert_eq!(again.replay(&trip, None).unwrap(), replay);
    assert!(store_handshakes.load(Ordering::SeqCst) > 0);

    // A what-if regeneration on that store, calling the model over https: the model saw
    // the context, and its answer is the fork's last turn.
    let job = regenerate_on(&s, &trip, &endpoint);
    assert_eq!(job.status, JobStatus::Complete, "{job:?}");
    assert!(model_handshakes.load(Ordering::SeqCst) > 0);
    let sent = model.requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["messages"][2]["content"], "And the price?");
    let fork = s.replay(&job.fork.unwrap(), None).unwrap();
    assert_eq!(
        fork.last().unwrap().content,
        stub::echo("model-b", "And the price?")
    );

    // A comparison whose arm is an Anthropic model over https, on the https store: the
    // arm answers the last user turn and ends complete, with the stub's usage.
    let arm = compare_on(&s, &trip, &claude_endpoint);
    assert_eq!(arm.status, "complete", "{arm:?}");
    assert_eq!(arm.figures.input_tokens, Some(21 + 3));
    assert_eq!(arm.figures.output_tokens, Some(5));
    assert!(claude_handshakes.load(Ordering::SeqCst) > 0);
    assert_eq!(claude.requests().len(), 1);
    let last = s.replay(arm.session.as_ref().unwrap(), None).unwrap();
    assert_eq!(last.last().unwrap().content, "By train, 49 EUR.");

    // The CLI: refused without SSL_CERT_FILE (exit 1, the URL and the remedy on
    // stderr), the same replay with it.
    let failed = cli(None, &["--store", &url, "replay", "trip", "--json"]);
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(!failed.status.success(), "{stderr}");
    assert!(
        stderr.contains(&url) && stderr.contains("SSL_CERT_FILE"),
        "{stderr}"
    );
    let ok = cli(
        Some(&pki.ca_pem),
        &["--store", &url, "replay", "trip", "--json"],
    );
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let records: serde_json::Value = serde_json::from_slice(&ok.stdout).unwrap();
    assert_eq!(records, serde_json::to_value(&replay).unwrap());
    std::env::remove_var("SSL_CERT_FILE");
}

/// The openssl command line tool, or `None` (with a note) where there is none, except
/// under `CI`, where that fails.
fn openssl() -> Option<()> {
    match Command::new("openssl").arg("version").output() {
        Ok(out) if out.status.success() => Some(()),
        _ if std::env::var_os("CI").is_some() => {
            panic!("no openssl on the PATH; in CI the test of its certificates must run")
        }
        _ => {
            eprintln!("note: no openssl on the PATH; its certificates are not tried");
            None
        }
    }
}

/// Runs `command` with `sh` in `dir`, and fails with what it printed unless it worked.
fn shell(dir: &Path, command: &str) {
    let out = Command::new("sh")
        .args(["-c", command])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{command}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A TLS server configuration presenting the PEM certificate `cert` with the key `key`.
fn served(cert: &Path, key: &Path) -> Arc<rustls::ServerConfig> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = PrivateKeyDer::from_pem_file(key).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    Arc::new(config)
}

#[test]
fn a_certificate_made_by_openssl_req_x509_is_trusted_as_itself_once_ssl_cert_file_lists_it() {
    let Some(oxigraph) = common::OxigraphServer::start() else {
        return;
    };
    let Some(()) = openssl() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // The recipe most guides give: a CA certificate (basicConstraints CA:TRUE), which
    // the server then presents as its own.
    shell(
        dir.path(),
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout key.pem -out cert.pem \
         -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1",
    );
    let cert = dir.path().join("cert.pem");
    let server = served(&cert, &dir.path().join("key.pem"));
    let (store_port, store_handshakes) = relay(Arc::clone(&server), address(&oxigraph.query_url()));
    let url = format!("https://localhost:{store_port}/query");
    let model = stub::start(Mode::Echo);
    let (model_port, model_handshakes) = relay(Arc::clone(&server), address(&model.url));
    let endpoint = format!("https://127.0.0.1:{model_port}/v1");

    let _env = cert_env();
    std::env::remove_var("SSL_CERT_FILE");
    std::env::remove_var("SSL_CERT_DIR");

    // Not listed, it is refused, and the error says what it is and how to do better:
    // trust it as itself, or make a CA and a server certificate it signs.
    let says_what_is_wrong = |message: &str| {
        for needed in [
            "CA certificate",
            "basicConstraints CA:TRUE",
            "SSL_CERT_FILE",
            "openssl x509 -req -CA ca.pem",
        ] {
            assert!(message.contains(needed), "{needed}: {message}");
        }
    };
    let refused = Store::remote(RemoteConfig::new(&url))
        .unwrap()
        .create_session(NewSession::default())
        .unwrap_err()
        .to_string();
    assert!(refused.contains("https://localhost:"), "{refused}");
    says_what_is_wrong(&refused);
    let memory = Store::in_memory().unwrap();
    let trip = conversation(&memory);
    let job = regenerate_on(&memory, &trip, &endpoint);
    assert_eq!(job.status, JobStatus::Failed, "{job:?}");
    let error = job.error.clone().unwrap_or_default();
    assert!(error.contains(&endpoint), "{error}");
    says_what_is_wrong(&error);
    // Listing another certificate does not trust this one.
    let other = Pki::new();
    std::env::set_var("SSL_CERT_FILE", &other.ca_pem);
    let refused = Store::remote(RemoteConfig::new(&url))
        .unwrap()
        .create_session(NewSession::default())
        .unwrap_err()
        .to_string();
    says_what_is_wrong(&refused);
    assert_eq!(store_handshakes.load(Ordering::SeqCst), 0);
    assert_eq!(model_handshakes.load(Ordering::SeqCst), 0);
    assert!(model.requests().is_empty());

    // Listed in SSL_CERT_FILE, it is trusted as itself: the store over https keeps what
    // is written, and a regeneration calls the model over https.
    std::env::set_var("SSL_CERT_FILE", &cert);
    let s = Store::remote(RemoteConfig::new(&url)).unwrap();
    let trip = conversation(&s);
    let replay = s.replay(&trip, None).unwrap();
    assert_eq!(replay.len(), 3);
    assert_eq!(replay[2].content, "And the price?");
    assert!(store_handshakes.load(Ordering::SeqCst) > 0);
    let job = regenerate_on(&s, &trip, &endpoint);
    assert_eq!(job.status, JobStatus::Complete, "{job:?}");
    assert!(model_handshakes.load(Ordering::SeqCst) > 0);
    let fork = s.replay(&job.fork.unwrap(), None).unwrap();
    assert_eq!(
        fork.last().unwrap().content,
        stub::echo("model-b", "And the price?")
    );

    // The other remedy the error gives, its commands run as written (for the host
    // localhost): a CA and a server certificate it signs, trusted through the CA.
    for command in says_commands(&refused) {
        shell(dir.path(), &command.replace("HOST", "localhost"));
    }
    let signed = served(
        &dir.path().join("server.pem"),
        &dir.path().join("server.key"),
    );
    let (signed_port, signed_handshakes) = relay(signed, address(&oxigraph.query_url()));
    std::env::set_var("SSL_CERT_FILE", dir.path().join("ca.pem"));
    let signed_url = format!("https://localhost:{signed_port}/query");
    let again = Store::remote(RemoteConfig::new(&signed_url)).unwrap();
    assert_eq!(again.replay(&trip, None).unwrap(), replay);
    assert!(signed_handshakes.load(Ordering::SeqCst) > 0);
    std::env::remove_var("SSL_CERT_FILE");
}

/// The commands an error message quotes that write a key (`-keyout`), in order.
fn says_commands(message: &str) -> Vec<String> {
    let commands: Vec<String> = message
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|quoted| quoted.contains("-keyout"))
        .map(str::to_string)
        .collect();
    assert_eq!(commands.len(), 2, "{message}");
    commands
}
