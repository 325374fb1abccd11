//! The real Claude Code (npm `@anthropic-ai/claude-code`, pinned in the Makefile), run
//! offline against a scripted Anthropic Messages stub ([`common::anthropic`]) that
//! answers with parallel tool calls, in the main conversation and in a sub-agent: the
//! tools run for real, Claude Code writes its log, and the log imported replays as the
//! conversation the model was sent, turn for turn, with no fork but the sub-agent's.
//! `make test` installs it and sets `FORKTRAIL_CLAUDE_CODE` (the `claude` binary);
//! without it the test is skipped with a note, except under `CI`, where it fails.

use crate::common;

use common::anthropic::{self, AnthropicStub};
use common::stub::anthropic_message;
use common::*;
use forktrail::{Role, Store, TranscriptOptions, Turn};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

pub(crate) const PROMPT: &str = "Print one and two, and have an agent print alpha, beta and gamma.";
pub(crate) const SUB_PROMPT: &str = "Print alpha, beta and gamma with echo.";
const MODEL: &str = "claude-sonnet-4-5";

/// Where `make claude-code` installed the `claude` binary.
pub(crate) fn claude() -> Option<PathBuf> {
    installed("FORKTRAIL_CLAUDE_CODE", "Claude Code (npm)", "claude-code")
}

/// The model's side of both conversations, told apart by their first prompt, step by
/// step (how many answers the request already holds): the main one makes three calls
/// at once (the sub-agent among them) with its text, then two without text, then ends;
/// the sub-agent makes three calls at once, then ends.
pub(crate) fn script(request: &Value) -> Value {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let answered = messages.iter().filter(|m| m["role"] == "assistant").count();
    let bash = |id: &str, word: &str| {
        (
            id.to_string(),
            "Bash",
            json!({"command": format!("echo {word}"), "description": format!("Print {word}")}),
        )
    };
    let sub = first_prompt(&messages).as_deref() == Some(SUB_PROMPT);
    let (text, calls, stop) = match (sub, answered) {
        (false, 0) => (
            Some("Three things at once."),
            vec![
                (
                    "toolu_agent".to_string(),
                    "Agent",
                    json!({"description": "Print three words", "prompt": SUB_PROMPT,
                           "subagent_type": "general-purpose", "run_in_background": false}),
                ),
                bash("toolu_one", "one"),
                bash("toolu_two", "two"),
            ],
            "tool_use",
        ),
        (false, 1) => (
            None,
            vec![bash("toolu_three", "three"), bash("toolu_four", "four")],
            "tool_use",
        ),
        (true, 0) => (
            Some("Three echoes."),
            vec![
                bash("toolu_alpha", "alpha"),
                bash("toolu_beta", "beta"),
                bash("toolu_gamma", "gamma"),
            ],
            "tool_use",
        ),
        (true, _) => (Some("alpha beta gamma"), Vec::new(), "end_turn"),
        (false, _) => (Some("All done."), Vec::new(), "end_turn"),
    };
    let calls: Vec<(&str, &str, Value)> = calls
        .iter()
        .map(|(id, name, input)| (id.as_str(), *name, input.clone()))
        .collect();
    let mut message = anthropic_message(MODEL, text, &calls, (100, 20, 0), stop);
    message["id"] = json!(format!(
        "msg_{}_{answered}",
        if sub { "sub" } else { "main" }
    ));
    message
}

/// The first thing the user said in a conversation, Claude Code's reminders aside.
pub(crate) fn first_prompt(messages: &[Value]) -> Option<String> {
    let first = messages.iter().find(|m| m["role"] == "user")?;
    let turns = api_turns(std::slice::from_ref(first));
    turns.into_iter().next().map(|t| t.content)
}

/// A turn as compared: role, text, calls (id, name, input), the call a result answers.
#[derive(Clone, Debug, PartialEq)]
struct Said {
    role: Role,
    content: String,
    calls: Vec<(String, String, Value)>,
    answers: Option<String>,
}

/// What the model was sent, as forktrail's turns: an assistant message one turn (its
/// text blocks joined by a blank line, its `tool_use` blocks its calls), a user
/// message's text one turn, each `tool_result` one turn. Set aside as the system prompt
/// is: `system` messages and the `<system-reminder>` blocks Claude Code adds (from
/// lines of other types, which the import skips and counts).
fn api_turns(messages: &[Value]) -> Vec<Said> {
    let mut out = Vec::new();
    for message in messages {
        let blocks = match &message["content"] {
            Value::String(text) => vec![json!({"type": "text", "text": text})],
            Value::Array(blocks) => blocks.clone(),
            _ => Vec::new(),
        };
        let text = |b: &Value| b["text"].as_str().unwrap_or_default().to_string();
        let texts: Vec<String> = blocks
            .iter()
            .filter(|b| b["type"] == "text")
            .map(text)
            .filter(|t| !t.starts_with("<system-reminder>"))
            .collect();
        match message["role"].as_str() {
            Some("assistant") => out.push(Said {
                role: Role::Assistant,
                content: texts.join("\n\n"),
                calls: blocks
                    .iter()
                    .filter(|b| b["type"] == "tool_use")
                    .map(|b| (text_of(&b["id"]), text_of(&b["name"]), b["input"].clone()))
                    .collect(),
                answers: None,
            }),
            Some("user") => {
                if !texts.is_empty() {
                    out.push(said(Role::User, texts.join("\n\n"), None));
                }
                for result in blocks.iter().filter(|b| b["type"] == "tool_result") {
                    let content = match &result["content"] {
                        Value::Array(parts) => {
                            parts.iter().map(text).collect::<Vec<_>>().join("\n\n")
                        }
                        other => text_of(other),
                    };
                    let id = text_of(&result["tool_use_id"]);
                    out.push(said(Role::Tool, content, Some(id)));
                }
            }
            _ => {}
        }
    }
    out
}

fn said(role: Role, content: String, answers: Option<String>) -> Said {
    Said {
        role,
        content,
        calls: Vec::new(),
        answers,
    }
}

fn text_of(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_string()
}

/// A stored session's turns, as compared.
fn stored(store: &Store, id: &str) -> Vec<Said> {
    let turns: Vec<Turn> = store.load(&sid(id), None).unwrap();
    turns
        .into_iter()
        .map(|t| {
            let calls = calls_of(t.tool_calls.as_deref())
                .iter()
                .map(|c| {
                    let args = c["function"]["arguments"].as_str().unwrap();
                    (
                        text_of(&c["id"]),
                        text_of(&c["function"]["name"]),
                        serde_json::from_str(args).unwrap(),
                    )
                })
                .collect();
            Said {
                role: t.role,
                content: t.content,
                calls,
                answers: t.tool_call_id,
            }
        })
        .collect()
}

/// The conversation whose first prompt is `prompt` as the model saw it last: the
/// messages of the last request sent for it, then the answer the stub gave.
fn conversation(stub: &AnthropicStub, prompt: &str) -> Vec<Said> {
    let last = stub
        .messages_requests()
        .into_iter()
        .rev()
        .find(|r| {
            let messages = r["messages"].as_array().cloned().unwrap_or_default();
            first_prompt(&messages).as_deref() == Some(prompt)
        })
        .unwrap_or_else(|| panic!("the stub was sent no request for {prompt:?}"));
    let mut turns = api_turns(last["messages"].as_array().unwrap());
    turns.extend(api_turns(&[script(&last)]));
    turns
}

/// Runs `claude -p PROMPT` in `project` with `home` as its home (and its temp folder
/// inside), against `stub`.
fn run_claude(claude: &Path, stub: &AnthropicStub, home: &Path, project: &Path) -> Value {
    let tmp = home.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let out = Command::new(claude)
        .args(["-p", PROMPT, "--output-format", "json", "--max-turns", "8"])
        .args(["--allowedTools", "Bash(echo:*)", "Agent"])
        .current_dir(project)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("TMPDIR", &tmp)
        .env("ANTHROPIC_BASE_URL", &stub.url)
        .env("ANTHROPIC_API_KEY", "sk-ant-dummy")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "claude failed: {stdout}\nstderr: {}\nrequests: {:?}",
        String::from_utf8_lossy(&out.stderr),
        stub.requests()
            .iter()
            .map(|r| format!("{} {}", r.method, r.path))
            .collect::<Vec<_>>()
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

#[test]
fn a_log_the_real_claude_code_wrote_with_parallel_calls_replays_as_the_model_saw_it() {
    let Some(claude) = claude() else { return };
    let stub = anthropic::start(script);
    let home = tempfile::tempdir().unwrap();
    let project = home.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let result = run_claude(&claude, &stub, home.path(), &project);
    assert_eq!(
        (&result["is_error"], &result["result"]),
        (&json!(false), &json!("All done.")),
        "{result}"
    );
    let session = result["session_id"].as_str().unwrap().to_string();
    // What else Claude Code asked, offline: nothing but the model (and maybe a count).
    for request in stub.requests() {
        assert!(
            request.is_messages() || request.path.starts_with("/v1/messages/count_tokens"),
            "Claude Code asked {} {}",
            request.method,
            request.path
        );
    }
    let main = conversation(&stub, PROMPT);
    let sub = conversation(&stub, SUB_PROMPT);
    // The tools ran: their output is what the model was sent.
    let results: Vec<&str> = main
        .iter()
        .chain(&sub)
        .filter(|t| t.role == Role::Tool && !t.content.contains('\n'))
        .map(|t| t.content.as_str())
        .collect();
    let mut sorted = results.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        ["alpha", "beta", "four", "gamma", "one", "three", "two"]
    );

    let folder = std::fs::read_dir(home.path().join(".claude/projects"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .expect("Claude Code wrote a project folder");
    for s in stores() {
        let report = s
            .import_claude_code_path(&folder, &TranscriptOptions::default())
            .unwrap();
        assert_eq!(report.sessions.len(), 2, "{}: {report:?}", s.kind);
        assert_eq!(report.sessions[0].as_str(), session, "{}", s.kind);
        let branches = s.branches(&sid(&session)).unwrap();
        assert_eq!(branches.len(), 1, "{}: {branches:?}", s.kind);
        let agent = &branches[0];
        assert!(agent.branch.starts_with("agent-"), "{}: {agent:?}", s.kind);
        assert_eq!(agent.forked_at_index, 0, "{}", s.kind);
        assert!(s.branches(&agent.session).unwrap().is_empty(), "{}", s.kind);

        assert_eq!(stored(&s, &session), main, "{}: the main session", s.kind);
        assert_eq!(
            stored(&s, agent.session.as_str()),
            sub,
            "{}: the sub-agent",
            s.kind
        );
        assert!(s.verify(None).unwrap().is_clean(), "{}", s.kind);
    }
}
