//! Anthropic Messages: request bodies (`system`, `max_tokens`, tools with `input_schema`),
//! native `tool_use`/`tool_result` blocks, and responses parsed into a [`Turn`]. The assistant's
//! content blocks — signed `thinking` and `redacted_thinking` blocks included — are replayed
//! unchanged and in order, as the API requires across tool turns.

use serde_json::{Value, json};

use super::{
    ProtocolError, RequestParams, StopReason, ToolCall, ToolResult, Turn, arguments_object, count,
};
use crate::events::Usage;

pub(super) fn user_message(text: &str) -> Value {
    json!({"role": "user", "content": [{"type": "text", "text": text}]})
}

pub(super) fn tool_results(results: &[ToolResult]) -> Value {
    let blocks: Vec<Value> = results
        .iter()
        .map(|r| {
            json!({"type": "tool_result", "tool_use_id": r.call_id, "content": r.output,
                   "is_error": r.is_error})
        })
        .collect();
    json!({"role": "user", "content": blocks})
}

pub(super) fn request(params: &RequestParams<'_>, messages: &[Value]) -> Value {
    let tools: Vec<Value> = params
        .tools
        .iter()
        .map(
            |t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}),
        )
        .collect();
    json!({
        "model": params.model,
        "system": params.system,
        "messages": messages,
        "tools": tools,
        "max_tokens": params.max_output_tokens,
        "stream": false,
    })
}

pub(super) fn parse(value: &Value) -> Result<Turn, ProtocolError> {
    if value.get("type").and_then(Value::as_str) == Some("error") {
        return Err(ProtocolError::Unsupported(
            "an error object with status 200".into(),
        ));
    }
    let content = value
        .get("content")
        .and_then(Value::as_array)
        .ok_or(ProtocolError::Missing("content"))?;
    let stop = match value.get("stop_reason").and_then(Value::as_str) {
        Some("end_turn" | "stop_sequence") => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolCalls,
        Some("max_tokens") => StopReason::Length,
        Some("refusal") => StopReason::ContentFilter,
        Some(other) => return Err(ProtocolError::Unsupported(format!("stop_reason {other}"))),
        None => return Err(ProtocolError::Incomplete("no stop_reason".into())),
    };
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut calls = Vec::new();
    for block in content {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(block.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("thinking") => {
                reasoning.push_str(block.get("thinking").and_then(Value::as_str).unwrap_or(""))
            }
            Some("redacted_thinking") => {}
            Some("tool_use") => {
                let name = block
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or(ProtocolError::Missing("tool_use.name"))?;
                let id = block
                    .get("id")
                    .and_then(Value::as_str)
                    .ok_or(ProtocolError::Missing("tool_use.id"))?;
                calls.push(ToolCall {
                    id: id.to_owned(),
                    name: name.to_owned(),
                    arguments: arguments_object(name, block.get("input"))?,
                });
            }
            other => {
                return Err(ProtocolError::Unsupported(format!(
                    "content block {}",
                    other.unwrap_or("without a type")
                )));
            }
        }
    }
    let usage = Usage {
        input_tokens: count(value, "/usage/input_tokens"),
        cache_read_tokens: count(value, "/usage/cache_read_input_tokens"),
        cache_write_tokens: count(value, "/usage/cache_creation_input_tokens"),
        output_tokens: count(value, "/usage/output_tokens"),
        reasoning_tokens: None,
        cost_usd: None,
        cost_source: None,
    };
    Ok(Turn {
        text: Some(text).filter(|t| !t.is_empty()),
        reasoning: Some(reasoning).filter(|t| !t.is_empty()),
        calls,
        stop,
        usage,
        replay: vec![json!({"role": "assistant", "content": content})],
    })
}
