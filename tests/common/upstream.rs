//! A model upstream on 127.0.0.1 that answers as a script says, byte by byte: a JSON
//! body, or a stream of server-sent events with pauses between them, and, if told, a
//! connection closed before the answer is whole. For the model proxy's tests: clients
//! that go away, upstreams that are cut short, slow, failing or answering garbage.

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One answer.
pub struct Answer {
    pub status: u16,
    pub content_type: &'static str,
    /// Parts written one after the other, each after its pause.
    pub parts: Vec<(Duration, String)>,
    /// Close the connection after the parts, with no end of the body (a stream with no
    /// `Content-Length` just ends; a JSON body is cut short of its length).
    pub cut: bool,
    /// A wait before anything is written (the head included).
    pub silence: Duration,
}

impl Answer {
    /// A JSON body, whole.
    pub fn json(status: u16, body: &Value) -> Self {
        Self {
            status,
            content_type: "application/json",
            parts: vec![(Duration::ZERO, body.to_string())],
            cut: false,
            silence: Duration::ZERO,
        }
    }

    /// Server-sent events (`(event name or "", data)`), each after `pause`.
    pub fn events(events: &[(&str, Value)], pause: Duration) -> Self {
        let parts = events
            .iter()
            .map(|(name, data)| {
                let head = if name.is_empty() {
                    String::new()
                } else {
                    format!("event: {name}\n")
                };
                let data = match data {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (pause, format!("{head}data: {data}\n\n"))
            })
            .collect();
        Self {
            status: 200,
            content_type: "text/event-stream",
            parts,
            cut: false,
            silence: Duration::ZERO,
        }
    }
}

/// A request received: its path and its JSON body.
pub type Received = (String, Value);

pub struct Upstream {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    pub received: Arc<Mutex<Vec<Received>>>,
}

impl Upstream {
    pub fn bodies(&self) -> Vec<Value> {
        self.received
            .lock()
            .unwrap()
            .iter()
            .map(|(_, b)| b.clone())
            .collect()
    }
}

/// An upstream answering each request (path, body) with `script`'s answer.
pub fn start(script: impl Fn(&str, &Value) -> Answer + Send + Sync + 'static) -> Upstream {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let received = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&received);
    let script = Arc::new(script);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let (seen, script) = (Arc::clone(&seen), Arc::clone(&script));
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let (mut path, mut length) = (String::new(), 0usize);
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
                    } else if let Some((k, v)) = line.split_once(':') {
                        if k.eq_ignore_ascii_case("content-length") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                    }
                }
                let mut body = vec![0; length];
                if reader.read_exact(&mut body).is_err() {
                    return;
                }
                let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                seen.lock().unwrap().push((path.clone(), body.clone()));
                let answer = script(&path, &body);
                let total: usize = answer.parts.iter().map(|(_, p)| p.len()).sum();
                let length = if answer.content_type == "application/json" {
                    format!(
                        "Content-Length: {}\r\n",
                        total + usize::from(answer.cut) * 10
                    )
                } else {
                    String::new()
                };
                let head = format!(
                    "HTTP/1.1 {} X\r\nContent-Type: {}\r\n{length}Connection: close\r\n\r\n",
                    answer.status, answer.content_type
                );
                std::thread::sleep(answer.silence);
                if stream.write_all(head.as_bytes()).is_err() {
                    return;
                }
                for (pause, part) in &answer.parts {
                    std::thread::sleep(*pause);
                    if stream.write_all(part.as_bytes()).is_err() || stream.flush().is_err() {
                        return;
                    }
                }
                let _ = stream.shutdown(std::net::Shutdown::Both);
            });
        }
    });
    Upstream { url, received }
}
