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
