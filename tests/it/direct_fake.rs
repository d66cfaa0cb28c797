//! Fake loopback endpoints for the direct runtime's tests: a TCP listener answering canned HTTP
//! (`FakeEndpoint`), and what a ready local server answers to the readiness preflight
//! (`ready_answer`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use autocode::demo::{CHECKER_MODEL, DOER_MODEL};

/// A loopback endpoint answering every request with one canned HTTP response; counts requests.
pub(super) struct FakeEndpoint {
    pub(super) url: String,
    hits: Arc<Mutex<u32>>,
}

impl FakeEndpoint {
    /// A ready local server (it lists the demo's models and passes the readiness canaries,
    /// `ready_answer`) that answers every stage request with `response`; `hits` counts the
    /// stage requests only.
    pub(super) fn start(response: String) -> FakeEndpoint {
        let stage_hits = Arc::new(Mutex::new(0));
        let counter = stage_hits.clone();
        let mut endpoint = FakeEndpoint::routed(move |path, body| {
            ready_answer(path, body).unwrap_or_else(|| {
                *counter.lock().unwrap() += 1;
                response.clone()
            })
        });
        endpoint.hits = stage_hits;
        endpoint
    }

    /// Answers each request with `handler(path, body)` (a whole HTTP response).
    pub(super) fn routed(handler: impl Fn(&str, &str) -> String + Send + 'static) -> FakeEndpoint {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let hits = Arc::new(Mutex::new(0));
        let counter = hits.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut length = 0usize;
                let mut path = String::new();
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if path.is_empty() {
                        path = line
                            .split_whitespace()
                            .nth(1)
                            .unwrap_or_default()
                            .to_owned();
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; length];
                let _ = reader.read_exact(&mut body);
                *counter.lock().unwrap() += 1;
                let response = handler(&path, &String::from_utf8_lossy(&body));
                let _ = stream.write_all(response.as_bytes());
            }
        });
        FakeEndpoint { url, hits }
    }

    pub(super) fn json(status: &str, body: Value) -> FakeEndpoint {
        FakeEndpoint::start(http_json(status, &body))
    }

    pub(super) fn hits(&self) -> u32 {
        *self.hits.lock().unwrap()
    }
}

/// What a ready local server answers to the readiness preflight (`GET /v1/models` listing the
/// demo's models; a canary asking to echo its `ac-canary-…` marker gets that shell call), or
/// `None` for any other request.
pub(super) fn ready_answer(path: &str, body: &str) -> Option<String> {
    if path == "/v1/models" {
        return Some(http_json(
            "200 OK",
            &json!({"data": [{"id": DOER_MODEL}, {"id": CHECKER_MODEL}]}),
        ));
    }
    if !body.contains("preflight canary") {
        return None;
    }
    let start = body.find("ac-canary-")?;
    let marker: String = body[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    Some(http_json(
        "200 OK",
        &chat_calls(1, &json!({"command": format!("echo {marker}")}).to_string()),
    ))
}

pub(super) fn http_json(status: &str, body: &Value) -> String {
    let body = body.to_string();
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

pub(super) fn chat_calls(calls: usize, arguments: &str) -> Value {
    let calls: Vec<Value> = (0..calls)
        .map(|i| {
            json!({"id": format!("c{i}"), "type": "function",
                        "function": {"name": "shell", "arguments": arguments}})
        })
        .collect();
    json!({"choices": [{"index": 0, "finish_reason": "tool_calls",
                        "message": {"role": "assistant", "content": null, "tool_calls": calls}}],
           "usage": {"prompt_tokens": 10, "completion_tokens": 5}})
}
