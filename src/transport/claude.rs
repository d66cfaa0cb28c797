//! The Claude Code transport: `claude -p --output-format stream-json` with the prompt on stdin.
//!
//! Plan (cwd = workspace):
//! `claude -p --output-format stream-json --verbose --json-schema SCHEMA_JSON
//!  --tools Bash,Read,Edit,Write,Glob,Grep --strict-mcp-config --disable-slash-commands
//!  --setting-sources project --model MODEL --permission-mode dontAsk
//!  --allowedTools <stage tools> --disallowedTools <git denials...> [--effort E] [--resume ID]`.
//!
//! - The same six tools are offered on every stage; `dontAsk` denies whatever is not
//!   pre-approved, and `--allowedTools` pre-approves Edit and Write only when the stage's
//!   sandbox is not read-only.
//! - Git history and branch changes are denied with Claude Code 2.1 rules (`Bash(git commit:*)`
//!   matches every command starting `git commit`); deny rules win over allow rules in every
//!   mode. They match command text, so they are a guard rail, not a sandbox.
//! - No bypass flag (`--dangerously-skip-permissions`, `bypassPermissions`): Claude Code refuses
//!   them as root, and they would lift the denials.
//! - Effort goes through `--effort` (low, medium, high, xhigh, max). `CLAUDE_CODE_EFFORT_LEVEL`
//!   outranks the flag, so it is removed from the child's environment when an effort is given.
//! - The ten variables that would tie the child to a parent Claude Code session are removed
//!   ([`PARENT_SESSION_VARS`]) and `DISABLE_AUTOUPDATER=1` is set.
//! - `--resume ID` only for a same-stage correction (the request's `resume_session`).

use super::{LaunchPlan, PlanError, StageRequest, base_env, check_model};
use crate::role::SandboxMode;

/// Variables that tie a child to a parent Claude Code session; removed from every stage.
pub const PARENT_SESSION_VARS: [&str; 10] = [
    "CLAUDE_CODE_SESSION_ID",
    "CLAUDE_CODE_REMOTE_SESSION_ID",
    "CLAUDE_CODE_CHILD_SESSION",
    "CLAUDE_CODE_DEBUG",
    "CLAUDE_CODE_DIAGNOSTICS_FILE",
    "CLAUDE_CODE_TEE_SDK_STDOUT",
    "CLAUDE_CODE_MESSAGING_SOCKET",
    "CLAUDE_EFFORT",
    "CLAUDE_AUTO_BACKGROUND_TASKS",
    "CLAUDE_CODE_ENTRYPOINT",
];

/// The environment variable that overrides `--effort`.
pub const EFFORT_ENV_VAR: &str = "CLAUDE_CODE_EFFORT_LEVEL";

/// The effort levels Claude Code 2.1 accepts.
pub const EFFORT_LEVELS: [&str; 5] = ["low", "medium", "high", "xhigh", "max"];

/// The tools offered on every stage.
pub const TOOLS: &str = "Bash,Read,Edit,Write,Glob,Grep";

/// Git operations no stage may run.
pub const GIT_DENIALS: [&str; 8] = [
    "Bash(git commit:*)",
    "Bash(git push:*)",
    "Bash(git checkout:*)",
    "Bash(git reset:*)",
    "Bash(git stash:*)",
    "Bash(git branch:*)",
    "Bash(git rebase:*)",
    "Bash(git merge:*)",
];

/// The tools pre-approved for a stage with this sandbox.
pub fn allowed_tools(sandbox: SandboxMode) -> &'static str {
    match sandbox {
        SandboxMode::ReadOnly => "Bash,Read,Glob,Grep",
        SandboxMode::WorkspaceWrite => TOOLS,
    }
}

/// Plans a Claude Code stage.
pub fn plan(request: &StageRequest) -> Result<LaunchPlan, PlanError> {
    let route = &request.route;
    check_model(&route.model)?;
    if let Some(effort) = &route.effort
        && !EFFORT_LEVELS.contains(&effort.as_str())
    {
        return Err(PlanError::ClaudeEffort {
            effort: effort.clone(),
        });
    }
    let schema = serde_json::to_string(&request.schema_json).map_err(|e| PlanError::Schema {
        error: e.to_string(),
    })?;
    let mut args: Vec<String> = [
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--json-schema",
    ]
    .map(String::from)
    .to_vec();
    args.push(schema);
    args.extend(
        [
            "--tools",
            TOOLS,
            "--strict-mcp-config",
            "--disable-slash-commands",
            "--setting-sources",
            "project",
            "--model",
        ]
        .map(String::from),
    );
    args.push(route.model.clone());
    args.extend(["--permission-mode".into(), "dontAsk".into()]);
    args.extend([
        "--allowedTools".into(),
        allowed_tools(request.sandbox).into(),
    ]);
    args.push("--disallowedTools".into());
    args.extend(GIT_DENIALS.map(String::from));
    if let Some(effort) = &route.effort {
        args.extend(["--effort".into(), effort.clone()]);
    }
    if let Some(session) = &request.resume_session {
        args.extend(["--resume".into(), session.to_string()]);
    }

    let mut env = base_env(request);
    let mut removed_env = Vec::new();
    let effort_override = route.effort.as_ref().map(|_| EFFORT_ENV_VAR);
    for name in PARENT_SESSION_VARS.into_iter().chain(effort_override) {
        if env.remove(name).is_some() {
            removed_env.push(name.to_string());
        }
    }
    removed_env.sort();
    env.insert("DISABLE_AUTOUPDATER".into(), "1".into());

    Ok(LaunchPlan {
        program: "claude".into(),
        args,
        env,
        cwd: request.workspace.clone(),
        stdin: request.prompt.as_bytes().to_vec(),
        files: Vec::new(),
        output_token_cap: None,
        removed_env,
    })
}
