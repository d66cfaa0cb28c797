//! The readiness preflight of local direct endpoints as a run meets it (`src/direct/readiness.rs`,
//! `src/run/preflight/direct_ready.rs`): a run is refused before anything exists when its local
//! server is down, its model absent, the model calls no tools, the prompt is truncated, or the
//! server drops the canary; `doctor` prints the same checks; a resume re-checks them; a passed
//! canary is cached (a second run repeats no canary, a changed server fingerprint does); the
//! cross-model rule uses the endpoints' declared families.

use std::ffi::OsString;
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::direct_e2e::{FakeEndpoint, Place, chat_calls, http_json, ready_answer, script_with};
use autocode::demo::{CHECKER_MODEL, DOER_MODEL};
use autocode::direct::connections::{
    Connections, Endpoint, EndpointKind, EndpointModel, dir_under,
};
use autocode::direct::http::Secret;
use autocode::direct::protocol::Protocol;
use autocode::direct::readiness::{CACHE_FILE, Canaries, CanaryMode};
use autocode::direct::scripted;
use autocode::provider::{ConfigPaths, Registry};
use autocode::role::Role;
use autocode::run::api::RunError;
use autocode::run::driver::DriveOutcome;
use autocode::run::preflight::{self, Independence, RouteChoice};
use autocode::scripted_model::{Action, ScriptedServer, ServerConfig};

/// Saves endpoint `name` under the place's config home, models as (id, family).
fn save(place: &Place, name: &str, kind: EndpointKind, url: &str, models: &[(&str, &str)]) {
    let mut connections = Connections::load(&dir_under(&place.config_home())).unwrap();
    connections
        .save_endpoint(
            Endpoint {
                name: name.into(),
                kind,
                base_url: url.into(),
                protocol: Protocol::ChatCompletions,
                token_field: kind.default_token_field(),
                stream: true,
                max_output_tokens: None,
                models: models
                    .iter()
                    .map(|(id, family)| EndpointModel {
                        id: (*id).into(),
                        family: (*family).into(),
                    })
                    .collect(),
            },
            kind.needs_key().then(|| Secret::new("test-key")),
        )
        .unwrap();
}

fn demo_models(place: &Place, url: &str) {
    save(
        place,
        "local",
        EndpointKind::LlamaCpp,
        url,
        &[(DOER_MODEL, "alpha"), (CHECKER_MODEL, "beta")],
    );
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn tool_call(command: &str) -> String {
    http_json(
        "200 OK",
        &chat_calls(1, &json!({"command": command}).to_string()),
    )
}

/// A llama.cpp-like local server with one fault; `stage` counts the requests that are not the
/// readiness preflight's.
fn faulty_server(fault: &'static str, stage: Arc<Mutex<u32>>) -> FakeEndpoint {
    FakeEndpoint::routed(move |path, body| {
        let canary = body.contains("preflight canary");
        match (fault, path) {
            ("model_absent", "/v1/models") => {
                http_json("200 OK", &json!({"data": [{"id": DOER_MODEL}]}))
            }
            ("small_context", "/props") => http_json(
                "200 OK",
                &json!({"default_generation_settings": {"n_ctx": 4096}}),
            ),
            ("no_tools", "/v1/chat/completions") if canary => http_json(
                "200 OK",
                &json!({"choices": [{"index": 0, "finish_reason": "stop",
                        "message": {"role": "assistant", "content": "Sure, here is the command: echo it"}}]}),
            ),
            // The start of a long prompt is dropped: the model never saw the marker.
            ("truncated", "/v1/chat/completions") if canary && body.contains("filler text") => {
                tool_call("echo MARKER")
            }
            // The server drops the request without an answer.
            ("no_answer", "/v1/chat/completions") if canary => String::new(),
            (_, "/props") => http_json("404 Not Found", &json!({"error": "no props"})),
            _ => ready_answer(path, body).unwrap_or_else(|| {
                *stage.lock().unwrap() += 1;
                http_json(
                    "500 Internal Server Error",
                    &json!({"error": "not a stage"}),
                )
            }),
        }
    })
}

fn branches(workspace: &Path) -> String {
    let out = Command::new("git")
        .args(["branch", "--list", "--format=%(refname:short)"])
        .current_dir(workspace)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_a_local_endpoint_that_is_not_ready_is_refused_before_anything_exists() {
    let cases: [(&str, &str, &str); 6] = [
        (
            "server_down",
            "server check failed",
            "start the llama.cpp server",
        ),
        (
            "model_absent",
            "model check failed",
            "load beta-model in the server",
        ),
        ("no_tools", "tool_call check failed", "tool-capable model"),
        (
            "small_context",
            "context check failed",
            "start llama-server with -c 32768",
        ),
        ("truncated", "long_prompt check failed", "larger -c"),
        (
            "no_answer",
            "tool_call check failed",
            "did not answer the canary",
        ),
    ];
    for (fault, what, fix) in cases {
        let place = Place::new();
        let stage = Arc::new(Mutex::new(0));
        let server = (fault != "server_down").then(|| faulty_server(fault, stage.clone()));
        let url = match &server {
            Some(server) => server.url.clone(),
            None => format!("http://127.0.0.1:{}/v1", free_port()),
        };
        demo_models(&place, &url);
        let refused = match place.start("local").await {
            Err(e @ RunError::Preflight(_)) => e.to_string(),
            other => panic!("{fault}: expected a preflight refusal, got {other:?}"),
        };
        assert!(refused.contains(what), "{fault}: {refused}");
        assert!(refused.contains(fix), "{fault}: {refused}");
        assert!(
            refused.contains("nothing was created"),
            "{fault}: {refused}"
        );
        // Nothing exists: no run directory, no worktree branch, no stage request.
        assert!(
            !place.workspace().join(".autocode/runs").exists(),
            "{fault}"
        );
        assert_eq!(branches(&place.workspace()), "main", "{fault}");
        assert_eq!(*stage.lock().unwrap(), 0, "{fault}");
        // A failed canary is never cached.
        let cache = place
            .dir
            .path()
            .join("home/.local/state/autocode")
            .join(CACHE_FILE);
        if matches!(fault, "no_tools" | "truncated" | "no_answer") {
            let text = std::fs::read_to_string(&cache).unwrap_or_default();
            assert!(
                !text.contains(DOER_MODEL) && !text.contains(CHECKER_MODEL),
                "{fault}: {text}"
            );
        }
    }
}

/// The real binary: `doctor` runs the same checks for the routes its model flags name, and
/// says what to change.
#[test]
fn doctor_prints_the_readiness_checks_of_the_routes() {
    let place = Place::new();
    demo_models(&place, &format!("http://127.0.0.1:{}/v1", free_port()));
    let out = Command::new(env!("CARGO_BIN_EXE_autocode"))
        .args([
            "doctor",
            "--provider",
            "autocode",
            "--single-model",
            &format!("local/{DOER_MODEL}"),
            "--json",
        ])
        .env_clear()
        .envs(place.env())
        .current_dir(place.workspace())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let readiness = &report["preflight"]["checks"][0]["readiness"][0];
    assert_eq!(readiness["model"], DOER_MODEL, "{report}");
    assert_eq!(readiness["checks"][0]["name"], "server", "{report}");
    assert_eq!(readiness["checks"][0]["ok"], false, "{report}");
    assert!(
        readiness["checks"][0]["fix"]
            .as_str()
            .unwrap()
            .contains("start the llama.cpp server"),
        "{report}"
    );
    let problems = report["problems"].to_string();
    assert!(problems.contains("server check failed"), "{problems}");
    // The same in text, with the fix.
    let text = Command::new(env!("CARGO_BIN_EXE_autocode"))
        .args([
            "doctor",
            "--provider",
            "autocode",
            "--single-model",
            &format!("local/{DOER_MODEL}"),
        ])
        .env_clear()
        .envs(place.env())
        .current_dir(place.workspace())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&format!("FAIL local/{DOER_MODEL} server:")),
        "{text}"
    );
    assert!(text.contains("fix: start the llama.cpp server"), "{text}");
}

/// Two full runs against the scripted model in one home: the first runs the canaries of both
/// models (answered by the scripted model's built-in responder, the script not shifted), the
/// second reuses the cached passes, a third with `--recheck` runs them again; the cache is in the
/// state directory, not the workspace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_reuses_the_passed_canaries() {
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
    let canaries = || {
        server
            .requests()
            .iter()
            .filter(|r| r.action == Action::Canary)
            .count()
    };
    for run in 0..2 {
        let summary = place.run(scripted::SCRIPTED_ENDPOINT).await;
        assert!(
            matches!(summary.outcome, DriveOutcome::Complete),
            "run {run}: {:?}",
            summary.outcome
        );
        // Two canaries per model, on the first run only.
        assert_eq!(canaries(), 4, "run {run}");
    }
    // `run --recheck` runs them again despite the cached passes.
    let summary = place
        .start_with(scripted::SCRIPTED_ENDPOINT, true)
        .await
        .unwrap();
    assert!(matches!(summary.outcome, DriveOutcome::Complete));
    assert_eq!(canaries(), 8);
    let cache = place
        .dir
        .path()
        .join("home/.local/state/autocode")
        .join(CACHE_FILE);
    let text = std::fs::read_to_string(&cache).unwrap();
    assert!(
        text.contains(DOER_MODEL) && text.contains(CHECKER_MODEL),
        "{text}"
    );
    assert!(!place.workspace().join(CACHE_FILE).exists());
    server.shutdown().await;
}

fn single_model_request(place: &Place, model: &str, canaries: CanaryMode) -> preflight::Request {
    preflight::Request {
        provider: Some("autocode".into()),
        choice: RouteChoice {
            single_model: Some(model.into()),
            ..RouteChoice::default()
        },
        auto_select: false,
        scripted_local: false,
        workspace: place.workspace(),
        canaries,
    }
}

fn registry(place: &Place) -> Registry {
    Registry::new(ConfigPaths::under(&place.config_home().join("autocode")))
}

/// The cache's key includes what the server reports: a changed context re-runs the canaries;
/// `--recheck` (fresh mode) runs them regardless; a failed fresh canary drops the cached pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_fingerprint_or_a_recheck_runs_the_canaries_again() {
    let place = Place::new();
    let n_ctx = Arc::new(AtomicU64::new(32_768));
    let tools = Arc::new(AtomicBool::new(true));
    let canaries = Arc::new(AtomicU64::new(0));
    let (ctx, tools_on, count) = (n_ctx.clone(), tools.clone(), canaries.clone());
    let listed = AtomicU64::new(0);
    let server = FakeEndpoint::routed(move |path, body| {
        if path == "/v1/models" {
            // llama.cpp stamps `created` with the time of the request, vLLM adds fresh
            // permission ids: neither may change the fingerprint.
            let n = listed.fetch_add(1, Ordering::SeqCst);
            return http_json(
                "200 OK",
                &json!({"data": [
                    {"id": DOER_MODEL, "created": 1_700_000_000 + n,
                     "permission": [{"id": format!("modelperm-{n}")}], "meta": {"n_params": 1_500_000_000u64}},
                    {"id": CHECKER_MODEL}]}),
            );
        }
        if path == "/props" {
            return http_json(
                "200 OK",
                &json!({"default_generation_settings": {"n_ctx": ctx.load(Ordering::SeqCst)},
                        "model_path": "/models/m.gguf"}),
            );
        }
        if body.contains("preflight canary") {
            count.fetch_add(1, Ordering::SeqCst);
            if !tools_on.load(Ordering::SeqCst) {
                return http_json(
                    "200 OK",
                    &json!({"choices": [{"index": 0, "finish_reason": "stop",
                            "message": {"role": "assistant", "content": "no tools here"}}]}),
                );
            }
        }
        ready_answer(path, body).unwrap_or_else(|| http_json("404 Not Found", &json!({})))
    });
    demo_models(&place, &server.url);
    let registry = registry(&place);
    let env = place.env();
    let model = format!("local/{DOER_MODEL}");
    let check = |mode| {
        let request = single_model_request(&place, &model, mode);
        let registry = &registry;
        let env = &env;
        async move { preflight::preflight(registry, env, &request).await.unwrap() }
    };
    let source = |pf: &preflight::Preflight| pf.checks[0].readiness[0].canaries.clone();
    let first = check(CanaryMode::Cached).await;
    assert!(first.ok, "{:?}", first.problems);
    assert_eq!(source(&first), Canaries::Ran);
    assert_eq!(canaries.load(Ordering::SeqCst), 2);
    let second = check(CanaryMode::Cached).await;
    assert!(second.ok);
    assert!(matches!(source(&second), Canaries::Cached { .. }));
    assert_eq!(canaries.load(Ordering::SeqCst), 2);
    // The server now reports another context: another fingerprint.
    n_ctx.store(65_536, Ordering::SeqCst);
    let third = check(CanaryMode::Cached).await;
    assert_eq!(source(&third), Canaries::Ran);
    assert_eq!(canaries.load(Ordering::SeqCst), 4);
    // A recheck runs them even with a valid pass; when it fails, the pass is dropped.
    tools.store(false, Ordering::SeqCst);
    let rechecked = check(CanaryMode::Fresh).await;
    assert!(!rechecked.ok);
    assert_eq!(canaries.load(Ordering::SeqCst), 5);
    assert!(
        rechecked.problems_text().contains("tool_call check failed"),
        "{}",
        rechecked.problems_text()
    );
    tools.store(true, Ordering::SeqCst);
    let after = check(CanaryMode::Cached).await;
    assert!(after.ok);
    assert_eq!(source(&after), Canaries::Ran);
    assert_eq!(canaries.load(Ordering::SeqCst), 7);
}

/// Independence by declared family: look-alike names on two declared families are independent;
/// unlike names on one declared family are not. Cloud endpoints get no live check (nothing is
/// contacted: the URLs do not resolve).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn independence_uses_the_endpoints_declared_families() {
    let place = Place::new();
    let cloud = |name: &str, models: &[(&str, &str)]| {
        save(
            &place,
            name,
            EndpointKind::OpenaiCompatible,
            &format!("https://{name}.example.invalid/v1"),
            models,
        )
    };
    cloud("a", &[("gpt-x", "alpha")]);
    cloud("b", &[("gpt-y", "beta")]);
    cloud("c", &[("qwen-coder", "acme")]);
    cloud("d", &[("llama-3", "acme")]);
    let registry = registry(&place);
    let env = place.env();
    let routes = |doer: &str, checker: &str| {
        let models = Role::ALL
            .into_iter()
            .map(|role| {
                let verifier = matches!(
                    role,
                    Role::PlanReviewer | Role::Tester | Role::CompletionReviewer
                );
                (role, if verifier { checker } else { doer }.to_owned())
            })
            .collect();
        preflight::Request {
            provider: Some("autocode".into()),
            choice: RouteChoice {
                models,
                ..RouteChoice::default()
            },
            auto_select: false,
            scripted_local: false,
            workspace: place.workspace(),
            canaries: CanaryMode::Cached,
        }
    };
    let alike = preflight::preflight(&registry, &env, &routes("a/gpt-x", "b/gpt-y"))
        .await
        .unwrap();
    assert_eq!(alike.independence, Independence::Independent);
    assert!(alike.ok, "{:?}", alike.problems);
    assert!(alike.checks[0].readiness.is_empty());
    let same = preflight::preflight(&registry, &env, &routes("c/qwen-coder", "d/llama-3"))
        .await
        .unwrap();
    match &same.independence {
        Independence::Violated { pairs } => {
            assert_eq!(pairs.len(), 3, "{pairs:?}");
            assert!(pairs.iter().all(|p| p.contains("`acme`")), "{pairs:?}");
        }
        other => panic!("expected a violation, got {other:?}"),
    }
    assert!(!same.ok);
    // Without the connections (another home), the names decide: gpt-x and gpt-y are one family.
    let mut bare = env.clone();
    bare.insert(
        OsString::from("XDG_CONFIG_HOME"),
        place.dir.path().join("elsewhere").into_os_string(),
    );
    let families = preflight::families::from_os_env(&bare);
    let route = |model: &str| autocode::transport::Route {
        provider: autocode::ids::ProviderName::new("autocode").unwrap(),
        model: model.into(),
        effort: None,
        codex_model_provider: None,
    };
    assert_eq!(families.of(&route("a/gpt-x")).as_str(), "openai");
    let declared = preflight::families::from_os_env(&env);
    assert_eq!(declared.of(&route("a/gpt-x")).as_str(), "alpha");
    assert_eq!(declared.of(&route("d/llama-3")).as_str(), "acme");
}

/// A resume re-checks the local endpoints of the run's routes before it launches anything: a
/// server that went down pauses the run again, naming the check and its fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_pauses_when_the_local_server_went_down() {
    let place = Place::new();
    let server = ScriptedServer::start(ServerConfig::new(script_with(|s| {
        let builder = s["conversation"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|c| c["name"] == "builder")
            .unwrap();
        builder["step"].as_array_mut().unwrap().insert(
            0,
            json!({"kind": "http_error", "status": 429, "retry_after": 1, "times": 3}),
        );
    })))
    .await
    .unwrap();
    scripted::configure(
        &server,
        &place.config_home(),
        Protocol::ChatCompletions,
        &[(DOER_MODEL, "alpha"), (CHECKER_MODEL, "beta")],
    )
    .unwrap();
    let first = place.run(scripted::SCRIPTED_ENDPOINT).await;
    let DriveOutcome::Paused { pause } = &first.outcome else {
        panic!("expected the rate-limit pause");
    };
    assert_eq!(pause.code, autocode::pause::PauseCode::PausedRateLimit);
    let stages = first.stages;
    server.shutdown().await;
    let resumed = autocode::run::api::resume(
        &registry(&place),
        &place.env(),
        autocode::run::api::ResumeOptions {
            workspace: place.workspace(),
            ..Default::default()
        },
        &mut super::direct_e2e::Quiet,
    )
    .await
    .unwrap();
    let DriveOutcome::Paused { pause } = &resumed.outcome else {
        panic!("expected a pause, got {:?}", resumed.outcome);
    };
    assert_eq!(
        pause.code,
        autocode::pause::PauseCode::PausedProviderUncertain,
        "{pause:?}"
    );
    assert!(
        pause.reason.contains("server check failed"),
        "{}",
        pause.reason
    );
    assert!(pause.reason.contains("fix: start the"), "{}", pause.reason);
    // Nothing was launched.
    assert_eq!(resumed.stages, stages);
}

/// The real binary: a passing `connections check --live` records its passes, so `doctor` (the
/// run's own checks) reuses them; `doctor --recheck` runs the canaries again.
#[test]
fn a_live_check_feeds_the_cache_and_doctor_recheck_bypasses_it() {
    let place = Place::new();
    let canaries = Arc::new(AtomicU64::new(0));
    let count = canaries.clone();
    let server = FakeEndpoint::routed(move |path, body| {
        if body.contains("preflight canary") {
            count.fetch_add(1, Ordering::SeqCst);
        }
        ready_answer(path, body).unwrap_or_else(|| http_json("404 Not Found", &json!({})))
    });
    demo_models(&place, &server.url);
    let autocode = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_autocode"))
            .args(args)
            .env_clear()
            .envs(place.env())
            .current_dir(place.workspace())
            .output()
            .unwrap();
        (
            out.status.code(),
            serde_json::from_slice::<Value>(&out.stdout).unwrap_or(Value::Null),
        )
    };
    let (code, check) = autocode(&[
        "connections",
        "check",
        "--provider",
        "autocode",
        "--live",
        "--json",
    ]);
    assert_eq!(code, Some(0), "{check}");
    assert_eq!(canaries.load(Ordering::SeqCst), 4);
    let model = format!("local/{DOER_MODEL}");
    let doctor = |recheck: bool| {
        let mut args = vec![
            "doctor",
            "--provider",
            "autocode",
            "--single-model",
            &model,
            "--json",
        ];
        if recheck {
            args.push("--recheck");
        }
        let (_, report) = autocode(&args);
        report["preflight"]["checks"][0]["readiness"][0].clone()
    };
    let cached = doctor(false);
    assert_eq!(cached["canaries"]["state"], "cached", "{cached}");
    assert_eq!(canaries.load(Ordering::SeqCst), 4);
    let fresh = doctor(true);
    assert_eq!(fresh["canaries"]["state"], "ran", "{fresh}");
    assert!(
        fresh["checks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["ok"] == true),
        "{fresh}"
    );
    assert_eq!(canaries.load(Ordering::SeqCst), 6);
}

/// A local server that sends its headers, then one body byte every 300 ms, forever (until the
/// client hangs up): each read gets a byte, so only a total deadline ends a check.
fn trickling_server() -> String {
    use std::io::{Read, Write};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for socket in listener.incoming() {
            let Ok(mut socket) = socket else { return };
            std::thread::spawn(move || {
                let mut request = [0u8; 8192];
                let _ = socket.read(&mut request);
                let head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000000\r\n\r\n";
                if socket.write_all(head).is_err() {
                    return;
                }
                while socket.write_all(b" ").and_then(|()| socket.flush()).is_ok() {
                    std::thread::sleep(std::time::Duration::from_millis(300));
                }
            });
        }
    });
    url
}

/// The real binary against a trickling server: `connections check --live` and `doctor` end by
/// their total deadline (`AUTOCODE_CHECK_DEADLINE`, here 2 s per model) and name the URL that
/// ran out of time.
#[test]
fn live_checks_and_doctor_end_by_their_deadline_against_a_trickling_server() {
    let place = Place::new();
    let url = trickling_server();
    demo_models(&place, &url);
    let model = format!("local/{DOER_MODEL}");
    for args in [
        &["connections", "check", "--provider", "autocode", "--live"][..],
        &["doctor", "--provider", "autocode", "--single-model", &model],
    ] {
        let started = std::time::Instant::now();
        let child = Command::new(env!("CARGO_BIN_EXE_autocode"))
            .args(args)
            .env_clear()
            .envs(place.env())
            .env("AUTOCODE_CHECK_DEADLINE", "2")
            .current_dir(place.workspace())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        // A build without the deadline would wait for days: fail (and stop it) instead.
        let out = match rx.recv_timeout(std::time::Duration::from_secs(90)) {
            Ok(out) => out.unwrap(),
            Err(_) => {
                let _ = Command::new("kill").arg(pid.to_string()).status();
                panic!("{args:?} still waiting after 90 s");
            }
        };
        let took = started.elapsed();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(1), "{args:?}: {said}");
        assert!(
            said.contains(&format!("{url}/models")) && said.contains("2 s deadline"),
            "{args:?}: {said}"
        );
        // Two models of 2 s each, and process start-up: far below one 60 s per-read timeout.
        assert!(
            took < std::time::Duration::from_secs(30),
            "{args:?}: {took:?}"
        );
    }
}
