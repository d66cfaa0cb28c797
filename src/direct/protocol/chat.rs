//! OpenAI Chat Completions: request bodies, tool results, and responses parsed into a
//! [`Turn`]. `reasoning_content` (MiMo, Z.ai, llama.cpp) is kept on the replayed assistant
//! message across tool turns.

use serde_json::{Map, Value, json};

use super::{
    ProtocolError, RequestParams, StopReason, ToolCall, ToolResult, Turn, arguments_object, count,
    openai_usage,
};

pub(super) fn user_message(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

pub(super) fn tool_result(result: &ToolResult) -> Value {
    json!({"role": "tool", "tool_call_id": result.call_id, "content": result.output})
}

pub(super) fn request(params: &RequestParams<'_>, messages: &[Value]) -> Value {
    let mut all = Vec::with_capacity(messages.len() + 1);
    all.push(json!({"role": "system", "content": params.system}));
    all.extend(messages.iter().cloned());
    let tools: Vec<Value> = params
        .tools
        .iter()
        .map(|t| {
            json!({"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.parameters}})
        })
        .collect();
    let mut body = json!({
        "model": params.model,
        "messages": all,
        "tools": tools,
        "stream": false,
    });
    body[params.token_field.as_str()] = json!(params.max_output_tokens);
    body
}

pub(super) fn parse(value: &Value) -> Result<Turn, ProtocolError> {
    let choice = value
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or(ProtocolError::Missing("choices"))?;
    let message = choice
        .get("message")
        .and_then(Value::as_object)
        .ok_or(ProtocolError::Missing("choices[0].message"))?;
    let stop = match choice.get("finish_reason").and_then(Value::as_str) {
        Some("stop") => StopReason::EndTurn,
        Some("tool_calls" | "function_call") => StopReason::ToolCalls,
        Some("length") => StopReason::Length,
        Some("content_filter") => StopReason::ContentFilter,
        Some(other) => return Err(ProtocolError::Unsupported(format!("finish_reason {other}"))),
        None => return Err(ProtocolError::Incomplete("no finish_reason".into())),
    };
    let text = match message.get("content") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()).filter(|s| !s.is_empty()),
        Some(other) => {
            return Err(ProtocolError::Unsupported(format!(
                "message content of type {}",
                type_name(other)
            )));
        }
    };
    let reasoning = message
        .get("reasoning_content")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .filter(|s| !s.is_empty());
    let mut calls = Vec::new();
    for call in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let function = call
            .get("function")
            .ok_or(ProtocolError::Missing("tool_calls[].function"))?;
        let name = function
            .get("name")
            .and_then(Value::as_str)
            .ok_or(ProtocolError::Missing("tool_calls[].function.name"))?;
        let id = call
            .get("id")
            .and_then(Value::as_str)
            .ok_or(ProtocolError::Missing("tool_calls[].id"))?;
        calls.push(ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments: arguments_object(name, function.get("arguments"))?,
        });
    }
    let mut replay = Map::new();
    replay.insert("role".into(), json!("assistant"));
    replay.insert(
        "content".into(),
        text.clone().map_or(Value::Null, Value::from),
    );
    if let Some(r) = &reasoning {
        replay.insert("reasoning_content".into(), json!(r));
    }
    if !calls.is_empty() {
        let echoed: Vec<Value> = calls
            .iter()
            .map(|c| {
                json!({"id": c.id, "type": "function",
                       "function": {"name": c.name, "arguments": c.arguments.to_string()}})
            })
            .collect();
        replay.insert("tool_calls".into(), Value::Array(echoed));
    }
    let usage = openai_usage(
        count(value, "/usage/prompt_tokens"),
        count(value, "/usage/prompt_tokens_details/cached_tokens"),
        count(value, "/usage/completion_tokens"),
        count(value, "/usage/completion_tokens_details/reasoning_tokens"),
    );
    Ok(Turn {
        text,
        reasoning,
        calls,
        stop,
        usage,
        replay: vec![Value::Object(replay)],
    })
}

pub(super) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
