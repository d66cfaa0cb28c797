//! Streamed responses (server-sent events) assembled into the body the same request would have
//! got without streaming, so one parser ([`super::Exchange::parse_response`]) judges both. A
//! stream that ends before its finish (no `finish_reason`, no `response.completed`, no
//! `message_stop`) assembles into a body without one, which the parser refuses as incomplete.

use serde_json::{Map, Value, json};

use super::{Protocol, ProtocolError};

/// The `data:` payloads of an SSE body, in order (`[DONE]` and comments dropped).
pub fn sse_data(body: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in body.lines() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            if let Some(data) = current.take() {
                out.push(data);
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("data:") {
            let rest = rest.strip_prefix(' ').unwrap_or(rest);
            match current.as_mut() {
                Some(data) => {
                    data.push('\n');
                    data.push_str(rest);
                }
                None => current = Some(rest.to_owned()),
            }
        }
    }
    if let Some(data) = current {
        out.push(data);
    }
    out.retain(|d| d.trim() != "[DONE]");
    out
}

/// Assembles a streamed body into the equivalent non-streamed JSON body.
pub fn assemble(protocol: Protocol, body: &str) -> Result<Value, ProtocolError> {
    let events: Vec<Value> = sse_data(body)
        .iter()
        .map(|d| serde_json::from_str::<Value>(d))
        .collect::<Result<_, _>>()
        .map_err(|e| ProtocolError::NotJson(format!("a stream event: {e}")))?;
    if events.is_empty() {
        return Err(ProtocolError::NotJson("the stream holds no events".into()));
    }
    Ok(match protocol {
        Protocol::ChatCompletions => chat(&events),
        Protocol::Responses => responses(&events)?,
        Protocol::AnthropicMessages => anthropic(&events)?,
    })
}

fn chat(events: &[Value]) -> Value {
    let mut content = String::new();
    let mut reasoning = String::new();
    let mut calls: Vec<Map<String, Value>> = Vec::new();
    let mut finish = Value::Null;
    let mut usage = Value::Null;
    for event in events {
        if let Some(u) = event.get("usage").filter(|u| u.is_object()) {
            usage = u.clone();
        }
        let Some(choice) = event["choices"].as_array().and_then(|c| c.first()) else {
            continue;
        };
        let delta = &choice["delta"];
        if let Some(text) = delta["content"].as_str() {
            content.push_str(text);
        }
        if let Some(text) = delta["reasoning_content"].as_str() {
            reasoning.push_str(text);
        }
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let index = call["index"].as_u64().unwrap_or(0) as usize;
            while calls.len() <= index {
                calls.push(Map::new());
            }
            let slot = &mut calls[index];
            if let Some(id) = call["id"].as_str() {
                slot.insert("id".into(), json!(id));
            }
            slot.insert("type".into(), json!("function"));
            let function = slot
                .entry("function")
                .or_insert_with(|| json!({"name": "", "arguments": ""}));
            if let Some(name) = call["function"]["name"].as_str() {
                function["name"] = json!(format!(
                    "{}{name}",
                    function["name"].as_str().unwrap_or_default()
                ));
            }
            if let Some(args) = call["function"]["arguments"].as_str() {
                function["arguments"] = json!(format!(
                    "{}{args}",
                    function["arguments"].as_str().unwrap_or_default()
                ));
            }
        }
        if !choice["finish_reason"].is_null() {
            finish = choice["finish_reason"].clone();
        }
    }
    let mut message = json!({"role": "assistant",
        "content": if content.is_empty() { Value::Null } else { json!(content) }});
    if !reasoning.is_empty() {
        message["reasoning_content"] = json!(reasoning);
    }
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls.into_iter().map(Value::Object).collect());
    }
    let mut body = json!({"choices": [{"index": 0, "message": message, "finish_reason": finish}]});
    if !usage.is_null() {
        body["usage"] = usage;
    }
    body
}

fn responses(events: &[Value]) -> Result<Value, ProtocolError> {
    // The final event carries the whole response.
    events
        .iter()
        .rev()
        .find(|e| {
            matches!(
                e["type"].as_str(),
                Some("response.completed" | "response.incomplete" | "response.failed")
            )
        })
        .and_then(|e| e.get("response").cloned())
        .ok_or_else(|| {
            ProtocolError::Incomplete("the stream ended before response.completed".into())
        })
}

fn anthropic(events: &[Value]) -> Result<Value, ProtocolError> {
    let mut message = events
        .iter()
        .find(|e| e["type"] == "message_start")
        .and_then(|e| e.get("message").cloned())
        .ok_or(ProtocolError::Missing("message_start"))?;
    let mut blocks: Vec<Value> = Vec::new();
    let mut partial_json: Vec<String> = Vec::new();
    let mut stopped = false;
    for event in events {
        match event["type"].as_str() {
            Some("content_block_start") => {
                let index = event["index"].as_u64().unwrap_or(0) as usize;
                while blocks.len() <= index {
                    blocks.push(Value::Null);
                    partial_json.push(String::new());
                }
                blocks[index] = event["content_block"].clone();
            }
            Some("content_block_delta") => {
                let index = event["index"].as_u64().unwrap_or(0) as usize;
                let Some(block) = blocks.get_mut(index) else {
                    return Err(ProtocolError::Incomplete("a delta before its block".into()));
                };
                let delta = &event["delta"];
                let append = |block: &mut Value, field: &str, piece: &str| {
                    let old = block[field].as_str().unwrap_or_default().to_owned();
                    block[field] = json!(old + piece);
                };
                match delta["type"].as_str() {
                    Some("text_delta") => {
                        append(block, "text", delta["text"].as_str().unwrap_or(""))
                    }
                    Some("thinking_delta") => {
                        append(block, "thinking", delta["thinking"].as_str().unwrap_or(""))
                    }
                    Some("signature_delta") => append(
                        block,
                        "signature",
                        delta["signature"].as_str().unwrap_or(""),
                    ),
                    Some("input_json_delta") => {
                        partial_json[index].push_str(delta["partial_json"].as_str().unwrap_or(""))
                    }
                    other => {
                        return Err(ProtocolError::Unsupported(format!(
                            "stream delta {}",
                            other.unwrap_or("without a type")
                        )));
                    }
                }
            }
            Some("message_delta") => {
                if let Some(reason) = event["delta"].get("stop_reason") {
                    message["stop_reason"] = reason.clone();
                }
                if let Some(usage) = event["usage"].as_object() {
                    for (k, v) in usage {
                        message["usage"][k] = v.clone();
                    }
                }
            }
            Some("message_stop") => stopped = true,
            Some("error") => {
                return Err(ProtocolError::Incomplete(format!(
                    "the stream reported an error: {}",
                    event["error"]
                )));
            }
            _ => {}
        }
    }
    if !stopped {
        message["stop_reason"] = Value::Null;
    }
    for (block, json_text) in blocks.iter_mut().zip(partial_json) {
        if block["type"] == "tool_use" && !json_text.is_empty() {
            // Left as text when it does not parse: the parser reports the malformed call.
            block["input"] = serde_json::from_str(&json_text).unwrap_or(Value::String(json_text));
        }
    }
    message["content"] = Value::Array(blocks);
    Ok(message)
}

/// Watches a streamed answer as it arrives for a text answer that runs on: once its text passes
/// `limit` characters, or `limit / 4` text pieces (a server sends about one piece a token, and a
/// run of newlines is hundreds of tokens of one character each), while no tool call has begun,
/// [`ProseWatch::feed`] answers `false` and the caller stops reading. A text answer is never a report, so cutting it loses nothing; a weak
/// model's prose can otherwise run to the response cap (thousands of tokens at a few a second).
/// Text that starts like JSON or a fenced block (`{`, `[`, a backtick) is not cut: a server may
/// stream a tool call the model wrote as text before it parses it, and a shell-command answer is
/// JSON. Memory is bounded: one partial line and the first `limit` characters of text.
#[derive(Debug)]
pub struct ProseWatch {
    protocol: Protocol,
    limit: usize,
    line: Vec<u8>,
    data: Option<String>,
    text: String,
    text_chars: usize,
    text_pieces: usize,
    tool_started: bool,
}

/// The longest line of a stream the watch reads (a longer one is skipped, not judged).
const WATCH_MAX_LINE: usize = 1 << 20;

impl ProseWatch {
    pub fn new(protocol: Protocol, limit: usize) -> ProseWatch {
        ProseWatch {
            protocol,
            limit,
            line: Vec::new(),
            data: None,
            text: String::new(),
            text_chars: 0,
            text_pieces: 0,
            tool_started: false,
        }
    }

    /// Reads one piece of the body; `false` once the answer is prose past the limit.
    pub fn feed(&mut self, piece: &[u8]) -> bool {
        for &byte in piece {
            if byte != b'\n' {
                if self.line.len() < WATCH_MAX_LINE {
                    self.line.push(byte);
                }
                continue;
            }
            let line = std::mem::take(&mut self.line);
            let line = String::from_utf8_lossy(&line);
            let line = line.strip_suffix('\r').unwrap_or(&line);
            if line.is_empty() {
                if let Some(data) = self.data.take() {
                    self.event(&data);
                }
            } else if let Some(rest) = line.strip_prefix("data:") {
                let rest = rest.strip_prefix(' ').unwrap_or(rest);
                match self.data.as_mut() {
                    Some(data) => {
                        data.push('\n');
                        data.push_str(rest);
                    }
                    None => self.data = Some(rest.to_owned()),
                }
            }
        }
        !self.is_runaway_prose()
    }

    /// The answer so far is text only, past the limit, and does not start like JSON.
    pub fn is_runaway_prose(&self) -> bool {
        !self.tool_started
            && (self.text_chars > self.limit || self.text_pieces > self.limit / 4)
            && !self.text.trim_start().starts_with(['{', '[', '`'])
    }

    /// The first `limit` characters of the answer's text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The characters of text seen.
    pub fn text_chars(&self) -> usize {
        self.text_chars
    }

    fn event(&mut self, data: &str) {
        let Ok(event) = serde_json::from_str::<Value>(data) else {
            return;
        };
        let text = match self.protocol {
            Protocol::ChatCompletions => {
                let delta = &event["choices"][0]["delta"];
                if delta["tool_calls"]
                    .as_array()
                    .is_some_and(|c| !c.is_empty())
                {
                    self.tool_started = true;
                }
                delta["content"].as_str()
            }
            Protocol::Responses => match event["type"].as_str() {
                Some("response.output_item.added") if event["item"]["type"] != "message" => {
                    if event["item"]["type"] != "reasoning" {
                        self.tool_started = true;
                    }
                    None
                }
                Some("response.function_call_arguments.delta") => {
                    self.tool_started = true;
                    None
                }
                Some("response.output_text.delta") => event["delta"].as_str(),
                _ => None,
            },
            Protocol::AnthropicMessages => match event["type"].as_str() {
                Some("content_block_start") if event["content_block"]["type"] == "tool_use" => {
                    self.tool_started = true;
                    None
                }
                Some("content_block_delta") if event["delta"]["type"] == "text_delta" => {
                    event["delta"]["text"].as_str()
                }
                _ => None,
            },
        };
        if let Some(text) = text {
            self.text_pieces += 1;
            for c in text.chars() {
                self.text_chars += 1;
                if self.text_chars <= self.limit {
                    self.text.push(c);
                }
            }
        }
    }
}
