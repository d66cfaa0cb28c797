//! Tools registered with one TOML file: the provider's command template, expanded for a stage.
//!
//! `prompt = "stdin"` sends the prompt on stdin; `prompt = "file"` writes it to the stage's
//! `prompt.md` and passes its path as `{prompt_file}`. A resumed stage appends the provider's
//! `resume` arguments (with `{session}`). `output = "report_file"` tools write `{report}`;
//! `output = "opencode_events"` tools print OpenCode events. The environment is the agents'
//! filtered environment, unchanged: autocode does not alter a configured tool's token limits.
//!
//! The Codex artifact adapter (`sandbox_adapter = "codex_artifacts"`) splices `{sandbox_args}`:
//! `--ignore-user-config --sandbox workspace-write` for every role, so judges can write their
//! capture receipts; the read-only contract of planning roles is enforced by autocode's
//! before/after workspace snapshot, not by Codex. (The reference's named permission profile is
//! not implemented.)

use super::{LaunchPlan, PlanError, PlannedFile, StageRequest, opencode};
use crate::provider::{
    OutputMode, PromptMode, ProviderConfig, SandboxAdapter, TemplateValues, expand,
};

/// The `{sandbox_args}` splice of the Codex artifact adapter.
pub fn codex_artifact_sandbox_args() -> Vec<String> {
    ["--ignore-user-config", "--sandbox", "workspace-write"]
        .map(str::to_owned)
        .to_vec()
}

/// Plans a stage of a TOML-registered tool.
pub fn plan(request: &StageRequest, config: &ProviderConfig) -> Result<LaunchPlan, PlanError> {
    let prompt_file = request.stage_dir.join("prompt.md");
    let path = |p: &std::path::Path| Some(p.to_string_lossy().into_owned());
    let values = TemplateValues {
        model: Some(request.route.model.clone()),
        effort: request.route.effort.clone(),
        workspace: path(&request.workspace),
        report: path(&request.report_path),
        schema: path(&request.schema_path),
        prompt_file: path(&prompt_file),
        run_dir: path(&request.run_dir),
        role: Some(request.role.as_str().to_owned()),
        sandbox: Some(request.sandbox.as_str().to_owned()),
        session: request.resume_session.as_ref().map(|s| s.to_string()),
        sandbox_args: config
            .sandbox_adapter
            .map(|SandboxAdapter::CodexArtifacts| codex_artifact_sandbox_args()),
    };
    let template_error = |e: crate::provider::ExpandError| PlanError::Template {
        provider: config.name.to_string(),
        error: e.to_string(),
    };
    let mut argv = expand(&config.command, &values).map_err(template_error)?;
    // An ACP agent's session is continued in the protocol (`crate::acp::Continuation`).
    if request.resume_session.is_some() && config.output != crate::provider::OutputMode::Acp {
        let resume = config.resume.as_ref().ok_or_else(|| PlanError::NoResume {
            provider: config.name.to_string(),
        })?;
        argv.extend(expand(resume, &values).map_err(template_error)?);
    }
    let Some((program, args)) = argv.split_first() else {
        return Err(PlanError::Template {
            provider: config.name.to_string(),
            error: "the command is empty".into(),
        });
    };
    let mut files = vec![PlannedFile {
        path: request.schema_path.clone(),
        contents: serde_json::to_string_pretty(&request.schema_json).map_err(|e| {
            PlanError::Schema {
                error: e.to_string(),
            }
        })?,
    }];
    let stdin = match config.prompt {
        PromptMode::Stdin => request.prompt.clone().into_bytes(),
        PromptMode::File => {
            files.push(PlannedFile {
                path: prompt_file,
                contents: request.prompt.clone(),
            });
            Vec::new()
        }
    };
    let output_token_cap = match config.output {
        OutputMode::OpencodeEvents => Some(opencode::observed_output_token_cap(&request.env.kept)),
        _ => None,
    };
    Ok(LaunchPlan {
        program: program.clone(),
        args: args.to_vec(),
        env: request.env.kept.clone(),
        cwd: request.workspace.clone(),
        stdin,
        files,
        output_token_cap,
        removed_env: Vec::new(),
    })
}
