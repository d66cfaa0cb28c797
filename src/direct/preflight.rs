//! Readiness of an endpoint's model before a run relies on it (local servers above all): the
//! server answers, the model is there, its context is large enough, a tool call round-trips, and a
//! long prompt is not silently truncated. Each failed check names what to change.
//!
//! [`metadata`] makes no model request (server, model, context, capabilities); [`canaries`] makes
//! two real ones (a tool call, a long prompt). A run's preflight runs both for local endpoints and
//! caches a passed canary (`super::readiness`); `autocode connections check --provider autocode
//! --live` runs both for every endpoint. Blocking; call it off the async runtime's workers.

use serde::Serialize;
use serde_json::{Value, json};

use super::connections::{Endpoint, EndpointKind};
use super::http::{Client, HttpFailure};
use super::protocol::{Exchange, Protocol, RequestParams, ToolSpec};

/// The context a stage needs, in tokens: the largest stage prompts with their schemas are about
/// 6k tokens, plus the response cap (8,192) and room for tool turns.
pub const STAGE_CONTEXT: u64 = 32_768;
/// The long-prompt canary's size, in tokens (near a stage prompt's).
pub const CANARY_TOKENS: usize = 6_000;

/// One check's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    pub detail: String,
    /// What to change when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// What the checks need.
#[derive(Debug, Clone)]
pub struct PreflightInput<'a> {
    pub endpoint: &'a Endpoint,
    pub model: &'a str,
    /// The context a stage needs, in tokens (prompt + response cap).
    pub needed_context: u64,
    /// The size of the long-prompt canary, in tokens (about 4 characters each).
    pub canary_tokens: usize,
    /// The marker the canaries must bring back (random in use, fixed in tests).
    pub marker: &'a str,
}

fn check(name: &'static str, ok: bool, detail: String, fix: Option<String>) -> Check {
    Check {
        name,
        ok,
        detail,
        fix: if ok { None } else { fix },
    }
}

/// The server's root (the base URL without its `/v1`).
fn root(base_url: &str) -> &str {
    base_url.trim_end_matches('/').trim_end_matches("/v1")
}

/// What the server reported about a model: the input of the readiness cache's fingerprint
/// (`direct::readiness`), so a reloaded model, a changed context or template re-runs the canaries.
/// Volatile fields (`created`, vLLM's `permission` ids) are left out.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ServerFacts {
    /// The model's entry in `GET /models`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listed: Option<Value>,
    /// llama.cpp's `/props`: model path, context, chat template, build.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub props: Option<Value>,
    /// Ollama's `/api/show`: capabilities, parameters, template, details, context length.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub show: Option<Value>,
}

impl ServerFacts {
    /// A SHA-256 of the facts (hex).
    pub fn fingerprint(&self) -> String {
        use sha2::{Digest, Sha256};
        let bytes = serde_json::to_vec(self).unwrap_or_default();
        Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// The cheap checks (no model request): server, model, context, capabilities.
#[derive(Debug, Clone, Default)]
pub struct Metadata {
    pub checks: Vec<Check>,
    pub facts: ServerFacts,
}

impl Metadata {
    pub fn ok(&self) -> bool {
        self.checks.iter().all(|c| c.ok)
    }

    /// The server answered and lists the model (the canaries can run).
    pub fn reachable(&self) -> bool {
        self.checks
            .iter()
            .all(|c| c.ok || !matches!(c.name, "server" | "model"))
    }
}

/// Runs every check in order: the metadata, then the canaries unless the server is down or the
/// model absent.
pub fn preflight(client: &Client, input: &PreflightInput<'_>) -> Vec<Check> {
    let metadata = metadata(client, input);
    let reachable = metadata.reachable();
    let mut checks = metadata.checks;
    if reachable {
        checks.extend(canaries(client, input));
    }
    checks
}

/// The server answers, lists the model, and declares enough context and tool support (GET
/// requests and Ollama's `/api/show`; no model request).
pub fn metadata(client: &Client, input: &PreflightInput<'_>) -> Metadata {
    let endpoint = input.endpoint;
    let mut out = Metadata::default();
    let checks = &mut out.checks;
    // 1. The server answers, and 2. the model is there.
    if endpoint.protocol != Protocol::AnthropicMessages {
        match client.get(&format!("{}/models", client.base_url())) {
            Err(e) => {
                checks.push(check(
                    "server",
                    false,
                    format!("{}: {e}", client.base_url()),
                    Some(format!(
                        "start the {} server at {} (or fix the endpoint's --base-url)",
                        endpoint.kind.as_str(),
                        client.base_url()
                    )),
                ));
                return out;
            }
            Ok(body) => {
                checks.push(check(
                    "server",
                    true,
                    format!("{} answers", client.base_url()),
                    None,
                ));
                let listed: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let ids: Vec<&str> = listed["data"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|m| m["id"].as_str())
                    .collect();
                let present = ids.contains(&input.model);
                checks.push(check(
                    "model",
                    present,
                    if present {
                        format!("{} is listed", input.model)
                    } else {
                        format!("{} is not listed (listed: {})", input.model, ids.join(", "))
                    },
                    Some(match endpoint.kind {
                        EndpointKind::Ollama => format!("pull it: ollama pull {}", input.model),
                        _ => format!(
                            "load {} in the server, or set the endpoint's --model to a listed id",
                            input.model
                        ),
                    }),
                ));
                if !present {
                    return out;
                }
                let entry = listed["data"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|m| m["id"] == input.model)
                    .cloned();
                // vLLM lists the context length with the model.
                if let Some(len) = entry.as_ref().and_then(|m| m["max_model_len"].as_u64()) {
                    checks.push(context_check(len, input.needed_context, endpoint.kind));
                }
                out.facts.listed = entry.map(|mut m| {
                    if let Some(fields) = m.as_object_mut() {
                        fields.remove("created");
                        fields.remove("permission");
                    }
                    m
                });
            }
        }
    }
    // 3. Declared capabilities and context length.
    match endpoint.kind {
        EndpointKind::LlamaCpp => {
            if let Ok(body) = client.get(&format!("{}/props", root(client.base_url()))) {
                let props: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let n_ctx = props
                    .pointer("/default_generation_settings/n_ctx")
                    .or_else(|| props.get("n_ctx"))
                    .and_then(Value::as_u64);
                if let Some(n_ctx) = n_ctx {
                    checks.push(context_check(n_ctx, input.needed_context, endpoint.kind));
                }
                out.facts.props = Some(json!({
                    "model_path": props["model_path"],
                    "n_ctx": n_ctx,
                    "chat_template": props["chat_template"],
                    "build_info": props["build_info"],
                }));
            }
        }
        EndpointKind::Ollama => {
            if let Ok(reply) = client.post_json_to(
                &format!("{}/api/show", root(client.base_url())),
                &json!({"model": input.model}),
            ) {
                let show: Value = serde_json::from_slice(&reply.body).unwrap_or(Value::Null);
                if let Some(caps) = show["capabilities"].as_array() {
                    let tools = caps.iter().any(|c| c == "tools");
                    checks.push(check(
                        "capabilities",
                        tools,
                        format!("declared capabilities: {}", show["capabilities"]),
                        Some("pick a model whose capabilities include tools".into()),
                    ));
                }
                let max_len = show["model_info"].as_object().and_then(|info| {
                    info.iter()
                        .find(|(k, _)| k.ends_with(".context_length"))
                        .and_then(|(_, v)| v.as_u64())
                });
                if let Some(len) = max_len {
                    // Ollama serves num_ctx (default 2048-4096), not the model's maximum.
                    let num_ctx = show["parameters"]
                        .as_str()
                        .and_then(|p| {
                            p.lines().find_map(|l| {
                                l.trim()
                                    .strip_prefix("num_ctx")
                                    .and_then(|v| v.trim().parse::<u64>().ok())
                            })
                        })
                        .unwrap_or(len);
                    checks.push(context_check(
                        num_ctx.min(len),
                        input.needed_context,
                        endpoint.kind,
                    ));
                }
                out.facts.show = Some(json!({
                    "capabilities": show["capabilities"],
                    "parameters": show["parameters"],
                    "template": show["template"],
                    "details": show["details"],
                    "modified_at": show["modified_at"],
                    "context_length": max_len,
                }));
            }
        }
        _ => {}
    }
    out
}

/// The two canaries (real model requests): a tool call round-trips, and a long prompt keeps its
/// start. The second runs only when the first passed.
pub fn canaries(client: &Client, input: &PreflightInput<'_>) -> Vec<Check> {
    let endpoint = input.endpoint;
    let mut checks = Vec::new();
    // 4. A tool call round-trips.
    let short = format!(
        "This is autocode's preflight canary. Call the `shell` tool exactly once with the command `echo {}`. Do not answer in text.",
        input.marker
    );
    let outcome = canary(client, endpoint, input.model, &short, input.marker);
    let tools_ok = outcome.is_ok();
    checks.push(check(
        "tool_call",
        tools_ok,
        match &outcome {
            Ok(()) => "the model called the tool with the marker".into(),
            Err(e) => e.to_string(),
        },
        Some(match &outcome {
            Err(e) if e.unanswered() => UNANSWERED_FIX.into(),
            _ => "pick a tool-capable model (for llama.cpp start llama-server with --jinja and a tool-call template)"
                .into(),
        }),
    ));
    if !tools_ok {
        return checks;
    }
    // 5. A long prompt keeps its start.
    let mut long = format!(
        "This is autocode's preflight canary. The marker is {}. Remember it.\n\n",
        input.marker
    );
    let filler = "This line is filler text that stands in for a long stage prompt.\n";
    while long.len() < input.canary_tokens.saturating_mul(4) {
        long.push_str(filler);
    }
    long.push_str(
        "\nCall the `shell` tool exactly once with the command `echo MARKER`, where MARKER is the marker given at the start of this message. Do not answer in text.",
    );
    let outcome = canary(client, endpoint, input.model, &long, input.marker);
    checks.push(check(
        "long_prompt",
        outcome.is_ok(),
        match &outcome {
            Ok(()) => format!("a {}-token prompt kept its start", input.canary_tokens),
            Err(e) => format!("a {}-token prompt lost its start: {e}", input.canary_tokens),
        },
        Some(match endpoint.kind {
            _ if outcome.as_ref().is_err_and(CanaryFailure::unanswered) => UNANSWERED_FIX.into(),
            EndpointKind::Ollama => "raise the context: set num_ctx (e.g. OLLAMA_CONTEXT_LENGTH or a Modelfile PARAMETER num_ctx)".into(),
            EndpointKind::LlamaCpp => "raise the context: start llama-server with a larger -c".into(),
            _ => "raise the server's context length (max_model_len / context size)".into(),
        }),
    ));
    checks
}

fn context_check(have: u64, need: u64, kind: EndpointKind) -> Check {
    check(
        "context",
        have >= need,
        format!("context {have} tokens; a stage needs about {need}"),
        Some(match kind {
            EndpointKind::Ollama => format!("raise num_ctx to at least {need}"),
            EndpointKind::LlamaCpp => format!("start llama-server with -c {need} or more"),
            _ => format!("raise the server's context length to at least {need}"),
        }),
    )
}

/// The fix when the server did not answer a canary at all.
const UNANSWERED_FIX: &str = "the server did not answer the canary in time or dropped it: check that it runs and is not busy (its log says why); on a slow machine use a smaller model";

/// Why a canary failed: no answer, or an answer that is not the marker's tool call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum CanaryFailure {
    #[error(transparent)]
    Http(HttpFailure),
    #[error("{0}")]
    Answer(String),
}

impl CanaryFailure {
    /// The server gave no answer (timeout, dropped connection, unreadable body).
    fn unanswered(&self) -> bool {
        matches!(
            self,
            CanaryFailure::Http(
                HttpFailure::Timeout(_) | HttpFailure::Transport(_) | HttpFailure::Body(_)
            )
        )
    }
}

/// One canary request: the model must call `shell` with a command holding `marker`.
fn canary(
    client: &Client,
    endpoint: &Endpoint,
    model: &str,
    prompt: &str,
    marker: &str,
) -> Result<(), CanaryFailure> {
    let protocol = endpoint.protocol;
    let tools = [ToolSpec {
        name: "shell",
        description: "Run a shell command.",
        parameters: json!({"type": "object", "properties": {"command": {"type": "string"}},
                           "required": ["command"]}),
    }];
    let exchange = Exchange::new(protocol, prompt);
    let body = exchange.request_body(&RequestParams {
        model,
        system: "You are a preflight check. Follow the instruction exactly.",
        tools: &tools,
        max_output_tokens: 256,
        token_field: endpoint.token_field,
        stream: endpoint.stream,
    });
    let reply = client
        .post_json(protocol.path(), &body)
        .map_err(CanaryFailure::Http)?;
    let turn = if reply.event_stream {
        exchange.parse_stream(&reply.body)
    } else {
        exchange.parse_response(&reply.body)
    }
    .map_err(|e| CanaryFailure::Answer(e.to_string()))?;
    let Some(call) = turn.calls.first() else {
        return Err(CanaryFailure::Answer(format!(
            "the model answered without a tool call{}",
            turn.text
                .map(|t| format!(": {}", t.chars().take(120).collect::<String>()))
                .unwrap_or_default()
        )));
    };
    let command = call.arguments["command"].as_str().unwrap_or_default();
    if call.name == "shell" && command.contains(marker) {
        Ok(())
    } else {
        Err(CanaryFailure::Answer(format!(
            "the model called `{}` with {} instead of the marker",
            call.name, call.arguments
        )))
    }
}
