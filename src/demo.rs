//! `autocode demo`: the whole pipeline — requirements to COMPLETE — on a small bundled task, in a
//! temporary git workspace, through a real agent CLI driven by the scripted model server. No
//! account and no network model access: the CLI talks to a loopback server that answers every
//! stage from an embedded script.
//!
//! It prefers the pinned CLIs under `tests/clis/node_modules/.bin` (looked up from the current
//! directory and from the source tree autocode was built from), then `PATH`; Codex first (fastest
//! start), then Claude Code, then OpenCode.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::agent_env::PASS_ENV_VAR;
use crate::provider::registry::Env;
use crate::scripted_model::{RunningServer, Script, ScriptSyntax, ScriptedServer, ServerConfig};
use crate::transport::BuiltinTransport;

/// The model the doing roles run on, and the one the verifiers run on: two families, so the
/// cross-model guard is satisfied without waiving independence.
pub const DOER_MODEL: &str = "alpha-model";
pub const CHECKER_MODEL: &str = "beta-model";

/// The check that decides the demo's one acceptance criterion.
pub const DEMO_CHECK: &str = "grep -qx \"hello, world\" hello.txt";

/// The demo's routes: the verifying roles on [`CHECKER_MODEL`], the others on [`DOER_MODEL`]
/// (two families, so independence holds), each model id written by `route`.
pub fn demo_routes(route: impl Fn(&str) -> String) -> BTreeMap<crate::role::Role, String> {
    use crate::role::Role;
    Role::ALL
        .into_iter()
        .map(|role| {
            let model = match role {
                Role::PlanReviewer | Role::Tester | Role::CompletionReviewer => CHECKER_MODEL,
                _ => DOER_MODEL,
            };
            (role, route(model))
        })
        .collect()
}

pub const DEMO_OBJECTIVE: &str = "Create hello.txt containing exactly the line `hello, world`.";

/// Where a CLI was found.
#[derive(Debug, Clone)]
pub struct FoundCli {
    pub transport: BuiltinTransport,
    pub executable: PathBuf,
}

/// The first usable CLI: `preferred` if given, else codex, claude, opencode.
pub fn find_cli(preferred: Option<BuiltinTransport>, path_var: &OsString) -> Option<FoundCli> {
    let order = match preferred {
        Some(t) => vec![t],
        None => vec![
            BuiltinTransport::Codex,
            BuiltinTransport::Claude,
            BuiltinTransport::Opencode,
        ],
    };
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Ok(cwd) = std::env::current_dir() {
        dirs.push(cwd.join("tests/clis/node_modules/.bin"));
    }
    dirs.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clis/node_modules/.bin"));
    for transport in order {
        let name = transport.program();
        for dir in &dirs {
            let candidate = dir.join(name);
            if crate::provider::resolve_on_path(&candidate.to_string_lossy(), path_var).is_some() {
                return Some(FoundCli {
                    transport,
                    executable: candidate,
                });
            }
        }
        if let Some(found) = crate::provider::resolve_on_path(name, path_var) {
            return Some(FoundCli {
                transport,
                executable: found,
            });
        }
    }
    None
}

/// The model id a route names on `transport` (OpenCode spells `provider/model`).
pub fn model_id(transport: BuiltinTransport, model: &str) -> String {
    match transport {
        BuiltinTransport::Opencode => format!("mock/{model}"),
        _ => model.to_owned(),
    }
}

/// How a CLI is pointed at the scripted model.
#[derive(Debug, Clone, Copy)]
pub struct ScriptedCli<'a> {
    /// The model ids the scripts use (OpenCode must list them in its provider config; the first
    /// is the CLI's default).
    pub models: &'a [&'a str],
    /// How often the CLI retries a failed request itself (0 keeps a script's fault counts exact).
    pub max_retries: u32,
}

/// The demo's and the conformance probe's setting: two model families, one retry.
pub const DEMO_CLI: ScriptedCli<'static> = ScriptedCli {
    models: &[DOER_MODEL, CHECKER_MODEL],
    max_retries: 1,
};

/// An isolated home for `transport` pointed at `server`: writes its config under `home` and
/// returns the variables that replace autocode's own (HOME, XDG dirs, the CLI's config dir, its
/// dummy key passed through, and the settings that silence its other traffic). The user's own
/// configuration is never read or touched. The demo, the conformance probe and the scenario
/// harness all set CLIs up through here.
pub fn isolated_cli_env(
    transport: BuiltinTransport,
    server: &RunningServer,
    home: &Path,
    setup: ScriptedCli<'_>,
) -> std::io::Result<BTreeMap<String, String>> {
    let h = |p: &str| home.join(p).to_string_lossy().into_owned();
    let mut env: BTreeMap<String, String> = [
        ("HOME", h("")),
        ("XDG_CONFIG_HOME", h(".config")),
        ("XDG_DATA_HOME", h(".local/share")),
        ("XDG_CACHE_HOME", h(".cache")),
        ("XDG_STATE_HOME", h(".local/state")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let default_model = setup.models.first().copied().unwrap_or(DOER_MODEL);
    let retries = setup.max_retries;
    match transport {
        BuiltinTransport::Codex => {
            let codex_home = home.join(".codex");
            std::fs::create_dir_all(&codex_home)?;
            std::fs::write(
                codex_home.join("config.toml"),
                format!(
                    "model = \"{default_model}\"\nmodel_provider = \"mock\"\napproval_policy = \"never\"\n\
                     sandbox_mode = \"workspace-write\"\ncheck_for_update_on_startup = false\n\
                     [analytics]\nenabled = false\n\
                     [features]\nunbounded_connection_retries = false\nplugins = false\napps = false\n\
                     [model_providers.mock]\nname = \"Mock\"\nbase_url = \"{}\"\nwire_api = \"responses\"\n\
                     env_key = \"MOCK_API_KEY\"\nrequest_max_retries = {retries}\nstream_max_retries = {retries}\n",
                    server.openai_base_url()
                ),
            )?;
            env.insert(
                "CODEX_HOME".into(),
                codex_home.to_string_lossy().into_owned(),
            );
            env.insert("MOCK_API_KEY".into(), "scripted-model".into());
            // The key is a dummy, but its name reads as a credential: let it through.
            env.insert(PASS_ENV_VAR.into(), "MOCK_API_KEY".into());
        }
        BuiltinTransport::Claude => {
            env.insert("ANTHROPIC_BASE_URL".into(), server.base_url());
            env.insert("ANTHROPIC_API_KEY".into(), "scripted-model".into());
            env.insert(PASS_ENV_VAR.into(), "ANTHROPIC_API_KEY".into());
            for name in [
                "DISABLE_TELEMETRY",
                "DISABLE_ERROR_REPORTING",
                "DISABLE_AUTOUPDATER",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
            ] {
                env.insert(name.into(), "1".into());
            }
            env.insert("CLAUDE_CODE_MAX_RETRIES".into(), retries.to_string());
        }
        BuiltinTransport::Opencode => {
            let dir = home.join(".config/opencode");
            std::fs::create_dir_all(&dir)?;
            let models: serde_json::Map<String, Value> = setup
                .models
                .iter()
                .map(|name| {
                    (
                        (*name).to_owned(),
                        json!({"name": name, "tool_call": true, "limit": {"context": 128000, "output": 8192}}),
                    )
                })
                .collect();
            let config = json!({
                "$schema": "https://opencode.ai/config.json",
                "provider": {"mock": {"npm": "@ai-sdk/openai-compatible", "name": "Mock",
                    "options": {"baseURL": server.openai_base_url(), "apiKey": "scripted-model"},
                    "models": models}},
                "model": format!("mock/{default_model}"),
                "small_model": format!("mock/{default_model}"),
                "autoupdate": false, "share": "disabled",
                "permission": {"bash": "allow", "edit": "allow", "external_directory": "allow"}
            });
            std::fs::write(
                dir.join("opencode.json"),
                serde_json::to_vec_pretty(&config)?,
            )?;
            for name in [
                "OPENCODE_DISABLE_AUTOUPDATE",
                "OPENCODE_DISABLE_MODELS_FETCH",
                "OPENCODE_DISABLE_SHARE",
                "OPENCODE_DISABLE_LSP_DOWNLOAD",
            ] {
                env.insert(name.into(), "1".into());
            }
        }
    }
    Ok(env)
}

/// autocode's environment with `overrides` and the CLI's directory first on PATH.
pub fn run_env(base: &Env, overrides: &BTreeMap<String, String>, cli: &FoundCli) -> Env {
    let mut env = base.clone();
    for (k, v) in overrides {
        env.insert(k.into(), v.into());
    }
    if let Some(dir) = cli.executable.parent() {
        let path = env
            .get(&OsString::from("PATH"))
            .cloned()
            .unwrap_or_default();
        let mut joined = dir.as_os_str().to_owned();
        if !path.is_empty() {
            joined.push(":");
            joined.push(path);
        }
        env.insert("PATH".into(), joined);
    }
    env
}

fn step_shell(command: &str) -> Value {
    json!({"kind": "shell", "command": command})
}

fn step_report(report: Value) -> Value {
    json!({"kind": "report", "report": report})
}

fn conversation(name: &str, role_phrase: &str, steps: Vec<Value>) -> Value {
    json!({"name": name, "match": {"prompt_contains": role_phrase}, "step": steps})
}

/// The embedded demo script: one conversation per role, matched by the role's prompt.
pub fn demo_script() -> Value {
    let check =
        |evidence: &str| json!({"command": DEMO_CHECK, "exit_code": 0, "evidence_ref": evidence});
    json!({
        "models": [DOER_MODEL, CHECKER_MODEL],
        "title": "autocode demo",
        "conversation": [
            conversation("requirements", "You are the requirements gatherer", vec![step_report(json!({
                "summary": "Create hello.txt with the single line `hello, world`.",
                "goals": ["hello.txt exists at the workspace root and holds exactly `hello, world`"],
                "constraints": ["change nothing else"],
                "acceptance_criteria": [{"id": "a1", "text": "hello.txt holds exactly the line `hello, world`",
                                         "covers": [DEMO_OBJECTIVE]}],
                "open_questions": []
            }))]),
            conversation("planner", "You are the planner", vec![step_report(json!({
                "summary": "One milestone: write the file, check it with grep.",
                "milestones": [{
                    "id": "m1", "title": "Write hello.txt", "description": "Create the file.",
                    "acceptance_criteria": [{"id": "c1", "text": "hello.txt holds exactly `hello, world`",
                                             "check": DEMO_CHECK, "human_review": false, "kind": "fail_to_pass"}]
                }]
            }))]),
            conversation("plan_reviewer", "You are the plan reviewer", vec![step_report(json!({
                "verdict": "approve", "summary": "The check decides the criterion exactly.", "concerns": [], "uncovered": []
            }))]),
            conversation("builder", "You are the builder", vec![
                step_shell("printf \"hello, world\\n\" > hello.txt"),
                step_shell(DEMO_CHECK),
                step_report(json!({
                    "status": "done", "summary": "Wrote hello.txt and checked it.",
                    "files_changed": ["hello.txt"], "checks": [check("event:?")], "blockers": []
                })),
            ]),
            conversation("tester", "You are the tester", vec![
                step_shell(DEMO_CHECK),
                step_report(json!({
                    "milestone_id": "m1", "summary": "The check passes.",
                    "criteria": [{"criterion_id": "c1", "verdict": "PASS", "checks": [check("event:?")], "notes": ""}]
                })),
            ]),
            conversation("completion", "You are the completion reviewer", vec![step_report(json!({
                "decision": "COMPLETE", "summary": "The only milestone is verified.", "findings": [], "uncovered": []
            }))]),
        ]
    })
}

/// Starts the scripted model server on the demo script.
pub async fn start_server() -> Result<RunningServer, String> {
    let text = demo_script().to_string();
    let script = Script::parse(&text, ScriptSyntax::Json, Path::new("demo-script.json"))
        .map_err(|e| e.to_string())?;
    ScriptedServer::start(ServerConfig::new(script))
        .await
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_script_parses_and_its_reports_validate() {
        let script = demo_script();
        Script::parse(
            &script.to_string(),
            ScriptSyntax::Json,
            Path::new("demo.json"),
        )
        .unwrap();
        let kinds = [
            ("requirements", crate::report::ReportKind::Requirements),
            ("planner", crate::report::ReportKind::Plan),
            ("plan_reviewer", crate::report::ReportKind::PlanReview),
            ("builder", crate::report::ReportKind::Build),
            ("tester", crate::report::ReportKind::Test),
            ("completion", crate::report::ReportKind::Completion),
        ];
        for (name, kind) in kinds {
            let conv = script["conversation"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["name"] == name)
                .unwrap();
            let report = conv["step"].as_array().unwrap().last().unwrap()["report"].clone();
            crate::report::validate(kind, &report).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }

    #[test]
    fn the_roles_are_on_two_families() {
        use crate::provider::family_of;
        assert_ne!(family_of(DOER_MODEL), family_of(CHECKER_MODEL));
        assert_ne!(
            family_of(&model_id(BuiltinTransport::Opencode, DOER_MODEL)),
            family_of(&model_id(BuiltinTransport::Opencode, CHECKER_MODEL))
        );
    }
}
