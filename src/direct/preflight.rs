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
use super::protocol::{Exchange, Protocol, RequestParams, ToolChoice, ToolSpec};

/// The context a stage needs, in tokens: the largest stage prompts with their schemas are about
/// 6k tokens, plus the response cap (8,192) and room for tool turns.
pub const STAGE_CONTEXT: u64 = 32_768;
/// The context Ollama runs a model with when the model's parameters set no `num_ctx` (its
/// default since 0.6; `OLLAMA_CONTEXT_LENGTH` on the server may differ, which no API shows).
pub const OLLAMA_DEFAULT_NUM_CTX: u64 = 4096;
/// The model formats whose answers LM Studio constrains to a JSON schema (`compatibility_type`
/// in its own API).
pub const LMSTUDIO_STRUCTURED: [&str; 2] = ["gguf", "mlx"];
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
    /// LM Studio's own `GET /api/v0/models/{model}`: state, format, quantization, the loaded and
    /// the trained context.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lmstudio: Option<Value>,
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
    /// The context the server said it serves the model with, in tokens, when it said.
    pub context: Option<u64>,
}

impl Metadata {
    pub fn ok(&self) -> bool {
        self.checks.iter().all(|c| c.ok)
    }

    /// The server said it constrains an answer to a JSON schema: llama.cpp answered `/props`
    /// (its server takes `response_format: json_schema` as a grammar), vLLM listed the model
    /// (`owned_by: "vllm"`; guided decoding), or LM Studio's own API described the model as a
    /// GGUF or MLX model (its structured output: `response_format: json_schema`, a grammar on
    /// llama.cpp models, Outlines on MLX ones). Nothing else is assumed.
    pub fn constrains_answers(&self) -> bool {
        self.facts.props.is_some()
            || self
                .facts
                .listed
                .as_ref()
                .is_some_and(|m| m["owned_by"] == "vllm")
            || self
                .facts
                .lmstudio
                .as_ref()
                .and_then(|m| m["compatibility_type"].as_str())
                .is_some_and(|format| LMSTUDIO_STRUCTURED.contains(&format))
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
    let context = metadata.context;
    let mut checks = metadata.checks;
    if reachable {
        checks.extend(canaries(client, input, context));
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
                    out.context = Some(len);
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
                    out.context = Some(n_ctx);
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
                    // Ollama serves num_ctx, not the model's maximum: without one in the
                    // model's parameters, its own default.
                    let num_ctx = show["parameters"]
                        .as_str()
                        .and_then(|p| {
                            p.lines().find_map(|l| {
                                l.trim()
                                    .strip_prefix("num_ctx")
                                    .and_then(|v| v.trim().parse::<u64>().ok())
                            })
                        })
                        .unwrap_or(OLLAMA_DEFAULT_NUM_CTX);
                    checks.push(context_check(
                        num_ctx.min(len),
                        input.needed_context,
                        endpoint.kind,
                    ));
                    out.context = Some(num_ctx.min(len));
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
        EndpointKind::Lmstudio => {
            // LM Studio's own REST API (0.3.6 and later) says whether the model is loaded, with
            // which context, and in which format; its `/v1/models` says none of that.
            let url = format!("{}/api/v0/models/{}", root(client.base_url()), input.model);
            if let Ok(body) = client.get(&url) {
                let model: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                // Only the loaded context is the one it runs with; `max_context_length` is
                // the trained maximum.
                let loaded = model["loaded_context_length"].as_u64();
                if let Some(len) = loaded {
                    checks.push(context_check(len, input.needed_context, endpoint.kind));
                    out.context = Some(len);
                }
                out.facts.lmstudio = Some(json!({
                    "state": model["state"],
                    "compatibility_type": model["compatibility_type"],
                    "quantization": model["quantization"],
                    "arch": model["arch"],
                    "loaded_context_length": loaded,
                    "max_context_length": model["max_context_length"],
                }));
            }
        }
        _ => {}
    }
    out
}

/// The two canaries (real model requests): a tool call round-trips, and a long prompt keeps its
/// start. The second runs only when the first passed. `context`: what the server said it serves
/// ([`Metadata::context`]), which tells a cut prompt from a model that lost the marker.
pub fn canaries(client: &Client, input: &PreflightInput<'_>, context: Option<u64>) -> Vec<Check> {
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
    // No placeholder word to copy: weak models echo a literal `MARKER` (measured on a 1.5B model).
    long.push_str(
        "\nCall the `shell` tool exactly once. Its command is the word echo, a space, and then the marker given in the first line of this message. Do not answer in text.",
    );
    let outcome = canary(client, endpoint, input.model, &long, input.marker);
    let cut = outcome
        .as_ref()
        .err()
        .map(|e| prompt_was_cut(e.read_tokens(), context));
    let raise_context = match endpoint.kind {
        EndpointKind::Ollama => {
            "raise the context: set num_ctx (e.g. OLLAMA_CONTEXT_LENGTH or a Modelfile PARAMETER num_ctx)"
        }
        EndpointKind::LlamaCpp => "raise the context: start llama-server with a larger -c",
        EndpointKind::Lmstudio => {
            "raise the context: load the model with a larger --context-length"
        }
        _ => "raise the server's context length (max_model_len / context size)",
    };
    checks.push(check(
        "long_prompt",
        outcome.is_ok(),
        match (&outcome, cut) {
            (Ok(()), _) => format!("a {}-token prompt kept its start", input.canary_tokens),
            (Err(e), Some(Cut::No { read, context })) => format!(
                "the model did not bring back the marker from the start of a {}-token prompt, though the server read all of it ({read} tokens, context {context}): {e}",
                input.canary_tokens
            ),
            (Err(e), _) => format!("a {}-token prompt lost its start: {e}{}", input.canary_tokens,
                e.read_tokens().map(|n| format!(" (the server read {n} tokens)")).unwrap_or_default()),
        },
        Some(match cut {
            _ if outcome.as_ref().is_err_and(CanaryFailure::unanswered) => UNANSWERED_FIX.into(),
            Some(Cut::No { .. }) => "the prompt was not cut, the model lost its start: pick a stronger model for this role (stage prompts are this long)".into(),
            Some(Cut::Unknown) => format!("{raise_context}; if the context is already large, the model itself lost the start: pick a stronger model"),
            _ => raise_context.into(),
        }),
    ));
    checks
}

/// Whether a long canary's prompt was cut to the server's context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    /// The server read well under its context: nothing was cut.
    No { read: u64, context: u64 },
    /// It read about its whole context (a cut prompt fills it).
    Yes,
    /// Not said (no token count, or no declared context).
    Unknown,
}

/// A server that cuts a prompt keeps about a context's worth of it (less a reserve for the
/// answer): a read count well under the declared context means the whole prompt was read.
fn prompt_was_cut(read: Option<u64>, context: Option<u64>) -> Cut {
    match (read, context) {
        (Some(read), Some(context)) if read + (context / 8).max(512) < context => {
            Cut::No { read, context }
        }
        (Some(_), Some(_)) => Cut::Yes,
        _ => Cut::Unknown,
    }
}

fn context_check(have: u64, need: u64, kind: EndpointKind) -> Check {
    check(
        "context",
        have >= need,
        format!("context {have} tokens; a stage needs about {need}"),
        Some(match kind {
            EndpointKind::Ollama => format!("raise num_ctx to at least {need}"),
            EndpointKind::LlamaCpp => format!("start llama-server with -c {need} or more"),
            EndpointKind::Lmstudio => {
                format!(
                    "load the model with a context length of {need} or more (lms load --context-length {need})"
                )
            }
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
    /// The answer, and the prompt tokens the server said it read (input plus cached reads).
    #[error("{detail}")]
    Answer { detail: String, read: Option<u64> },
}

impl CanaryFailure {
    fn read_tokens(&self) -> Option<u64> {
        match self {
            CanaryFailure::Answer { read, .. } => *read,
            CanaryFailure::Http(_) => None,
        }
    }

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
        // As a stage's requests ask (`runtime::run_stage`): the canary checks what a run uses.
        tool_choice: ToolChoice::Required,
        answer_schema: None,
    });
    let reply = client
        .post_json(protocol.path(), &body)
        .map_err(CanaryFailure::Http)?;
    let turn = if reply.event_stream {
        exchange.parse_stream(&reply.body)
    } else {
        exchange.parse_response(&reply.body)
    }
    .map_err(|e| CanaryFailure::Answer {
        detail: e.to_string(),
        read: None,
    })?;
    let read = turn
        .usage
        .input_tokens
        .map(|input| input + turn.usage.cache_read_tokens.unwrap_or(0));
    let Some(call) = turn.calls.first() else {
        return Err(CanaryFailure::Answer {
            detail: format!(
                "the model answered without a tool call{}",
                turn.text
                    .map(|t| format!(": {}", t.chars().take(120).collect::<String>()))
                    .unwrap_or_default()
            ),
            read,
        });
    };
    let command = call.arguments["command"].as_str().unwrap_or_default();
    if call.name == "shell" && command.contains(marker) {
        Ok(())
    } else {
        Err(CanaryFailure::Answer {
            detail: format!(
                "the model called `{}` with {} instead of the marker",
                call.name, call.arguments
            ),
            read,
        })
    }
}

#[cfg(test)]
mod cut_tests {
    use super::{Cut, prompt_was_cut};

    #[test]
    fn a_read_count_well_under_the_context_means_nothing_was_cut() {
        // The 1.5B model on llama.cpp: the whole ~5.2k-token canary read in a 32k context.
        assert_eq!(
            prompt_was_cut(Some(5_235), Some(32_768)),
            Cut::No {
                read: 5_235,
                context: 32_768
            }
        );
        // Ollama's 2048 default: a cut prompt fills the context.
        assert_eq!(prompt_was_cut(Some(2_040), Some(2_048)), Cut::Yes);
        assert_eq!(prompt_was_cut(Some(1_600), Some(2_048)), Cut::Yes);
        assert_eq!(prompt_was_cut(Some(30_000), Some(32_768)), Cut::Yes);
        assert_eq!(prompt_was_cut(None, Some(32_768)), Cut::Unknown);
        assert_eq!(prompt_was_cut(Some(5_000), None), Cut::Unknown);
    }
}
