//! The runtime's steering against the scripted model server: what each request of a stage
//! carries (tool choice, offered tools, answer format, response cap) and how the stage ends.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::direct::http::Auth;
use crate::scripted_model::{
    RequestLogEntry, RunningServer, Script, ScriptSyntax, ScriptedServer, ServerConfig,
};

fn review() -> Value {
    json!({"verdict": "approve", "summary": "The check decides the criterion.",
           "concerns": [], "uncovered": []})
}

async fn server(steps: Value) -> RunningServer {
    let script = json!({"models": ["m"], "conversation": [{"name": "stage", "step": steps}]});
    let script = Script::parse(&script.to_string(), ScriptSyntax::Json, Path::new("s.json"))
        .expect("the script parses");
    ScriptedServer::start(ServerConfig::new(script))
        .await
        .expect("the server starts")
}

fn input(
    server: &RunningServer,
    protocol: Protocol,
    dir: &Path,
    max_responses: u32,
    steering: Steering,
) -> StageInput {
    let base = match protocol {
        Protocol::AnthropicMessages => format!("{}/v1", server.base_url()),
        _ => server.openai_base_url(),
    };
    StageInput {
        client: Client::new(&base, Auth::Bearer(crate::direct::http::Secret::new("k")))
            .expect("a loopback URL"),
        protocol,
        token_field: TokenField::MaxTokens,
        stream: false,
        model: "m".into(),
        system: "sys".into(),
        prompt: "review the plan".into(),
        kind: ReportKind::PlanReview,
        quotable: Quotable::default(),
        writable: false,
        root: dir.to_owned(),
        shell: ShellContext {
            cwd: dir.to_owned(),
            env: Default::default(),
            room: None,
            timeout: Duration::from_secs(5),
        },
        bounds: Bounds {
            max_responses,
            ..Bounds::default()
        },
        steering,
        tokens_left: None,
        events_log: dir.join("events.jsonl"),
        label: "stage test".into(),
    }
}

fn model_requests(server: &RunningServer) -> Vec<RequestLogEntry> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.api.is_some())
        .collect()
}

fn read(path: &str) -> Value {
    json!({"kind": "tool", "name": "read_file", "arguments": {"path": path}})
}

const REQUIRED: Steering = Steering {
    require_tool: true,
    answer_schema: false,
    context: None,
};

#[tokio::test]
async fn every_request_requires_a_tool_and_the_last_offers_only_the_report() {
    for (protocol, choice) in [
        (Protocol::ChatCompletions, json!("required")),
        (Protocol::Responses, json!("required")),
        (Protocol::AnthropicMessages, json!({"type": "any"})),
    ] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("plan.md"), "the plan").unwrap();
        let server = server(json!([read("plan.md"), read("plan.md"),
            {"kind": "report", "report": review()}]))
        .await;
        let run = run_stage(input(&server, protocol, dir.path(), 3, REQUIRED)).await;
        assert_eq!(run.end, StageEnd::Reported(review()), "{protocol:?}");
        let requests = model_requests(&server);
        assert_eq!(requests.len(), 3, "{protocol:?}");
        for request in &requests {
            assert_eq!(request.tool_choice.as_ref(), Some(&choice), "{protocol:?}");
            assert_eq!(request.answer_format, None, "{protocol:?}");
        }
        assert!(requests[0].tools.len() > 1, "{:?}", requests[0].tools);
        assert!(requests[1].tools.len() > 1, "{:?}", requests[1].tools);
        assert_eq!(requests[2].tools, vec!["report".to_owned()], "{protocol:?}");
        server.shutdown().await;
    }
}

#[tokio::test]
async fn without_steering_nothing_is_forced_until_the_last_response() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("plan.md"), "the plan").unwrap();
    let server = server(json!([read("plan.md"), {"kind": "report", "report": review()}])).await;
    let steering = Steering::default();
    let run = run_stage(input(
        &server,
        Protocol::ChatCompletions,
        dir.path(),
        2,
        steering,
    ))
    .await;
    assert_eq!(run.end, StageEnd::Reported(review()));
    let requests = model_requests(&server);
    assert_eq!(requests[0].tool_choice, None);
    assert_eq!(requests[1].tools, vec!["report".to_owned()]);
    server.shutdown().await;
}

#[tokio::test]
async fn a_server_that_constrains_answers_is_asked_for_the_report_in_its_schema() {
    for protocol in [Protocol::ChatCompletions, Protocol::Responses] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("plan.md"), "the plan").unwrap();
        // A text answer first: the next response can only be the report.
        let server = server(json!([{"kind": "text", "text": "The plan looks fine."},
            {"kind": "report", "report": review()}]))
        .await;
        let steering = Steering {
            answer_schema: true,
            ..REQUIRED
        };
        let run = run_stage(input(&server, protocol, dir.path(), 8, steering)).await;
        assert_eq!(run.end, StageEnd::Reported(review()), "{protocol:?}");
        let requests = model_requests(&server);
        assert_eq!(requests.len(), 2, "{protocol:?}");
        assert_eq!(requests[0].answer_format, None);
        assert!(requests[1].tools.is_empty(), "{:?}", requests[1].tools);
        assert_eq!(requests[1].tool_choice, None, "no tools, no tool choice");
        let format = requests[1].answer_format.clone().expect("an answer format");
        assert_eq!(format["type"], "json_schema", "{format}");
        let schema = format
            .pointer("/json_schema/schema")
            .or_else(|| format.get("schema"))
            .cloned();
        // The review's schema, offered with no uncited sentence listed.
        assert_eq!(
            schema,
            Some(offered_schema(ReportKind::PlanReview, &Quotable::default())),
            "{protocol:?}"
        );
        server.shutdown().await;
    }
}

#[tokio::test]
async fn an_answer_that_breaks_the_schema_is_not_a_report() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(json!([{"kind": "text", "text": "done"},
        {"kind": "text", "text": "{\"verdict\": \"maybe\"}"},
        {"kind": "text", "text": "still not a report"}]))
    .await;
    let steering = Steering {
        answer_schema: true,
        ..REQUIRED
    };
    let run = run_stage(input(
        &server,
        Protocol::ChatCompletions,
        dir.path(),
        8,
        steering,
    ))
    .await;
    assert!(
        matches!(&run.end, StageEnd::NoReport(why) if why.contains("not accepted")),
        "{:?}",
        run.end
    );
    server.shutdown().await;
}

#[tokio::test]
async fn the_response_cap_is_cut_to_what_the_servers_context_still_holds() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(json!([{"kind": "report", "report": review()}])).await;
    let context = 4_000;
    let steering = Steering {
        context: Some(context),
        ..REQUIRED
    };
    let run = run_stage(input(
        &server,
        Protocol::ChatCompletions,
        dir.path(),
        4,
        steering,
    ))
    .await;
    assert_eq!(run.end, StageEnd::Reported(review()));
    let cap = model_requests(&server)[0].max_tokens.expect("a cap");
    assert!(cap < u64::from(DEFAULT_MAX_OUTPUT_TOKENS), "{cap}");
    assert!(cap >= MIN_RESPONSE_TOKENS && cap < context, "{cap}");
    server.shutdown().await;

    // A context the request alone fills: no request at all, a typed failure.
    let server = self::server(json!([{"kind": "report", "report": review()}])).await;
    let steering = Steering {
        context: Some(1_000),
        ..REQUIRED
    };
    let run = run_stage(input(
        &server,
        Protocol::ChatCompletions,
        dir.path(),
        4,
        steering,
    ))
    .await;
    assert!(
        matches!(
            run.end,
            StageEnd::Failed(DirectFailure::ContextFull { context: 1_000, .. })
        ),
        "{:?}",
        run.end
    );
    assert!(model_requests(&server).is_empty());
    server.shutdown().await;
}

#[test]
fn the_model_is_told_how_many_responses_remain() {
    assert!(budget_line(32).contains("at most 32 model responses"));
    assert!(remaining_note(5).contains("5 model responses remain"));
    assert!(remaining_note(1).contains("must be the `report` call"));
}

/// The text events of a stage, in order.
fn texts(events: &[NormalizedEvent]) -> Vec<&String> {
    events
        .iter()
        .filter_map(|e| match e {
            NormalizedEvent::Text { text, .. } => Some(text),
            _ => None,
        })
        .collect()
}

fn prose(chars: usize) -> String {
    "We will set aside the command. The objective will remain as is for now. "
        .repeat(chars / 70 + 1)
}

/// A streamed text answer that runs on is cut after [`PROSE_CUT_CHARS`] and the next response
/// can only be the report, on each protocol; what the model said is kept, cut, in the events.
#[tokio::test]
async fn a_text_answer_that_runs_on_is_cut_and_the_next_response_is_the_report() {
    for protocol in [
        Protocol::ChatCompletions,
        Protocol::Responses,
        Protocol::AnthropicMessages,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let server = server(json!([{"kind": "text", "text": prose(20_000)},
            {"kind": "report", "report": review()}]))
        .await;
        let mut input = input(&server, protocol, dir.path(), 8, REQUIRED);
        input.stream = true;
        let run = run_stage(input).await;
        assert_eq!(run.end, StageEnd::Reported(review()), "{protocol:?}");
        let requests = model_requests(&server);
        assert_eq!(requests.len(), 2, "{protocol:?}");
        assert_eq!(requests[1].tools, vec!["report".to_owned()], "{protocol:?}");
        let said = texts(&run.events);
        assert_eq!(said.len(), 1, "{protocol:?}: {said:?}");
        assert_eq!(said[0].chars().count(), PROSE_CUT_CHARS, "{protocol:?}");
        assert!(
            run.events.iter().any(|e| matches!(e,
                NormalizedEvent::Notice { message } if message.contains("stopped reading"))),
            "{protocol:?}"
        );
        server.shutdown().await;
    }
}

/// A long answer that starts like JSON (a tool call a server streams as text before it parses
/// it, a shell-command answer) and a short preamble are never cut.
#[tokio::test]
async fn a_long_json_answer_and_a_short_preamble_are_not_cut() {
    let dir = tempfile::tempdir().unwrap();
    let long_command = format!(r#"{{"cmd": "echo {}"}}"#, "a".repeat(3 * PROSE_CUT_CHARS));
    let server = server(json!([{"kind": "text", "text": long_command},
        {"kind": "text", "text": "Let me look at the plan first."},
        {"kind": "report", "report": review()}]))
    .await;
    let mut input = input(
        &server,
        Protocol::ChatCompletions,
        dir.path(),
        8,
        Steering::default(),
    );
    input.stream = true;
    let run = run_stage(input).await;
    assert!(
        !run.events
            .iter()
            .any(|e| matches!(e, NormalizedEvent::Notice { .. })),
        "{:?}",
        run.events
    );
    let said = texts(&run.events);
    assert_eq!(said.first().map(|t| t.len()), Some(long_command.len()));
    server.shutdown().await;
}

/// A model that writes prose forever (a stream that never ends): the stage does not wait for
/// the response cap or its time limit; it stops reading, closes the connection (which ends the
/// server's generation) and asks for the report.
#[tokio::test]
async fn an_endless_text_answer_is_cut_and_its_connection_closed() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let server = std::thread::spawn(move || {
        // First request: prose until the client hangs up.
        let (mut socket, _) = listener.accept().unwrap();
        let mut request = [0u8; 65536];
        let _ = socket.read(&mut request);
        socket
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n")
            .unwrap();
        let event = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"The objective will remain as is for now. \"}}]}\n\n";
        let mut sent = 0usize;
        while socket
            .write_all(&[format!("{:x}\r\n", event.len()).as_bytes(), event, b"\r\n"].concat())
            .and_then(|()| socket.flush())
            .is_ok()
        {
            sent += 1;
        }
        // Second request: the report, as plain JSON.
        let (mut socket, _) = listener.accept().unwrap();
        let mut request = Vec::new();
        let mut buf = [0u8; 65536];
        let complete = |request: &[u8]| {
            let text = String::from_utf8_lossy(request);
            text.split_once("\r\n\r\n").is_some_and(|(head, body)| {
                head.lines()
                    .find_map(|l| {
                        let l = l.to_ascii_lowercase();
                        l.strip_prefix("content-length:")
                            .map(|v| v.trim().parse::<usize>().unwrap())
                    })
                    .is_some_and(|length| body.len() >= length)
            })
        };
        while !complete(&request) {
            let n = socket.read(&mut buf).unwrap();
            assert!(n > 0, "the second request ended early");
            request.extend_from_slice(&buf[..n]);
        }
        let body = json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "report", "arguments": review().to_string()}}]}}]})
        .to_string();
        let _ = socket.write_all(
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        );
        (sent, String::from_utf8_lossy(&request).into_owned())
    });
    let dir = tempfile::tempdir().unwrap();
    let scripted = self::server(json!([{"kind": "report", "report": review()}])).await;
    let mut input = input(
        &scripted,
        Protocol::ChatCompletions,
        dir.path(),
        8,
        REQUIRED,
    );
    input.client = Client::new(&base, Auth::None).unwrap();
    input.stream = true;
    // Without the cut this stage would read until the response cap, which never comes.
    let run = tokio::time::timeout(Duration::from_secs(120), run_stage(input))
        .await
        .expect("the endless answer was cut");
    assert_eq!(run.end, StageEnd::Reported(review()));
    assert_eq!(run.responses, 2);
    let (sent, second) = server
        .join()
        .expect("the endless answer ended when the client hung up");
    assert!(sent * 41 > PROSE_CUT_CHARS, "{sent}");
    // Only the cut answer's opening is replayed to the model (it would copy the rest into the
    // report), then the reminder.
    let second: serde_json::Value =
        serde_json::from_str(second.split_once("\r\n\r\n").unwrap().1).unwrap();
    let messages = second["messages"].as_array().unwrap();
    let n = messages.len();
    assert_eq!(
        messages[n - 2],
        json!({"role": "assistant", "content": "The objective will remain as is for now. […]"})
    );
    assert!(
        messages[n - 1]["content"]
            .as_str()
            .unwrap()
            .starts_with(CUT_REMINDER)
    );
    scripted.shutdown().await;
}

/// A model going round in circles (the same command, the same result, a third time) is asked
/// for the report next instead of spending every response of the stage.
#[tokio::test]
async fn a_model_that_repeats_itself_is_asked_for_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(json!([{"kind": "shell", "command": "true", "repeat": 3},
        {"kind": "report", "report": review()}]))
    .await;
    let run = run_stage(input(
        &server,
        Protocol::ChatCompletions,
        dir.path(),
        32,
        REQUIRED,
    ))
    .await;
    assert_eq!(run.end, StageEnd::Reported(review()));
    let requests = model_requests(&server);
    assert_eq!(requests.len(), 4);
    assert!(requests[2].tools.len() > 1, "{:?}", requests[2].tools);
    assert_eq!(requests[3].tools, vec!["report".to_owned()]);
    assert!(run.events.iter().any(|e| matches!(e,
        NormalizedEvent::Notice { message } if message.contains("repeated the same calls"))));
    server.shutdown().await;
}

/// A review's verdict comes after its reasons in the offered schema (a server constraining the
/// answer generates keys in that order); the schema still admits exactly the role's reports.
#[test]
fn a_reviews_verdict_is_offered_after_its_reasons() {
    for (kind, key) in [
        (ReportKind::PlanReview, "verdict"),
        (ReportKind::Completion, "decision"),
    ] {
        let offered = offered_schema(kind, &Quotable::default());
        let keys: Vec<&String> = offered["properties"].as_object().unwrap().keys().collect();
        assert_eq!(keys.last().map(|k| k.as_str()), Some(key), "{keys:?}");
        assert_eq!(
            offered["required"].as_array().unwrap().last(),
            Some(&json!(key))
        );
        let mut own = kind.cli_schema();
        let mut sorted = offered.clone();
        for schema in [&mut own, &mut sorted] {
            schema["required"]
                .as_array_mut()
                .unwrap()
                .sort_by_key(|k| k.to_string());
            schema["properties"].as_object_mut().unwrap().sort_keys();
        }
        // Besides the order, only the uncited sentences' limit differs (none listed: none).
        sorted["properties"]["uncovered"] = own["properties"]["uncovered"].clone();
        assert_eq!(sorted, own, "{kind:?}");
    }
    let plan = offered_schema(ReportKind::Plan, &Quotable::default());
    assert_eq!(plan, ReportKind::Plan.cli_schema());
}

/// A stage whose model ends on a shell command written as its report (`{"cmd": …}`) ends as the
/// CLIs' shell-command final message does (the driver repairs it, then pauses
/// `PAUSED_REPEATED_FAILURE`), not as a plain missing report; prose twice stays a missing report.
#[tokio::test]
async fn a_stage_that_ends_on_a_shell_command_answer_says_which_command() {
    let end = end_of(json!([{"kind": "text", "text": "{\"cmd\": \"ls -la\"}"},
        {"kind": "text", "text": "{\"cmd\": \"cat hello.txt\"}"}]))
    .await;
    match &end {
        StageEnd::ShellCommand { problem, command } => {
            assert!(problem.contains("cat hello.txt"), "{problem}");
            assert_eq!(
                serde_json::from_str::<Value>(command).unwrap(),
                json!({"cmd": "cat hello.txt"})
            );
        }
        other => panic!("{other:?}"),
    }
    let end = end_of(json!([{"kind": "text", "text": "I will look at it."},
        {"kind": "text", "text": "Done."}]))
    .await;
    assert!(matches!(&end, StageEnd::NoReport(_)), "{end:?}");
}

/// How a stage ends whose model answers with `steps`.
async fn end_of(steps: Value) -> StageEnd {
    let dir = tempfile::tempdir().unwrap();
    let server = server(steps).await;
    let run = run_stage(input(
        &server,
        Protocol::ChatCompletions,
        dir.path(),
        8,
        Steering::default(),
    ))
    .await;
    server.shutdown().await;
    run.end
}
