//! OpenAI Responses: request bodies (`instructions`, `input` items, `max_output_tokens`,
//! `store: false`), tool results as `function_call_output` items, and responses parsed into a
//! [`Turn`]. Output items (reasoning included) are replayed as input items, in order.

use serde_json::{Value, json};

use super::chat::type_name;
use super::{
    ProtocolError, RequestParams, StopReason, ToolCall, ToolResult, Turn, arguments_object, count,
    openai_usage,
};

pub(super) fn user_message(text: &str) -> Value {
    json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
}

pub(super) fn tool_result(result: &ToolResult) -> Value {
    json!({"type": "function_call_output", "call_id": result.call_id, "output": result.output})
}

pub(super) fn request(params: &RequestParams<'_>, messages: &[Value]) -> Value {
    let tools: Vec<Value> = params
        .tools
        .iter()
        .map(|t| {
            json!({"type": "function", "name": t.name, "description": t.description,
                   "parameters": t.parameters})
        })
        .collect();
    json!({
        "model": params.model,
        "instructions": params.system,
        "input": messages,
        "tools": tools,
        "max_output_tokens": params.max_output_tokens,
        "store": false,
        "stream": false,
    })
}

pub(super) fn parse(value: &Value) -> Result<Turn, ProtocolError> {
    match value.get("status").and_then(Value::as_str) {
        Some("completed") | None => {}
        Some("incomplete") => {
            let reason = value
                .pointer("/incomplete_details/reason")
                .and_then(Value::as_str)
                .unwrap_or("unknown");
            if reason == "max_output_tokens" {
                return Ok(Turn {
                    text: None,
                    reasoning: None,
                    calls: Vec::new(),
                    stop: StopReason::Length,
                    usage: usage(value),
                    replay: Vec::new(),
                });
            }
            if reason == "content_filter" {
                return Ok(Turn {
                    text: None,
                    reasoning: None,
                    calls: Vec::new(),
                    stop: StopReason::ContentFilter,
                    usage: usage(value),
                    replay: Vec::new(),
                });
            }
            return Err(ProtocolError::Incomplete(format!(
                "status incomplete: {reason}"
            )));
        }
        Some(other) => return Err(ProtocolError::Incomplete(format!("status {other}"))),
    }
    let output = value
        .get("output")
        .and_then(Value::as_array)
        .ok_or(ProtocolError::Missing("output"))?;
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut calls = Vec::new();
    let mut replay = Vec::new();
    for item in output {
        let kind = item.get("type").and_then(Value::as_str).unwrap_or_default();
        match kind {
            "message" => {
                for part in item
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    match part.get("type").and_then(Value::as_str) {
                        Some("output_text") => {
                            text.push_str(part.get("text").and_then(Value::as_str).unwrap_or(""))
                        }
                        Some("refusal") => {
                            return Err(ProtocolError::Unsupported("a refusal".into()));
                        }
                        other => {
                            return Err(ProtocolError::Unsupported(format!(
                                "message content {}",
                                other.unwrap_or("without a type")
                            )));
                        }
                    }
                }
                replay.push(item.clone());
            }
            "reasoning" => {
                for part in item
                    .get("summary")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    reasoning.push_str(part.get("text").and_then(Value::as_str).unwrap_or(""));
                }
                replay.push(item.clone());
            }
            "function_call" => {
                let name = item
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or(ProtocolError::Missing("function_call.name"))?;
                let id = item
                    .get("call_id")
                    .and_then(Value::as_str)
                    .ok_or(ProtocolError::Missing("function_call.call_id"))?;
                calls.push(ToolCall {
                    id: id.to_owned(),
                    name: name.to_owned(),
                    arguments: arguments_object(name, item.get("arguments"))?,
                });
                replay.push(json!({"type": "function_call", "call_id": id, "name": name,
                                   "arguments": item.get("arguments").cloned().unwrap_or(Value::Null)}));
            }
            other => {
                return Err(ProtocolError::Unsupported(format!(
                    "output item {}",
                    if other.is_empty() {
                        type_name(item)
                    } else {
                        other
                    }
                )));
            }
        }
    }
    let stop = if calls.is_empty() {
        StopReason::EndTurn
    } else {
        StopReason::ToolCalls
    };
    Ok(Turn {
        text: Some(text).filter(|t| !t.is_empty()),
        reasoning: Some(reasoning).filter(|t| !t.is_empty()),
        calls,
        stop,
        usage: usage(value),
        replay,
    })
}

fn usage(value: &Value) -> crate::events::Usage {
    openai_usage(
        count(value, "/usage/input_tokens"),
        count(value, "/usage/input_tokens_details/cached_tokens"),
        count(value, "/usage/output_tokens"),
        count(value, "/usage/output_tokens_details/reasoning_tokens"),
    )
}
