//! OpenTelemetry GenAI traces in: the latest conventions' message attributes, the older
//! prompt/completion attributes, OpenInference's, through `import --format otlp` (OTLP
//! JSON Lines) and `POST /v1/traces` (JSON or protobuf, gzip): a conversation with a
//! tool call and a retried answer becomes a session and a fork.

use crate::common;

use common::*;
use forktrail::{ImportFormat, Kind, Role, SessionId, Store, TranscriptOptions};
use serde_json::{json, Value};

const TRACE: &str = "5b8efff798038103d269b633813fc60c";

/// An OTLP JSON span with `attrs` (string values unless already OTLP-typed).
fn span(id: u8, name: &str, start_ms: u64, attrs: Value) -> Value {
    let attributes: Vec<Value> = attrs
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            let value = match v {
                Value::String(s) => json!({"stringValue": s}),
                Value::Number(n) => json!({"intValue": n.to_string()}),
                other => json!({"stringValue": other.to_string()}),
            };
            json!({"key": k, "value": value})
        })
        .collect();
    let start = start_ms * 1_000_000;
    json!({
        "traceId": TRACE, "spanId": format!("{id:016x}"), "name": name, "kind": 3,
        "startTimeUnixNano": start.to_string(),
        "endTimeUnixNano": (start + 1_500_000_000).to_string(),
        "attributes": attributes, "status": {}
    })
}

/// One OTLP trace request holding `spans`.
fn request(spans: Vec<Value>) -> Value {
    json!({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "agent"}}]},
        "scopeSpans": [{"scope": {"name": "test"}, "spans": spans}]
    }]})
}

fn text(role: &str, content: &str) -> Value {
    json!({"role": role, "parts": [{"type": "text", "content": content}]})
}

const QUESTION: &str = "What is the weather in Paris?";

/// A chat with a tool call and a retried answer, as the latest GenAI conventions
/// record it (messages as JSON attributes), plus a span of something else.
fn latest_spans(conversation: Option<&str>) -> Vec<Value> {
    let call = json!({"role": "assistant", "parts": [{"type": "tool_call", "id": "call_1",
        "name": "get_weather", "arguments": {"city": "Paris"}}]});
    let result = json!({"role": "tool", "parts": [{"type": "tool_call_response",
        "id": "call_1", "response": "18°C, cloudy"}]});
    let system = json!([{"type": "text", "content": "Answer briefly."}]).to_string();
    let chat = |id: u8, at: u64, input: Value, output: Value, tokens: (u64, u64)| {
        let mut attrs = json!({
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.response.model": "gpt-4o-2024-08-06",
            "gen_ai.system_instructions": system,
            "gen_ai.input.messages": input.to_string(),
            "gen_ai.output.messages": output.to_string(),
            "gen_ai.usage.input_tokens": tokens.0,
            "gen_ai.usage.output_tokens": tokens.1,
            "gen_ai.request.temperature": "0.2",
        });
        if let Some(c) = conversation {
            attrs["gen_ai.conversation.id"] = json!(c);
        }
        span(id, "chat gpt-4o", at, attrs)
    };
    let asked = json!([text("user", QUESTION)]);
    let answered = json!([text("user", QUESTION), call, result]);
    vec![
        chat(1, 1000, asked, json!([call]), (20, 8)),
        span(
            2,
            "execute_tool get_weather",
            2000,
            json!({
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.id": "call_1"}),
        ),
        chat(
            3,
            3000,
            answered.clone(),
            json!([text("assistant", "18°C and cloudy.")]),
            (40, 6),
        ),
        // Retried: the same input, another answer.
        chat(
            4,
            4000,
            answered,
            json!([text("assistant", "Cloudy, 18 degrees.")]),
            (40, 7),
        ),
        span(
            5,
            "GET /forecast",
            4500,
            json!({"http.request.method": "GET"}),
        ),
    ]
}

fn import(store: &Store, lines: &[Value]) -> forktrail::TranscriptReport {
    let text: String = lines.iter().map(|l| l.to_string() + "\n").collect();
    assert_eq!(
        ImportFormat::sniff(text.as_bytes()),
        Some(ImportFormat::Otlp)
    );
    store
        .import_with(text.as_bytes(), None, &TranscriptOptions::default())
        .unwrap()
}

/// What the conversation must become: the main line and the retried answer's fork.
fn check_conversation(store: &Store, main: &SessionId) {
    let model = Some("gpt-4o-2024-08-06".to_string());
    let main_turns = turns_of(store, main);
    assert_eq!(
        main_turns
            .iter()
            .map(|t| (t.0, t.1, t.2.as_str()))
            .collect::<Vec<_>>(),
        [
            (Role::System, Kind::Message, "Answer briefly."),
            (Role::User, Kind::Message, QUESTION),
            (Role::Assistant, Kind::ToolCall, ""),
            (Role::Tool, Kind::Message, "18°C, cloudy"),
            (Role::Assistant, Kind::Message, "18°C and cloudy."),
        ]
    );
    assert_eq!((&main_turns[2].3, &main_turns[4].3), (&model, &model));
    let loaded = store.load(main, None).unwrap();
    let calls: Value = serde_json::from_str(loaded[2].tool_calls.as_deref().unwrap()).unwrap();
    assert_eq!(calls[0]["function"]["name"], "get_weather");
    assert_eq!(
        serde_json::from_str::<Value>(calls[0]["function"]["arguments"].as_str().unwrap()).unwrap(),
        json!({"city": "Paris"})
    );
    assert_eq!(
        (loaded[3].tool_call_id.as_deref(), loaded[3].name.as_deref()),
        (Some("call_1"), Some("get_weather"))
    );
    let payload: Value = serde_json::from_str(loaded[4].payload.as_deref().unwrap()).unwrap();
    assert_eq!(
        (
            &payload["otel"]["input_tokens"],
            &payload["otel"]["output_tokens"]
        ),
        (&json!(40), &json!(6))
    );
    assert_eq!(payload["otel"]["latency_ms"], 1500);
    let branches = store.branches(main).unwrap();
    assert_eq!(branches.len(), 1, "{branches:?}");
    let retry = &branches[0].session;
    let info = store.info(retry).unwrap();
    assert_eq!((info.forked_at_index, info.own_turns), (Some(4), 1));
    assert_eq!(turns_of(store, retry)[4].2, "Cloudy, 18 degrees.");
}

#[test]
fn a_traced_conversation_with_a_tool_call_and_a_retry_is_a_session_and_a_fork() {
    for store in stores() {
        let kind = store.kind;
        let lines = [request(latest_spans(Some("conv-1")))];
        let report = import(&store, &lines);
        assert_eq!(report.sessions.len(), 2, "{kind}: {report:?}");
        assert_eq!(report.turns, 6, "{kind}");
        assert_eq!(
            report
                .skipped_types
                .get("span GET /forecast (not a GenAI call)"),
            Some(&1),
            "{kind}: {report:?}"
        );
        assert_eq!(
            report
                .skipped_types
                .get("attribute gen_ai.request.temperature (not kept)"),
            Some(&3),
            "{kind}: an attribute not kept is counted, never dropped unsaid"
        );
        check_conversation(&store, &sid("conv-1"));
        // The same traces again: nothing new.
        imports_nothing_new(&store, kind, || import(&store, &lines));
    }
}

#[test]
fn a_conversation_continued_in_a_later_export_gains_its_new_turns() {
    let store = Store::in_memory().unwrap();
    import(&store, &[request(latest_spans(Some("conv-2")))]);
    let so_far = json!([
        text("user", QUESTION),
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1", "response": "18°C, cloudy"}]},
        text("assistant", "18°C and cloudy."),
        text("user", "And tomorrow?"),
    ]);
    let next = span(
        9,
        "chat gpt-4o",
        9000,
        json!({
            "gen_ai.operation.name": "chat",
            "gen_ai.conversation.id": "conv-2",
            "gen_ai.system_instructions": json!([{"type": "text", "content": "Answer briefly."}]).to_string(),
            "gen_ai.input.messages": so_far.to_string(),
            "gen_ai.output.messages": json!([text("assistant", "Sunny.")]).to_string(),
        }),
    );
    let report = import(&store, &[request(vec![next])]);
    assert_eq!(report.extended, [sid("conv-2")], "{report:?}");
    assert_eq!(
        report.turns, 2,
        "the arguments given as text match those given as JSON"
    );
    assert_eq!(store.info(&sid("conv-2")).unwrap().length, 7);
}

#[test]
fn older_prompt_attributes_and_openinference_give_the_same_conversation() {
    // The retried conversation as OpenLLMetry (gen_ai.prompt.N.*) and OpenInference
    // (llm.input_messages.N.message.*) flatten it; no conversation id: the trace names
    // the session.
    let flat = |prefix_in: &str, prefix_out: &str, role: &str, content: &str, calls: &str| {
        // A tool call's keys: OpenInference's names (`llm.…`), else OpenLLMetry's.
        let pick = |openinference: &'static str, openllmetry: &'static str| {
            if prefix_in.starts_with("llm") {
                openinference
            } else {
                openllmetry
            }
        };
        let mut spans = Vec::new();
        let messages: Vec<(&str, &str, Option<&str>)> = vec![
            ("system", "Answer briefly.", None),
            ("user", QUESTION, None),
            ("assistant", "", Some("call")),
            ("tool", "18°C, cloudy", Some("result")),
        ];
        for (id, (answer, at)) in [("18°C and cloudy.", 3000), ("Cloudy, 18 degrees.", 4000)]
            .into_iter()
            .enumerate()
        {
            let mut attrs = json!({"gen_ai.response.model": "gpt-4o-2024-08-06"});
            for (i, (r, c, extra)) in messages.iter().enumerate() {
                attrs[format!("{prefix_in}{i}.{role}")] = json!(r);
                attrs[format!("{prefix_in}{i}.{content}")] = json!(c);
                match extra {
                    Some("call") => {
                        for (key, value) in [
                            (pick("tool_call.id", "id"), "call_1"),
                            (pick("tool_call.function.name", "name"), "get_weather"),
                            (
                                pick("tool_call.function.arguments", "arguments"),
                                "{\"city\":\"Paris\"}",
                            ),
                        ] {
                            attrs[format!("{prefix_in}{i}.{calls}0.{key}")] = json!(value);
                        }
                    }
                    Some("result") => {
                        let key = pick("message.tool_call_id", "tool_call_id");
                        attrs[format!("{prefix_in}{i}.{key}")] = json!("call_1");
                    }
                    _ => {}
                }
            }
            attrs[format!("{prefix_out}0.{role}")] = json!("assistant");
            attrs[format!("{prefix_out}0.{content}")] = json!(answer);
            spans.push(span(10 + id as u8, "llm", at, attrs));
        }
        request(spans)
    };
    let trace = sid(TRACE);
    for shape in [
        flat(
            "gen_ai.prompt.",
            "gen_ai.completion.",
            "role",
            "content",
            "tool_calls.",
        ),
        flat(
            "llm.input_messages.",
            "llm.output_messages.",
            "message.role",
            "message.content",
            "message.tool_calls.",
        ),
    ] {
        let store = Store::in_memory().unwrap();
        let report = import(&store, &[shape]);
        assert_eq!(report.sessions[0], trace, "{report:?}");
        let main = turns_of(&store, &trace);
        assert_eq!(main.len(), 5, "{main:?}");
        assert_eq!(main[2].1, Kind::ToolCall);
        assert_eq!(main[3].2, "18°C, cloudy");
        assert_eq!(main[4].2, "18°C and cloudy.");
        let branches = store.branches(&trace).unwrap();
        assert_eq!(branches.len(), 1);
        assert_eq!(
            turns_of(&store, &branches[0].session)[4].2,
            "Cloudy, 18 degrees."
        );
    }
}

/// `store` served with the token `t0k`: the server, and the URL it takes traces at.
#[cfg(feature = "server")]
fn collector(store: Store) -> (common::server::Server, String) {
    let config = forktrail::server::ServerConfig {
        token: Some("t0k".into()),
        ..Default::default()
    };
    let server = common::server::Server::start(std::sync::Arc::new(store), config);
    let url = server.url("/v1/traces");
    (server, url)
}

#[cfg(feature = "server")]
#[test]
fn the_server_takes_otlp_http_as_json_and_gzipped_protobuf_with_its_token() {
    use std::io::Write;
    let (server, url) = collector(Store::in_memory().unwrap());
    let (store, http) = (std::sync::Arc::clone(&server.store), &server.http);
    let body = request(latest_spans(Some("conv-json")));
    let refused = http.post(&url).json(&body).send().unwrap();
    assert_eq!(refused.status(), 401);
    assert!(store.list().unwrap().is_empty());
    let ok = http
        .post(&url)
        .bearer_auth("t0k")
        .json(&body)
        .send()
        .unwrap();
    assert_eq!(ok.status(), 200);
    assert_eq!(ok.text().unwrap(), "{}");
    check_conversation(&store, &sid("conv-json"));

    // The same spans for another conversation as gzipped protobuf, as exporters send.
    // (Its own conversation: the same messages under another id would all be turns the
    // store already holds, shared rather than stored again.)
    let other: Value = serde_json::from_str(
        &request(latest_spans(Some("conv-proto")))
            .to_string()
            .replace("Paris", "Lyon"),
    )
    .unwrap();
    let proto: opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest =
        serde_json::from_value(other).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&prost::Message::encode_to_vec(&proto))
        .unwrap();
    let ok = http
        .post(&url)
        .bearer_auth("t0k")
        .header("Content-Type", "application/x-protobuf")
        .header("Content-Encoding", "gzip")
        .body(gz.finish().unwrap())
        .send()
        .unwrap();
    assert_eq!(ok.status(), 200);
    assert_eq!(
        ok.headers()["content-type"].to_str().unwrap(),
        "application/x-protobuf"
    );
    let lyon = store.load(&sid("conv-proto"), None).unwrap();
    assert_eq!(lyon.len(), 5);
    assert_eq!(lyon[1].content, "What is the weather in Lyon?");
    assert_eq!(store.branches(&sid("conv-proto")).unwrap().len(), 1);
    // A body that is no trace request: 400, nothing written.
    let before = quads(&store);
    let bad = http
        .post(&url)
        .bearer_auth("t0k")
        .header("Content-Type", "application/x-protobuf")
        .body(vec![0xff, 0xff, 0xff])
        .send()
        .unwrap();
    assert_eq!(bad.status(), 400);
    assert_eq!(before, quads(&store));
}

#[test]
fn span_events_of_the_older_conventions_give_the_messages() {
    // The 1.36 shape: each message a span event `gen_ai.<role>.message`, the answer a
    // `gen_ai.choice` event.
    let mut chat = span(
        20,
        "chat",
        1000,
        json!({"gen_ai.operation.name": "chat",
        "gen_ai.conversation.id": "events-1", "gen_ai.response.model": "m-events"}),
    );
    let event = |name: &str, attrs: Value| {
        let attributes: Vec<Value> = attrs
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| json!({"key": k, "value": {"stringValue": v.as_str().unwrap()}}))
            .collect();
        json!({"timeUnixNano": "1000000000", "name": name, "attributes": attributes})
    };
    chat["events"] = json!([
        event(
            "gen_ai.system.message",
            json!({"content": "Answer briefly."})
        ),
        event("gen_ai.user.message", json!({"content": QUESTION})),
        event(
            "gen_ai.choice",
            json!({"message": json!({"content": "Mild."}).to_string()})
        ),
        event("gen_ai.something.else", json!({"x": "y"})),
    ]);
    let store = Store::in_memory().unwrap();
    let report = import(&store, &[request(vec![chat])]);
    assert_eq!(
        report.skipped_types.get("event gen_ai.something.else"),
        Some(&1)
    );
    let got = turns_of(&store, &sid("events-1"));
    assert_eq!(
        got.iter()
            .map(|t| (t.0, t.2.as_str(), t.3.as_deref()))
            .collect::<Vec<_>>(),
        [
            (Role::System, "Answer briefly.", None),
            (Role::User, QUESTION, None),
            (Role::Assistant, "Mild.", Some("m-events")),
        ]
    );
}

/// A chat span of `conversation` (latest conventions): `input` in, `output` out.
fn chat(id: u8, at: u64, conversation: &str, input: Value, output: Value) -> Value {
    span(
        id,
        "chat m",
        at,
        json!({"gen_ai.operation.name": "chat", "gen_ai.conversation.id": conversation,
               "gen_ai.response.model": "m", "gen_ai.input.messages": input.to_string(),
               "gen_ai.output.messages": output.to_string()}),
    )
}

#[cfg(feature = "server")]
#[test]
fn the_server_answers_partial_success_naming_what_it_imported_and_the_spans_it_refused() {
    use opentelemetry_proto::tonic::collector::trace::v1::{
        ExportTraceServiceRequest, ExportTraceServiceResponse,
    };
    let limits = forktrail::Limits {
        content_bytes: 2000,
        ..Default::default()
    };
    let (server, url) = collector(Store::in_memory().unwrap().with_limits(limits));
    let (store, http) = (std::sync::Arc::clone(&server.store), &server.http);
    let post = |body: Vec<u8>, content_type: &str| {
        http.post(&url)
            .bearer_auth("t0k")
            .header("Content-Type", content_type)
            .body(body)
            .send()
            .unwrap()
    };
    // A good conversation (with a span of no GenAI shape), and one whose answer is
    // over the store's content limit, in its two spans.
    let spans = |good: &str, big: &str| {
        let mut spans = latest_spans(Some(good));
        let asked = json!([text("user", "Dump the table.")]);
        let dumped = json!([text("assistant", &"row ".repeat(1500))]);
        spans.push(chat(30, 5000, big, asked.clone(), dumped.clone()));
        spans.push(chat(31, 6000, big, asked, dumped));
        request(spans)
    };

    let answer = post(
        spans("conv-good", "conv-big").to_string().into_bytes(),
        "application/json",
    );
    assert_eq!(answer.status(), 200);
    let body: Value = answer.json().unwrap();
    let partial = &body["partialSuccess"];
    assert_eq!(partial["rejectedSpans"], "2", "{body}");
    let message = partial["errorMessage"].as_str().unwrap();
    let imported = store.info(&sid("conv-good")).unwrap().length + 1;
    assert!(
        message.starts_with(&format!(
            "imported {imported} turns (sessions new: conv-good"
        )),
        "{message}"
    );
    assert!(
        message.contains("refused 2 spans: conversation conv-big: ")
            && message.contains("over the limit of 2000 bytes"),
        "{message}"
    );
    assert!(
        message.contains("not imported: 1 span GET /forecast (not a GenAI call)"),
        "{message}"
    );
    check_conversation(&store, &sid("conv-good"));
    assert!(
        store.info(&sid("conv-big")).is_err(),
        "nothing of it is stored"
    );

    // The same as protobuf: the protocol's own message says so.
    let other = spans("conv-good-2", "conv-big-2")
        .to_string()
        .replace("Paris", "Lyon");
    let proto: ExportTraceServiceRequest = serde_json::from_str(&other).unwrap();
    let answer = post(
        prost::Message::encode_to_vec(&proto),
        "application/x-protobuf",
    );
    assert_eq!(answer.status(), 200);
    let decoded: ExportTraceServiceResponse =
        prost::Message::decode(&answer.bytes().unwrap()[..]).unwrap();
    let partial = decoded.partial_success.unwrap();
    assert_eq!(partial.rejected_spans, 2);
    assert!(
        partial
            .error_message
            .contains("refused 2 spans: conversation conv-big-2: "),
        "{}",
        partial.error_message
    );
    assert!(store.info(&sid("conv-good-2")).is_ok());

    // A request of one conversation, refused: a partial success of nothing.
    let alone = request(vec![chat(
        32,
        8000,
        "conv-big-3",
        json!([text("user", "Dump it again.")]),
        json!([text("assistant", &"row ".repeat(1500))]),
    )]);
    let answer = post(alone.to_string().into_bytes(), "application/json");
    assert_eq!(answer.status(), 200);
    let body: Value = answer.json().unwrap();
    assert_eq!(body["partialSuccess"]["rejectedSpans"], "1", "{body}");
    assert!(store.info(&sid("conv-big-3")).is_err());

    // Spans with nothing to import are not a silent success either.
    let http_only = request(vec![span(
        40,
        "GET /health",
        7000,
        json!({"http.request.method": "GET"}),
    )]);
    let before = quads(&store);
    let answer = post(http_only.to_string().into_bytes(), "application/json");
    assert_eq!(answer.status(), 200);
    let body: Value = answer.json().unwrap();
    assert_eq!(body["partialSuccess"]["rejectedSpans"], "0", "{body}");
    assert_eq!(
        body["partialSuccess"]["errorMessage"],
        "imported 0 turns (sessions new: none; extended: none); not imported: 1 span GET \
         /health (not a GenAI call)"
    );
    assert_eq!(before, quads(&store));
}
