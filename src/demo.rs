//! `autocode demo`: the whole pipeline — requirements to COMPLETE — on a small bundled task, in a
//! temporary git workspace, through a real agent CLI driven by the scripted model server. No
//! account and no network model access: the CLI talks to a loopback server that answers every
//! stage from an embedded script.
//!
//! It drives the CLI a run would use: the one on `PATH`, or exactly the one `--executable` names;
//! a directory of pinned CLIs (`--clis-dir tests/clis/node_modules/.bin`) is searched first only
//! when the command is given one, never the source tree autocode was built from. Codex first
//! (fastest start), then Claude Code, then OpenCode.

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

/// Where a command looks for a CLI beyond `PATH`.
#[derive(Debug, Clone, Default)]
pub struct CliSearch {
    /// Exactly this executable (`--executable`): nothing else is looked at.
    pub executable: Option<PathBuf>,
    /// A directory searched before `PATH` (`--clis-dir`, e.g. the pinned `tests/clis/...`).
    pub dir: Option<PathBuf>,
}

/// Why no CLI was found.
#[derive(Debug, thiserror::Error)]
pub enum FindCliError {
    #[error("--executable {0}: not an executable file")]
    NotExecutable(PathBuf),
    #[error("--executable needs --provider to say which CLI it is")]
    NoTransport,
    #[error("no {0} on PATH{1}")]
    NotFound(String, String),
}

/// The CLI a run would use: `search.executable` if given (for `preferred`), else the first of
/// `preferred` (or codex, claude, opencode) in `search.dir` and then on `path_var`.
pub fn find_cli(
    preferred: Option<BuiltinTransport>,
    path_var: &OsString,
    search: &CliSearch,
) -> Result<FoundCli, FindCliError> {
    if let Some(exe) = &search.executable {
        let transport = preferred.ok_or(FindCliError::NoTransport)?;
        let exe = std::path::absolute(exe).unwrap_or_else(|_| exe.clone());
        let resolved = crate::provider::resolve_on_path(&exe.to_string_lossy(), path_var)
            .ok_or(FindCliError::NotExecutable(exe))?;
        return Ok(FoundCli {
            transport,
            executable: resolved,
        });
    }
    let order = match preferred {
        Some(t) => vec![t],
        None => vec![
            BuiltinTransport::Codex,
            BuiltinTransport::Claude,
            BuiltinTransport::Opencode,
        ],
    };
    for transport in &order {
        let name = transport.program();
        if let Some(dir) = &search.dir {
            let candidate = dir.join(name);
            let candidate = std::path::absolute(&candidate).unwrap_or(candidate);
            if let Some(found) =
                crate::provider::resolve_on_path(&candidate.to_string_lossy(), path_var)
            {
                return Ok(FoundCli {
                    transport: *transport,
                    executable: found,
                });
            }
        }
        if let Some(found) = crate::provider::resolve_on_path(name, path_var) {
            return Ok(FoundCli {
                transport: *transport,
                executable: found,
            });
        }
    }
    let names: Vec<&str> = order.iter().map(|t| t.program()).collect();
    Err(FindCliError::NotFound(
        names.join(", "),
        search
            .dir
            .as_ref()
            .map(|d| format!(" or in {}", d.display()))
            .unwrap_or_default(),
    ))
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
    use super::{CliSearch, FindCliError, find_cli};
    use crate::transport::BuiltinTransport;

    fn fake(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, "#!/bin/sh\necho fake\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[test]
    fn the_cli_is_the_one_a_run_would_use_never_the_build_trees() {
        let root = tempfile::tempdir().unwrap();
        let on_path = fake(&root.path().join("bin"), "codex");
        let pinned = fake(&root.path().join("pinned"), "codex");
        let path_var = root.path().join("bin").into_os_string();
        let codex = Some(BuiltinTransport::Codex);
        // PATH, as a run: not the pinned copy, not the source tree's tests/clis.
        let found = find_cli(codex, &path_var, &CliSearch::default()).unwrap();
        assert_eq!(found.executable, on_path);
        // Nothing on PATH: nothing found, though this source tree has pinned CLIs.
        let empty = root.path().join("empty").into_os_string();
        assert!(matches!(
            find_cli(codex, &empty, &CliSearch::default()),
            Err(FindCliError::NotFound(..))
        ));
        // A directory the command names is searched first.
        let search = CliSearch {
            executable: None,
            dir: Some(root.path().join("pinned")),
        };
        assert_eq!(
            find_cli(codex, &path_var, &search).unwrap().executable,
            pinned
        );
        // An explicit executable is that one, for the named CLI only.
        let other = fake(&root.path().join("other"), "codex-0.171");
        let explicit = CliSearch {
            executable: Some(other.clone()),
            dir: None,
        };
        let found = find_cli(codex, &empty, &explicit).unwrap();
        assert_eq!(
            (found.executable, found.transport),
            (other, BuiltinTransport::Codex)
        );
        assert!(matches!(
            find_cli(None, &empty, &explicit),
            Err(FindCliError::NoTransport)
        ));
        let missing = CliSearch {
            executable: Some(root.path().join("nope")),
            dir: None,
        };
        assert!(matches!(
            find_cli(codex, &empty, &missing),
            Err(FindCliError::NotExecutable(_))
        ));
    }

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
