//! `autocode local setup` against fake local servers written here: an Ollama (tags, a streamed
//! pull that is interrupted once and resumed, show) and a llama.cpp server, including servers
//! that report a context they do not run with. Through the library (`autocode::local::setup`)
//! and, for the confirmation, through the built binary.

use std::process::Command;
use std::sync::{Arc, Mutex};

use serde_json::json;

use super::direct_fake::{FakeEndpoint, http_json, ready_answer};
use autocode::direct::connections::{Connections, EndpointKind, dir_under};
use autocode::local::setup::{self, PullEvent, SetupError};
use autocode::models::Catalogue;

const TAG: &str = "qwen2.5-coder:1.5b";
const TOTAL: u64 = 1_117_320_768;

/// What the fake Ollama remembers: how far the pull got, whether the model is there, the
/// requests it saw.
#[derive(Default)]
struct OllamaState {
    completed: u64,
    pulled: bool,
    pulls: u32,
    paths: Vec<String>,
}

/// A fake Ollama whose model sets `num_ctx` in its parameters when `num_ctx` is `Some`.
fn fake_ollama(num_ctx: Option<u64>) -> (FakeEndpoint, Arc<Mutex<OllamaState>>) {
    let state = Arc::new(Mutex::new(OllamaState::default()));
    let shared = state.clone();
    let endpoint = FakeEndpoint::routed(move |path, body| {
        let mut s = shared.lock().unwrap();
        s.paths.push(path.to_owned());
        let listed: Vec<&str> = if s.pulled { vec![TAG] } else { vec![] };
        match path {
            "/api/tags" => http_json(
                "200 OK",
                &json!({"models": listed.iter().map(|n| json!({"name": n})).collect::<Vec<_>>()}),
            ),
            "/v1/models" => http_json(
                "200 OK",
                &json!({"object": "list", "data": listed.iter().map(|n| json!({"id": n, "owned_by": "library"})).collect::<Vec<_>>()}),
            ),
            "/api/pull" => {
                s.pulls += 1;
                let digest = "sha256:6f2b1c3a0000";
                let line = |completed: u64| {
                    json!({"status": format!("pulling {digest}"), "digest": digest,
                           "total": TOTAL, "completed": completed})
                    .to_string()
                };
                let mut lines = vec![json!({"status": "pulling manifest"}).to_string()];
                if s.pulls == 1 {
                    // The first pull gets 40% in and the connection drops.
                    lines.push(line(0));
                    s.completed = TOTAL * 4 / 10;
                    lines.push(line(s.completed));
                } else {
                    // Ollama kept the partial blob: the second pull starts where it stopped.
                    lines.push(line(s.completed));
                    lines.push(line(TOTAL));
                    lines.push(json!({"status": "verifying sha256 digest"}).to_string());
                    lines.push(json!({"status": "success"}).to_string());
                    s.pulled = true;
                }
                // No length: the body ends when the connection closes.
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson\r\nconnection: close\r\n\r\n{}\n",
                    lines.join("\n")
                )
            }
            "/api/show" => {
                let mut show = json!({
                    "capabilities": ["completion", "tools"],
                    "model_info": {"qwen2.context_length": 32768},
                    "details": {"family": "qwen2"},
                });
                if let Some(n) = num_ctx {
                    show["parameters"] = json!(format!("num_ctx {n}\nstop \"<|im_end|>\""));
                }
                http_json("200 OK", &show)
            }
            _ => ready_answer(path, body)
                .unwrap_or_else(|| http_json("404 Not Found", &json!({"error": "not found"}))),
        }
    });
    (endpoint, state)
}

/// A fake llama.cpp server that runs the model with `n_ctx` though it was trained for 32k.
fn fake_llama_cpp(n_ctx: u64) -> FakeEndpoint {
    FakeEndpoint::routed(move |path, body| match path {
        "/v1/models" => http_json(
            "200 OK",
            &json!({"object": "list", "data": [{"id": "qwen2.5-coder-1.5b", "owned_by": "llamacpp",
                "meta": {"n_ctx_train": 32768}}]}),
        ),
        "/props" => http_json(
            "200 OK",
            &json!({"default_generation_settings": {"n_ctx": n_ctx}, "n_ctx_train": 32768,
                    "model_path": "/m/qwen.gguf", "chat_template": "{{ x }}",
                    "build_info": "b1"}),
        ),
        _ => ready_answer(path, body)
            .unwrap_or_else(|| http_json("404 Not Found", &json!({"error": "not found"}))),
    })
}

/// A fake LM Studio (on an ephemeral port, not its usual :1234): its OpenAI-compatible
/// `/v1/models` says nothing about the model; its own `/api/v0/models/{model}` says how it is
/// loaded (`compatibility_type`, `loaded_context_length`) beside the trained maximum.
fn fake_lmstudio(format: &'static str, loaded_context: Option<u64>) -> FakeEndpoint {
    const MODEL: &str = "qwen2.5-coder-1.5b-instruct";
    let described = move || {
        let mut model = json!({"id": MODEL, "object": "model", "type": "llm",
            "publisher": "lmstudio-community", "arch": "qwen2", "compatibility_type": format,
            "quantization": "Q4_K_M", "state": "not-loaded", "max_context_length": 32768});
        if let Some(len) = loaded_context {
            model["state"] = json!("loaded");
            model["loaded_context_length"] = json!(len);
        }
        model
    };
    FakeEndpoint::routed(move |path, body| match path {
        "/v1/models" => http_json(
            "200 OK",
            &json!({"object": "list", "data": [{"id": MODEL, "object": "model",
                "owned_by": "organization_owner"}]}),
        ),
        "/api/v0/models" => http_json("200 OK", &json!({"object": "list", "data": [described()]})),
        p if p == format!("/api/v0/models/{MODEL}") => http_json("200 OK", &described()),
        _ => ready_answer(path, body)
            .unwrap_or_else(|| http_json("404 Not Found", &json!({"error": "not found"}))),
    })
}

/// The cheap checks of `model` on `server` (no model request), as a stage's steering reads them.
fn metadata_of(server: &setup::FoundServer, model: &str) -> autocode::direct::preflight::Metadata {
    use autocode::direct::preflight::{self, PreflightInput};
    let endpoint = setup::endpoint_for(server, "lmstudio", model, "qwen");
    let client =
        autocode::direct::http::Client::new(&endpoint.base_url, autocode::direct::http::Auth::None)
            .unwrap();
    preflight::metadata(
        &client,
        &PreflightInput {
            endpoint: &endpoint,
            model,
            needed_context: preflight::STAGE_CONTEXT,
            canary_tokens: preflight::CANARY_TOKENS,
            marker: "",
        },
    )
}

fn check<'a>(
    readiness: &'a setup::Readiness,
    name: &str,
) -> &'a autocode::direct::preflight::Check {
    readiness
        .checks
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no {name} check in {:?}", readiness.checks))
}

#[test]
fn ollama_is_found_pulled_across_an_interruption_checked_and_saved() {
    let (ollama, state) = fake_ollama(Some(32768));
    let server = setup::discover(Some(&ollama.url)).unwrap();
    assert_eq!(server.kind, EndpointKind::Ollama);
    assert!(server.models.is_empty());
    let catalogue = Catalogue::builtin();
    assert_eq!(setup::ollama_size(&catalogue, TAG), Some(TOTAL));

    // The first pull is cut at 40%: a typed error that says how far and to run setup again.
    let mut seen = Vec::new();
    let first = setup::ollama_pull(&server.base_url, TAG, |e| seen.push(e.clone()));
    match first {
        Err(SetupError::PullInterrupted { done, .. }) => {
            assert!(done.contains("0.4 GB of 1.1 GB"), "{done}")
        }
        other => panic!("expected an interrupted pull, got {other:?}"),
    }
    assert!(seen.contains(&PullEvent::Status("pulling manifest".into())));
    // The second continues from what Ollama kept, and ends with its success.
    let mut resumed = Vec::new();
    setup::ollama_pull(&server.base_url, TAG, |e| resumed.push(e.clone())).unwrap();
    let first_bytes = resumed.iter().find_map(|e| match e {
        PullEvent::Progress { completed, .. } => Some(*completed),
        PullEvent::Status(_) => None,
    });
    assert_eq!(first_bytes, Some(TOTAL * 4 / 10), "{resumed:?}");
    assert_eq!(state.lock().unwrap().pulls, 2);

    let server = setup::discover(Some(&ollama.url)).unwrap();
    assert_eq!(server.models, vec![TAG.to_owned()]);
    let family = setup::family_of(&catalogue, TAG).unwrap();
    assert_eq!(family, "qwen");
    let endpoint = setup::endpoint_for(&server, "ollama", TAG, &family);
    let readiness = setup::readiness(&endpoint, TAG, "ac-canary-setup1").unwrap();
    assert_eq!(readiness.context, Some(32768));
    assert!(readiness.ok(), "{:?}", readiness.checks);
    assert!(check(&readiness, "tool_call").ok);

    let home = tempfile::tempdir().unwrap();
    let mut connections = Connections::load(&dir_under(home.path())).unwrap();
    setup::save(&mut connections, endpoint).unwrap();
    let saved = Connections::load(&dir_under(home.path())).unwrap();
    let resolved = saved.resolve(&format!("ollama/{TAG}")).unwrap();
    assert_eq!(resolved.model.family, "qwen");
    assert_eq!(resolved.endpoint.kind, EndpointKind::Ollama);
}

#[test]
fn an_ollama_model_without_num_ctx_runs_with_ollamas_default_not_its_maximum() {
    let (ollama, state) = fake_ollama(None);
    state.lock().unwrap().pulled = true;
    let server = setup::discover(Some(&ollama.url)).unwrap();
    let endpoint = setup::endpoint_for(&server, "ollama", TAG, "qwen");
    let readiness = setup::readiness(&endpoint, TAG, "ac-canary-setup2").unwrap();
    assert_eq!(readiness.context, Some(4096), "not the trained 32768");
    let context = check(&readiness, "context");
    assert!(!context.ok);
    assert!(
        context
            .fix
            .as_deref()
            .unwrap_or_default()
            .contains("num_ctx"),
        "{context:?}"
    );
    assert!(!readiness.ok());
}

#[test]
fn llama_cpp_is_read_for_the_context_it_runs_with_not_the_trained_one() {
    let short = fake_llama_cpp(4096);
    let server = setup::discover(Some(&short.url)).unwrap();
    assert_eq!(server.kind, EndpointKind::LlamaCpp);
    let model = "qwen2.5-coder-1.5b";
    let endpoint = setup::endpoint_for(&server, "llamacpp", model, "qwen");
    let readiness = setup::readiness(&endpoint, model, "ac-canary-setup3").unwrap();
    assert_eq!(readiness.context, Some(4096));
    let context = check(&readiness, "context");
    assert!(!context.ok, "{context:?}");
    assert!(
        context
            .fix
            .as_deref()
            .unwrap_or_default()
            .contains("-c 32768"),
        "{context:?}"
    );
    // The same model served with its full context is ready.
    let full = fake_llama_cpp(32768);
    let server = setup::discover(Some(&full.url)).unwrap();
    let endpoint = setup::endpoint_for(&server, "llamacpp", model, "qwen");
    let readiness = setup::readiness(&endpoint, model, "ac-canary-setup4").unwrap();
    assert_eq!(readiness.context, Some(32768));
    assert!(readiness.ok(), "{:?}", readiness.checks);
}

/// LM Studio is told by its own API, not only its port; the context it runs the model with is
/// the loaded one, and a GGUF or MLX model's answer can be held to the report's JSON schema
/// (`response_format: json_schema`), so the forced report is asked that way. A model it does
/// not describe, or in another format, gets no such claim.
#[test]
fn lmstudio_is_read_for_its_loaded_context_and_its_json_schema_answers() {
    let model = "qwen2.5-coder-1.5b-instruct";
    let short = fake_lmstudio("gguf", Some(4096));
    let server = setup::discover(Some(&short.url)).unwrap();
    assert_eq!(server.kind, EndpointKind::Lmstudio);
    assert_eq!(server.models, vec![model.to_owned()]);
    let metadata = metadata_of(&server, model);
    assert_eq!(
        metadata.context,
        Some(4096),
        "the loaded context, not the trained 32768"
    );
    assert!(metadata.constrains_answers());
    let endpoint = setup::endpoint_for(&server, "lmstudio", model, "qwen");
    let readiness = setup::readiness(&endpoint, model, "ac-canary-lms1").unwrap();
    let context = check(&readiness, "context");
    assert!(!context.ok, "{context:?}");
    assert!(
        context
            .fix
            .as_deref()
            .unwrap_or_default()
            .contains("--context-length 32768"),
        "{context:?}"
    );

    let full = fake_lmstudio("mlx", Some(32768));
    let server = setup::discover(Some(&full.url)).unwrap();
    let metadata = metadata_of(&server, model);
    assert!(metadata.constrains_answers());
    let endpoint = setup::endpoint_for(&server, "lmstudio", model, "qwen");
    let readiness = setup::readiness(&endpoint, model, "ac-canary-lms2").unwrap();
    assert_eq!(readiness.context, Some(32768));
    assert!(readiness.ok(), "{:?}", readiness.checks);

    // Not loaded: no context is claimed (the trained maximum is not the running one).
    let idle = fake_lmstudio("gguf", None);
    let server = setup::discover(Some(&idle.url)).unwrap();
    assert_eq!(metadata_of(&server, model).context, None);
    // A format autocode does not know LM Studio to constrain: no schema claim.
    let other = fake_lmstudio("safetensors", Some(32768));
    let server = setup::discover(Some(&other.url)).unwrap();
    let metadata = metadata_of(&server, model);
    assert!(!metadata.constrains_answers());
    assert_eq!(metadata.context, Some(32768));
    // A server without LM Studio's API on another port is not taken for LM Studio.
    let llama = fake_llama_cpp(32768);
    assert_eq!(
        setup::discover(Some(&llama.url)).unwrap().kind,
        EndpointKind::LlamaCpp
    );
}

#[test]
fn a_server_off_this_machine_is_refused() {
    assert!(matches!(
        setup::discover(Some("https://example.com")),
        Err(SetupError::NotLoopback(_))
    ));
}

#[test]
fn nothing_is_pulled_without_confirmation_and_the_size_is_shown_first() {
    let (ollama, state) = fake_ollama(Some(32768));
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_autocode"))
        .args(["local", "setup", "qwen2.5-coder-1.5b", "--url", &ollama.url])
        .current_dir(home.path())
        .env_clear()
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join(".config"))
        .env("PATH", "/usr/bin:/bin")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("a 1.1 GB download"), "{stderr}");
    assert!(stderr.contains("nothing was downloaded"), "{stderr}");
    let s = state.lock().unwrap();
    assert_eq!(s.pulls, 0, "{:?}", s.paths);
    assert!(
        !home
            .path()
            .join(".config/autocode/direct/endpoints.toml")
            .exists()
    );
}

#[test]
fn run_local_without_a_saved_local_endpoint_says_how_to_make_one() {
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_autocode"))
        .args(["run", "--local", "--provider", "autocode", "make hello.txt"])
        .current_dir(home.path())
        .env_clear()
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join(".config"))
        .env("PATH", "/usr/bin:/bin")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no local endpoint is saved; set one up with: autocode local setup"),
        "{stderr}"
    );
    // Nothing was started.
    assert!(!home.path().join(".autocode").exists());
}

/// Cloud and local in one run, offline: `--local` puts the bulk roles on the scripted
/// endpoint's doer model (a loopback endpoint, so a local one) and the verifiers stay on the
/// checker model of another family; the run completes and the split was printed first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_local_puts_the_bulk_roles_on_the_local_model_and_completes() {
    use super::direct_e2e::{Place, script_with};
    use autocode::demo::{CHECKER_MODEL, DEMO_OBJECTIVE, DOER_MODEL};
    use autocode::direct::protocol::Protocol;
    use autocode::direct::scripted;
    use autocode::scripted_model::{ScriptedServer, ServerConfig};

    let place = Place::new();
    let server = ScriptedServer::start(ServerConfig::new(script_with(|_| {})))
        .await
        .unwrap();
    scripted::configure(
        &server,
        &place.config_home(),
        Protocol::ChatCompletions,
        &[(DOER_MODEL, "alpha"), (CHECKER_MODEL, "beta")],
    )
    .unwrap();
    let checker = format!("scripted/{CHECKER_MODEL}");
    let local = format!("scripted/{DOER_MODEL}");
    let workspace = place.workspace();
    let mut command = Command::new(env!("CARGO_BIN_EXE_autocode"));
    command
        .args(["run", "--local", &local, "--provider", "autocode"])
        .args([
            "--plan-reviewer-model",
            &checker,
            "--tester-model",
            &checker,
        ])
        .args(["--completion-model", &checker, "--resolver-model", &checker])
        .args(["--yes", "--no-chat", "--json", "--workspace"])
        .arg(&workspace)
        .arg(DEMO_OBJECTIVE)
        .env_clear()
        .envs(place.env())
        .stdin(std::process::Stdio::null());
    let out = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    server.shutdown().await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "--local: requirements, planner and builder on {local} (family alpha"
        )),
        "{stderr}"
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["outcome"], "complete", "{summary}");
    // Each stage ran on the model its role was given.
    let run_dir = std::path::PathBuf::from(summary["run_dir"].as_str().unwrap());
    let mut seen = Vec::new();
    for stage in std::fs::read_dir(run_dir.join("stages")).unwrap() {
        let stage = stage.unwrap().path();
        let Ok(launch) = std::fs::read(stage.join("launch.json")) else {
            continue;
        };
        let launch: serde_json::Value = serde_json::from_slice(&launch).unwrap();
        let name = stage.file_name().unwrap().to_string_lossy().into_owned();
        let model = launch["model"].as_str().unwrap_or_default().to_owned();
        let bulk = ["requirements", "planner", "builder"]
            .iter()
            .any(|r| name.contains(r));
        let expected = if bulk { DOER_MODEL } else { CHECKER_MODEL };
        assert_eq!(model, expected, "{name}");
        seen.push(name);
    }
    assert!(seen.len() >= 5, "{seen:?}");
}

#[test]
fn setup_through_the_binary_saves_a_ready_llama_cpp_and_its_passed_canaries() {
    let server = fake_llama_cpp(32768);
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_autocode"))
        .args(["local", "setup", "--url", &server.url])
        .current_dir(home.path())
        .env_clear()
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join(".config"))
        .env("XDG_STATE_HOME", home.path().join(".state"))
        .env("PATH", "/usr/bin:/bin")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("32,768 token context"), "{stderr}");
    assert!(
        stdout.contains("autocode run --local llamacpp/qwen2.5-coder-1.5b"),
        "{stdout}"
    );
    let saved = Connections::load(&dir_under(&home.path().join(".config"))).unwrap();
    assert_eq!(
        saved
            .resolve("llamacpp/qwen2.5-coder-1.5b")
            .unwrap()
            .model
            .family,
        "qwen"
    );
    // A run right after does not repeat the canaries.
    assert!(
        home.path()
            .join(".state/autocode/direct-readiness.json")
            .exists()
    );
}
