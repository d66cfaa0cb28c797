//! The scripted model server, end to end: wire protocol tests with a hand-written HTTP/1.1 client
//! (SSE event sequences asserted), and one happy-path run per real CLI (OpenCode, Codex, Claude
//! Code, from `tests/clis/node_modules/.bin/`) against the server.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use autocode::scripted_model::{
    Action, RequestLogEntry, RunningServer, Script, ScriptSyntax, ScriptedServer, ServeArgs,
    ServerConfig, serve_until,
};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn script(toml_text: &str) -> Script {
    Script::parse(toml_text, ScriptSyntax::Toml, Path::new("test.toml")).expect("test script")
}

async fn start(toml_text: &str) -> RunningServer {
    ScriptedServer::start(ServerConfig::new(script(toml_text)))
        .await
        .expect("server starts")
}

struct HttpReply {
    status: u16,
    headers: BTreeMap<String, String>,
    body: String,
}

/// One HTTP/1.1 exchange on a fresh connection (`Connection: close`, so the body ends at EOF).
async fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> std::io::Result<HttpReply> {
    let mut stream = TcpStream::connect(addr).await?;
    let body = body.map(Value::to_string).unwrap_or_default();
    let mut request = format!("{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() {
        request.push_str(&format!(
            "content-type: application/json\r\ncontent-length: {}\r\n",
            body.len()
        ));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    stream.write_all(request.as_bytes()).await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("no response: {text:?}"),
        )
    })?;
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    Ok(HttpReply {
        status,
        headers,
        body: body.to_owned(),
    })
}

async fn post(addr: SocketAddr, path: &str, body: Value) -> HttpReply {
    http(addr, "POST", path, &[], Some(&body))
        .await
        .expect("exchange")
}

/// The SSE frames of a body as (event name, data JSON); `[DONE]` becomes `Value::Null`.
fn sse(body: &str) -> Vec<(Option<String>, Value)> {
    body.split("\n\n")
        .filter(|frame| !frame.trim().is_empty())
        .map(|frame| {
            let event = frame
                .lines()
                .find_map(|line| line.strip_prefix("event: "))
                .map(str::to_owned);
            let data = frame
                .lines()
                .find_map(|line| line.strip_prefix("data: "))
                .expect("every frame has data");
            let value = if data == "[DONE]" {
                Value::Null
            } else {
                serde_json::from_str(data).expect("data is JSON")
            };
            (event, value)
        })
        .collect()
}

fn types(frames: &[(Option<String>, Value)]) -> Vec<String> {
    frames
        .iter()
        .map(|(event, data)| {
            let kind = data.get("type").and_then(Value::as_str).map(str::to_owned);
            assert_eq!(event, &kind, "the SSE event name equals data.type");
            kind.unwrap_or_default()
        })
        .collect()
}

const SHELL_THEN_REPORT: &str = r#"
[[conversation]]
name = "happy"
[[conversation.step]]
kind = "shell"
command = "echo hello > out.txt && cat out.txt"
thinking = "I should create out.txt with the shell tool."
[[conversation.step]]
kind = "report"
report = { status = "done", summary = "Created out.txt containing hello.", checks = [{ command = "cat out.txt", exit_code = 0 }] }
"#;

fn report() -> Value {
    json!({"status": "done", "summary": "Created out.txt containing hello.",
           "checks": [{"command": "cat out.txt", "exit_code": 0}]})
}

fn chat_tools() -> Value {
    json!([{"type": "function", "function": {"name": "bash",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}])
}

fn claude_tools() -> Value {
    json!([
        {"name": "Bash", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}, "description": {"type": "string"}}, "required": ["command"]}},
        {"name": "StructuredOutput", "input_schema": {"type": "object"}}
    ])
}

fn responses_tools() -> Value {
    json!([{"type": "function", "name": "exec_command",
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}},
           {"type": "web_search"}])
}

// ---------------------------------------------------------------------------------------------
// Protocol tests
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn chat_completions_stream_tool_call_then_report_text() {
    let server = start(SHELL_THEN_REPORT).await;
    let first = post(
        server.addr(),
        "/v1/chat/completions",
        json!({"model": "mock-model", "stream": true, "stream_options": {"include_usage": true},
               "messages": [{"role": "user", "content": "go"}], "tools": chat_tools()}),
    )
    .await;
    assert_eq!(first.status, 200);
    assert_eq!(first.headers["content-type"], "text/event-stream");
    let frames = sse(&first.body);
    assert_eq!(
        frames.last().map(|(_, data)| data),
        Some(&Value::Null),
        "ends with [DONE]"
    );
    let chunks: Vec<&Value> = frames
        .iter()
        .map(|(_, data)| data)
        .filter(|d| !d.is_null())
        .collect();
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let reasoning: String = chunks
        .iter()
        .filter_map(|c| {
            c.pointer("/choices/0/delta/reasoning_content")
                .and_then(Value::as_str)
        })
        .collect();
    assert_eq!(reasoning, "I should create out.txt with the shell tool.");
    let head = chunks
        .iter()
        .find_map(|c| c.pointer("/choices/0/delta/tool_calls/0/function/name"))
        .expect("a tool call head");
    assert_eq!(head, "bash");
    let arguments: String = chunks
        .iter()
        .filter_map(|c| {
            c.pointer("/choices/0/delta/tool_calls/0/function/arguments")
                .and_then(Value::as_str)
        })
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&arguments).unwrap(),
        json!({"command": "echo hello > out.txt && cat out.txt"})
    );
    let finish = chunks[chunks.len() - 2];
    assert_eq!(finish["choices"][0]["finish_reason"], "tool_calls");
    let usage = &chunks[chunks.len() - 1];
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(
        usage["usage"],
        json!({"prompt_tokens": 1000, "completion_tokens": 40, "total_tokens": 1040,
               "prompt_tokens_details": {"cached_tokens": 600},
               "completion_tokens_details": {"reasoning_tokens": 12}})
    );

    // Second request: one assistant turn in the history, so step 1 (the report as text).
    let second = post(
        server.addr(),
        "/v1/chat/completions",
        json!({"model": "mock-model", "stream": false,
               "messages": [{"role": "user", "content": "go"},
                            {"role": "assistant", "content": null, "tool_calls": []},
                            {"role": "tool", "tool_call_id": "x", "content": "hello"}],
               "tools": chat_tools()}),
    )
    .await;
    assert_eq!(second.status, 200);
    let object: Value = serde_json::from_str(&second.body).unwrap();
    assert_eq!(object["object"], "chat.completion");
    assert_eq!(object["choices"][0]["finish_reason"], "stop");
    let text = object["choices"][0]["message"]["content"].as_str().unwrap();
    assert_eq!(serde_json::from_str::<Value>(text).unwrap(), report());
    assert_eq!(object["usage"]["prompt_tokens"], 1100);

    let log = server.requests();
    let summary: Vec<(Option<usize>, Action, Option<&str>)> = log
        .iter()
        .map(|e| (e.step, e.action, e.tool.as_deref()))
        .collect();
    assert_eq!(
        summary,
        vec![
            (Some(0), Action::ToolCall, Some("bash")),
            (Some(1), Action::Text, None)
        ]
    );
    assert_eq!(log[0].tools, vec!["bash".to_owned()]);
    assert_eq!(log[0].stream, Some(true));
    assert_eq!(log[1].stream, Some(false));
    server.shutdown().await;
}

#[tokio::test]
async fn opencode_title_call_does_not_consume_a_step() {
    let server = start(SHELL_THEN_REPORT).await;
    let title = post(
        server.addr(),
        "/v1/chat/completions",
        json!({"stream": false, "messages": [
            {"role": "system", "content": "You are a title generator. You output ONLY a thread title."},
            {"role": "user", "content": "go"}]}),
    )
    .await;
    let object: Value = serde_json::from_str(&title.body).unwrap();
    assert_eq!(
        object["choices"][0]["message"]["content"],
        "Mock session title"
    );
    let agent = post(
        server.addr(),
        "/v1/chat/completions",
        json!({"stream": false, "messages": [{"role": "user", "content": "go"}], "tools": chat_tools()}),
    )
    .await;
    let object: Value = serde_json::from_str(&agent.body).unwrap();
    assert_eq!(object["choices"][0]["finish_reason"], "tool_calls");
    let actions: Vec<Action> = server.requests().iter().map(|e| e.action).collect();
    assert_eq!(actions, vec![Action::Title, Action::ToolCall]);
    server.shutdown().await;
}

#[tokio::test]
async fn responses_stream_event_sequence() {
    let server = start(SHELL_THEN_REPORT).await;
    let reply = post(
        server.addr(),
        "/v1/responses",
        json!({"model": "mock-model", "stream": true, "tools": responses_tools(),
               "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}]}),
    )
    .await;
    assert_eq!(reply.status, 200);
    let frames = sse(&reply.body);
    let names = types(&frames);
    let mut expected = vec![
        "response.created",
        "response.output_item.added",
        "response.reasoning_summary_part.added",
    ];
    expected.extend(std::iter::repeat_n(
        "response.reasoning_summary_text.delta",
        3,
    ));
    expected.extend([
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
        "response.output_item.added",
    ]);
    let arguments = json!({"cmd": "echo hello > out.txt && cat out.txt"}).to_string();
    let argument_deltas = arguments.chars().count().div_ceil(16);
    expected.extend(std::iter::repeat_n(
        "response.function_call_arguments.delta",
        argument_deltas,
    ));
    expected.extend([
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]);
    assert_eq!(names, expected);
    let sequence: Vec<u64> = frames
        .iter()
        .filter_map(|(_, d)| d["sequence_number"].as_u64())
        .collect();
    assert_eq!(sequence, (0..frames.len() as u64).collect::<Vec<_>>());
    let call = &frames[frames.len() - 2].1["item"];
    assert_eq!(call["type"], "function_call");
    assert_eq!(call["name"], "exec_command");
    let arguments: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(
        arguments,
        json!({"cmd": "echo hello > out.txt && cat out.txt"})
    );
    let completed = &frames[frames.len() - 1].1["response"];
    assert_eq!(completed["status"], "completed");
    assert_eq!(
        completed["usage"],
        json!({"input_tokens": 1000, "input_tokens_details": {"cached_tokens": 600},
               "output_tokens": 40, "output_tokens_details": {"reasoning_tokens": 12},
               "total_tokens": 1040})
    );

    // Codex's second request: reasoning + function_call + output make one assistant turn.
    let second = post(
        server.addr(),
        "/v1/responses",
        json!({"model": "mock-model", "stream": true, "tools": responses_tools(),
               "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
                         {"type": "reasoning", "summary": []},
                         {"type": "function_call", "name": "exec_command", "arguments": "{}", "call_id": "c"},
                         {"type": "function_call_output", "call_id": "c", "output": "hello"}]}),
    )
    .await;
    let frames = sse(&second.body);
    let names = types(&frames);
    assert_eq!(names[1], "response.output_item.added");
    assert_eq!(names[2], "response.content_part.added");
    let text: String = frames
        .iter()
        .filter(|(e, _)| e.as_deref() == Some("response.output_text.delta"))
        .filter_map(|(_, d)| d["delta"].as_str())
        .collect();
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), report());
    let done = &frames[frames.len() - 2].1["item"];
    assert_eq!(done["type"], "message");
    assert_eq!(done["content"][0]["type"], "output_text");
    assert_eq!(
        frames[frames.len() - 1].1["response"]["usage"]["input_tokens"],
        1100
    );
    server.shutdown().await;
}

#[tokio::test]
async fn responses_non_streaming_and_length() {
    let server = start(
        r#"
[[conversation]]
name = "short"
[[conversation.step]]
kind = "length"
text = "This answer was cut"
"#,
    )
    .await;
    let body = json!({"model": "m", "input": "go"});
    let reply = post(server.addr(), "/v1/responses", body).await;
    let object: Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(object["object"], "response");
    assert_eq!(object["status"], "incomplete");
    assert_eq!(object["incomplete_details"]["reason"], "max_output_tokens");
    assert_eq!(
        object["output"][0]["content"][0]["text"],
        "This answer was cut"
    );
    let streamed = post(
        server.addr(),
        "/v1/responses",
        json!({"model": "m", "input": "go", "stream": true}),
    )
    .await;
    let frames = sse(&streamed.body);
    assert_eq!(
        types(&frames).last().map(String::as_str),
        Some("response.incomplete")
    );
    let chat = post(
        server.addr(),
        "/v1/chat/completions",
        json!({"messages": [{"role": "user", "content": "go"}]}),
    )
    .await;
    let object: Value = serde_json::from_str(&chat.body).unwrap();
    assert_eq!(object["choices"][0]["finish_reason"], "length");
    let messages = post(
        server.addr(),
        "/v1/messages?beta=true",
        json!({"messages": [{"role": "user", "content": "go"}]}),
    )
    .await;
    let object: Value = serde_json::from_str(&messages.body).unwrap();
    assert_eq!(object["stop_reason"], "max_tokens");
    assert!(server.requests().iter().all(|e| e.action == Action::Length));
    server.shutdown().await;
}

#[tokio::test]
async fn anthropic_stream_event_sequence_with_structured_output() {
    let server = start(SHELL_THEN_REPORT).await;
    let path = "/v1/messages?beta=true";
    let first = post(
        server.addr(),
        path,
        json!({"model": "mock-model", "stream": true, "tools": claude_tools(),
               "messages": [{"role": "user", "content": [{"type": "text", "text": "go"}]}]}),
    )
    .await;
    let frames = sse(&first.body);
    let names = types(&frames);
    let mut expected = vec!["message_start", "content_block_start"];
    expected.extend(std::iter::repeat_n("content_block_delta", 3 + 1));
    expected.extend(["content_block_stop", "content_block_start"]);
    let input = json!({"command": "echo hello > out.txt && cat out.txt",
                       "description": "Run the scripted mock command"});
    let input_deltas = input.to_string().chars().count().div_ceil(16);
    expected.extend(std::iter::repeat_n("content_block_delta", input_deltas));
    expected.extend(["content_block_stop", "message_delta", "message_stop"]);
    assert_eq!(names, expected);
    assert_eq!(
        frames[0].1["message"]["usage"],
        json!({"input_tokens": 1000, "cache_creation_input_tokens": 300,
               "cache_read_input_tokens": 600, "output_tokens": 1})
    );
    assert_eq!(frames[1].1["content_block"]["type"], "thinking");
    assert_eq!(frames[5].1["delta"]["type"], "signature_delta");
    let tool_start = &frames[7].1["content_block"];
    assert_eq!(tool_start["type"], "tool_use");
    assert_eq!(tool_start["name"], "Bash");
    let partial: String = frames
        .iter()
        .filter_map(|(_, d)| d.pointer("/delta/partial_json").and_then(Value::as_str))
        .collect();
    assert_eq!(serde_json::from_str::<Value>(&partial).unwrap(), input);
    let delta = &frames[frames.len() - 2].1;
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    assert_eq!(delta["usage"]["output_tokens"], 40);

    let second = post(
        server.addr(),
        path,
        json!({"model": "mock-model", "stream": false, "tools": claude_tools(),
               "messages": [{"role": "user", "content": "go"},
                            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Bash", "input": {}}]},
                            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "hello"}]}]}),
    )
    .await;
    let object: Value = serde_json::from_str(&second.body).unwrap();
    assert_eq!(object["type"], "message");
    assert_eq!(object["stop_reason"], "tool_use");
    assert_eq!(object["content"][0]["name"], "StructuredOutput");
    assert_eq!(object["content"][0]["input"], report());
    assert_eq!(object["usage"]["cache_creation_input_tokens"], 301);
    server.shutdown().await;
}

#[tokio::test]
async fn http_errors_are_served_times_then_the_step_plays() {
    let server = start(
        r#"
[[conversation]]
name = "flaky"
[[conversation.step]]
kind = "http_error"
status = 429
times = 2
retry_after = 1
[[conversation.step]]
kind = "http_error"
status = 529
[[conversation.step]]
kind = "text"
text = "finally"
"#,
    )
    .await;
    let body = json!({"messages": [{"role": "user", "content": "go"}]});
    let path = "/v1/messages";
    let mut statuses = Vec::new();
    for _ in 0..4 {
        let reply = post(server.addr(), path, body.clone()).await;
        statuses.push(reply.status);
        match reply.status {
            429 => {
                assert_eq!(
                    reply.headers.get("retry-after").map(String::as_str),
                    Some("1")
                );
                let error: Value = serde_json::from_str(&reply.body).unwrap();
                assert_eq!(
                    error,
                    json!({"type": "error", "error": {"type": "rate_limit_error", "message": "mock 429 error"}})
                );
            }
            529 => {
                assert!(!reply.headers.contains_key("retry-after"));
                assert!(reply.body.contains("overloaded_error"));
            }
            _ => assert!(reply.body.contains("finally")),
        }
    }
    assert_eq!(statuses, vec![429, 429, 529, 200]);
    // The OpenAI error shape on the other APIs.
    let server2 = start(
        "[[conversation]]\nname='e'\n[[conversation.step]]\nkind='http_error'\nstatus=500\ntimes=5\n",
    )
    .await;
    let reply = post(server2.addr(), "/v1/chat/completions", body.clone()).await;
    assert_eq!(reply.status, 500);
    let error: Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(error["error"]["message"], "mock 500 error");
    assert_eq!(error["error"]["type"], "server_error");
    let log = server.requests();
    let steps: Vec<Option<usize>> = log.iter().map(|e| e.script_step).collect();
    assert_eq!(steps, vec![Some(0), Some(0), Some(1), Some(2)]);
    assert_eq!(log[0].action, Action::HttpError);
    assert_eq!(log[0].status, Some(429));
    server.shutdown().await;
    server2.shutdown().await;
}

#[tokio::test]
async fn garbage_is_neither_sse_nor_json() {
    let server = start(
        "[[conversation]]\nname='g'\n[[conversation.step]]\nkind='garbage'\ntimes=2\n[[conversation.step]]\nkind='text'\ntext='ok'\n",
    )
    .await;
    let streamed = post(
        server.addr(),
        "/v1/chat/completions",
        json!({"stream": true, "messages": [{"role": "user", "content": "go"}]}),
    )
    .await;
    assert_eq!(streamed.status, 200);
    assert_eq!(streamed.headers["content-type"], "text/event-stream");
    let data_lines: Vec<&str> = streamed
        .body
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .collect();
    assert!(!data_lines.is_empty());
    assert!(
        data_lines
            .iter()
            .all(|data| serde_json::from_str::<Value>(data).is_err())
    );
    let plain = post(server.addr(), "/v1/responses", json!({"input": "go"})).await;
    assert!(serde_json::from_str::<Value>(&plain.body).is_err());
    let ok = post(server.addr(), "/v1/responses", json!({"input": "go"})).await;
    assert!(ok.body.contains("\"ok\""));
    server.shutdown().await;
}

#[tokio::test]
async fn hang_ends_at_its_timeout_or_at_shutdown() {
    let timed =
        start("[[conversation]]\nname='h'\n[[conversation.step]]\nkind='hang'\nseconds=1\n").await;
    let started = std::time::Instant::now();
    let result = http(
        timed.addr(),
        "POST",
        "/v1/responses",
        &[],
        Some(&json!({"input": "go", "stream": true})),
    )
    .await;
    assert!(result.is_err(), "the connection closes without a response");
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert_eq!(timed.requests()[0].action, Action::Hang);
    assert_eq!(timed.requests()[0].status, None);
    timed.shutdown().await;

    let forever = start("[[conversation]]\nname='h'\n[[conversation.step]]\nkind='hang'\n").await;
    let addr = forever.addr();
    let client = tokio::spawn(async move {
        http(
            addr,
            "POST",
            "/v1/messages",
            &[],
            Some(&json!({"messages": []})),
        )
        .await
    });
    // Wait (bounded) until the server has logged the hanging request, then shut down.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while forever.requests().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the hanging request never arrived"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::timeout(Duration::from_secs(10), forever.shutdown())
        .await
        .expect("shutdown ends a hanging request");
    let outcome = tokio::time::timeout(Duration::from_secs(10), client)
        .await
        .expect("the client sees the connection close")
        .expect("client task");
    assert!(outcome.is_err(), "no response was sent");
}

#[tokio::test]
async fn side_endpoints_and_404s_are_logged() {
    let server = start(SHELL_THEN_REPORT).await;
    let addr = server.addr();
    let hello = http(addr, "HEAD", "/api/hello", &[], None).await.unwrap();
    assert_eq!(hello.status, 200);
    let openai = http(addr, "GET", "/v1/models", &[], None).await.unwrap();
    let openai: Value = serde_json::from_str(&openai.body).unwrap();
    assert_eq!(openai["object"], "list");
    assert_eq!(openai["data"][0]["id"], "mock-model");
    let anthropic = http(
        addr,
        "GET",
        "/v1/models",
        &[("anthropic-version", "2023-06-01")],
        None,
    )
    .await
    .unwrap();
    let anthropic: Value = serde_json::from_str(&anthropic.body).unwrap();
    assert_eq!(anthropic["data"][0]["type"], "model");
    assert_eq!(anthropic["has_more"], false);
    let missing = http(
        addr,
        "POST",
        "/v1/messages/count_tokens",
        &[("user-agent", "probe/1")],
        Some(&json!({})),
    )
    .await
    .unwrap();
    assert_eq!(missing.status, 404);
    let bad = http(addr, "POST", "/v1/chat/completions", &[], None)
        .await
        .unwrap();
    assert_eq!(bad.status, 400);
    let log = server.requests();
    let summary: Vec<(&str, &str, Action, Option<u16>)> = log
        .iter()
        .map(|e| (e.method.as_str(), e.path.as_str(), e.action, e.status))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("HEAD", "/api/hello", Action::Hello, Some(200)),
            ("GET", "/v1/models", Action::Models, Some(200)),
            ("GET", "/v1/models", Action::Models, Some(200)),
            (
                "POST",
                "/v1/messages/count_tokens",
                Action::NotFound,
                Some(404)
            ),
            (
                "POST",
                "/v1/chat/completions",
                Action::BadRequest,
                Some(400)
            ),
        ]
    );
    assert_eq!(log[3].user_agent.as_deref(), Some("probe/1"));
    server.shutdown().await;
}

#[tokio::test]
async fn conversations_are_chosen_by_prompt_and_can_restart_per_prompt() {
    let server = start(
        r#"
[[conversation]]
name = "followup"
match = { last_prompt_contains = "SECOND" }
count_turns = "since_last_prompt"
[[conversation.step]]
kind = "text"
text = "followup step 0"
[[conversation]]
name = "first"
match = { prompt_contains = "FIRST" }
[[conversation.step]]
kind = "text"
text = "first step 0"
[[conversation.step]]
kind = "text"
text = "first step 1"
"#,
    )
    .await;
    let first = json!({"messages": [{"role": "user", "content": "FIRST task"}]});
    let reply = post(server.addr(), "/v1/chat/completions", first).await;
    assert!(reply.body.contains("first step 0"));
    let resumed = json!({"messages": [{"role": "user", "content": "FIRST task"},
        {"role": "assistant", "content": "first step 0"}, {"role": "user", "content": "SECOND task"}]});
    let reply = post(server.addr(), "/v1/chat/completions", resumed).await;
    assert!(reply.body.contains("followup step 0"), "{}", reply.body);
    let unmatched = json!({"messages": [{"role": "user", "content": "other"}]});
    let reply = post(server.addr(), "/v1/chat/completions", unmatched).await;
    assert_eq!(reply.status, 400);
    let conversations: Vec<Option<String>> = server
        .requests()
        .into_iter()
        .map(|e| e.conversation)
        .collect();
    assert_eq!(
        conversations,
        vec![Some("first".to_owned()), Some("followup".to_owned()), None]
    );
    assert_eq!(server.requests()[2].action, Action::NoMatch);
    server.shutdown().await;
}

#[tokio::test]
async fn unplayable_steps_and_exhausted_scripts_are_explicit() {
    let server = start(SHELL_THEN_REPORT).await;
    let no_tools = post(
        server.addr(),
        "/v1/messages",
        json!({"messages": [{"role": "user", "content": "go"}]}),
    )
    .await;
    assert_eq!(no_tools.status, 400);
    assert!(no_tools.body.contains("no shell tool"));
    let late = post(
        server.addr(),
        "/v1/messages",
        json!({"messages": [{"role": "user", "content": "go"}, {"role": "assistant", "content": "a"},
                            {"role": "user", "content": "b"}, {"role": "assistant", "content": "c"},
                            {"role": "user", "content": "d"}]}),
    )
    .await;
    assert_eq!(late.status, 200);
    assert!(late.body.contains("script exhausted"));
    let actions: Vec<Action> = server.requests().iter().map(|e| e.action).collect();
    assert_eq!(actions, vec![Action::Unplayable, Action::Exhausted]);
    server.shutdown().await;
}

#[tokio::test]
async fn one_server_serves_concurrent_connections() {
    let server = start(SHELL_THEN_REPORT).await;
    let addr = server.addr();
    let mut clients = Vec::new();
    for index in 0..8 {
        clients.push(tokio::spawn(async move {
            let (path, body) = match index % 3 {
                0 => ("/v1/chat/completions", json!({"stream": true, "messages": [{"role": "user", "content": "go"}], "tools": chat_tools()})),
                1 => ("/v1/responses", json!({"stream": true, "input": "go", "tools": responses_tools()})),
                _ => ("/v1/messages", json!({"stream": true, "messages": [{"role": "user", "content": "go"}], "tools": claude_tools()})),
            };
            post(addr, path, body).await.status
        }));
    }
    for client in clients {
        assert_eq!(client.await.unwrap(), 200);
    }
    let mut seqs: Vec<u64> = server.requests().iter().map(|e| e.seq).collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=8).collect::<Vec<_>>());
    server.shutdown().await;
}

#[tokio::test]
async fn serve_until_prints_the_address_and_writes_the_log_file() {
    let dir = tempfile::tempdir().unwrap();
    let script_path = dir.path().join("script.json");
    std::fs::write(
        &script_path,
        json!({"conversation": [{"name": "j", "step": [{"kind": "text", "text": "from json"}]}]})
            .to_string(),
    )
    .unwrap();
    let log_path = dir.path().join("requests.jsonl");
    let (address_tx, address_rx) = tokio::sync::oneshot::channel::<SocketAddr>();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let args = ServeArgs {
        script: script_path,
        port: 0,
        log: Some(log_path.clone()),
    };
    let serving = tokio::spawn(async move {
        let mut out = AddressSink {
            sent: Some(address_tx),
            buffer: Vec::new(),
        };
        let result = serve_until(args, &mut out, async {
            let _ = stop_rx.await;
        })
        .await;
        (result.map_err(|e| e.to_string()), out.buffer)
    });
    let addr = address_rx.await.expect("an address line");
    let reply = post(addr, "/v1/responses", json!({"input": "go"})).await;
    assert!(reply.body.contains("from json"));
    stop_tx.send(()).unwrap();
    let (result, printed) = serving.await.unwrap();
    result.unwrap();
    assert_eq!(String::from_utf8(printed).unwrap(), format!("{addr}\n"));
    let lines: Vec<RequestLogEntry> = std::fs::read_to_string(&log_path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0].action, Action::Text);
    assert_eq!(lines[0].conversation.as_deref(), Some("j"));
    // Once stopped, nothing listens any more.
    assert!(TcpStream::connect(addr).await.is_err());
}

/// Captures what `serve_until` prints and reports the first line's address.
struct AddressSink {
    sent: Option<tokio::sync::oneshot::Sender<SocketAddr>>,
    buffer: Vec<u8>,
}

impl Write for AddressSink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buffer.extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        let text = String::from_utf8_lossy(&self.buffer);
        if let Some(line) = text.lines().next()
            && let Ok(addr) = line.parse()
            && let Some(sender) = self.sent.take()
        {
            let _ = sender.send(addr);
        }
        Ok(())
    }
}

#[tokio::test]
async fn bad_script_files_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(
        &path,
        "[[conversation]]\nname = 'x'\n[[conversation.step]]\nkind = 'teleport'\n",
    )
    .unwrap();
    let args = ServeArgs {
        script: path,
        port: 0,
        log: None,
    };
    let error = serve_until(args, &mut Vec::new(), async {})
        .await
        .unwrap_err();
    assert!(error.to_string().contains("bad.toml"), "{error}");
    let missing = ServeArgs {
        script: dir.path().join("missing.toml"),
        port: 0,
        log: None,
    };
    let error = serve_until(missing, &mut Vec::new(), async {})
        .await
        .unwrap_err();
    assert!(error.to_string().contains("cannot read script"), "{error}");
}

// ---------------------------------------------------------------------------------------------
// The real CLIs
// ---------------------------------------------------------------------------------------------

const HAPPY_PROMPT: &str = "Create out.txt containing hello using the shell (echo hello > out.txt && cat out.txt), then reply with ONLY a JSON object of the form {\"status\":\"done|failed\",\"summary\":\"...\",\"checks\":[{\"command\":\"...\",\"exit_code\":0}]}.\n";

const REPORT_SCHEMA: &str = r#"{"type":"object","properties":{"status":{"type":"string","enum":["done","failed"]},"summary":{"type":"string"},"checks":{"type":"array","items":{"type":"object","properties":{"command":{"type":"string"},"exit_code":{"type":"integer"}},"required":["command","exit_code"],"additionalProperties":false}}},"required":["status","summary","checks"],"additionalProperties":false}"#;

/// A CLI run never takes longer than this; the watchdog kills its process group after it.
const CLI_TIMEOUT: Duration = Duration::from_secs(90);

/// `tests/clis/node_modules/.bin/<name>`, or a failure that says how to install it.
fn cli_binary(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/clis/node_modules/.bin")
        .join(name);
    assert!(
        path.exists(),
        "{} is missing: install the pinned CLIs with `npm ci --prefix tests/clis` (if the \
         registry lacks opencode's other-platform packages, `npm install --prefix tests/clis` \
         installs the same locked versions)",
        path.display()
    );
    path
}

/// A throwaway HOME and a git workspace with one commit, like the captures.
struct Sandbox {
    _dir: tempfile::TempDir,
    home: PathBuf,
    workspace: PathBuf,
}

fn sandbox() -> Sandbox {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("README.md"), "scratch workspace\n").unwrap();
    for args in [
        &["init", "-q"][..],
        &["add", "-A"][..],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.invalid",
            "commit",
            "-qm",
            "init",
        ][..],
    ] {
        let status = Command::new("git")
            .args(args)
            .current_dir(&workspace)
            .env("HOME", &home)
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    }
    Sandbox {
        _dir: dir,
        home,
        workspace,
    }
}

struct CliRun {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `command` (env already cleared and set) with `stdin`, killing its process group if it
/// outlives [`CLI_TIMEOUT`].
fn run_cli(mut command: Command, stdin: &str) -> CliRun {
    use std::os::unix::process::CommandExt;
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = command.spawn().expect("the CLI starts");
    let pid = child.id();
    let mut input = child.stdin.take().expect("stdin pipe");
    let stdin = stdin.to_owned();
    let writer = std::thread::spawn(move || {
        // A CLI that ignores stdin may close it early; that is not this test's failure.
        let _ = input.write_all(stdin.as_bytes());
    });
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if done_rx.recv_timeout(CLI_TIMEOUT).is_err() {
            let group = nix::unistd::Pid::from_raw(-i32::try_from(pid).unwrap_or(i32::MAX));
            let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGKILL);
            return true;
        }
        false
    });
    let output = child.wait_with_output().expect("the CLI is waited for");
    let _ = done_tx.send(());
    let timed_out = watchdog.join().unwrap_or(false);
    let _ = writer.join();
    let run = CliRun {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    assert!(
        !timed_out,
        "the CLI ran longer than {CLI_TIMEOUT:?}\n{}",
        run.describe()
    );
    run
}

impl CliRun {
    fn describe(&self) -> String {
        format!(
            "rc {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }

    fn events(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }
}

fn base_command(binary: &Path, sandbox: &Sandbox) -> Command {
    let mut command = Command::new(binary);
    command
        .env_clear()
        .current_dir(&sandbox.workspace)
        .env("HOME", &sandbox.home)
        .env(
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        )
        .env("LANG", "C.UTF-8")
        .env("TERM", "dumb");
    command
}

/// The three pinned CLIs, each configured exactly as `real-cli-headless.md` shows.
#[derive(Debug, Clone, Copy)]
enum Cli {
    OpenCode,
    Codex,
    Claude,
}

impl Cli {
    fn binary_name(self) -> &'static str {
        match self {
            Cli::OpenCode => "opencode",
            Cli::Codex => "codex",
            Cli::Claude => "claude",
        }
    }

    /// Codex's `-o` file.
    fn report_file(sandbox: &Sandbox) -> PathBuf {
        sandbox.home.join("report.json")
    }

    /// Writes the CLI's config into the sandbox and returns the command and its stdin.
    fn prepare(self, sandbox: &Sandbox, server: &RunningServer, prompt: &str) -> (Command, String) {
        let binary = cli_binary(self.binary_name());
        let mut command = base_command(&binary, sandbox);
        match self {
            Cli::OpenCode => {
                let config_home = sandbox.home.join(".config");
                std::fs::create_dir_all(config_home.join("opencode")).unwrap();
                let config = json!({
                    "$schema": "https://opencode.ai/config.json",
                    "provider": {"mock": {"npm": "@ai-sdk/openai-compatible", "name": "Mock",
                        "options": {"baseURL": server.openai_base_url(), "apiKey": "dummy"},
                        "models": {"mock-model": {"name": "Mock Model", "tool_call": true,
                                                  "limit": {"context": 128000, "output": 8192}}}}},
                    "model": "mock/mock-model", "small_model": "mock/mock-model",
                    "autoupdate": false, "share": "disabled",
                    "permission": {"bash": "allow", "edit": "allow", "external_directory": "allow"}
                });
                std::fs::write(
                    config_home.join("opencode/opencode.json"),
                    config.to_string(),
                )
                .unwrap();
                command
                    .env("XDG_CONFIG_HOME", &config_home)
                    .env("XDG_DATA_HOME", sandbox.home.join(".local/share"))
                    .env("XDG_CACHE_HOME", sandbox.home.join(".cache"))
                    .env("XDG_STATE_HOME", sandbox.home.join(".local/state"))
                    .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
                    .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
                    .env("OPENCODE_DISABLE_SHARE", "1")
                    .env("OPENCODE_DISABLE_LSP_DOWNLOAD", "1")
                    .args([
                        "run",
                        "--format",
                        "json",
                        "--model",
                        "mock/mock-model",
                        prompt,
                    ]);
                (command, String::new())
            }
            Cli::Codex => {
                let codex_home = sandbox.home.join(".codex");
                std::fs::create_dir_all(&codex_home).unwrap();
                let config = format!(
                    r#"model = "mock-model"
model_provider = "mock"
approval_policy = "never"
sandbox_mode = "workspace-write"
check_for_update_on_startup = false
[analytics]
enabled = false
[features]
unbounded_connection_retries = false
plugins = false
apps = false
[model_providers.mock]
name = "Mock"
base_url = "{}"
wire_api = "responses"
env_key = "MOCK_API_KEY"
"#,
                    server.openai_base_url()
                );
                std::fs::write(codex_home.join("config.toml"), config).unwrap();
                let schema = sandbox.home.join("schema.json");
                std::fs::write(&schema, REPORT_SCHEMA).unwrap();
                command
                    .env("CODEX_HOME", &codex_home)
                    .env("MOCK_API_KEY", "dummy")
                    .args(["exec", "--json", "--skip-git-repo-check", "-C"])
                    .arg(&sandbox.workspace)
                    .args(["--sandbox", "workspace-write", "-m", "mock-model"])
                    .arg("--output-schema")
                    .arg(&schema)
                    .arg("-o")
                    .arg(Cli::report_file(sandbox))
                    .arg("-");
                (command, prompt.to_owned())
            }
            Cli::Claude => {
                command
                    .env("ANTHROPIC_BASE_URL", server.base_url())
                    .env("ANTHROPIC_API_KEY", "dummy")
                    .env("DISABLE_TELEMETRY", "1")
                    .env("DISABLE_ERROR_REPORTING", "1")
                    .env("DISABLE_AUTOUPDATER", "1")
                    .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
                    .args(["-p", "--output-format", "stream-json", "--verbose"])
                    .args(["--json-schema", REPORT_SCHEMA])
                    .args([
                        "--tools",
                        "Bash,Read,Edit,Write,Glob,Grep",
                        "--model",
                        "mock-model",
                    ])
                    .args(["--permission-mode", "dontAsk"])
                    .args(["--allowedTools", "Bash,Read,Edit,Write,Glob,Grep"]);
                (command, prompt.to_owned())
            }
        }
    }

    /// The session id the run reports (OpenCode `sessionID`, Codex `thread_id`, Claude
    /// `session_id`).
    fn session_id(self, run: &CliRun) -> String {
        let events = run.events();
        let id = events.iter().find_map(|e| {
            let field = match self {
                Cli::OpenCode => &e["sessionID"],
                Cli::Codex => &e["thread_id"],
                Cli::Claude => &e["session_id"],
            };
            field.as_str().map(str::to_owned)
        });
        id.unwrap_or_else(|| panic!("no session id\n{}", run.describe()))
    }

    /// The command that resumes `session` with a new prompt (same HOME, config and workspace).
    fn resume(
        self,
        sandbox: &Sandbox,
        server: &RunningServer,
        session: &str,
        prompt: &str,
    ) -> (Command, String) {
        let (fresh, stdin) = self.prepare(sandbox, server, prompt);
        let mut command = Command::new(fresh.get_program());
        command.env_clear().current_dir(&sandbox.workspace);
        for (name, value) in fresh.get_envs() {
            if let Some(value) = value {
                command.env(name, value);
            }
        }
        match self {
            Cli::OpenCode => {
                command
                    .args(["run", "--format", "json", "--model", "mock/mock-model"])
                    .args(["--session", session, prompt]);
            }
            Cli::Codex => {
                command
                    .args(["exec", "resume", "--json", "--skip-git-repo-check"])
                    .args(["-m", "mock-model", "--output-schema"])
                    .arg(sandbox.home.join("schema.json"))
                    .arg("-o")
                    .arg(Cli::report_file(sandbox))
                    .args([session, "-"]);
            }
            Cli::Claude => {
                command.args(fresh.get_args()).args(["--resume", session]);
            }
        }
        (command, stdin)
    }

    fn shell_tool(self) -> &'static str {
        match self {
            Cli::OpenCode => "bash",
            Cli::Codex => "exec_command",
            Cli::Claude => "Bash",
        }
    }

    /// The log summary of a happy shell-then-report run.
    fn happy_log(self) -> Vec<(Action, Option<String>, Option<usize>)> {
        let tool = |name: &str| Some(name.to_owned());
        match self {
            Cli::OpenCode => vec![
                (Action::Title, None, Some(0)),
                (Action::ToolCall, tool("bash"), Some(0)),
                (Action::Text, None, Some(1)),
            ],
            Cli::Codex => vec![
                (Action::ToolCall, tool("exec_command"), Some(0)),
                (Action::Text, None, Some(1)),
            ],
            Cli::Claude => vec![
                (Action::ToolCall, tool("Bash"), Some(0)),
                (Action::ToolCall, tool("StructuredOutput"), Some(1)),
            ],
        }
    }

    /// Asserts the run's own output carries the scripted report.
    fn assert_report(self, sandbox: &Sandbox, run: &CliRun) {
        let events = run.events();
        let find = |kind: &str| {
            events
                .iter()
                .rev()
                .find(|e| e["type"] == kind)
                .unwrap_or_else(|| panic!("no {kind} event\n{}", run.describe()))
        };
        match self {
            Cli::OpenCode => {
                let text = find("text")["part"]["text"].as_str().unwrap_or_default();
                assert_eq!(serde_json::from_str::<Value>(text).unwrap(), report());
            }
            Cli::Codex => {
                let written = std::fs::read_to_string(Cli::report_file(sandbox)).unwrap();
                assert_eq!(serde_json::from_str::<Value>(&written).unwrap(), report());
            }
            Cli::Claude => {
                let result = find("result");
                assert_eq!(result["is_error"], false, "{}", run.describe());
                assert_eq!(result["structured_output"], report());
            }
        }
    }
}

/// A server on its own runtime (the CLIs run on test threads).
fn server_on_runtime(script_text: &str) -> (tokio::runtime::Runtime, RunningServer) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = runtime.block_on(start(script_text));
    (runtime, server)
}

fn log_summary(log: &[RequestLogEntry]) -> Vec<(Action, Option<String>, Option<usize>)> {
    log.iter()
        .map(|e| (e.action, e.tool.clone(), e.step))
        .collect()
}

fn assert_out_txt(sandbox: &Sandbox, run: &CliRun) {
    let written = std::fs::read_to_string(sandbox.workspace.join("out.txt"))
        .unwrap_or_else(|error| panic!("out.txt: {error}\n{}", run.describe()));
    assert_eq!(written, "hello\n");
}

/// One happy run of `cli` on its own server: rc 0, out.txt written, the report delivered.
fn happy_run(cli: Cli) -> (CliRun, Vec<RequestLogEntry>) {
    let sandbox = sandbox();
    let (runtime, server) = server_on_runtime(SHELL_THEN_REPORT);
    let (command, stdin) = cli.prepare(&sandbox, &server, HAPPY_PROMPT);
    let run = run_cli(command, &stdin);
    let log = server.requests();
    runtime.block_on(server.shutdown());
    assert_eq!(run.code, Some(0), "{}", run.describe());
    assert_out_txt(&sandbox, &run);
    assert_eq!(log_summary(&log), cli.happy_log(), "{}", run.describe());
    cli.assert_report(&sandbox, &run);
    (run, log)
}

#[test]
fn real_opencode_happy_path() {
    let (run, log) = happy_run(Cli::OpenCode);
    assert!(
        log.iter()
            .all(|e| e.path == "/v1/chat/completions" && e.stream == Some(true))
    );
    let events = run.events();
    let tool = events
        .iter()
        .find(|e| e["type"] == "tool_use")
        .unwrap_or_else(|| panic!("a tool_use event\n{}", run.describe()));
    assert_eq!(tool["part"]["state"]["metadata"]["exit"], 0);
    let first_finish = events
        .iter()
        .find(|e| e["type"] == "step_finish")
        .unwrap_or_else(|| panic!("a step_finish event\n{}", run.describe()));
    assert_eq!(first_finish["part"]["tokens"]["input"], 400);
    assert_eq!(first_finish["part"]["tokens"]["cache"]["read"], 600);
    assert_eq!(first_finish["part"]["tokens"]["reasoning"], 12);
}

#[test]
fn real_codex_happy_path() {
    let (run, log) = happy_run(Cli::Codex);
    assert!(log.iter().all(|e| e.path == "/v1/responses"));
    let events = run.events();
    let item = |kind: &str| {
        events
            .iter()
            .find(|e| e["type"] == "item.completed" && e["item"]["type"] == kind)
            .unwrap_or_else(|| panic!("a {kind} item\n{}", run.describe()))
    };
    assert_eq!(item("command_execution")["item"]["exit_code"], 0);
    assert_eq!(
        item("reasoning")["item"]["text"],
        "I should create out.txt with the shell tool."
    );
    let completed = events
        .iter()
        .find(|e| e["type"] == "turn.completed")
        .unwrap_or_else(|| panic!("turn.completed\n{}", run.describe()));
    assert_eq!(
        completed["usage"],
        json!({"input_tokens": 2100, "cached_input_tokens": 1210, "cache_write_input_tokens": 0,
               "output_tokens": 81, "reasoning_output_tokens": 25})
    );
}

#[test]
fn real_claude_happy_path() {
    let (run, log) = happy_run(Cli::Claude);
    assert!(log.iter().all(|e| e.path == "/v1/messages?beta=true"));
    let events = run.events();
    let result = events
        .iter()
        .find(|e| e["type"] == "result")
        .unwrap_or_else(|| panic!("a result row\n{}", run.describe()));
    let thinking = events.iter().find_map(|e| {
        let content = e["message"]["content"].as_array()?;
        content
            .iter()
            .find(|block| block["type"] == "thinking")
            .and_then(|block| block["thinking"].as_str())
    });
    assert_eq!(
        thinking,
        Some("I should create out.txt with the shell tool."),
        "{}",
        run.describe()
    );
    assert_eq!(result["usage"]["input_tokens"], 2100);
    assert_eq!(result["usage"]["cache_read_input_tokens"], 1210);
    assert_eq!(result["usage"]["cache_creation_input_tokens"], 601);
    assert_eq!(result["usage"]["output_tokens"], 81);
}

/// One server, three CLIs at once, each in its own conversation (chosen by a prompt marker)
/// that starts with one 429: every CLI retries (honouring `retry-after`), then writes a file
/// through its write tool (a heredoc for Codex), runs the shell and reports.
#[test]
fn real_clis_share_one_server_retry_a_429_and_write_a_file() {
    let mut script_text = String::new();
    let clis = [Cli::OpenCode, Cli::Codex, Cli::Claude];
    for cli in clis {
        script_text.push_str(&format!(
            r#"
[[conversation]]
name = "{name}"
match = {{ prompt_contains = "[{name}]" }}
[[conversation.step]]
kind = "http_error"
status = 429
retry_after = 1
[[conversation.step]]
kind = "write_file"
path = "notes/written.txt"
content = "line one\nline 'two' $HOME\n"
[[conversation.step]]
kind = "shell"
command = "echo hello > out.txt && cat out.txt"
[[conversation.step]]
kind = "report"
report = {{ status = "done", summary = "Created out.txt containing hello.", checks = [{{ command = "cat out.txt", exit_code = 0 }}] }}
"#,
            name = cli.binary_name()
        ));
    }
    let (runtime, server) = server_on_runtime(&script_text);
    let server = std::sync::Arc::new(server);
    let runs: Vec<(Cli, Sandbox, CliRun)> = std::thread::scope(|scope| {
        let handles: Vec<_> = clis
            .into_iter()
            .map(|cli| {
                let server = server.clone();
                scope.spawn(move || {
                    let sandbox = sandbox();
                    let prompt = format!("[{}] {HAPPY_PROMPT}", cli.binary_name());
                    let (command, stdin) = cli.prepare(&sandbox, &server, &prompt);
                    let run = run_cli(command, &stdin);
                    (cli, sandbox, run)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().expect("CLI thread"))
            .collect()
    });
    let log = server.requests();
    if let Ok(server) = std::sync::Arc::try_unwrap(server) {
        runtime.block_on(server.shutdown());
    }
    for (cli, sandbox, run) in &runs {
        assert_eq!(run.code, Some(0), "{cli:?}\n{}", run.describe());
        assert_out_txt(sandbox, run);
        cli.assert_report(sandbox, run);
        let name = cli.binary_name();
        let own: Vec<RequestLogEntry> = log
            .iter()
            .filter(|e| e.conversation.as_deref() == Some(name))
            .cloned()
            .collect();
        // Codex has no write tool: the write goes through its shell as a heredoc.
        let write_tool = match cli {
            Cli::OpenCode => "write",
            Cli::Codex => "exec_command",
            Cli::Claude => "Write",
        };
        let mut expected = vec![
            (Action::HttpError, None, Some(0)),
            (Action::ToolCall, Some(write_tool.to_owned()), Some(0)),
        ];
        expected.extend(
            cli.happy_log()
                .into_iter()
                .filter(|(action, _, _)| *action != Action::Title)
                .map(|(action, tool, step)| (action, tool, step.map(|step| step + 1))),
        );
        assert_eq!(log_summary(&own), expected, "{cli:?}\n{}", run.describe());
        assert_eq!(own[0].status, Some(429));
        let written = std::fs::read_to_string(sandbox.workspace.join("notes/written.txt"))
            .unwrap_or_else(|error| panic!("{cli:?} written.txt: {error}\n{}", run.describe()));
        assert_eq!(written, "line one\nline 'two' $HOME\n");
    }
}

/// Each CLI resumes its session with a second prompt; the `followup` conversation (matched on
/// the last prompt, turns counted since it) plays from its step 0 although the history already
/// holds the first turn's calls.
#[test]
fn real_clis_resume_into_a_followup_conversation() {
    let script_text = format!(
        r#"
[[conversation]]
name = "followup"
match = {{ last_prompt_contains = "SECOND" }}
count_turns = "since_last_prompt"
[[conversation.step]]
kind = "shell"
command = "cat out.txt && ls"
[[conversation.step]]
kind = "report"
report = {{ status = "done", summary = "second", checks = [] }}
{SHELL_THEN_REPORT}"#
    );
    let (runtime, server) = server_on_runtime(&script_text);
    let clis = [Cli::OpenCode, Cli::Codex, Cli::Claude];
    let second_prompt = "SECOND: check out.txt again and report.\n";
    let runs: Vec<(Cli, CliRun, CliRun, String)> = std::thread::scope(|scope| {
        let server = &server;
        let handles: Vec<_> = clis
            .into_iter()
            .map(|cli| {
                scope.spawn(move || {
                    let sandbox = sandbox();
                    let (command, stdin) = cli.prepare(&sandbox, server, HAPPY_PROMPT);
                    let first = run_cli(command, &stdin);
                    let session = cli.session_id(&first);
                    let (command, stdin) = cli.resume(&sandbox, server, &session, second_prompt);
                    let second = run_cli(command, &stdin);
                    (cli, first, second, session)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().expect("CLI thread"))
            .collect()
    });
    let log = server.requests();
    runtime.block_on(server.shutdown());
    for (cli, first, second, session) in &runs {
        assert_eq!(first.code, Some(0), "{cli:?} first\n{}", first.describe());
        assert_eq!(
            second.code,
            Some(0),
            "{cli:?} resumed\n{}",
            second.describe()
        );
        assert_eq!(
            &cli.session_id(second),
            session,
            "{cli:?} keeps its session"
        );
        let agent = match cli {
            Cli::OpenCode => "opencode/",
            Cli::Codex => "codex_exec/",
            Cli::Claude => "claude-cli/",
        };
        let followup: Vec<(Option<String>, Option<usize>)> = log
            .iter()
            .filter(|e| {
                e.conversation.as_deref() == Some("followup")
                    && e.user_agent
                        .as_deref()
                        .is_some_and(|ua| ua.starts_with(agent))
            })
            .map(|e| (e.tool.clone(), e.step))
            .collect();
        let shell = Some(cli.shell_tool().to_owned());
        let last_tool = match cli {
            Cli::Claude => Some("StructuredOutput".to_owned()),
            Cli::OpenCode | Cli::Codex => None,
        };
        assert_eq!(
            followup,
            vec![(shell, Some(0)), (last_tool, Some(1))],
            "{cli:?}\n{}",
            second.describe()
        );
    }
}

/// Codex yields a command still running after the step's `yield_ms` and expects the model to
/// poll it: the scripted model polls with `write_stdin` until the command ends, answering no
/// script step, so the next step sees the finished command's effect.
#[test]
fn real_codex_command_still_running_is_polled_until_it_ends() {
    let sandbox = sandbox();
    let (runtime, server) = server_on_runtime(
        r#"
[[conversation]]
name = "slow"
[[conversation.step]]
kind = "shell"
command = "sleep 2 && echo hello > out.txt && cat out.txt"
yield_ms = 300
[[conversation.step]]
kind = "shell"
command = "cat out.txt"
[[conversation.step]]
kind = "report"
report = { status = "done", summary = "Created out.txt containing hello.", checks = [{ command = "cat out.txt", exit_code = 0 }] }
"#,
    );
    let (command, stdin) = Cli::Codex.prepare(&sandbox, &server, HAPPY_PROMPT);
    let run = run_cli(command, &stdin);
    let log = server.requests();
    runtime.block_on(server.shutdown());
    assert_eq!(run.code, Some(0), "{}", run.describe());
    assert_out_txt(&sandbox, &run);
    let tools: Vec<Option<String>> = log
        .iter()
        .filter(|e| e.action == Action::ToolCall)
        .map(|e| e.tool.clone())
        .collect();
    assert!(
        tools
            .first()
            .is_some_and(|t| t.as_deref() == Some("exec_command"))
            && tools.iter().any(|t| t.as_deref() == Some("write_stdin")),
        "{tools:?}\n{}",
        run.describe()
    );
    // The second step ran after the first command ended: it read what the first one wrote.
    let events = run.events();
    let reads: Vec<&Value> = events
        .iter()
        .filter(|e| {
            e["type"] == "item.completed"
                && e["item"]["type"] == "command_execution"
                && e["item"]["command"]
                    .as_str()
                    .is_some_and(|c| c.ends_with("'cat out.txt'"))
        })
        .collect();
    assert_eq!(reads.len(), 1, "{}", run.describe());
    assert_eq!(reads[0]["item"]["exit_code"], 0, "{}", run.describe());
}
