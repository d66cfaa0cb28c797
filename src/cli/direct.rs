//! The command line of autocode's own runtime (`src/direct/`): `autocode connections setup`
//! (non-interactive flags), `connections check --provider autocode` (local setup only: no model
//! request; `--live` runs the readiness checks and records a full pass in the canary cache), and
//! `autocode demo --provider autocode`.

//! Setup also has an interview on a terminal (`super::direct_setup`); `connections list` shows
//! the endpoints ([`endpoint_rows`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

use clap::Args;
use serde_json::{Value, json};

use super::context::Context;
use super::demo::{DemoProtocol, seed_workspace, shell_quote};
use super::direct_setup::{self, Draft, InterviewError, Preset, Prompter};
use super::output::{self, say};
use super::run::TerminalUi;
use crate::demo::{CHECKER_MODEL, DEMO_OBJECTIVE, DOER_MODEL};
use crate::direct::connections::{self, Connections, Endpoint, EndpointKind, EndpointModel};
use crate::direct::http::{self, Client, Secret};
use crate::direct::preflight;
use crate::direct::protocol::{Protocol, TokenField};
use crate::direct::scripted::{self, SCRIPTED_ENDPOINT};
use crate::error::{EdgeError, exit};
use crate::run::api::{self, StartOptions};
use crate::run::driver::DriveOutcome;

#[derive(Debug, Args)]
pub struct SetupArgs {
    /// The endpoint's name (route models are `NAME/MODEL`). Without --name and --kind on a
    /// terminal, setup asks for each answer.
    #[arg(long)]
    pub name: Option<String>,
    /// openai, anthropic, openai-compatible, ollama, llama.cpp, vllm or lmstudio.
    #[arg(long)]
    pub kind: Option<String>,
    /// The base URL with its version path (https; http only on loopback). Default: the kind's.
    #[arg(long)]
    pub base_url: Option<String>,
    /// chat_completions, responses or anthropic_messages (default: the kind's).
    #[arg(long)]
    pub protocol: Option<String>,
    /// Chat Completions' response cap field: max_completion_tokens or max_tokens.
    #[arg(long)]
    pub token_field: Option<String>,
    /// A model the endpoint serves and its family, `ID=FAMILY` (repeatable). Without any, the
    /// endpoint's saved models are kept.
    #[arg(long = "model", value_name = "ID=FAMILY")]
    pub models: Vec<String>,
    /// Ask for non-streamed responses (streaming is the default).
    #[arg(long)]
    pub no_stream: bool,
    /// The response cap the runtime requests of this endpoint's models, in tokens (default
    /// 8192; a response cut by it pauses `PAUSED_OUTPUT_CAP`). Without it, the saved one is kept.
    #[arg(long, value_name = "TOKENS", value_parser = clap::value_parser!(u32).range(256..=1_048_576))]
    pub max_output_tokens: Option<u32>,
    /// Read the API key from standard input (never from an argument, never printed).
    #[arg(long)]
    pub key_stdin: bool,
    /// Print the saved endpoint as JSON on stdout (no key).
    #[arg(long)]
    pub json: bool,
}

/// The non-interactive form, for the error that names it.
const SETUP_FLAGS: &str = "autocode connections setup --name NAME --kind KIND [--base-url URL] \
[--protocol chat_completions|responses|anthropic_messages] [--token-field max_completion_tokens|max_tokens] \
[--model ID=FAMILY]... [--no-stream] [--max-output-tokens TOKENS] [--key-stdin] [--json]";

fn connections_of(ctx: &Context) -> Result<Connections, EdgeError> {
    let dir = connections::dir_from_env(|k| {
        ctx.env
            .get(std::ffi::OsStr::new(k))
            .and_then(|v| v.to_str())
            .map(str::to_owned)
    })
    .map_err(EdgeError::usage)?;
    Connections::load(&dir).map_err(EdgeError::usage)
}

/// The flags, parsed (each one checked before anything is asked or saved).
fn preset_of(args: &SetupArgs) -> Result<Preset, EdgeError> {
    let kind = args
        .kind
        .as_deref()
        .map(|k| {
            EndpointKind::parse(k).ok_or_else(|| {
                EdgeError::usage(format!(
                    "unknown kind `{k}`; one of: {}",
                    EndpointKind::ALL.map(EndpointKind::as_str).join(", ")
                ))
            })
        })
        .transpose()?;
    let protocol = args
        .protocol
        .as_deref()
        .map(|p| {
            Protocol::parse(p).ok_or_else(|| {
                EdgeError::usage(format!(
                    "unknown protocol `{p}`; one of: {}",
                    Protocol::ALL.map(Protocol::as_str).join(", ")
                ))
            })
        })
        .transpose()?;
    let token_field = match args.token_field.as_deref() {
        None => None,
        Some("max_completion_tokens") => Some(TokenField::MaxCompletionTokens),
        Some("max_tokens") => Some(TokenField::MaxTokens),
        Some(other) => {
            return Err(EdgeError::usage(format!(
                "unknown token field `{other}`; max_completion_tokens or max_tokens"
            )));
        }
    };
    let models = args
        .models
        .iter()
        .map(|m| {
            let (id, family) = m.split_once('=').ok_or_else(|| {
                EdgeError::usage(format!(
                    "--model `{m}`: write ID=FAMILY (e.g. qwen2.5-coder=qwen)"
                ))
            })?;
            if id.trim().is_empty() || family.trim().is_empty() {
                return Err(EdgeError::usage(format!(
                    "--model `{m}`: ID and FAMILY must not be empty"
                )));
            }
            Ok(EndpointModel {
                id: id.trim().into(),
                family: family.trim().into(),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Preset {
        name: args.name.clone(),
        kind,
        base_url: args.base_url.clone(),
        protocol,
        token_field,
        models,
        no_stream: args.no_stream,
        max_output_tokens: args.max_output_tokens,
    })
}

/// `autocode connections setup`: with `--name` and `--kind`, from the flags; without them, an
/// interview on the terminal (`cli::direct_setup`); without them and without a terminal, a usage
/// error naming the flags.
pub fn setup(ctx: &Context, args: SetupArgs) -> Result<ExitCode, EdgeError> {
    let mut connections = connections_of(ctx)?;
    let preset = preset_of(&args)?;
    let (Some(name), Some(kind)) = (preset.name.clone(), preset.kind) else {
        let prompter = (!args.key_stdin).then(Prompter::terminal).flatten();
        let Some(mut prompter) = prompter else {
            return Err(EdgeError::usage(format!(
                "connections setup needs --name and --kind when {}: {SETUP_FLAGS}",
                if args.key_stdin {
                    "the key is read from standard input (--key-stdin)"
                } else {
                    "standard input or standard error is not a terminal"
                }
            ))
            .hint(
                "on a terminal, `autocode connections setup` without flags asks for each answer",
            ));
        };
        let draft = match direct_setup::interview(&mut prompter, &connections, &preset) {
            Ok(draft) => draft,
            Err(e @ InterviewError::Cancelled) => return Err(EdgeError::usage(e)),
            Err(e) => return Err(EdgeError::internal(e)),
        };
        drop(prompter);
        return save(&mut connections, draft, args.json);
    };
    let previous = connections.endpoint(&name).cloned();
    // A saved endpoint of the same kind keeps what the flags do not change.
    let same_kind = previous.as_ref().filter(|p| p.kind == kind);
    let protocol = preset
        .protocol
        .or(same_kind.map(|p| p.protocol))
        .unwrap_or(kind.default_protocol());
    let token_field = preset
        .token_field
        .or(same_kind.map(|p| p.token_field))
        .unwrap_or(kind.default_token_field());
    let stream = !args.no_stream && same_kind.is_none_or(|p| p.stream);
    let max_output_tokens = args
        .max_output_tokens
        .or(previous.as_ref().and_then(|p| p.max_output_tokens));
    let base_url = preset
        .base_url
        .clone()
        .or_else(|| previous.as_ref().map(|p| p.base_url.clone()))
        .or_else(|| kind.default_base_url().map(str::to_owned))
        .ok_or_else(|| {
            EdgeError::usage(format!(
                "kind {} has no default URL: pass --base-url with the version path (e.g. https://host/v1)",
                kind.as_str()
            ))
        })?;
    let models = if preset.models.is_empty() {
        previous.map(|p| p.models).unwrap_or_default()
    } else {
        preset.models
    };
    let key = if args.key_stdin {
        match Secret::read_from(std::io::stdin().lock()) {
            Ok(key) => Some(key),
            Err(http::ReadSecretError::Invalid(http::SecretError::Empty)) => {
                return Err(EdgeError::usage("--key-stdin: standard input held no key"));
            }
            Err(http::ReadSecretError::Invalid(e)) => {
                return Err(EdgeError::usage(format!("--key-stdin: {e}; nothing was stored"))
                    .hint("pipe the key alone, e.g. `printf %s \"$KEY\" | autocode connections setup … --key-stdin`"));
            }
            Err(e @ http::ReadSecretError::Io(_)) => return Err(EdgeError::internal(e)),
        }
    } else {
        None
    };
    let endpoint = Endpoint {
        name,
        kind,
        base_url,
        protocol,
        token_field,
        stream,
        max_output_tokens,
        models,
    };
    save(&mut connections, Draft { endpoint, key }, args.json)
}

/// Saves one endpoint (and its key, bound to its URL) and says so.
fn save(
    connections: &mut Connections,
    draft: Draft,
    json_out: bool,
) -> Result<ExitCode, EdgeError> {
    let Draft { endpoint, key } = draft;
    let key_given = key.is_some();
    connections
        .save_endpoint(endpoint.clone(), key)
        .map_err(EdgeError::usage)?;
    let has_key = connections.has_key(&endpoint);
    let status = endpoint_status(&endpoint, has_key);
    if json_out {
        output::print_json(&status)?;
    } else {
        say!(
            "saved endpoint {} ({}, {}, {}) in {}{}",
            endpoint.name,
            endpoint.kind.as_str(),
            endpoint.base_url,
            endpoint.protocol.as_str(),
            connections.dir().display(),
            if key_given { "; key stored (0600)" } else { "" }
        );
        if endpoint.kind.needs_key() && !has_key {
            say!("no key is stored for this URL: run again with --key-stdin");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn endpoint_status(endpoint: &Endpoint, has_key: bool) -> Value {
    let mut value = endpoint.identity();
    value["key"] = json!(if has_key { "stored" } else { "none" });
    value["configured"] = json!(has_key || !endpoint.kind.needs_key());
    value["route_models"] = json!(
        endpoint
            .models
            .iter()
            .map(|m| format!("{}/{}", endpoint.name, m.id))
            .collect::<Vec<_>>()
    );
    value
}

/// The direct endpoints' rows of `connections list` (what `check` shows, without a request):
/// name, kind, base URL, protocol, models with family, whether a key is stored (never the key).
pub fn endpoint_rows(ctx: &Context) -> Result<Vec<Value>, EdgeError> {
    let connections = connections_of(ctx)?;
    Ok(connections
        .file
        .endpoints
        .iter()
        .map(|e| endpoint_status(e, connections.has_key(e)))
        .collect())
}

/// One endpoint row for people: `NAME KIND URL PROTOCOL key: … models: ID (FAMILY), …`.
pub fn endpoint_line(row: &Value) -> String {
    let models: Vec<String> = row["models"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            format!(
                "{} ({})",
                m["id"].as_str().unwrap_or_default(),
                m["family"].as_str().unwrap_or_default()
            )
        })
        .collect();
    format!(
        "{:<14} {:<18} {:<30} {:<18} key: {:<6} models: {}",
        row["endpoint"].as_str().unwrap_or_default(),
        row["kind"].as_str().unwrap_or_default(),
        row["base_url"].as_str().unwrap_or_default(),
        row["protocol"].as_str().unwrap_or_default(),
        row["key"].as_str().unwrap_or_default(),
        if models.is_empty() {
            "none".to_owned()
        } else {
            models.join(", ")
        }
    )
}

/// `connections check --provider autocode`: validates the local setup (no model request).
pub fn check(ctx: &Context, json_out: bool, live: bool) -> Result<ExitCode, EdgeError> {
    let connections = connections_of(ctx)?;
    let mut rows: Vec<Value> = connections
        .file
        .endpoints
        .iter()
        .map(|e| endpoint_status(e, connections.has_key(e)))
        .collect();
    // The same judgement `doctor` makes (`Connections::setup_problems`), each with its fix.
    let problems: Vec<String> = connections
        .setup_problems()
        .into_iter()
        .map(|(what, fix)| format!("{what}: {fix}"))
        .collect();
    let mut ok = problems.is_empty();
    let mut failed_checks = Vec::new();
    if live {
        for (row, endpoint) in rows.iter_mut().zip(&connections.file.endpoints) {
            let client = connections
                .auth(endpoint)
                .map_err(|e| e.to_string())
                .and_then(|auth| Client::new(&endpoint.base_url, auth).map_err(|e| e.to_string()));
            let client = match client {
                Ok(client) => client,
                Err(e) => {
                    failed_checks.push(format!("{}: {e}", endpoint.name));
                    row["preflight_error"] = json!(e);
                    ok = false;
                    continue;
                }
            };
            let mut models = BTreeMap::new();
            for model in &endpoint.models {
                // One total deadline for this model's whole check, whatever the server trickles.
                let client = client.clone().with_deadline(http::check_deadline(
                    ctx.env
                        .get(std::ffi::OsStr::new(http::CHECK_DEADLINE_ENV))
                        .and_then(|v| v.to_str()),
                ));
                let marker = format!("ac-canary-{}", crate::run::runner::nonce_hex());
                let input = preflight::PreflightInput {
                    endpoint,
                    model: &model.id,
                    needed_context: preflight::STAGE_CONTEXT,
                    canary_tokens: preflight::CANARY_TOKENS,
                    marker: &marker,
                };
                let metadata = preflight::metadata(&client, &input);
                let fingerprint = metadata.facts.fingerprint();
                let mut checks = metadata.checks.clone();
                if metadata.reachable() {
                    checks.extend(preflight::canaries(&client, &input, metadata.context));
                }
                // A full pass spares the next run's preflight its canaries (`direct::readiness`).
                if checks.iter().all(|c| c.ok)
                    && let Some(cache) = crate::run::preflight::direct_ready::cache_of(&ctx.env)
                    && let Err(e) =
                        cache.record_pass(endpoint, &model.id, &fingerprint, chrono::Utc::now())
                {
                    tracing::warn!(error = %e, "cannot record the readiness pass");
                }
                ok &= checks.iter().all(|c| c.ok);
                failed_checks.extend(checks.iter().filter(|c| !c.ok).map(|c| {
                    format!(
                        "{}/{} {} check failed: {}{}",
                        endpoint.name,
                        model.id,
                        c.name,
                        c.detail,
                        c.fix
                            .as_ref()
                            .map(|f| format!(" -> {f}"))
                            .unwrap_or_default()
                    )
                }));
                if !json_out {
                    for c in &checks {
                        say!(
                            "{}/{} {:<12} {} {}{}",
                            endpoint.name,
                            model.id,
                            c.name,
                            if c.ok { "ok  " } else { "FAIL" },
                            c.detail,
                            c.fix
                                .as_ref()
                                .map(|f| format!(" -> {f}"))
                                .unwrap_or_default()
                        );
                    }
                }
                models.insert(model.id.clone(), checks);
            }
            row["preflight"] = json!(models);
        }
    }
    if json_out {
        output::print_json(&json!({
            "provider": crate::direct::PROVIDER_NAME,
            "dir": connections.dir(),
            "status": if ok { "configured" } else { "setup_required" },
            "problems": problems,
            "failed_checks": failed_checks,
            "endpoints": rows,
        }))?;
    } else if rows.is_empty() {
        output::print_stdout(&format!(
            "autocode: setup required: {}",
            problems.join("; ")
        ))?;
    } else {
        let lines: Vec<String> = rows
            .iter()
            .map(|r| {
                format!(
                    "{:<14} {:<18} {:<20} key: {:<7} models: {}",
                    r["endpoint"].as_str().unwrap_or_default(),
                    r["kind"].as_str().unwrap_or_default(),
                    r["protocol"].as_str().unwrap_or_default(),
                    r["key"].as_str().unwrap_or_default(),
                    r["route_models"]
                        .as_array()
                        .map(|m| m
                            .iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join(", "))
                        .unwrap_or_default()
                )
            })
            .collect();
        output::print_stdout(&lines.join("\n"))?;
        // Never a bare exit 1: the verdict and every reason for it.
        for why in problems.iter().chain(&failed_checks) {
            say!("problem: {why}");
        }
        say!(
            "autocode: {}",
            match (problems.is_empty(), failed_checks.is_empty()) {
                (true, true) if live => "configured; every endpoint model passed its checks",
                (true, true) =>
                    "configured (no model request made: --live runs the readiness checks)",
                (false, _) => "setup required (see the problems above)",
                (true, false) => "configured, but not ready (see the failed checks above)",
            }
        );
    }
    Ok(ExitCode::from(if ok { exit::OK } else { exit::FAILED }))
}

/// `models --provider autocode`: the configured roster (`ENDPOINT/MODEL` and family); no
/// model request.
pub fn models(ctx: &Context, json_out: bool) -> Result<ExitCode, EdgeError> {
    let connections = connections_of(ctx)?;
    let rows: Vec<Value> = connections
        .file
        .endpoints
        .iter()
        .flat_map(|e| {
            e.models.iter().map(move |m| {
                json!({"route_model": format!("{}/{}", e.name, m.id), "endpoint": e.name,
                       "id": m.id, "family": m.family, "protocol": e.protocol.as_str()})
            })
        })
        .collect();
    if json_out {
        output::print_json(&json!({"provider": crate::direct::PROVIDER_NAME, "models": rows}))?;
    } else {
        let lines: Vec<String> = rows
            .iter()
            .map(|r| {
                format!(
                    "{}  (family {})",
                    r["route_model"].as_str().unwrap_or_default(),
                    r["family"].as_str().unwrap_or_default()
                )
            })
            .collect();
        output::print_stdout(&lines.join("\n"))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `autocode demo --provider autocode`: the demo on autocode's own runtime against the scripted
/// model, in a temporary home whose direct connections name only the scripted endpoint.
pub fn demo(
    ctx: &Context,
    protocol: DemoProtocol,
    json_out: bool,
    unconfined: bool,
) -> Result<ExitCode, EdgeError> {
    let protocol = match protocol {
        DemoProtocol::ChatCompletions => Protocol::ChatCompletions,
        DemoProtocol::Responses => Protocol::Responses,
        DemoProtocol::AnthropicMessages => Protocol::AnthropicMessages,
    };
    let root = tempfile::Builder::new()
        .prefix("autocode-demo-")
        .tempdir()
        .map_err(EdgeError::internal)?
        .keep();
    let workspace = root.join("demo workspace");
    let home = root.join("home");
    say!(
        "autocode demo: autocode's own runtime ({}) against the scripted model; workspace {}",
        protocol.as_str(),
        workspace.display()
    );
    let runtime = super::runtime()?;
    let outcome = runtime.block_on(async {
        seed_workspace(&workspace, ctx).await?;
        let server = crate::demo::start_server()
            .await
            .map_err(EdgeError::internal)?;
        let config_home = home.join(".config");
        scripted::configure(
            &server,
            &config_home,
            protocol,
            &[(DOER_MODEL, "alpha"), (CHECKER_MODEL, "beta")],
        )
        .map_err(EdgeError::internal)?;
        let mut env = ctx.env.clone();
        env.insert("HOME".into(), home.clone().into_os_string());
        env.insert("XDG_CONFIG_HOME".into(), config_home.into_os_string());
        let models = crate::demo::demo_routes(|model| format!("{SCRIPTED_ENDPOINT}/{model}"));
        let opts = StartOptions {
            objective: DEMO_OBJECTIVE.into(),
            workspace: workspace.clone(),
            provider: Some(crate::direct::PROVIDER_NAME.into()),
            models,
            yes: true,
            unconfined,
            ..StartOptions::default()
        };
        let mut ui = TerminalUi::with_progress(super::progress::Progress::detect(false, json_out));
        let result = api::start(&ctx.registry, &env, opts, &mut ui).await;
        server.shutdown().await;
        result.map_err(|e| match e {
            e @ api::RunError::RoomUnavailable { .. } => EdgeError::usage(e),
            e => EdgeError::internal(e),
        })
    })?;
    let state = crate::run::load(&outcome.run_dir).map_err(EdgeError::internal)?;
    for attempt in &state.attempts {
        print_evidence(
            &outcome.run_dir.join("stages").join(&attempt.dir),
            &attempt.dir,
        );
    }
    say!("run directory: {}", outcome.run_dir.display());
    say!(
        "the demo's files stay for you to inspect; remove them with: rm -rf {}",
        shell_quote(&root.display().to_string())
    );
    if json_out {
        output::print_json(&outcome)?;
    }
    Ok(ExitCode::from(match outcome.outcome {
        DriveOutcome::Complete => exit::OK,
        DriveOutcome::Paused { .. } => exit::PAUSED,
    }))
}

fn print_evidence(dir: &Path, name: &str) {
    if let Ok(text) = std::fs::read_to_string(dir.join("evidence.json"))
        && let Ok(value) = serde_json::from_str::<Value>(&text)
    {
        for check in value["checks"].as_array().into_iter().flatten() {
            say!(
                "  evidence {name}: `{}` exit {} via {} (run by autocode) -> {}",
                check["check"]["command"].as_str().unwrap_or_default(),
                check["check"]["exit_code"],
                check["check"]["evidence_ref"].as_str().unwrap_or_default(),
                if check["problem"].is_null() {
                    "verified"
                } else {
                    "REJECTED"
                }
            );
        }
    }
}
