//! Real emitters: the OpenAI Python client instrumented by OpenTelemetry's GenAI
//! instrumentation from PyPI (`opentelemetry-instrumentation-openai-v2` 2.4b0, with
//! message content on the spans and the latest conventions), exporting OTLP/HTTP to
//! `forktrail serve`. The model is a scripted OpenAI-compatible stub, so that it calls
//! the tool and answers the retry differently every time. `make test` installs the
//! Python side into a venv and sets `FORKTRAIL_OTEL_PYTHON`; without it the test is
//! skipped with a note, except under `CI`, where that fails.
#![cfg(all(feature = "server", feature = "rocksdb"))]

use crate::common;

use common::cli::{forktrail, succeeds};
use common::stub::{self, completion, Reply};
use forktrail::{Kind, Role, SessionId, Store};
use serde_json::{json, Value};
use std::process::Command;
use std::sync::Arc;

#[test]
fn an_instrumented_openai_client_sends_its_conversation_with_a_tool_call_and_a_retry() {
    let Some(python) = std::env::var_os("FORKTRAIL_OTEL_PYTHON") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "FORKTRAIL_OTEL_PYTHON is not set: `make test` installs OpenTelemetry's Python \
             side; in CI this test must run"
        );
        eprintln!("skipped: FORKTRAIL_OTEL_PYTHON is not set (run `make test`)");
        return;
    };
    // Calls the tool while no tool has answered; then two different answers.
    let answers = std::sync::atomic::AtomicUsize::new(0);
    let model = stub::scripted(move |request, _| {
        let answered = request["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
        let body = if !answered {
            completion(
                "stub-model-1",
                None,
                &[("call_1", "get_weather", json!({"city": "Paris"}))],
                (20, 8, 0),
                "tool_calls",
            )
        } else if answers.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            completion(
                "stub-model-1",
                Some("18°C and cloudy."),
                &[],
                (40, 6, 0),
                "stop",
            )
        } else {
            completion(
                "stub-model-1",
                Some("Cloudy, 18 degrees."),
                &[],
                (40, 7, 0),
                "stop",
            )
        };
        Reply {
            status: 200,
            body: body.to_string(),
            delay: None,
        }
    });
    let store = Arc::new(Store::in_memory().unwrap());
    let config = forktrail::server::ServerConfig {
        token: Some("otel-token".into()),
        ..Default::default()
    };
    let addr = common::serve_in_process(Arc::clone(&store), config);
    let script = format!("{}/tests/otel_client.py", env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("traces.jsonl");
    let out = succeeds(
        Command::new(python)
            .arg(script)
            .env(
                "FORKTRAIL_OTLP_ENDPOINT",
                format!("http://{addr}/v1/traces"),
            )
            .env("FORKTRAIL_TOKEN", "otel-token")
            .env("FORKTRAIL_OTLP_FILE", &file)
            .env("FORKTRAIL_MODEL_URL", &model.url)
            .env(
                "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
                "SPAN_ONLY",
            )
            .env(
                "OTEL_SEMCONV_STABILITY_OPT_IN",
                "gen_ai_latest_experimental",
            ),
        "the instrumented client",
    );
    let client: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        client["answers"],
        json!(["18°C and cloudy.", "Cloudy, 18 degrees."])
    );
    // No conversation id is sent: the trace names the session.
    let main: SessionId = client["trace_id"].as_str().unwrap().parse().unwrap();
    let turns = store.load(&main, None).unwrap();
    let seen: Vec<(Role, Kind, &str)> = turns
        .iter()
        .map(|t| (t.role, t.kind, t.content.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            (Role::System, Kind::Message, "Answer briefly."),
            (Role::User, Kind::Message, "What is the weather in Paris?"),
            (Role::Assistant, Kind::ToolCall, ""),
            (Role::Tool, Kind::Message, "18°C, cloudy"),
            (Role::Assistant, Kind::Message, "18°C and cloudy."),
        ],
        "as the client saw it"
    );
    assert_eq!(turns[2].model.as_deref(), Some("stub-model-1"));
    assert_eq!(turns[3].tool_call_id.as_deref(), Some("call_1"));
    let payload: Value = serde_json::from_str(turns[4].payload.as_deref().unwrap()).unwrap();
    assert_eq!(
        (
            &payload["otel"]["input_tokens"],
            &payload["otel"]["output_tokens"]
        ),
        (&json!(40), &json!(6)),
        "{payload}"
    );
    // The retried answer: a fork where it departs.
    let branches = store.branches(&main).unwrap();
    assert_eq!(branches.len(), 1, "{branches:?}");
    let retry = store.load(&branches[0].session, None).unwrap();
    assert_eq!(
        (
            store.info(&branches[0].session).unwrap().forked_at_index,
            retry[4].content.as_str()
        ),
        (Some(4), "Cloudy, 18 degrees.")
    );

    // The same spans written to a file, imported with the CLI: the same sessions.
    let from_file = dir.path().join("store");
    let out = succeeds(
        forktrail(&from_file, &["import", "--json"]).arg(&file),
        "import",
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["turns"], 6, "{report}");
    let imported = Store::open(&from_file).unwrap();
    assert_eq!(common::shape(&imported), common::shape(&store));
}
