//! A deterministic OpenAI-compatible `/v1/chat/completions` server on 127.0.0.1, for
//! regeneration tests: it records every request body and answers from its content.

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

pub struct Stub {
    /// The base URL to pass as endpoint (`http://127.0.0.1:PORT/v1`).
    pub url: String,
    pub requests: Arc<Mutex<Vec<Value>>>,
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
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(Vec::new()));
    let answered = Arc::new(Mutex::new(0));
    let (seen, done) = (Arc::clone(&requests), Arc::clone(&answered));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let (seen, done) = (Arc::clone(&seen), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let line = line.trim_end();
                    if line.is_empty() {
                        break;
                    }
                    if let Some((k, v)) = line.split_once(':') {
                        if k.eq_ignore_ascii_case("content-length") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                    }
                }
                let mut body = vec![0; length];
                reader.read_exact(&mut body).unwrap();
                let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                seen.lock().unwrap().push(request.clone());
                let (status, text) = answer(mode, &request, body.len());
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
