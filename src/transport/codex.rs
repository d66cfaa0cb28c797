//! The Codex transport: `codex exec --json` with the prompt on stdin (`-`).
//!
//! New session (cwd = workspace):
//! `codex exec --json --skip-git-repo-check -C WS --sandbox MODE -m MODEL
//!  [-c model_reasoning_effort="EFFORT"] [-c model_provider="X"] --output-schema SCHEMA
//!  -o REPORT -`.
//!
//! Resume: `codex exec resume --json --skip-git-repo-check -m MODEL [-c ...effort]
//! [-c model_provider="X"] -c sandbox_mode="MODE" --output-schema SCHEMA -o REPORT THREAD_ID -`
//! with cwd = workspace, because `resume` has neither `-C` nor `--sandbox` (Codex 0.169.0).
//!
//! Inside autocode's room (`StageRequest::confined`) the sandbox mode is `danger-full-access`:
//! Codex's own sandbox needs namespaces and mounts, which Landlock refuses to a confined process,
//! and the room already enforces the write limits (`docs/run-lifecycle.md`, "The room").
//!
//! Codex reads the schema from a file, so the plan writes `schema_json` to `schema_path`.
//! Values placed inside `-c key="value"` (effort, model provider) are restricted to a safe
//! alphabet first: `-c` values are parsed as TOML, and a quote would inject configuration.
//! Credentials stay with Codex's own login; `OPENAI_API_KEY`/`CODEX_API_KEY` are already withheld
//! by the agents' environment policy.

use super::{
    LaunchPlan, PlanError, PlannedFile, StageRequest, base_env, check_model, path_arg, safe_token,
};

/// Codex's sandbox mode for `request`: the role's own, or `danger-full-access` inside the room.
pub fn sandbox_mode(request: &StageRequest) -> &'static str {
    if request.confined {
        "danger-full-access"
    } else {
        request.sandbox.as_str()
    }
}

/// Plans a Codex stage.
pub fn plan(request: &StageRequest) -> Result<LaunchPlan, PlanError> {
    let route = &request.route;
    check_model(&route.model)?;
    if let Some(effort) = &route.effort {
        safe_token("effort", effort)?;
    }
    if let Some(provider) = &route.codex_model_provider {
        safe_token("codex model provider", provider)?;
    }
    let sandbox = sandbox_mode(request);
    let mut args: Vec<String> = vec!["exec".into()];
    if request.resume_session.is_some() {
        args.push("resume".into());
    }
    args.extend(["--json".into(), "--skip-git-repo-check".into()]);
    if request.resume_session.is_none() {
        args.extend([
            "-C".into(),
            path_arg(&request.workspace),
            "--sandbox".into(),
            sandbox.into(),
        ]);
    }
    args.extend(["-m".into(), route.model.clone()]);
    if let Some(effort) = &route.effort {
        args.extend(["-c".into(), format!("model_reasoning_effort=\"{effort}\"")]);
    }
    if let Some(provider) = &route.codex_model_provider {
        args.extend(["-c".into(), format!("model_provider=\"{provider}\"")]);
    }
    if request.resume_session.is_some() {
        args.extend(["-c".into(), format!("sandbox_mode=\"{sandbox}\"")]);
    }
    args.extend([
        "--output-schema".into(),
        path_arg(&request.schema_path),
        "-o".into(),
        path_arg(&request.report_path),
    ]);
    if let Some(thread) = &request.resume_session {
        args.push(thread.to_string());
    }
    args.push("-".into());

    // Codex sends it as OpenAI's strict JSON schema: every property required.
    let schema = serde_json::to_string(&crate::report::strict_schema(&request.schema_json))
        .map_err(|e| PlanError::Schema {
            error: e.to_string(),
        })?;
    Ok(LaunchPlan {
        program: "codex".into(),
        args,
        env: base_env(request),
        cwd: request.workspace.clone(),
        stdin: request.prompt.as_bytes().to_vec(),
        files: vec![PlannedFile {
            path: request.schema_path.clone(),
            contents: schema + "\n",
        }],
        output_token_cap: None,
        removed_env: Vec::new(),
    })
}
