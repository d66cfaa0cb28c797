//! Puts an [`Answer`] or an [`HttpFault`] into each API's wire form: SSE event sequences for
//! streaming requests, one JSON object otherwise, and each API's error body shape.
//!
//! Invariants: every streamed answer ends with that API's terminal event (`data: [DONE]`,
//! `response.completed`/`response.incomplete`, `message_stop`); ids are derived from the request
//! sequence number, so a log line and the answer it got can be matched.

use serde_json::{Value, json};

use super::reply::{Answer, Finish, HttpFault};
use super::request::Api;

/// Deltas are cut into pieces of this many characters (the prototype's size), so clients see
/// several deltas per block like with a real model.
const DELTA_CHARS: usize = 16;

/// Anthropic thinking blocks need a signature; clients only echo it back.
const THINKING_SIGNATURE: &str = "mocksig";

/// Ids of one answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ids {
    seq: u64,
}

impl Ids {
    pub fn new(seq: u64) -> Ids {
        Ids { seq }
    }
    fn with(&self, prefix: &str) -> String {
        format!("{prefix}_mock_{}", self.seq)
    }
}

/// A rendered body and its content type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub content_type: &'static str,
    pub body: String,
}

/// Renders `answer` for `api`, streamed or not.
pub fn render_answer(
    api: Api,
    answer: &Answer,
    model: &str,
    ids: &Ids,
    stream: bool,
    include_usage: bool,
) -> Rendered {
    if stream {
        let body = match api {
            Api::ChatCompletions => chat::stream(answer, model, ids, include_usage),
            Api::Responses => responses::stream(answer, model, ids),
            Api::AnthropicMessages => anthropic::stream(answer, model, ids),
        };
        Rendered {
            content_type: "text/event-stream",
            body,
        }
    } else {
        let value = match api {
            Api::ChatCompletions => chat::object(answer, model, ids),
            Api::Responses => responses::object(answer, model, ids, "completed"),
            Api::AnthropicMessages => anthropic::object(answer, model, ids),
        };
        Rendered {
            content_type: "application/json",
            body: value.to_string(),
        }
    }
}

/// What `api`'s provider says with `status` when the script names no message: the real
/// wording for a bad key (an agent that hides the status, as the ACP adapters do, leaves the
/// words as the only sign of it), else `mock <status> error`.
pub fn error_message(api: Api, status: u16) -> String {
    match (api, status) {
        (Api::ChatCompletions | Api::Responses, 401) => {
            "Incorrect API key provided: sk-mock. You can find your API key at https://platform.openai.com/account/api-keys.".to_owned()
        }
        (Api::AnthropicMessages, 401) => "invalid x-api-key".to_owned(),
        _ => format!("mock {status} error"),
    }
}

/// The error body of `api` for `fault` (OpenAI `{error:{…}}`, Anthropic `{type:"error",…}`).
pub fn error_body(api: Api, fault: &HttpFault) -> Value {
    match api {
        Api::ChatCompletions | Api::Responses => {
            let (kind, code) = match fault.status {
                401 => ("invalid_request_error", json!("invalid_api_key")),
                429 => ("rate_limit_error", json!("rate_limit_exceeded")),
                400..=499 => ("invalid_request_error", Value::Null),
                _ => ("server_error", Value::Null),
            };
            json!({"error": {"message": fault.message, "type": kind, "param": null, "code": code}})
        }
        Api::AnthropicMessages => {
            let kind = match fault.status {
                400 => "invalid_request_error",
                401 => "authentication_error",
                403 => "permission_error",
                404 => "not_found_error",
                413 => "request_too_large",
                429 => "rate_limit_error",
                529 => "overloaded_error",
                _ => "api_error",
            };
            json!({"type": "error", "error": {"type": kind, "message": fault.message}})
        }
    }
}

/// A body that is neither valid SSE events nor JSON.
pub fn garbage(stream: bool) -> Rendered {
    if stream {
        Rendered {
            content_type: "text/event-stream",
            body: "data: {\"garbage\": tru\n\nevent\u{0}: ???\ndata: }}}not json{{{\n\n".to_owned(),
        }
    } else {
        Rendered {
            content_type: "application/json",
            body: "{\"garbage\": <<<not json".to_owned(),
        }
    }
}

fn pieces(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    chars
        .chunks(DELTA_CHARS)
        .map(|chunk| chunk.iter().collect())
        .collect()
}

fn sse_data(out: &mut String, value: &Value) {
    out.push_str("data: ");
    out.push_str(&value.to_string());
    out.push_str("\n\n");
}

fn sse_event(out: &mut String, value: &Value) {
    let name = value
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("message");
    out.push_str("event: ");
    out.push_str(name);
    out.push('\n');
    sse_data(out, value);
}

fn created() -> i64 {
    chrono::Utc::now().timestamp()
}

mod chat {
    use super::*;

    fn finish_reason(finish: Finish) -> &'static str {
        match finish {
            Finish::Stop => "stop",
            Finish::ToolCall => "tool_calls",
            Finish::Length => "length",
        }
    }

    fn usage(answer: &Answer) -> Value {
        let usage = &answer.usage;
        json!({
            "prompt_tokens": usage.input,
            "completion_tokens": usage.output,
            "total_tokens": usage.input.saturating_add(usage.output),
            "prompt_tokens_details": {"cached_tokens": usage.cached},
            "completion_tokens_details": {"reasoning_tokens": usage.reasoning},
        })
    }

    pub(super) fn stream(answer: &Answer, model: &str, ids: &Ids, include_usage: bool) -> String {
        let id = ids.with("chatcmpl");
        let created = created();
        let chunk = |delta: Value, finish: Option<&str>| {
            json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        };
        let mut out = String::new();
        sse_data(
            &mut out,
            &chunk(json!({"role": "assistant", "content": ""}), None),
        );
        if let Some(thinking) = &answer.thinking {
            for piece in pieces(thinking) {
                sse_data(&mut out, &chunk(json!({"reasoning_content": piece}), None));
            }
        }
        if let Some(text) = &answer.text {
            for piece in pieces(text) {
                sse_data(&mut out, &chunk(json!({"content": piece}), None));
            }
        }
        if let Some(call) = &answer.tool_call {
            let head = json!({"tool_calls": [{"index": 0, "id": ids.with("call"), "type": "function",
                              "function": {"name": call.name, "arguments": ""}}]});
            sse_data(&mut out, &chunk(head, None));
            for piece in pieces(&call.arguments.to_string()) {
                let delta = json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]});
                sse_data(&mut out, &chunk(delta, None));
            }
        }
        sse_data(
            &mut out,
            &chunk(json!({}), Some(finish_reason(answer.finish))),
        );
        if include_usage {
            let last = json!({"id": id, "object": "chat.completion.chunk", "created": created,
                              "model": model, "choices": [], "usage": usage(answer)});
            sse_data(&mut out, &last);
        }
        out.push_str("data: [DONE]\n\n");
        out
    }

    pub(super) fn object(answer: &Answer, model: &str, ids: &Ids) -> Value {
        let mut message = json!({"role": "assistant", "content": answer.text});
        if let Some(thinking) = &answer.thinking {
            message["reasoning_content"] = json!(thinking);
        }
        if let Some(call) = &answer.tool_call {
            message["tool_calls"] = json!([{"id": ids.with("call"), "type": "function",
                "function": {"name": call.name, "arguments": call.arguments.to_string()}}]);
        }
        json!({"id": ids.with("chatcmpl"), "object": "chat.completion", "created": created(),
               "model": model,
               "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(answer.finish)}],
               "usage": usage(answer)})
    }
}

mod responses {
    use super::*;

    fn usage(answer: &Answer) -> Value {
        let usage = &answer.usage;
        json!({
            "input_tokens": usage.input,
            "input_tokens_details": {"cached_tokens": usage.cached},
            "output_tokens": usage.output,
            "output_tokens_details": {"reasoning_tokens": usage.reasoning},
            "total_tokens": usage.input.saturating_add(usage.output),
        })
    }

    /// The completed output items of `answer`.
    fn items(answer: &Answer, ids: &Ids) -> Vec<Value> {
        let mut items = Vec::new();
        if let Some(thinking) = &answer.thinking {
            items.push(json!({"type": "reasoning", "id": ids.with("rs"),
                              "summary": [{"type": "summary_text", "text": thinking}]}));
        }
        if let Some(text) = &answer.text {
            items.push(
                json!({"type": "message", "id": ids.with("msg"), "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}),
            );
        }
        if let Some(call) = &answer.tool_call {
            items.push(
                json!({"type": "function_call", "id": ids.with("fc"), "call_id": ids.with("call"),
                "name": call.name, "arguments": call.arguments.to_string(), "status": "completed"}),
            );
        }
        items
    }

    pub(super) fn object(answer: &Answer, model: &str, ids: &Ids, status: &str) -> Value {
        let mut response = json!({"id": ids.with("resp"), "object": "response", "created_at": created(),
            "status": status, "model": model, "output": items(answer, ids), "usage": usage(answer)});
        if answer.finish == Finish::Length {
            response["status"] = json!("incomplete");
            response["incomplete_details"] = json!({"reason": "max_output_tokens"});
        }
        response
    }

    pub(super) fn stream(answer: &Answer, model: &str, ids: &Ids) -> String {
        let mut out = String::new();
        let mut sequence: u64 = 0;
        let mut emit = |out: &mut String, mut event: Value| {
            event["sequence_number"] = json!(sequence);
            sequence = sequence.saturating_add(1);
            sse_event(out, &event);
        };
        let mut created_response = object(answer, model, ids, "in_progress");
        created_response["output"] = json!([]);
        created_response["status"] = json!("in_progress");
        if let Some(map) = created_response.as_object_mut() {
            map.remove("usage");
            map.remove("incomplete_details");
        }
        emit(
            &mut out,
            json!({"type": "response.created", "response": created_response}),
        );
        for (index, item) in items(answer, ids).into_iter().enumerate() {
            let item_id = item.get("id").cloned().unwrap_or(Value::Null);
            let kind = item.get("type").and_then(Value::as_str).unwrap_or_default();
            let mut added = item.clone();
            match kind {
                "reasoning" => {
                    added["summary"] = json!([]);
                    emit(
                        &mut out,
                        json!({"type": "response.output_item.added", "output_index": index, "item": added}),
                    );
                    let text = answer.thinking.as_deref().unwrap_or_default();
                    emit(
                        &mut out,
                        json!({"type": "response.reasoning_summary_part.added", "item_id": item_id,
                        "output_index": index, "summary_index": 0, "part": {"type": "summary_text", "text": ""}}),
                    );
                    for piece in pieces(text) {
                        emit(
                            &mut out,
                            json!({"type": "response.reasoning_summary_text.delta", "item_id": item_id,
                            "output_index": index, "summary_index": 0, "delta": piece}),
                        );
                    }
                    emit(
                        &mut out,
                        json!({"type": "response.reasoning_summary_text.done", "item_id": item_id,
                        "output_index": index, "summary_index": 0, "text": text}),
                    );
                    emit(
                        &mut out,
                        json!({"type": "response.reasoning_summary_part.done", "item_id": item_id,
                        "output_index": index, "summary_index": 0, "part": {"type": "summary_text", "text": text}}),
                    );
                }
                "message" => {
                    added["content"] = json!([]);
                    added["status"] = json!("in_progress");
                    emit(
                        &mut out,
                        json!({"type": "response.output_item.added", "output_index": index, "item": added}),
                    );
                    let text = answer.text.as_deref().unwrap_or_default();
                    emit(
                        &mut out,
                        json!({"type": "response.content_part.added", "item_id": item_id,
                        "output_index": index, "content_index": 0,
                        "part": {"type": "output_text", "text": "", "annotations": []}}),
                    );
                    for piece in pieces(text) {
                        emit(
                            &mut out,
                            json!({"type": "response.output_text.delta", "item_id": item_id,
                            "output_index": index, "content_index": 0, "delta": piece}),
                        );
                    }
                    emit(
                        &mut out,
                        json!({"type": "response.output_text.done", "item_id": item_id,
                        "output_index": index, "content_index": 0, "text": text}),
                    );
                    emit(
                        &mut out,
                        json!({"type": "response.content_part.done", "item_id": item_id,
                        "output_index": index, "content_index": 0,
                        "part": {"type": "output_text", "text": text, "annotations": []}}),
                    );
                }
                _ => {
                    let arguments = item
                        .get("arguments")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned();
                    added["arguments"] = json!("");
                    added["status"] = json!("in_progress");
                    emit(
                        &mut out,
                        json!({"type": "response.output_item.added", "output_index": index, "item": added}),
                    );
                    for piece in pieces(&arguments) {
                        emit(
                            &mut out,
                            json!({"type": "response.function_call_arguments.delta", "item_id": item_id,
                            "output_index": index, "delta": piece}),
                        );
                    }
                    emit(
                        &mut out,
                        json!({"type": "response.function_call_arguments.done", "item_id": item_id,
                        "output_index": index, "arguments": arguments}),
                    );
                }
            }
            emit(
                &mut out,
                json!({"type": "response.output_item.done", "output_index": index, "item": item}),
            );
        }
        let (kind, status) = match answer.finish {
            Finish::Length => ("response.incomplete", "incomplete"),
            Finish::Stop | Finish::ToolCall => ("response.completed", "completed"),
        };
        emit(
            &mut out,
            json!({"type": kind, "response": object(answer, model, ids, status)}),
        );
        out
    }
}

mod anthropic {
    use super::*;

    fn stop_reason(finish: Finish) -> &'static str {
        match finish {
            Finish::Stop => "end_turn",
            Finish::ToolCall => "tool_use",
            Finish::Length => "max_tokens",
        }
    }

    fn usage(answer: &Answer, output: u64) -> Value {
        let usage = &answer.usage;
        json!({
            "input_tokens": usage.input,
            "cache_creation_input_tokens": usage.cache_creation,
            "cache_read_input_tokens": usage.cached,
            "output_tokens": output,
        })
    }

    fn blocks(answer: &Answer, ids: &Ids) -> Vec<Value> {
        let mut blocks = Vec::new();
        if let Some(thinking) = &answer.thinking {
            blocks.push(
                json!({"type": "thinking", "thinking": thinking, "signature": THINKING_SIGNATURE}),
            );
        }
        if let Some(text) = &answer.text {
            blocks.push(json!({"type": "text", "text": text}));
        }
        if let Some(call) = &answer.tool_call {
            blocks.push(
                json!({"type": "tool_use", "id": ids.with("toolu"), "name": call.name,
                               "input": call.arguments}),
            );
        }
        blocks
    }

    pub(super) fn object(answer: &Answer, model: &str, ids: &Ids) -> Value {
        json!({"id": ids.with("msg"), "type": "message", "role": "assistant", "model": model,
               "content": blocks(answer, ids), "stop_reason": stop_reason(answer.finish),
               "stop_sequence": null, "usage": usage(answer, answer.usage.output)})
    }

    pub(super) fn stream(answer: &Answer, model: &str, ids: &Ids) -> String {
        let mut out = String::new();
        sse_event(
            &mut out,
            &json!({"type": "message_start", "message": {
            "id": ids.with("msg"), "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage(answer, 1)}}),
        );
        for (index, block) in blocks(answer, ids).into_iter().enumerate() {
            let kind = block
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or_default();
            match kind {
                "thinking" => {
                    sse_event(
                        &mut out,
                        &json!({"type": "content_block_start", "index": index,
                        "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
                    );
                    for piece in pieces(answer.thinking.as_deref().unwrap_or_default()) {
                        sse_event(
                            &mut out,
                            &json!({"type": "content_block_delta", "index": index,
                            "delta": {"type": "thinking_delta", "thinking": piece}}),
                        );
                    }
                    sse_event(
                        &mut out,
                        &json!({"type": "content_block_delta", "index": index,
                        "delta": {"type": "signature_delta", "signature": THINKING_SIGNATURE}}),
                    );
                }
                "text" => {
                    sse_event(
                        &mut out,
                        &json!({"type": "content_block_start", "index": index,
                        "content_block": {"type": "text", "text": ""}}),
                    );
                    for piece in pieces(answer.text.as_deref().unwrap_or_default()) {
                        sse_event(
                            &mut out,
                            &json!({"type": "content_block_delta", "index": index,
                            "delta": {"type": "text_delta", "text": piece}}),
                        );
                    }
                }
                _ => {
                    let mut start = block.clone();
                    start["input"] = json!({});
                    sse_event(
                        &mut out,
                        &json!({"type": "content_block_start", "index": index,
                        "content_block": start}),
                    );
                    let input = block.get("input").map(Value::to_string).unwrap_or_default();
                    for piece in pieces(&input) {
                        sse_event(
                            &mut out,
                            &json!({"type": "content_block_delta", "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": piece}}),
                        );
                    }
                }
            }
            sse_event(
                &mut out,
                &json!({"type": "content_block_stop", "index": index}),
            );
        }
        sse_event(
            &mut out,
            &json!({"type": "message_delta",
            "delta": {"stop_reason": stop_reason(answer.finish), "stop_sequence": null},
            "usage": usage(answer, answer.usage.output)}),
        );
        sse_event(&mut out, &json!({"type": "message_stop"}));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scripted_model::reply::{ToolCall, Usage};

    fn events(body: &str) -> Vec<Value> {
        body.split("\n\n")
            .filter_map(|frame| frame.lines().find_map(|line| line.strip_prefix("data: ")))
            .filter(|data| *data != "[DONE]")
            .map(|data| serde_json::from_str(data).unwrap())
            .collect()
    }

    fn tool_answer() -> Answer {
        Answer {
            thinking: Some("think".into()),
            text: None,
            tool_call: Some(ToolCall {
                name: "bash".into(),
                arguments: json!({"command": "echo hello > out.txt && cat out.txt"}),
            }),
            finish: Finish::ToolCall,
            usage: Usage::for_step(0),
        }
    }

    #[test]
    fn chat_stream_reassembles_the_tool_call_and_reports_usage_last() {
        let body = chat::stream(&tool_answer(), "m", &Ids::new(3), true);
        assert!(body.ends_with("data: [DONE]\n\n"));
        let events = events(&body);
        let arguments: String = events
            .iter()
            .filter_map(|event| event.pointer("/choices/0/delta/tool_calls/0/function/arguments"))
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(
            serde_json::from_str::<Value>(&arguments).unwrap(),
            json!({"command": "echo hello > out.txt && cat out.txt"})
        );
        let last = events.last().unwrap();
        assert_eq!(last["usage"]["prompt_tokens"], 1000);
        assert_eq!(last["usage"]["prompt_tokens_details"]["cached_tokens"], 600);
        let finish = &events[events.len() - 2];
        assert_eq!(finish["choices"][0]["finish_reason"], "tool_calls");
    }

    #[test]
    fn anthropic_non_stream_and_error_shapes() {
        let object = anthropic::object(&tool_answer(), "m", &Ids::new(1));
        assert_eq!(object["stop_reason"], "tool_use");
        assert_eq!(object["content"][1]["type"], "tool_use");
        let fault = HttpFault {
            status: 529,
            retry_after: None,
            message: "busy".into(),
        };
        assert_eq!(
            error_body(Api::AnthropicMessages, &fault),
            json!({"type":"error","error":{"type":"overloaded_error","message":"busy"}})
        );
        assert_eq!(
            error_body(Api::Responses, &fault)["error"]["type"],
            "server_error"
        );
    }

    #[test]
    fn length_is_incomplete_in_responses() {
        let answer = Answer {
            finish: Finish::Length,
            ..Answer::text("trunc", 2)
        };
        let value = responses::object(&answer, "m", &Ids::new(1), "completed");
        assert_eq!(value["status"], "incomplete");
        assert_eq!(value["incomplete_details"]["reason"], "max_output_tokens");
        let body = responses::stream(&answer, "m", &Ids::new(1));
        let last = events(&body).pop().unwrap();
        assert_eq!(last["type"], "response.incomplete");
    }
}
