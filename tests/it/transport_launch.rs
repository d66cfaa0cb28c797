//! Launch plans per transport and role (snapshots: argv, env names, stdin, files, withheld
//! names), plans checked against the real CLIs' captured command lines, the Claude billing
//! checks against the captured init rows, and the Git exclusion step on real temp repositories.

use autocode::agent_env::{AgentEnvironment, agent_environment};
use autocode::ids::{ProviderName, SessionId};
use autocode::role::Role;
use autocode::transport::claude_auth::{
    BillingRefusal, ClaudeBillingRoute, check_agent_env, check_init_row, find_init_row,
};
use autocode::transport::opencode::ensure_git_exclusions;
use autocode::transport::{
    LaunchPlan, OutputTokenCapSetter, PlanError, Route, StageRequest, plan_launch,
};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const WS: &str = "/work/project";
const RUN: &str = "/work/project/.autocode/runs/r1";
const STAGE: &str = "/work/project/.autocode/runs/r1/stages/003-builder-1";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real-clis")
}

/// A runner environment with a bit of everything the policy must sort out.
fn runner_env() -> Vec<(String, String)> {
    [
        ("HOME", "/home/dev"),
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("LANG", "C.UTF-8"),
        ("GITHUB_TOKEN", "ghp_secret"),
        ("OPENAI_API_KEY", "sk-secret"),
        ("HTTPS_PROXY", "http://user:pw@proxy:3128"),
        ("NO_PROXY", "localhost,127.0.0.1"),
        ("AUTOCODE_PROVIDER", "opencode"),
        ("AUTOCODE_CONTROL_TOKEN", "ctl-secret"),
        ("CLAUDE_CODE_SESSION_ID", "parent-session"),
        ("CLAUDE_CODE_ENTRYPOINT", "cli"),
        ("CLAUDE_EFFORT", "max"),
        ("KEYBOARD_LAYOUT", "us"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": { "status": { "type": "string", "enum": ["done", "failed"] } },
        "required": ["status"],
        "additionalProperties": false
    })
}

fn request(provider: &str, role: Role, model: &str, effort: Option<&str>) -> StageRequest {
    StageRequest {
        role,
        route: Route {
            provider: ProviderName::new(provider).unwrap(),
            model: model.into(),
            effort: effort.map(String::from),
            codex_model_provider: None,
        },
        workspace: WS.into(),
        sandbox: role.sandbox(),
        prompt: format!("You are the {role}. Reply with the JSON report.\n"),
        schema_path: Path::new(STAGE).join("schema.json"),
        schema_json: schema(),
        report_path: Path::new(STAGE).join("report.json"),
        run_dir: RUN.into(),
        stage_dir: STAGE.into(),
        resume_session: None,
        env: agent_environment(runner_env(), &[], None),
        cli_version: None,
        confined: false,
    }
}

/// What a snapshot shows: everything but env values (names only).
fn view(plan: &LaunchPlan, env: &AgentEnvironment) -> Value {
    json!({
        "program": plan.program,
        "args": plan.args,
        "cwd": plan.cwd,
        "stdin": String::from_utf8_lossy(&plan.stdin),
        "env_names": plan.env.keys().collect::<Vec<_>>(),
        "files": plan.files,
        "output_token_cap": plan.output_token_cap,
        "removed_env": plan.removed_env,
        "withheld_env": env.withheld,
    })
}

fn assert_no_secret_reaches_the_child(plan: &LaunchPlan) {
    for secret in ["ghp_secret", "sk-secret", "ctl-secret", "user:pw"] {
        assert!(
            !plan.env.values().any(|v| v.contains(secret)),
            "{secret} leaked into the child's environment"
        );
        assert!(!plan.args.iter().any(|a| a.contains(secret)));
    }
}

#[test]
fn opencode_plans_per_role() {
    for role in Role::ALL {
        let req = request(
            "opencode",
            role,
            "zhipuai-coding-plan/glm-5.3",
            Some("medium"),
        );
        let plan = plan_launch(&req).unwrap();
        assert_no_secret_reaches_the_child(&plan);
        insta::assert_json_snapshot!(format!("opencode_{role}"), view(&plan, &req.env));
    }
}

#[test]
fn codex_plans_per_role() {
    for role in Role::ALL {
        let req = request("codex", role, "gpt-6-sol", Some("high"));
        let plan = plan_launch(&req).unwrap();
        assert_no_secret_reaches_the_child(&plan);
        insta::assert_json_snapshot!(format!("codex_{role}"), view(&plan, &req.env));
    }
}

#[test]
fn claude_plans_per_role() {
    for role in Role::ALL {
        let req = request("claude", role, "claude-sonnet-5-5", Some("medium"));
        let plan = plan_launch(&req).unwrap();
        assert_no_secret_reaches_the_child(&plan);
        assert!(!plan.env.values().any(|v| v == "parent-session"));
        assert_eq!(
            plan.removed_env,
            [
                "CLAUDE_CODE_ENTRYPOINT",
                "CLAUDE_CODE_SESSION_ID",
                "CLAUDE_EFFORT"
            ]
        );
        insta::assert_json_snapshot!(format!("claude_{role}"), view(&plan, &req.env));
    }
}

#[test]
fn resumed_and_versioned_variants() {
    let session = SessionId::new("ses_dd74eeb95ffeC0i3ERkxJLLdNL").unwrap();
    let mut oc = request("opencode", Role::Planner, "openai/gpt-6-sol", Some("high"));
    oc.resume_session = Some(session);
    oc.cli_version = Some("2.0.20".into());
    insta::assert_json_snapshot!(
        "opencode_v2_resume",
        view(&plan_launch(&oc).unwrap(), &oc.env)
    );

    let mut cx = request("codex", Role::Tester, "audit-model", None);
    cx.route.codex_model_provider = Some("other_provider".into());
    cx.resume_session = Some(SessionId::new("01a228c8-dcd7-7381-98b0-f4e9a83675c2").unwrap());
    insta::assert_json_snapshot!(
        "codex_resume_with_model_provider",
        view(&plan_launch(&cx).unwrap(), &cx.env)
    );

    let mut cl = request("claude", Role::Builder, "claude-haiku-4-5-20251001", None);
    cl.resume_session = Some(SessionId::new("e1ed9f8b-a3f5-4ce8-a198-8d1c4d861b47").unwrap());
    insta::assert_json_snapshot!(
        "claude_resume_without_effort",
        view(&plan_launch(&cl).unwrap(), &cl.env)
    );
}

/// Splits a captured `command.sh` into (env, argv) for simple commands: the `env -i` lines and
/// the last line, split on spaces, minus the stdin redirection.
fn captured_command(case: &str) -> (BTreeMap<String, String>, Vec<String>) {
    let text = std::fs::read_to_string(fixtures().join(case).join("command.sh")).unwrap();
    let mut env = BTreeMap::new();
    let mut argv = Vec::new();
    for line in text
        .lines()
        .skip_while(|l| !l.starts_with("env -i"))
        .skip(1)
    {
        let line = line.trim().trim_end_matches('\\').trim();
        match line.split_once('=') {
            Some((name, value)) if !line.contains(' ') => {
                env.insert(name.to_string(), value.to_string());
            }
            _ => {
                let command = line.split(" < ").next().unwrap();
                argv = command.split(' ').map(String::from).collect();
            }
        }
    }
    (env, argv)
}

#[test]
fn codex_plans_match_the_captured_command_lines() {
    for (case, resume) in [
        ("codex/happy", None),
        ("codex/resume", Some("01a228c8-dcd7-7381-98b0-f4e9a83675c2")),
    ] {
        let (_, argv) = captured_command(case);
        let schema = argv[argv.iter().position(|a| a == "--output-schema").unwrap() + 1].clone();
        let report = argv[argv.iter().position(|a| a == "-o").unwrap() + 1].clone();
        let mut req = request("codex", Role::Builder, "mock-model", None);
        req.workspace = "/tmp/ws-codex-happy".into();
        req.schema_path = schema.into();
        req.report_path = report.into();
        req.resume_session = resume.map(|r| SessionId::new(r).unwrap());
        let plan = plan_launch(&req).unwrap();
        let mut expected = argv.clone();
        assert_eq!(expected.remove(0), "codex");
        if resume.is_some() {
            // Our resume also carries the sandbox, which `resume` takes only through `-c`.
            let at = expected
                .iter()
                .position(|a| a == "--output-schema")
                .unwrap();
            expected.splice(
                at..at,
                ["-c".to_string(), "sandbox_mode=\"workspace-write\"".into()],
            );
        }
        assert_eq!(plan.args, expected, "{case}");
        assert_eq!(plan.cwd, Path::new("/tmp/ws-codex-happy"));
    }
}

#[test]
fn opencode_plan_matches_the_captured_command_line() {
    let (_, argv) = captured_command("opencode/happy_stdin");
    let plan = plan_launch(&request("opencode", Role::Builder, "mock/mock-model", None)).unwrap();
    assert_eq!(argv[0], "opencode");
    assert_eq!(plan.args, argv[1..]);
    assert_eq!(
        plan.stdin,
        request("opencode", Role::Builder, "m/x", None)
            .prompt
            .as_bytes()
    );
}

#[test]
fn claude_plan_keeps_the_captured_core_flags() {
    let text = std::fs::read_to_string(fixtures().join("claude/happy/command.sh")).unwrap();
    let plan = plan_launch(&request("claude", Role::Builder, "mock-model", None)).unwrap();
    for flag in [
        "-p",
        "--output-format stream-json",
        "--verbose",
        "--tools Bash,Read,Edit,Write,Glob,Grep",
        "--model mock-model",
        "--permission-mode dontAsk",
        "--allowedTools Bash,Read,Edit,Write,Glob,Grep",
    ] {
        assert!(text.contains(flag), "fixture lacks {flag}");
        let joined = plan.args.join(" ");
        assert!(joined.contains(flag), "plan lacks {flag}: {joined}");
    }
    let schema_at = plan.args.iter().position(|a| a == "--json-schema").unwrap();
    let schema: Value = serde_json::from_str(&plan.args[schema_at + 1]).unwrap();
    assert_eq!(schema, self::schema());
    assert!(
        !plan
            .args
            .iter()
            .any(|a| a.contains("dangerously") || a == "bypassPermissions")
    );
}

#[test]
fn opencode_output_cap_respects_the_operator() {
    let mut env = runner_env();
    env.push((
        "OPENCODE_EXPERIMENTAL_OUTPUT_TOKEN_MAX".into(),
        "100000".into(),
    ));
    let mut req = request("opencode", Role::Builder, "a/b", None);
    req.env = agent_environment(env, &[], None);
    let plan = plan_launch(&req).unwrap();
    let cap = plan.output_token_cap.unwrap();
    assert_eq!(
        (cap.tokens, cap.set_by),
        (100_000, OutputTokenCapSetter::Operator)
    );
    assert_eq!(plan.env["OPENCODE_EXPERIMENTAL_OUTPUT_TOKEN_MAX"], "100000");

    let mut env = runner_env();
    env.push((
        "OPENCODE_EXPERIMENTAL_OUTPUT_TOKEN_MAX".into(),
        "lots".into(),
    ));
    req.env = agent_environment(env, &[], None);
    let plan = plan_launch(&req).unwrap();
    let cap = plan.output_token_cap.unwrap();
    assert_eq!(
        (cap.tokens, cap.set_by),
        (64_000, OutputTokenCapSetter::Autocode)
    );
    assert_eq!(plan.env["OPENCODE_EXPERIMENTAL_OUTPUT_TOKEN_MAX"], "64000");
    assert_eq!(
        req.env.withheld_names(),
        [
            "AUTOCODE_CONTROL_TOKEN",
            "GITHUB_TOKEN",
            "HTTPS_PROXY",
            "OPENAI_API_KEY",
            "OPENCODE_EXPERIMENTAL_OUTPUT_TOKEN_MAX"
        ]
    );
}

#[test]
fn opencode_stage_layer_keeps_the_operators_inline_config() {
    let mut env = runner_env();
    env.push((
        "OPENCODE_CONFIG_CONTENT".into(),
        r#"{"share":"disabled"}"#.into(),
    ));
    let mut req = request("opencode", Role::Planner, "a/b", None);
    req.env = agent_environment(env, &[], None);
    let plan = plan_launch(&req).unwrap();
    let inline: Value = serde_json::from_str(&plan.env["OPENCODE_CONFIG_CONTENT"]).unwrap();
    assert_eq!(inline["share"], "disabled");
    assert_eq!(inline["permission"]["edit"], "deny");
    let record: Value = serde_json::from_str(&plan.files[0].contents).unwrap();
    assert_eq!(record, inline);
    assert!(plan.files[0].path.starts_with(STAGE));

    // A builder gets no permission layer: the operator's inline config with OpenCode's own
    // snapshots off.
    let mut req = request("opencode", Role::Builder, "a/b", None);
    let mut env = runner_env();
    env.push((
        "OPENCODE_CONFIG_CONTENT".into(),
        r#"{"permission":{"edit":"allow"}}"#.into(),
    ));
    req.env = agent_environment(env, &[], None);
    let plan = plan_launch(&req).unwrap();
    let inline: Value = serde_json::from_str(&plan.env["OPENCODE_CONFIG_CONTENT"]).unwrap();
    assert_eq!(
        inline,
        serde_json::json!({"permission": {"edit": "allow"}, "snapshot": false})
    );
    // An inline config that is not a JSON object cannot be merged over, so no stage plans
    // (OpenCode would stop on it too).
    let mut env = runner_env();
    env.push(("OPENCODE_CONFIG_CONTENT".into(), "not json".into()));
    req.env = agent_environment(env, &[], None);
    for role in [Role::Builder, Role::Planner] {
        req.role = role;
        req.sandbox = role.sandbox();
        assert!(matches!(
            plan_launch(&req),
            Err(PlanError::OpencodeInlineConfig { .. })
        ));
    }
}

#[test]
fn plans_refuse_unsafe_values() {
    let mut req = request("codex", Role::Builder, "gpt", Some("high\" -c x=\"y"));
    assert!(matches!(
        plan_launch(&req),
        Err(PlanError::UnsafeValue {
            field: "effort",
            ..
        })
    ));
    req.route.effort = None;
    req.route.codex_model_provider = Some("a b".into());
    assert!(matches!(
        plan_launch(&req),
        Err(PlanError::UnsafeValue { .. })
    ));
    let req = request("opencode", Role::Builder, "no-provider-prefix", None);
    assert!(matches!(
        plan_launch(&req),
        Err(PlanError::OpencodeModelWithoutProvider { .. })
    ));
    let req = request("claude", Role::Builder, "sonnet", Some("ultra"));
    assert!(matches!(
        plan_launch(&req),
        Err(PlanError::ClaudeEffort { .. })
    ));
    let req = request("claude", Role::Builder, "--model", None);
    assert!(matches!(
        plan_launch(&req),
        Err(PlanError::UnsafeValue { field: "model", .. })
    ));
    let mut req = request("opencode", Role::Builder, "a/b", None);
    req.cli_version = Some("latest".into());
    assert!(matches!(
        plan_launch(&req),
        Err(PlanError::BadVersion { .. })
    ));
    let req = request("kilocode", Role::Builder, "a/b", None);
    assert!(matches!(
        plan_launch(&req),
        Err(PlanError::NotBuiltin { .. })
    ));
}

#[test]
fn claude_effort_env_override_is_removed_only_with_an_effort() {
    let mut env = runner_env();
    env.push(("CLAUDE_CODE_EFFORT_LEVEL".into(), "max".into()));
    let mut req = request("claude", Role::Builder, "sonnet", Some("low"));
    req.env = agent_environment(env, &[], None);
    let plan = plan_launch(&req).unwrap();
    assert!(!plan.env.contains_key("CLAUDE_CODE_EFFORT_LEVEL"));
    assert!(
        plan.removed_env
            .contains(&"CLAUDE_CODE_EFFORT_LEVEL".to_string())
    );
    req.route.effort = None;
    let plan = plan_launch(&req).unwrap();
    assert_eq!(plan.env["CLAUDE_CODE_EFFORT_LEVEL"], "max");
    assert_eq!(plan.env["DISABLE_AUTOUPDATER"], "1");
}

#[test]
fn planned_files_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut req = request("codex", Role::Planner, "gpt", None);
    req.stage_dir = dir.path().join("stage");
    req.schema_path = req.stage_dir.join("schema.json");
    let plan = plan_launch(&req).unwrap();
    plan.write_files().unwrap();
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(&req.schema_path).unwrap()).unwrap();
    assert_eq!(written, schema());
    let spec = plan.into_launch_spec(
        "stage test",
        autocode::supervise::StdioMode::Captured { limit: 1 },
        None,
    );
    assert_eq!(spec.program, "codex");
    assert!(!spec.env.contains_key(std::ffi::OsStr::new("GITHUB_TOKEN")));
}

// ---- Claude billing checks against the captured init rows ----

fn claude_cases() -> Vec<(String, PathBuf)> {
    let mut cases: Vec<_> = std::fs::read_dir(fixtures().join("claude"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("stdout.jsonl").is_file())
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .collect();
    cases.sort();
    cases
}

#[test]
fn captured_init_rows_are_judged_by_their_api_key_source() {
    let local = ClaudeBillingRoute::ScriptedLocal {
        base_url: "http://127.0.0.1:18103".into(),
    };
    let mut judged = 0;
    for (case, dir) in claude_cases() {
        let stdout = std::fs::read_to_string(dir.join("stdout.jsonl")).unwrap();
        if stdout.is_empty() {
            continue; // refused before any output (root + bypass flag)
        }
        let first = find_init_row(stdout.lines()).unwrap_or_else(|| panic!("{case}: no init row"));
        judged += 1;
        let verdict = check_init_row(first, &ClaudeBillingRoute::Subscription);
        if case == "authtoken" {
            // ANTHROPIC_AUTH_TOKEN reports apiKeySource "none": the init row alone passes, which
            // is why the agents' environment is checked too (below).
            assert_eq!(verdict, Ok(()), "{case}");
        } else {
            assert_eq!(
                verdict,
                Err(BillingRefusal::InitApiKeySource {
                    source_name: "ANTHROPIC_API_KEY".into()
                }),
                "{case}"
            );
            assert_eq!(verdict.unwrap_err().pause_code(), "PAUSED_BILLING_ROUTE");
        }
        assert_eq!(check_init_row(first, &local), Ok(()), "{case}");
    }
    assert!(judged >= 20, "only {judged} init rows found");
}

#[test]
fn captured_environments_pass_only_as_scripted_local_routes() {
    for (case, dir) in claude_cases() {
        let env: BTreeMap<String, String> =
            serde_json::from_str(&std::fs::read_to_string(dir.join("env.json")).unwrap()).unwrap();
        let pass = Some("ANTHROPIC_API_KEY,ANTHROPIC_AUTH_TOKEN");
        let agents = agent_environment(env.clone(), &[], pass);
        if env.contains_key("ANTHROPIC_BASE_URL") {
            assert_eq!(
                check_agent_env(&agents.kept, true),
                Ok(ClaudeBillingRoute::ScriptedLocal {
                    base_url: "http://127.0.0.1:18103".into()
                }),
                "{case}"
            );
            assert_eq!(
                check_agent_env(&agents.kept, false),
                Err(BillingRefusal::BaseUrl),
                "{case}"
            );
        }
        // Without the opt-in the keys never reach Claude Code at all.
        let scrubbed = agent_environment(env, &[], None);
        assert!(!scrubbed.kept.contains_key("ANTHROPIC_API_KEY"));
        assert!(!scrubbed.kept.contains_key("ANTHROPIC_AUTH_TOKEN"));
    }
}

// ---- Git exclusions on real temp repositories ----

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn init_repo(dir: &Path) {
    git(dir, &["init", "-q", "-b", "main"]);
    git(
        dir,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "init",
        ],
    );
}

fn git_status(dir: &Path) -> String {
    let out = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=all"])
        .current_dir(dir)
        .env("HOME", dir)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn exclusion_is_added_once_and_hides_runtime_files() {
    let repo = tempfile::tempdir().unwrap();
    init_repo(repo.path());
    let exclude = repo.path().join(".git/info/exclude");
    std::fs::write(&exclude, "# keep me\n*.log").unwrap();
    std::fs::create_dir_all(repo.path().join(".autocode/runs")).unwrap();
    std::fs::write(repo.path().join(".autocode/runs/x.json"), "{}").unwrap();
    assert!(git_status(repo.path()).contains(".autocode/"));

    assert!(ensure_git_exclusions(repo.path()).unwrap());
    assert!(
        !ensure_git_exclusions(repo.path()).unwrap(),
        "second call changes nothing"
    );
    assert_eq!(
        std::fs::read_to_string(&exclude).unwrap(),
        "# keep me\n*.log\n.autocode/\n"
    );
    assert_eq!(git_status(repo.path()), "");
}

#[test]
fn exclusion_file_is_created_when_missing() {
    let repo = tempfile::tempdir().unwrap();
    init_repo(repo.path());
    std::fs::remove_dir_all(repo.path().join(".git/info")).unwrap();
    let sub = repo.path().join("crates/app");
    std::fs::create_dir_all(&sub).unwrap();
    assert!(
        ensure_git_exclusions(&sub).unwrap(),
        "found from a subdirectory"
    );
    assert_eq!(
        std::fs::read_to_string(repo.path().join(".git/info/exclude")).unwrap(),
        ".autocode/\n"
    );
}

#[test]
fn worktree_exclusion_goes_to_the_common_git_dir() {
    let base = tempfile::tempdir().unwrap();
    let main = base.path().join("main");
    std::fs::create_dir(&main).unwrap();
    init_repo(&main);
    git(&main, &["worktree", "add", "-q", "../wt", "-b", "side"]);
    let wt = base.path().join("wt");
    assert!(wt.join(".git").is_file());
    std::fs::create_dir_all(wt.join(".autocode")).unwrap();
    std::fs::write(wt.join(".autocode/a"), "x").unwrap();

    assert!(ensure_git_exclusions(&wt).unwrap());
    let common = std::fs::read_to_string(main.join(".git/info/exclude")).unwrap();
    assert!(common.lines().any(|l| l == ".autocode/"), "{common}");
    assert_eq!(git_status(&wt), "");
    assert!(
        !ensure_git_exclusions(&main).unwrap(),
        "shared with the main checkout"
    );
}

#[test]
fn not_a_repository_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    // A temp dir is not inside a repository unless $TMPDIR is; skip rather than misjudge.
    if autocode::transport::opencode::find_common_git_dir(dir.path())
        .unwrap()
        .is_some()
    {
        return;
    }
    assert!(!ensure_git_exclusions(dir.path()).unwrap());
    assert!(!dir.path().join(".git").exists());
}

#[test]
fn a_broken_git_file_is_an_error_not_a_guess() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".git"), "nonsense\n").unwrap();
    let err = ensure_git_exclusions(dir.path()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
}

/// TOML-registered tools: the bundled kilocode config, expanded for a stage.
#[test]
fn toml_tool_kilocode_plans_with_and_without_effort_and_resumes() {
    use autocode::provider::builtin::bundled_text;
    use autocode::provider::load_config;
    use autocode::transport::{plan_for_provider, toml_tool};

    let text = bundled_text("kilocode").unwrap();
    let config = load_config(Path::new("providers/kilocode.toml"), text)
        .unwrap()
        .config;
    let req = request(
        "kilocode",
        Role::Builder,
        "openai/gpt-5.6-terra",
        Some("medium"),
    );
    let plan = plan_for_provider(&req, &config, None).unwrap();
    assert_eq!(plan.program, "kilo");
    assert_eq!(
        plan.args,
        [
            "run",
            "--auto",
            "--dir",
            WS,
            "--model",
            "openai/gpt-5.6-terra",
            "--variant",
            "medium",
            "--format",
            "json"
        ]
    );
    assert_eq!(plan.stdin, req.prompt.as_bytes());
    assert_eq!(plan.cwd, Path::new(WS));
    assert_no_secret_reaches_the_child(&plan);
    // No effort: `--variant {effort}` disappears entirely.
    let plan = toml_tool::plan(&request("kilocode", Role::Builder, "m/x", None), &config).unwrap();
    assert!(!plan.args.iter().any(|a| a == "--variant" || a.is_empty()));
    // Resume appends the resume template.
    let mut resumed = request("kilocode", Role::Tester, "m/x", None);
    resumed.resume_session = Some(autocode::ids::SessionId::new("ses_abc").unwrap());
    let plan = toml_tool::plan(&resumed, &config).unwrap();
    assert_eq!(&plan.args[plan.args.len() - 2..], ["--session", "ses_abc"]);
}

#[test]
fn toml_tool_prompt_file_and_report_file() {
    use autocode::provider::load_config;
    use autocode::transport::toml_tool;

    let text = r#"
name = "filetool"
command = ["filetool", "--prompt", "{prompt_file}", "--out", "{report}", "--schema", "{schema}"]
prompt = "file"
output = "report_file"
models = ["alpha-1", "beta-2"]
version_command = ["filetool", "--version"]

[roles]
astra = { model = "alpha-1" }
terra = { model = "alpha-1" }
sol = { model = "beta-2" }
completion = { model = "beta-2" }
glm = { model = "alpha-1" }
plan_reviewer = { model = "beta-2" }
"#;
    let config = load_config(Path::new("filetool.toml"), text)
        .unwrap()
        .config;
    let req = request("filetool", Role::Tester, "beta-2", None);
    let plan = toml_tool::plan(&req, &config).unwrap();
    assert!(plan.stdin.is_empty());
    let prompt_path = Path::new(STAGE).join("prompt.md");
    assert!(
        plan.files
            .iter()
            .any(|f| f.path == prompt_path && f.contents == req.prompt)
    );
    assert!(plan.files.iter().any(|f| f.path == req.schema_path));
    assert_eq!(plan.args[1], prompt_path.to_string_lossy());
    assert_eq!(plan.args[3], req.report_path.to_string_lossy());
    // This tool has no resume template: a session cannot be continued.
    let mut resumed = req.clone();
    resumed.resume_session = Some(autocode::ids::SessionId::new("s1").unwrap());
    assert!(toml_tool::plan(&resumed, &config).is_err());
}

/// Values substituted into a shell's `-c` script reach the command as single words, whatever
/// they hold and wherever the template put them (unquoted, in '…', in "…").
#[test]
fn placeholders_inside_sh_c_scripts_are_quoted_for_the_shell() {
    use autocode::provider::template::{TemplateValues, expand};
    let hostile = [
        "p;touch X;#",
        "a b",
        "it's",
        "$(touch Y)",
        "`touch Z`",
        "back\\slash\"quote",
        "new\nline",
    ];
    let dir = tempfile::tempdir().unwrap();
    for value in hostile {
        for script in [
            "printf '%s|' {workspace}",
            "printf '%s|' '{workspace}'",
            "printf '%s|' \"{workspace}\"",
            "printf '%s|' x{workspace}y",
        ] {
            let template: Vec<String> =
                ["sh", "-c", script].iter().map(|s| s.to_string()).collect();
            let values = TemplateValues {
                workspace: Some(value.to_owned()),
                ..TemplateValues::default()
            };
            let argv = expand(&template, &values).unwrap();
            let out = std::process::Command::new(&argv[0])
                .args(&argv[1..])
                .current_dir(dir.path())
                .output()
                .unwrap();
            let printed = String::from_utf8(out.stdout).unwrap();
            let expected = if script.contains("x{workspace}y") {
                format!("x{value}y|")
            } else {
                format!("{value}|")
            };
            assert_eq!(printed, expected, "{script} with {value:?}: {argv:?}");
        }
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "a value ran a command"
    );
}

/// `opencode acp` registered as an ACP tool gets the native stages' snapshot-off layer, merged
/// over the operator's inline config; another ACP tool gets nothing of OpenCode's.
#[test]
fn an_acp_tool_running_opencode_gets_the_snapshot_off_layer() {
    use autocode::provider::load_config;
    use autocode::transport::{BuiltinTransport, plan_for_provider};

    let text = r#"
name = "opencode-acp"
command = ["opencode", "acp"]
output = "acp"

[roles]
astra = { model = "mock/a" }
terra = { model = "mock/a" }
sol = { model = "mock/b" }
completion = { model = "mock/b" }
glm = { model = "mock/a" }
plan_reviewer = { model = "mock/b" }
"#;
    let config = load_config(Path::new("opencode-acp.toml"), text)
        .unwrap()
        .config;
    let drives = autocode::acp::pinned::driven_cli(&config);
    assert_eq!(drives, Some(BuiltinTransport::Opencode));
    let mut req = request("opencode-acp", Role::Planner, "mock/a", None);
    let mut env = runner_env();
    env.push((
        "OPENCODE_CONFIG_CONTENT".into(),
        r#"{"share":"disabled"}"#.into(),
    ));
    req.env = agent_environment(env, &[], None);
    let plan = plan_for_provider(&req, &config, drives).unwrap();
    let inline: Value = serde_json::from_str(&plan.env["OPENCODE_CONFIG_CONTENT"]).unwrap();
    assert_eq!(inline, json!({"share": "disabled", "snapshot": false}));
    let record = plan
        .files
        .iter()
        .find(|f| f.path == Path::new(STAGE).join("opencode-config.json"))
        .expect("the layer's record");
    assert_eq!(
        serde_json::from_str::<Value>(&record.contents).unwrap(),
        inline
    );

    // Not OpenCode: the operator's inline config reaches the agent untouched.
    let plan = plan_for_provider(&req, &config, None).unwrap();
    assert_eq!(
        plan.env["OPENCODE_CONFIG_CONTENT"],
        r#"{"share":"disabled"}"#
    );
}
