//! The readiness preflight of direct endpoints (`src/direct/preflight.rs`): a ready endpoint
//! passes, and each failure — server down, model absent, no tool calls, a small context, a
//! truncated long prompt — is caught with what to change. The scripted model and a fake loopback
//! server (`direct_e2e::FakeEndpoint`) play the servers.

use std::net::TcpListener;
use std::path::Path;

use serde_json::{Value, json};

use super::direct_e2e::{FakeEndpoint, http_json};
use autocode::direct::connections::{Endpoint, EndpointKind, EndpointModel};
use autocode::direct::protocol::Protocol;
use autocode::scripted_model::{Script, ScriptSyntax, ScriptedServer, ServerConfig};

const MARKER: &str = "ac-canary-test";

fn preflight_endpoint(kind: EndpointKind, url: &str) -> Endpoint {
    Endpoint {
        name: "probe".into(),
        kind,
        base_url: url.into(),
        protocol: Protocol::ChatCompletions,
        token_field: kind.default_token_field(),
        stream: true,
        max_output_tokens: None,
        models: vec![EndpointModel {
            id: "mock-model".into(),
            family: "mock".into(),
        }],
    }
}

fn run_preflight(endpoint: &Endpoint, model: &str) -> Vec<autocode::direct::preflight::Check> {
    let client =
        autocode::direct::http::Client::new(&endpoint.base_url, autocode::direct::http::Auth::None)
            .unwrap();
    autocode::direct::preflight::preflight(
        &client,
        &autocode::direct::preflight::PreflightInput {
            endpoint,
            model,
            needed_context: 16_384,
            canary_tokens: 2_000,
            marker: MARKER,
        },
    )
}

fn failed(checks: &[autocode::direct::preflight::Check]) -> Vec<(&'static str, String)> {
    checks
        .iter()
        .filter(|c| !c.ok)
        .map(|c| (c.name, c.fix.clone().unwrap_or_default()))
        .collect()
}

async fn canary_server(step: Value) -> autocode::scripted_model::RunningServer {
    let script = json!({"models": ["mock-model"], "conversation": [
        {"name": "canary", "match": {"prompt_contains": "preflight canary"}, "step": [step]}]});
    let script = Script::parse(
        &script.to_string(),
        ScriptSyntax::Json,
        Path::new("canary.json"),
    )
    .unwrap();
    ScriptedServer::start(ServerConfig::new(script))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflight_passes_a_ready_endpoint_and_names_an_absent_model() {
    let server = canary_server(json!({"kind": "shell", "command": format!("echo {MARKER}")})).await;
    let endpoint = preflight_endpoint(EndpointKind::OpenaiCompatible, &server.openai_base_url());
    let (ready, absent) = tokio::task::spawn_blocking(move || {
        (
            run_preflight(&endpoint, "mock-model"),
            run_preflight(&endpoint, "qwen-missing"),
        )
    })
    .await
    .unwrap();
    let names: Vec<_> = ready.iter().map(|c| (c.name, c.ok)).collect();
    assert_eq!(
        names,
        [
            ("server", true),
            ("model", true),
            ("tool_call", true),
            ("long_prompt", true)
        ],
        "{ready:?}"
    );
    let absent = failed(&absent);
    assert_eq!(absent.len(), 1, "{absent:?}");
    assert_eq!(absent[0].0, "model");
    assert!(absent[0].1.contains("qwen-missing"), "{absent:?}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflight_catches_a_model_that_does_not_call_tools() {
    let server = canary_server(json!({"kind": "text", "text": "Sure! echo ac-canary-test"})).await;
    let endpoint = preflight_endpoint(EndpointKind::Ollama, &server.openai_base_url());
    let checks = tokio::task::spawn_blocking(move || run_preflight(&endpoint, "mock-model"))
        .await
        .unwrap();
    let failures = failed(&checks);
    assert_eq!(failures.len(), 1, "{checks:?}");
    assert_eq!(failures[0].0, "tool_call");
    assert!(failures[0].1.contains("tool-capable"), "{failures:?}");
    server.shutdown().await;
}

#[test]
fn preflight_catches_a_server_that_is_down() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let endpoint = preflight_endpoint(
        EndpointKind::LlamaCpp,
        &format!("http://127.0.0.1:{port}/v1"),
    );
    let checks = run_preflight(&endpoint, "mock-model");
    assert_eq!(checks.len(), 1, "{checks:?}");
    assert_eq!(checks[0].name, "server");
    assert!(!checks[0].ok);
    assert!(
        checks[0]
            .fix
            .as_deref()
            .unwrap_or_default()
            .contains("start the llama.cpp server")
    );
}

#[test]
fn a_long_prompt_read_whole_but_answered_wrong_names_the_model_not_the_context() {
    // A llama.cpp-like server with a 32k context that reads the whole long canary (its usage says
    // so) while the model echoes the instruction instead of the marker: a weak model, measured
    // with the 1.5B reference model; raising the context would not help.
    let endpoint = FakeEndpoint::routed(|path, body| {
        let call = |command: &str, prompt_tokens: u64| {
            http_json(
                "200 OK",
                &json!({"choices": [{"index": 0, "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "shell", "arguments": json!({"command": command}).to_string()}}]}}],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 9}}),
            )
        };
        match path {
            "/v1/models" => http_json("200 OK", &json!({"data": [{"id": "mock-model"}]})),
            "/props" => http_json(
                "200 OK",
                &json!({"default_generation_settings": {"n_ctx": 32768}}),
            ),
            "/v1/chat/completions" if body.contains("filler text") => call("echo marker", 5_235),
            "/v1/chat/completions" => call(&format!("echo {MARKER}"), 120),
            _ => http_json("404 Not Found", &json!({"error": "no"})),
        }
    });
    let checks = run_preflight(
        &preflight_endpoint(EndpointKind::LlamaCpp, &endpoint.url),
        "mock-model",
    );
    let failures = failed(&checks);
    let names: Vec<&str> = failures.iter().map(|f| f.0).collect();
    assert_eq!(names, ["long_prompt"], "{checks:?}");
    let long = checks.iter().find(|c| c.name == "long_prompt").unwrap();
    assert!(
        long.detail
            .contains("read all of it (5235 tokens, context 32768)"),
        "{long:?}"
    );
    let fix = long.fix.as_deref().unwrap_or_default();
    assert!(
        fix.contains("stronger model") && !fix.contains("-c"),
        "{fix}"
    );
}

#[test]
fn preflight_catches_a_small_context_and_a_truncated_prompt() {
    // A llama.cpp-like server with a 4096-token context that drops the start of long prompts.
    let endpoint = FakeEndpoint::routed(|path, body| {
        let call = |command: &str| {
            http_json(
                "200 OK",
                &json!({"choices": [{"index": 0, "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "shell", "arguments": json!({"command": command}).to_string()}}]}}]}),
            )
        };
        match path {
            "/v1/models" => http_json("200 OK", &json!({"data": [{"id": "mock-model"}]})),
            "/props" => http_json(
                "200 OK",
                &json!({"default_generation_settings": {"n_ctx": 4096}}),
            ),
            "/v1/chat/completions" if body.contains("filler text") => call("echo MARKER"),
            "/v1/chat/completions" => call(&format!("echo {MARKER}")),
            _ => http_json("404 Not Found", &json!({"error": "no"})),
        }
    });
    let checks = run_preflight(
        &preflight_endpoint(EndpointKind::LlamaCpp, &endpoint.url),
        "mock-model",
    );
    let failures = failed(&checks);
    let names: Vec<&str> = failures.iter().map(|f| f.0).collect();
    assert_eq!(names, ["context", "long_prompt"], "{checks:?}");
    assert!(failures.iter().all(|f| f.1.contains("-c")), "{failures:?}");
    assert!(
        checks.iter().any(|c| c.name == "tool_call" && c.ok),
        "{checks:?}"
    );
}
