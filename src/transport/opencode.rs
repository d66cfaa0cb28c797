//! The OpenCode transport: `opencode run --format json` with the prompt on stdin.
//!
//! Plan (cwd = workspace): `opencode run --format json --model PROVIDER/MODEL`, plus
//! - effort: `--variant EFFORT` on 1.x; on 2.x `--standalone` and the model spelled
//!   `PROVIDER/MODEL#EFFORT`. An unknown version is planned as 1.x (the qualified line);
//! - resume: `--session ID`;
//! - every stage: OpenCode's own snapshots off (`"snapshot": false`) through an inline config
//!   layer (below): autocode snapshots the work tree itself, and OpenCode's snapshot copies the
//!   whole work tree into a git repository under its data directory at every step;
//! - read-only roles: edit tools denied through the same layer;
//! - `OPENCODE_EXPERIMENTAL_OUTPUT_TOKEN_MAX=64000` unless the agents' environment already holds
//!   a positive whole number (then the operator's value stands, `set_by: operator`);
//! - `OPENCODE_DISABLE_AUTOUPDATE=1`, because a CLI that updates itself mid-run changes the
//!   transport identity a saved run pinned.
//!
//! Why `OPENCODE_CONFIG_CONTENT` for the stage's layer: OpenCode merges its config sources
//! (remote, global, `OPENCODE_CONFIG`, project `opencode.json[c]`, `.opencode/` directories)
//! and applies the inline `OPENCODE_CONFIG_CONTENT` JSON after all of them except the
//! administrator's managed config. `OPENCODE_CONFIG` is merged *before* the project file, so a
//! workspace `opencode.json` could re-allow edits over it; the inline layer cannot be
//! overridden by the workspace. The layer sets `"snapshot": false` for every stage and, for a
//! read-only role, `permission.edit = "deny"` (the `edit` permission governs every
//! file-changing tool: edit, write, patch, multiedit) at the top level and for the `build` and
//! `general` agents, since an agent's own `permission` block is merged after the global one. It
//! is merged over any `OPENCODE_CONFIG_CONTENT` the operator already set, never replacing it, and
//! the exact JSON is also planned as `opencode-config.json` in the stage directory as the record
//! of the stage-local override. Shell commands keep OpenCode's native policy: this is not an OS
//! sandbox (the after-stage snapshot check is).
//!
//! [`ensure_git_exclusions`] keeps `.autocode/` out of Git's view of the workspace so runtime
//! evidence writes never look like source drift.

use super::{
    LaunchPlan, OutputTokenCap, OutputTokenCapSetter, PlanError, PlannedFile, StageRequest,
    base_env, check_model, major_version, safe_token, stage_file,
};
use crate::role::SandboxMode;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

/// The variable OpenCode reads its requested response limit from.
pub const OUTPUT_TOKEN_MAX_VAR: &str = "OPENCODE_EXPERIMENTAL_OUTPUT_TOKEN_MAX";
/// Autocode's default response limit for OpenCode stages.
pub const DEFAULT_OUTPUT_TOKENS: u64 = 64_000;
/// OpenCode's own default when the variable does not reach it.
pub const OPENCODE_DEFAULT_OUTPUT_TOKENS: u64 = 32_000;
/// The inline config variable the stage's layer goes through.
pub const CONFIG_CONTENT_VAR: &str = "OPENCODE_CONFIG_CONTENT";
/// The record of the stage's inline config layer, in the stage directory.
pub const CONFIG_RECORD_FILE: &str = "opencode-config.json";
/// The agents whose own permission blocks the read-only layer also covers.
const READ_ONLY_AGENTS: [&str; 2] = ["build", "general"];
/// The exclusion rule [`ensure_git_exclusions`] keeps.
pub const AUTOCODE_EXCLUSION: &str = ".autocode/";

/// Which OpenCode command-line generation a version speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generation {
    /// 1.x: `--variant EFFORT`.
    V1,
    /// 2.x and later: `--standalone`, `MODEL#EFFORT`.
    V2,
}

impl Generation {
    pub fn from_version(version: Option<&str>) -> Result<Generation, PlanError> {
        match version {
            None => Ok(Generation::V1),
            Some(v) => Ok(if major_version("opencode", v)? >= 2 {
                Generation::V2
            } else {
                Generation::V1
            }),
        }
    }
}

/// The cap a stage runs with, given the agents' environment (operator's positive whole number
/// wins; otherwise autocode's default).
pub fn output_token_cap(env: &BTreeMap<String, String>) -> OutputTokenCap {
    match env
        .get(OUTPUT_TOKEN_MAX_VAR)
        .and_then(|v| positive_whole(v))
    {
        Some(tokens) => OutputTokenCap {
            tokens,
            set_by: OutputTokenCapSetter::Operator,
        },
        None => OutputTokenCap {
            tokens: DEFAULT_OUTPUT_TOKENS,
            set_by: OutputTokenCapSetter::Autocode,
        },
    }
}

/// The cap an OpenCode-event tool that autocode does not configure (a TOML tool) runs with:
/// the variable if it reached the tool as a positive whole number, else OpenCode's default.
pub fn observed_output_token_cap(env: &BTreeMap<String, String>) -> OutputTokenCap {
    match env
        .get(OUTPUT_TOKEN_MAX_VAR)
        .and_then(|v| positive_whole(v))
    {
        Some(tokens) => OutputTokenCap {
            tokens,
            set_by: OutputTokenCapSetter::Operator,
        },
        None => OutputTokenCap {
            tokens: OPENCODE_DEFAULT_OUTPUT_TOKENS,
            set_by: OutputTokenCapSetter::Opencode,
        },
    }
}

fn positive_whole(value: &str) -> Option<u64> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    value.parse::<u64>().ok().filter(|n| *n > 0)
}

/// The stage's inline config layer, merged over the operator's own inline config: OpenCode's
/// snapshots off for every stage (measured on a bare `opencode run` of one reply in a 50-file
/// git repository: about 1 s of CPU and 0.8 s of wall fewer, and none of its per-step copies of
/// the work tree), and for a read-only role every file-changing tool denied.
pub fn stage_config(
    existing_inline: Option<&str>,
    sandbox: SandboxMode,
) -> Result<Value, PlanError> {
    let mut base = match existing_inline {
        None => Map::new(),
        Some(text) if text.trim().is_empty() => Map::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => map,
            Ok(other) => {
                return Err(PlanError::OpencodeInlineConfig {
                    error: format!("it is a JSON {}", json_kind(&other)),
                });
            }
            Err(e) => {
                return Err(PlanError::OpencodeInlineConfig {
                    error: e.to_string(),
                });
            }
        },
    };
    merge_into(&mut base, json!({ "snapshot": false }));
    if sandbox == SandboxMode::ReadOnly {
        let mut agents = Map::new();
        for agent in READ_ONLY_AGENTS {
            agents.insert(agent.into(), json!({ "permission": { "edit": "deny" } }));
        }
        merge_into(
            &mut base,
            json!({ "permission": { "edit": "deny" }, "agent": agents }),
        );
    }
    Ok(Value::Object(base))
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Deep merge: objects merge key by key, anything else is replaced by `layer`.
fn merge_into(base: &mut Map<String, Value>, layer: Value) {
    let Value::Object(layer) = layer else { return };
    for (key, value) in layer {
        match (base.get_mut(&key), value) {
            (Some(Value::Object(existing)), Value::Object(incoming)) => {
                merge_into(existing, Value::Object(incoming));
            }
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// Plans an OpenCode stage.
pub fn plan(request: &StageRequest) -> Result<LaunchPlan, PlanError> {
    let route = &request.route;
    check_model(&route.model)?;
    if !route.model.contains('/') || route.model.starts_with('/') || route.model.ends_with('/') {
        return Err(PlanError::OpencodeModelWithoutProvider {
            model: route.model.clone(),
        });
    }
    if let Some(effort) = &route.effort {
        safe_token("effort", effort)?;
    }
    let generation = Generation::from_version(request.cli_version.as_deref())?;

    let mut args: Vec<String> = vec!["run".into()];
    if generation == Generation::V2 {
        args.push("--standalone".into());
    }
    args.extend(["--format".into(), "json".into(), "--model".into()]);
    match (&route.effort, generation) {
        (Some(effort), Generation::V2) => args.push(format!("{}#{effort}", route.model)),
        (Some(effort), Generation::V1) => {
            args.push(route.model.clone());
            args.extend(["--variant".into(), effort.clone()]);
        }
        (None, _) => args.push(route.model.clone()),
    }
    if let Some(session) = &request.resume_session {
        args.extend(["--session".into(), session.to_string()]);
    }

    let mut env = base_env(request);
    let cap = output_token_cap(&env);
    env.insert(OUTPUT_TOKEN_MAX_VAR.into(), cap.tokens.to_string());
    env.insert("OPENCODE_DISABLE_AUTOUPDATE".into(), "1".into());

    let config = stage_config(
        env.get(CONFIG_CONTENT_VAR).map(String::as_str),
        request.sandbox,
    )?;
    env.insert(CONFIG_CONTENT_VAR.into(), config.to_string());
    let files = vec![config_record(request, &config)?];

    Ok(LaunchPlan {
        program: "opencode".into(),
        args,
        env,
        cwd: request.workspace.clone(),
        stdin: request.prompt.as_bytes().to_vec(),
        files,
        output_token_cap: Some(cap),
        removed_env: Vec::new(),
    })
}

/// Adds the stage's inline config layer to the plan of a registered ACP tool that runs OpenCode
/// (`opencode acp`): its own snapshots off, as in a native stage. Edit tools are not denied here:
/// an ACP agent's read-only roles are held by the room (the work tree is read-only to them) and
/// by autocode's `fs` methods, which is how the ACP scorecards were measured.
pub fn add_acp_layer(plan: &mut LaunchPlan, request: &StageRequest) -> Result<(), PlanError> {
    let config = stage_config(
        plan.env.get(CONFIG_CONTENT_VAR).map(String::as_str),
        SandboxMode::WorkspaceWrite,
    )?;
    plan.env
        .insert(CONFIG_CONTENT_VAR.into(), config.to_string());
    plan.files.push(config_record(request, &config)?);
    Ok(())
}

/// The record of the stage's inline config layer (the exact JSON OpenCode is given).
fn config_record(request: &StageRequest, config: &Value) -> Result<PlannedFile, PlanError> {
    let pretty = serde_json::to_string_pretty(config).map_err(|e| PlanError::Schema {
        error: e.to_string(),
    })?;
    Ok(PlannedFile {
        path: stage_file(request, CONFIG_RECORD_FILE),
        contents: pretty + "\n",
    })
}

/// Directories of the project OpenCode 1.18.33 writes at every start when they exist (measured:
/// in `.opencode/` it writes `package.json`, `package-lock.json`, `.gitignore` and installs
/// `node_modules/`, and stops with `Unexpected error … FileSystem.writeFile` when it may not).
pub const PROJECT_DIRS_WRITTEN_AT_START: [&str; 1] = [".opencode"];

/// Adds `.autocode/` to the workspace repository's `info/exclude`, creating the file if
/// missing and keeping every other rule. Returns whether the file changed (`false` when the
/// rule was already there or the workspace is not inside a Git repository).
///
/// The repository is found the way Git does: the nearest `.git` at or above the workspace. A
/// `.git` *file* (a linked worktree or submodule) names its git dir with `gitdir:`; a worktree's
/// git dir names the shared one in its `commondir` file, and `info/exclude` lives there.
pub fn ensure_git_exclusions(workspace: &Path) -> io::Result<bool> {
    let Some(common_dir) = find_common_git_dir(workspace)? else {
        return Ok(false);
    };
    let info = common_dir.join("info");
    let exclude = info.join("exclude");
    let existing =
        match crate::bounded_read::read_to_string(&exclude, crate::bounded_read::CONFIG_CAP) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(e),
        };
    let already = existing.lines().any(|line| {
        matches!(
            line.trim(),
            ".autocode/" | "/.autocode/" | ".autocode" | "/.autocode"
        )
    });
    if already {
        return Ok(false);
    }
    let mut updated = existing;
    if !updated.is_empty() && !updated.ends_with('\n') {
        updated.push('\n');
    }
    updated.push_str(AUTOCODE_EXCLUSION);
    updated.push('\n');
    std::fs::create_dir_all(&info)?;
    std::fs::write(&exclude, updated)?;
    Ok(true)
}

/// The repository's common git dir for a path inside its work tree, if any.
pub fn find_common_git_dir(workspace: &Path) -> io::Result<Option<PathBuf>> {
    for dir in workspace.ancestors() {
        let dot_git = dir.join(".git");
        let meta = match std::fs::metadata(&dot_git) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let git_dir = if meta.is_dir() {
            dot_git
        } else {
            let text =
                crate::bounded_read::read_to_string(&dot_git, crate::bounded_read::CONFIG_CAP)?;
            let target = text
                .lines()
                .find_map(|l| l.strip_prefix("gitdir:"))
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{} has no `gitdir:` line", dot_git.display()),
                    )
                })?;
            dir.join(target)
        };
        let commondir = git_dir.join("commondir");
        return match crate::bounded_read::read_to_string(
            &commondir,
            crate::bounded_read::CONFIG_CAP,
        ) {
            Ok(text) if !text.trim().is_empty() => Ok(Some(git_dir.join(text.trim()))),
            Ok(_) => Ok(Some(git_dir)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Some(git_dir)),
            Err(e) => Err(e),
        };
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn output_cap_rules() {
        let cap = output_token_cap(&env(&[]));
        assert_eq!(cap.tokens, 64_000);
        assert_eq!(cap.set_by, OutputTokenCapSetter::Autocode);
        let cap = output_token_cap(&env(&[(OUTPUT_TOKEN_MAX_VAR, "100000")]));
        assert_eq!(
            (cap.tokens, cap.set_by),
            (100_000, OutputTokenCapSetter::Operator)
        );
        for bad in ["0", "", "-5", "12k", " 12", "99999999999999999999999"] {
            let cap = output_token_cap(&env(&[(OUTPUT_TOKEN_MAX_VAR, bad)]));
            assert_eq!(
                (cap.tokens, cap.set_by),
                (64_000, OutputTokenCapSetter::Autocode),
                "{bad:?}"
            );
        }
        let cap = observed_output_token_cap(&env(&[]));
        assert_eq!(
            (cap.tokens, cap.set_by),
            (32_000, OutputTokenCapSetter::Opencode)
        );
        let cap = observed_output_token_cap(&env(&[(OUTPUT_TOKEN_MAX_VAR, "5")]));
        assert_eq!(
            (cap.tokens, cap.set_by),
            (5, OutputTokenCapSetter::Operator)
        );
    }

    #[test]
    fn the_stage_layer_merges_over_the_operators_inline_config() {
        let read_only = |inline| stage_config(inline, SandboxMode::ReadOnly);
        let merged = read_only(Some(
            r#"{"model":"a/b","snapshot":true,"permission":{"bash":"ask","edit":"allow"},"agent":{"build":{"temperature":0.1}}}"#,
        ))
        .unwrap();
        assert_eq!(merged["model"], "a/b");
        assert_eq!(merged["snapshot"], false);
        assert_eq!(merged["permission"]["bash"], "ask");
        assert_eq!(merged["permission"]["edit"], "deny");
        assert_eq!(merged["agent"]["build"]["temperature"], 0.1);
        assert_eq!(merged["agent"]["build"]["permission"]["edit"], "deny");
        assert_eq!(merged["agent"]["general"]["permission"]["edit"], "deny");
        // A string-form permission ("allow" for everything) is replaced by the object.
        let merged = read_only(Some(r#"{"permission":"allow"}"#)).unwrap();
        assert_eq!(merged["permission"]["edit"], "deny");
        assert!(read_only(Some("[1]")).is_err());
        assert!(read_only(Some("{nope")).is_err());
        assert_eq!(read_only(Some("  ")).unwrap(), read_only(None).unwrap());
        // A writing role keeps the operator's permissions; only the snapshots go.
        let writer = stage_config(
            Some(r#"{"permission":{"edit":"allow"}}"#),
            SandboxMode::WorkspaceWrite,
        )
        .unwrap();
        assert_eq!(
            writer,
            json!({"permission": {"edit": "allow"}, "snapshot": false})
        );
        assert!(stage_config(Some("[1]"), SandboxMode::WorkspaceWrite).is_err());
    }

    #[test]
    fn generations() {
        assert_eq!(Generation::from_version(None), Ok(Generation::V1));
        assert_eq!(
            Generation::from_version(Some("1.18.33")),
            Ok(Generation::V1)
        );
        assert_eq!(Generation::from_version(Some("2.0.20")), Ok(Generation::V2));
        assert!(Generation::from_version(Some("banana")).is_err());
    }
}
