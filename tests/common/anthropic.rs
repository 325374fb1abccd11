//! A scripted Anthropic Messages server on 127.0.0.1, for clients nobody here wrote
//! (Claude Code, SDKs): `POST /v1/messages` is answered by a script, streamed as the API
//! streams (`text/event-stream`: `message_start`, per content block
//! `content_block_start`, its deltas and `content_block_stop`, then `message_delta` and
//! `message_stop`) when the request asks `"stream": true`, else as one JSON message;
//! `POST /v1/messages/count_tokens` gets a count; anything else a 404 in the API's error
//! shape. Every request is kept (method, path, headers, body), so a test can read what
//! the client sent, and what it asked besides.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// One request the stub received.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    /// The path with its query (`/v1/messages?beta=true`).
    pub path: String,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    /// The body as JSON (`Null` when it is none).
    pub body: Value,
}

impl Request {
    /// Whether this is a `POST /v1/messages` (any query), not a token count.
    pub fn is_messages(&self) -> bool {
        self.method == "POST" && self.path.split('?').next() == Some("/v1/messages")
    }
}

pub struct AnthropicStub {
    /// The base URL, as `ANTHROPIC_BASE_URL` takes it (`http://127.0.0.1:PORT`).
    pub url: String,
    requests: Arc<Mutex<Vec<Request>>>,
}

impl AnthropicStub {
    /// Every request, in arrival order.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }

    /// The bodies of the `POST /v1/messages` requests, in arrival order.
    pub fn messages_requests(&self) -> Vec<Value> {
        self.requests()
            .into_iter()
            .filter(Request::is_messages)
            .map(|r| r.body)
            .collect()
    }
}

/// The answer to a messages request: a whole Anthropic message (as
/// [`super::stub::anthropic_message`] builds one), streamed when the request asks.
pub type Script = dyn Fn(&Value) -> Value + Send + Sync;

/// A stub that answers each messages request with `script`'s message.
pub fn start(script: impl Fn(&Value) -> Value + Send + Sync + 'static) -> AnthropicStub {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(Vec::new()));
    let script: Arc<Script> = Arc::new(script);
    let seen = Arc::clone(&requests);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let (seen, script) = (Arc::clone(&seen), Arc::clone(&script));
            std::thread::spawn(move || {
                let _ = serve(stream, &seen, script.as_ref());
            });
        }
    });
    AnthropicStub { url, requests }
}

/// Reads one request from `stream`, notes it and answers it; the connection is closed.
fn serve(
    mut stream: TcpStream,
    seen: &Mutex<Vec<Request>>,
    script: &Script,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut words = line.split_whitespace();
    let method = words.next().unwrap_or_default().to_string();
    let path = words.next().unwrap_or_default().to_string();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line.trim_end().is_empty() {
            break;
        }
        if let Some((k, v)) = line.trim_end().split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let body = if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        chunked(&mut reader)?
    } else {
        let length = header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        body
    };
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let request = Request {
        method,
        path,
        headers,
        body,
    };
    seen.lock().unwrap().push(request.clone());
    let route = request.path.split('?').next().unwrap_or_default();
    let reply = match (request.method.as_str(), route) {
        ("POST", "/v1/messages") => {
            let message = script(&request.body);
            if request.body["stream"] == json!(true) {
                let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
                            Cache-Control: no-cache\r\nConnection: close\r\n\r\n";
                format!("{head}{}", events(&message))
            } else {
                reply(200, &message)
            }
        }
        ("POST", "/v1/messages/count_tokens") => {
            let tokens = request.body.to_string().len() / 4;
            reply(200, &json!({ "input_tokens": tokens }))
        }
        _ => reply(
            404,
            &json!({"type": "error", "error": {"type": "not_found_error",
                    "message": format!("the stub answers no {} {}", request.method, route)}}),
        ),
    };
    stream.write_all(reply.as_bytes())?;
    stream.flush()
}

/// A chunked body, whole.
fn chunked(reader: &mut impl BufRead) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size)?;
        let size =
            usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16).unwrap_or(0);
        let mut chunk = vec![0; size + 2];
        reader.read_exact(&mut chunk)?;
        if size == 0 {
            return Ok(body);
        }
        body.extend_from_slice(&chunk[..size]);
    }
}

fn reply(status: u16, body: &Value) -> String {
    let text = body.to_string();
    format!(
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{text}",
        text.len()
    )
}

/// `message` as the API streams it: each block opened empty, its text (or its input as
/// JSON text, or its thinking) sent in two deltas, closed; then the stop reason and the
/// output tokens, and the end.
pub fn events(message: &Value) -> String {
    let mut out = String::new();
    let mut event = |name: &str, data: Value| {
        out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    };
    let mut start = message.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    start["stop_sequence"] = Value::Null;
    start["usage"]["output_tokens"] = json!(1);
    event(
        "message_start",
        json!({"type": "message_start", "message": start}),
    );
    for (index, block) in message["content"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let (empty, deltas) = match block["type"].as_str() {
            Some("tool_use") => {
                let mut empty = block.clone();
                empty["input"] = json!({});
                let input = block["input"].to_string();
                let deltas = halves(&input)
                    .map(|part| json!({"type": "input_json_delta", "partial_json": part}));
                (empty, deltas.collect::<Vec<_>>())
            }
            Some("thinking") => {
                let text = block["thinking"].as_str().unwrap_or_default();
                let mut deltas: Vec<Value> = halves(text)
                    .map(|part| json!({"type": "thinking_delta", "thinking": part}))
                    .collect();
                deltas.push(json!({"type": "signature_delta",
                                   "signature": block["signature"].as_str().unwrap_or("stub")}));
                (
                    json!({"type": "thinking", "thinking": "", "signature": ""}),
                    deltas,
                )
            }
            _ => {
                let text = block["text"].as_str().unwrap_or_default();
                let deltas = halves(text).map(|part| json!({"type": "text_delta", "text": part}));
                (json!({"type": "text", "text": ""}), deltas.collect())
            }
        };
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": empty}),
        );
        for delta in deltas {
            event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": delta}),
            );
        }
        event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        );
    }
    event(
        "message_delta",
        json!({"type": "message_delta",
               "delta": {"stop_reason": message["stop_reason"], "stop_sequence": null},
               "usage": {"output_tokens": message["usage"]["output_tokens"]}}),
    );
    event("message_stop", json!({"type": "message_stop"}));
    out
}

/// A text cut in two at a character boundary near its middle.
fn halves(text: &str) -> impl Iterator<Item = &str> {
    let mut cut = text.len() / 2;
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    let (a, b) = text.split_at(cut);
    [a, b].into_iter().filter(|p| !p.is_empty())
}
