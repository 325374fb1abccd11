//! A deterministic model endpoint on 127.0.0.1 (OpenAI's `/v1/chat/completions`, or
//! Anthropic's `/v1/messages` by script), for what-if tests: it records every request's
//! head and body and answers from them.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How the stub answers.
#[derive(Clone, Copy, Debug)]
pub enum Mode {
    /// `"<model> answers: <last user message>"`, with usage.
    Echo,
    /// The answer calls a tool (`get_weather`) instead of speaking.
    ToolCall,
    /// This HTTP status with an error body.
    Status(u16),
    /// 200 with a body that is not JSON.
    Garbage,
    /// Echo, after this long.
    Slow(Duration),
}

/// A request's path and its headers (names lowercased).
pub type Head = (String, Vec<(String, String)>);

pub struct Stub {
    /// The base URL to pass as endpoint (`http://127.0.0.1:PORT/v1`).
    pub url: String,
    pub requests: Arc<Mutex<Vec<Value>>>,
    /// Every request's path and headers (names lowercased), in arrival order.
    pub heads: Arc<Mutex<Vec<Head>>>,
    /// How many answers have been sent in full.
    pub answered: Arc<Mutex<usize>>,
}

impl Stub {
    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }
}

/// The answer the stub gives in `Echo` mode, for checks.
pub fn echo(model: &str, last_user: &str) -> String {
    format!("{model} answers: {last_user}")
}

pub fn start(mode: Mode) -> Stub {
    serve(Arc::new(
        move |_: &Head, request: &Value, body_len: usize| {
            let (status, text) = answer(mode, request, body_len);
            Reply {
                status,
                body: text,
                delay: None,
            }
        },
    ))
}

/// What a scripted stub sends back.
pub struct Reply {
    pub status: u16,
    pub body: String,
    /// Waits this long before answering.
    pub delay: Option<Duration>,
}

impl Reply {
    pub fn ok(body: Value) -> Self {
        Self {
            status: 200,
            body: body.to_string(),
            delay: None,
        }
    }
}

/// A stub that answers each request (its path and headers, JSON body and byte length)
/// with `script`.
pub type Script = Arc<dyn Fn(&Head, &Value, usize) -> Reply + Send + Sync>;

/// An OpenAI chat completion from `model` saying `content`, calling `calls` (`(id, name,
/// arguments JSON)`), with this usage.
pub fn completion(
    model: &str,
    content: Option<&str>,
    calls: &[(&str, &str, Value)],
    usage: (u64, u64, u64),
    finish: &str,
) -> Value {
    let mut message = json!({"role": "assistant", "content": content});
    if !calls.is_empty() {
        message["tool_calls"] = calls
            .iter()
            .map(|(id, name, args)| {
                json!({"id": id, "type": "function",
                       "function": {"name": name, "arguments": args.to_string()}})
            })
            .collect();
    }
    json!({
        "id": "chatcmpl-stub", "object": "chat.completion", "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": usage.0, "completion_tokens": usage.1,
                  "total_tokens": usage.0 + usage.1,
                  "prompt_tokens_details": {"cached_tokens": usage.2}},
    })
}

/// An Anthropic message from `model` saying `content`, with `tool_use` blocks for
/// `calls`, and this usage (input, output, cache reads).
pub fn anthropic_message(
    model: &str,
    content: Option<&str>,
    calls: &[(&str, &str, Value)],
    usage: (u64, u64, u64),
    stop: &str,
) -> Value {
    let mut blocks: Vec<Value> = content
        .map(|t| json!({"type": "text", "text": t}))
        .into_iter()
        .collect();
    blocks.extend(calls.iter().map(
        |(id, name, args)| json!({"type": "tool_use", "id": id, "name": name, "input": args}),
    ));
    json!({
        "id": "msg_stub", "type": "message", "role": "assistant", "model": model,
        "content": blocks, "stop_reason": stop,
        "usage": {"input_tokens": usage.0, "output_tokens": usage.1,
                  "cache_read_input_tokens": usage.2, "cache_creation_input_tokens": 0},
    })
}

/// A stub that answers with `script`.
pub fn scripted(script: impl Fn(&Value, usize) -> Reply + Send + Sync + 'static) -> Stub {
    serve(Arc::new(move |_: &Head, request: &Value, len| {
        script(request, len)
    }))
}

/// A stub that answers each request with `script`, given its path and headers too.
pub fn scripted_with_head(
    script: impl Fn(&Head, &Value, usize) -> Reply + Send + Sync + 'static,
) -> Stub {
    serve(Arc::new(script))
}

/// A gateway that echoes the credentials it received, as some do in their errors
/// (`"Incorrect API key provided: sk-…"`): every request is answered 401 in the wire
/// format of the provider its path names (Anthropic's `/v1/messages`, else OpenAI's),
/// quoting the key bare and every header as received, and `quote` besides (a secret the
/// test plants, as a gateway's log line might carry one). A request for model
/// `echo-ok` is answered 200 instead, its answer saying the key and the headers.
pub fn echoing_credentials(quote: &str) -> Stub {
    let quote = quote.to_string();
    scripted_with_head(move |(path, headers), request, _| {
        let key = headers
            .iter()
            .find(|(k, _)| k == "authorization" || k == "x-api-key")
            .map(|(_, v)| v.trim_start_matches("Bearer ").to_string())
            .unwrap_or_default();
        let all: Vec<String> = headers.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        let said = format!(
            "Incorrect API key provided: {key}. Received {}; see {quote}",
            all.join("; ")
        );
        let anthropic = path.ends_with("/messages");
        let model = request["model"].as_str().unwrap_or_default();
        if model == "echo-ok" {
            return Reply::ok(match anthropic {
                true => anthropic_message(model, Some(&said), &[], (10, 5, 0), "end_turn"),
                false => completion(model, Some(&said), &[], (10, 5, 0), "stop"),
            });
        }
        let body = match anthropic {
            true => json!({"type": "error",
                           "error": {"type": "authentication_error", "message": said}}),
            false => json!({"error": {"message": said, "type": "invalid_request_error",
                                      "code": "invalid_api_key"}}),
        };
        Reply {
            status: 401,
            body: body.to_string(),
            delay: None,
        }
    })
}

fn serve(script: Script) -> Stub {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(Vec::new()));
    let heads = Arc::new(Mutex::new(Vec::new()));
    let answered = Arc::new(Mutex::new(0));
    let (seen, done, headers) = (
        Arc::clone(&requests),
        Arc::clone(&answered),
        Arc::clone(&heads),
    );
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let (seen, done, headers) =
                (Arc::clone(&seen), Arc::clone(&done), Arc::clone(&headers));
            let script = Arc::clone(&script);
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut length = 0;
                let mut path = String::new();
                let mut head = Vec::new();
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let line = line.trim_end();
                    if line.is_empty() {
                        break;
                    }
                    if path.is_empty() {
                        path = line.split(' ').nth(1).unwrap_or("").to_string();
                        continue;
                    }
                    if let Some((k, v)) = line.split_once(':') {
                        head.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
                        if k.eq_ignore_ascii_case("content-length") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                    }
                }
                let mut body = vec![0; length];
                // A client killed mid-request sends no whole body: nothing to answer.
                if reader.read_exact(&mut body).is_err() {
                    return;
                }
                let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let received = (path, head);
                headers.lock().unwrap().push(received.clone());
                seen.lock().unwrap().push(request.clone());
                let Reply {
                    status,
                    body: text,
                    delay,
                } = script(&received, &request, body.len());
                if let Some(delay) = delay {
                    std::thread::sleep(delay);
                }
                let reply = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                    text.len()
                );
                let _ = stream.write_all(reply.as_bytes());
                *done.lock().unwrap() += 1;
            });
        }
    });
    Stub {
        url,
        requests,
        heads,
        answered,
    }
}

fn answer(mode: Mode, request: &Value, body_len: usize) -> (u16, String) {
    let model = request["model"].as_str().unwrap_or("").to_string();
    let last_user = request["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_string();
    let usage = json!({"prompt_tokens": body_len / 4, "completion_tokens": 7, "total_tokens": body_len / 4 + 7});
    let message = match mode {
        Mode::Status(code) => {
            return (
                code,
                json!({"error": {"message": "the stub fails"}}).to_string(),
            )
        }
        Mode::Garbage => return (200, "<html>not json</html>".into()),
        Mode::Slow(wait) => {
            std::thread::sleep(wait);
            json!({"role": "assistant", "content": echo(&model, &last_user)})
        }
        Mode::Echo => json!({"role": "assistant", "content": echo(&model, &last_user)}),
        Mode::ToolCall => json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_w", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\":\"Amsterdam\"}"}}]}),
    };
    let reply = json!({
        "id": "chatcmpl-stub", "object": "chat.completion", "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": usage,
    });
    (200, reply.to_string())
}
