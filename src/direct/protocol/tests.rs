//! The protocols against the scripted model's renderings (the same bodies its server sends) and
//! against hand-written edge cases: requests that the scripted model's request parser reads back,
//! turns with tool calls, thinking replay, usage conventions, and failing closed.

use serde_json::json;

use super::*;
use crate::scripted_model::reply::{Answer, Finish, ToolCall as ScriptedCall, Usage as StepUsage};
use crate::scripted_model::request::{Api, ModelRequest};
use crate::scripted_model::wire::{Ids, render_answer};

fn api(protocol: Protocol) -> Api {
    match protocol {
        Protocol::ChatCompletions => Api::ChatCompletions,
        Protocol::Responses => Api::Responses,
        Protocol::AnthropicMessages => Api::AnthropicMessages,
    }
}

fn tools() -> Vec<ToolSpec> {
    vec![ToolSpec {
        name: "shell",
        description: "run",
        parameters: json!({"type": "object", "properties": {"command": {"type": "string"}}}),
    }]
}

fn params<'a>(tools: &'a [ToolSpec]) -> RequestParams<'a> {
    RequestParams {
        model: "m",
        system: "sys",
        tools,
        max_output_tokens: 8192,
        token_field: TokenField::MaxTokens,
        stream: false,
        tool_choice: ToolChoice::Unset,
        answer_schema: None,
    }
}

#[test]
fn a_required_tool_and_an_answer_schema_take_each_protocols_form() {
    let tools = tools();
    let schema = json!({"type": "object", "properties": {"status": {"type": "string"}}});
    let forms = [
        (Protocol::ChatCompletions, json!("required")),
        (Protocol::Responses, json!("required")),
        (Protocol::AnthropicMessages, json!({"type": "any"})),
    ];
    for (protocol, choice) in forms {
        let exchange = Exchange::new(protocol, "go");
        let unset = exchange.request_body(&params(&tools));
        assert!(unset.get("tool_choice").is_none(), "{protocol:?}: {unset}");
        assert!(unset.get("response_format").is_none(), "{protocol:?}");
        let required = exchange.request_body(&RequestParams {
            tool_choice: ToolChoice::Required,
            ..params(&tools)
        });
        assert_eq!(required["tool_choice"], choice, "{protocol:?}");
        assert_eq!(required["tools"].as_array().map(Vec::len), Some(1));
        // The report asked as schema-constrained text: no tools, so no tool choice either.
        let answer = exchange.request_body(&RequestParams {
            tool_choice: ToolChoice::Required,
            answer_schema: Some(&schema),
            ..params(&[])
        });
        assert!(answer.get("tools").is_none(), "{protocol:?}: {answer}");
        assert!(
            answer.get("tool_choice").is_none(),
            "{protocol:?}: {answer}"
        );
        match protocol {
            Protocol::ChatCompletions => {
                assert_eq!(answer["response_format"]["type"], "json_schema");
                assert_eq!(answer["response_format"]["json_schema"]["schema"], schema);
            }
            Protocol::Responses => {
                assert_eq!(answer["text"]["format"]["type"], "json_schema");
                assert_eq!(answer["text"]["format"]["schema"], schema);
            }
            Protocol::AnthropicMessages => {
                assert!(answer.get("response_format").is_none(), "{answer}");
            }
        }
    }
}

#[test]
fn a_tool_turn_round_trips_on_every_protocol() {
    let tools = tools();
    for protocol in Protocol::ALL {
        let mut exchange = Exchange::new(protocol, "do the thing");
        let answer = Answer {
            thinking: Some("hmm".into()),
            text: None,
            tool_call: Some(ScriptedCall {
                name: "shell".into(),
                arguments: json!({"command": "ls"}),
            }),
            finish: Finish::ToolCall,
            usage: StepUsage::for_step(0),
        };
        let body = render_answer(api(protocol), &answer, "m", &Ids::new(1), false, false).body;
        let turn = exchange.parse_response(body.as_bytes()).unwrap();
        assert_eq!(turn.calls.len(), 1, "{protocol:?}");
        assert_eq!(turn.calls[0].name, "shell");
        assert_eq!(turn.calls[0].arguments, json!({"command": "ls"}));
        assert_eq!(turn.stop, StopReason::ToolCalls);
        // Usage in the events' convention: input excludes the cached part, output includes
        // reasoning; what the API does not send stays unknown.
        assert_eq!(turn.usage.output_tokens, Some(40), "{protocol:?}");
        match protocol {
            Protocol::AnthropicMessages => {
                assert_eq!(turn.usage.cache_write_tokens, Some(300));
                assert_eq!(turn.usage.reasoning_tokens, None);
            }
            _ => {
                assert_eq!(turn.usage.input_tokens, Some(400));
                assert_eq!(turn.usage.cache_read_tokens, Some(600));
                assert_eq!(turn.usage.cache_write_tokens, None);
            }
        }
        exchange.push_turn(&turn);
        exchange.push_results(&[ToolResult {
            call_id: turn.calls[0].id.clone(),
            name: "shell".into(),
            output: "a.txt".into(),
            is_error: false,
        }]);
        // The scripted model reads the request back: one prompt, one assistant turn, our tool.
        let request = exchange.request_body(&params(&tools));
        let parsed = ModelRequest::parse(api(protocol), request.to_string().as_bytes()).unwrap();
        assert_eq!(parsed.assistant_turns, 1, "{protocol:?}");
        assert_eq!(
            parsed.prompts,
            vec!["do the thing".to_owned()],
            "{protocol:?}"
        );
        assert_eq!(parsed.tool_names(), vec!["shell".to_owned()]);
        assert_eq!(parsed.model.as_deref(), Some("m"));
    }
}

#[test]
fn anthropic_thinking_blocks_are_replayed_in_order() {
    let exchange = Exchange::new(Protocol::AnthropicMessages, "p");
    let body = json!({
        "type": "message", "role": "assistant", "stop_reason": "tool_use",
        "content": [
            {"type": "thinking", "thinking": "first", "signature": "sig1"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "tool_use", "id": "t1", "name": "shell", "input": {"command": "ls"}}
        ],
        "usage": {"input_tokens": 5, "output_tokens": 7}
    });
    let turn = exchange
        .parse_response(body.to_string().as_bytes())
        .unwrap();
    assert_eq!(turn.reasoning.as_deref(), Some("first"));
    assert_eq!(turn.replay[0]["content"], body["content"]);
    assert_eq!(turn.usage.cache_read_tokens, None);
}

#[test]
fn chat_keeps_reasoning_content_and_uses_the_token_field() {
    let tools = tools();
    let mut exchange = Exchange::new(Protocol::ChatCompletions, "p");
    let body = json!({"choices": [{"finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": null, "reasoning_content": "thinking...",
        "tool_calls": [{"id": "c1", "type": "function",
                        "function": {"name": "shell", "arguments": "{\"command\":\"ls\"}"}}]}}]});
    let turn = exchange
        .parse_response(body.to_string().as_bytes())
        .unwrap();
    // No usage object: every field unknown, never zero.
    assert!(turn.usage.is_empty());
    exchange.push_turn(&turn);
    let request = exchange.request_body(&params(&tools));
    assert_eq!(request["messages"][2]["reasoning_content"], "thinking...");
    assert_eq!(request["max_tokens"], 8192);
    assert!(request.get("max_completion_tokens").is_none());
    let mut p = params(&tools);
    p.token_field = TokenField::MaxCompletionTokens;
    assert_eq!(exchange.request_body(&p)["max_completion_tokens"], 8192);
}

#[test]
fn bad_responses_fail_closed() {
    let chat = Exchange::new(Protocol::ChatCompletions, "p");
    let malformed = json!({"choices": [{"finish_reason": "tool_calls", "message": {
        "role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "shell", "arguments": "{\"command\": "}}]}}]});
    assert!(matches!(
        chat.parse_response(malformed.to_string().as_bytes()),
        Err(ProtocolError::MalformedToolCall { .. })
    ));
    let not_object = json!({"choices": [{"finish_reason": "tool_calls", "message": {
        "role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "shell", "arguments": "[1]"}}]}}]});
    assert!(matches!(
        chat.parse_response(not_object.to_string().as_bytes()),
        Err(ProtocolError::MalformedToolCall { .. })
    ));
    let unfinished = json!({"choices": [{"finish_reason": null, "message": {"role": "assistant", "content": "x"}}]});
    assert!(matches!(
        chat.parse_response(unfinished.to_string().as_bytes()),
        Err(ProtocolError::Incomplete(_))
    ));
    assert!(matches!(
        chat.parse_response(b"data: {\"choices\""),
        Err(ProtocolError::NotJson(_))
    ));
    let anthropic = Exchange::new(Protocol::AnthropicMessages, "p");
    let image = json!({"stop_reason": "end_turn", "content": [{"type": "image"}]});
    assert!(matches!(
        anthropic.parse_response(image.to_string().as_bytes()),
        Err(ProtocolError::Unsupported(_))
    ));
    let responses = Exchange::new(Protocol::Responses, "p");
    let failed = json!({"status": "failed", "output": []});
    assert!(matches!(
        responses.parse_response(failed.to_string().as_bytes()),
        Err(ProtocolError::Incomplete(_))
    ));
    let cut = json!({"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
                     "output": [], "usage": {"input_tokens": 3, "output_tokens": 8192}});
    let turn = responses
        .parse_response(cut.to_string().as_bytes())
        .unwrap();
    assert_eq!(turn.stop, StopReason::Length);
    assert_eq!(turn.usage.output_tokens, Some(8192));
}

#[test]
fn streamed_turns_assemble_like_plain_ones_on_every_protocol() {
    for protocol in Protocol::ALL {
        let exchange = Exchange::new(protocol, "p");
        let answer = Answer {
            thinking: Some("let me think".into()),
            text: Some("running it".into()),
            tool_call: Some(ScriptedCall {
                name: "shell".into(),
                arguments: json!({"command": "echo 'a \"quoted\" arg'"}),
            }),
            finish: Finish::ToolCall,
            usage: StepUsage::for_step(2),
        };
        let plain = render_answer(api(protocol), &answer, "m", &Ids::new(7), false, false).body;
        let streamed = render_answer(api(protocol), &answer, "m", &Ids::new(7), true, true).body;
        let a = exchange.parse_response(plain.as_bytes()).unwrap();
        let b = exchange.parse_stream(streamed.as_bytes()).unwrap();
        assert_eq!(a.calls, b.calls, "{protocol:?}");
        assert_eq!(a.text, b.text, "{protocol:?}");
        assert_eq!(a.stop, b.stop, "{protocol:?}");
        assert_eq!(a.usage.output_tokens, b.usage.output_tokens, "{protocol:?}");
        assert_eq!(a.reasoning, b.reasoning, "{protocol:?}");
        // A stream cut before its end is incomplete, never a turn.
        let cut = &streamed[..streamed.len() * 2 / 3];
        let cut = &cut[..cut.rfind("\n\n").unwrap_or(0)];
        assert!(
            exchange.parse_stream(cut.as_bytes()).is_err(),
            "{protocol:?}: a cut stream parsed"
        );
    }
}

#[test]
fn a_body_without_events_is_not_a_stream() {
    let exchange = Exchange::new(Protocol::ChatCompletions, "p");
    assert!(matches!(
        exchange.parse_stream(b"this is not an event stream"),
        Err(ProtocolError::NotJson(_))
    ));
}

mod prose_watch {
    use super::super::Protocol;
    use super::super::stream::ProseWatch;
    use serde_json::json;

    fn sse(events: &[serde_json::Value]) -> Vec<u8> {
        events
            .iter()
            .map(|e| format!("data: {e}\n\n"))
            .collect::<String>()
            .into_bytes()
    }

    fn chat_text(text: &str) -> serde_json::Value {
        json!({"choices": [{"index": 0, "delta": {"content": text}}]})
    }

    /// Fed a byte at a time (events split anywhere), the watch stops at the limit, holds only the
    /// first `limit` characters, and names how many it saw.
    #[test]
    fn prose_past_the_limit_stops_the_read_wherever_the_pieces_split() {
        let body = sse(&vec![chat_text("blah blah "); 20]);
        let mut watch = ProseWatch::new(Protocol::ChatCompletions, 100);
        let mut stopped_at = None;
        for (i, byte) in body.iter().enumerate() {
            if !watch.feed(std::slice::from_ref(byte)) {
                stopped_at = Some(i);
                break;
            }
        }
        assert!(stopped_at.is_some());
        assert_eq!(watch.text(), "blah blah ".repeat(10));
        assert_eq!(watch.text_chars(), 110);
    }

    /// A run of newlines (measured: the 1.5B model wrote `"Covered_elsewhere"` and then one
    /// newline a token for a thousand tokens) is cut by its count of pieces, not its length.
    #[test]
    fn a_run_of_whitespace_is_cut_by_its_pieces() {
        let mut pieces = vec![chat_text("\"Covered_elsewhere\"")];
        pieces.extend(std::iter::repeat_n(chat_text("\n"), 30));
        let mut watch = ProseWatch::new(Protocol::ChatCompletions, 100);
        assert!(!watch.feed(&sse(&pieces)));
        assert!(watch.text_chars() < 100);
    }

    #[test]
    fn a_tool_call_or_json_text_is_never_prose() {
        // A tool call began: text around it is a preamble, however long.
        let mut watch = ProseWatch::new(Protocol::ChatCompletions, 10);
        let call = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0,
            "id": "c", "function": {"name": "shell", "arguments": ""}}]}}]});
        assert!(watch.feed(&sse(&[call, chat_text(&"x".repeat(50))])));
        // Text that starts like JSON or a fence.
        for start in ["{\"cmd\": \"", "  [", "```json\n{"] {
            let mut watch = ProseWatch::new(Protocol::ChatCompletions, 10);
            assert!(
                watch.feed(&sse(&[chat_text(start), chat_text(&"y".repeat(50))])),
                "{start}"
            );
        }
        // Reasoning is not the answer's text.
        let mut watch = ProseWatch::new(Protocol::ChatCompletions, 10);
        let thinking =
            json!({"choices": [{"index": 0, "delta": {"reasoning_content": "z".repeat(50)}}]});
        assert!(watch.feed(&sse(&[thinking])));
    }

    #[test]
    fn each_protocol_s_text_and_tool_events_are_told_apart() {
        let responses_text = json!({"type": "response.output_text.delta", "delta": "w".repeat(20)});
        let mut watch = ProseWatch::new(Protocol::Responses, 10);
        assert!(!watch.feed(&sse(std::slice::from_ref(&responses_text))));
        let mut watch = ProseWatch::new(Protocol::Responses, 10);
        let call = json!({"type": "response.output_item.added",
            "item": {"type": "function_call", "name": "shell"}});
        assert!(watch.feed(&sse(&[call, responses_text.clone()])));
        let mut watch = ProseWatch::new(Protocol::Responses, 10);
        let reasoning =
            json!({"type": "response.output_item.added", "item": {"type": "reasoning"}});
        assert!(!watch.feed(&sse(&[reasoning, responses_text])));

        let anthropic_text = json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": "w".repeat(20)}});
        let mut watch = ProseWatch::new(Protocol::AnthropicMessages, 10);
        assert!(!watch.feed(&sse(std::slice::from_ref(&anthropic_text))));
        let mut watch = ProseWatch::new(Protocol::AnthropicMessages, 10);
        let tool = json!({"type": "content_block_start", "index": 1,
            "content_block": {"type": "tool_use", "id": "t", "name": "shell", "input": {}}});
        assert!(watch.feed(&sse(&[tool, anthropic_text])));
    }
}
