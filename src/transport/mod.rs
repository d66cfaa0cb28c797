//! Stage request → launch plan: the exact process each built-in CLI is started as.
//!
//! Theory of operation: the driver fills a [`StageRequest`] (role, route, paths, prompt, the
//! already-filtered [`AgentEnvironment`], the probed CLI version) and calls [`plan_launch`],
//! which picks the built-in transport for the route's provider and returns a [`LaunchPlan`]:
//! program, argv, the complete environment, cwd, stdin bytes, the isolated files to write
//! before launch, the output-token cap it requested and the variables it removed. Planning is
//! pure: nothing here touches the filesystem or starts a process (the two exceptions live in
//! named functions: [`opencode::ensure_git_exclusions`] and [`LaunchPlan::write_files`]).
//! [`LaunchPlan::into_launch_spec`] hands the plan to [`crate::supervise`], the only place that
//! starts processes. A TOML-registered tool builds the same [`LaunchPlan`] from its template.
//!
//! Invariants:
//! - The plan's environment is complete (nothing else is inherited) and starts from
//!   `StageRequest::env.kept`; a transport only adds its documented variables and removes its
//!   documented ones (listed in `removed_env`).
//! - Planned files live under the request's `stage_dir` (or are the request's own schema
//!   path); a plan never writes the user's global configuration.
//! - Values that reach a CLI inside its own option syntax (effort, Codex model provider) are
//!   checked against a safe alphabet first, so no request value can inject an option.
//!
//! Sub-modules: [`opencode`], [`codex`], [`claude`] (one pure planning function each),
//! [`claude_auth`] (login and billing-route checks) and [`identity`] (what a saved run pins).

pub mod claude;
pub mod claude_auth;
pub mod codex;
pub mod identity;
pub mod opencode;
pub mod toml_tool;

use crate::agent_env::AgentEnvironment;
use crate::ids::{ProviderName, SessionId};
use crate::role::{Role, SandboxMode};
use crate::supervise::{LaunchSpec, StdinSource, StdioMode};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Which tool and model a stage runs on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Route {
    /// The autocode provider (`opencode`, `codex`, `claude`, or a registered tool).
    pub provider: ProviderName,
    /// The model in the tool's own spelling (`openai/gpt-5.6-sol` for OpenCode).
    pub model: String,
    /// The reasoning effort, when one is chosen; `None` leaves the model's default.
    pub effort: Option<String>,
    /// Codex only: a `model_providers` entry of the Codex config to route through.
    pub codex_model_provider: Option<String>,
}

/// Everything a transport needs to plan one stage's process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageRequest {
    pub role: Role,
    pub route: Route,
    pub workspace: PathBuf,
    pub sandbox: SandboxMode,
    pub prompt: String,
    /// Where the report schema lives (Codex reads it from this file).
    pub schema_path: PathBuf,
    pub schema_json: serde_json::Value,
    /// Where the CLI writes its final message, when it can (Codex `-o`).
    pub report_path: PathBuf,
    pub run_dir: PathBuf,
    /// The stage's own directory; isolated configs are written here.
    pub stage_dir: PathBuf,
    /// The session to continue (a same-stage correction), if any.
    pub resume_session: Option<SessionId>,
    /// The agents' environment, already filtered by [`crate::agent_env::agent_environment`].
    pub env: AgentEnvironment,
    /// The probed CLI version (`1.18.33`), if known.
    pub cli_version: Option<String>,
    /// The stage runs in autocode's room (`docs/run-lifecycle.md`, "The room"), which enforces
    /// the write limits; a CLI whose own sandbox cannot work inside it is told to stand down.
    #[serde(default)]
    pub confined: bool,
}

/// A file written before launch (an isolated config or the schema).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedFile {
    pub path: PathBuf,
    pub contents: String,
}

/// Who chose the output-token cap a stage ran with. The strings are API (stage records).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputTokenCapSetter {
    /// The operator's own positive whole number reached the CLI.
    Operator,
    /// Autocode set its default.
    Autocode,
    /// The variable did not reach the CLI; OpenCode's own default applies.
    Opencode,
}

/// The output-token limit a stage requested (a request, not a verified provider limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputTokenCap {
    pub tokens: u64,
    pub set_by: OutputTokenCapSetter,
}

/// The exact process to start for one stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchPlan {
    pub program: String,
    pub args: Vec<String>,
    /// The complete environment of the child.
    pub env: BTreeMap<String, String>,
    pub cwd: PathBuf,
    pub stdin: Vec<u8>,
    /// Written before launch, in order.
    pub files: Vec<PlannedFile>,
    pub output_token_cap: Option<OutputTokenCap>,
    /// Names of agent-environment variables this transport removed (never values).
    pub removed_env: Vec<String>,
}

impl LaunchPlan {
    /// Writes the planned files, creating their directories.
    pub fn write_files(&self) -> std::io::Result<()> {
        for file in &self.files {
            if let Some(parent) = file.path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&file.path, &file.contents)?;
        }
        Ok(())
    }

    /// The supervision spec for this plan (stdout/stderr captured or on the terminal as
    /// `stdio` says).
    pub fn into_launch_spec(
        self,
        label: impl Into<String>,
        stdio: StdioMode,
        timeout: Option<Duration>,
    ) -> LaunchSpec {
        // Tools that read `PWD` (OpenCode does) must see the stage's directory, not the one
        // autocode was started from.
        let mut env = self.env;
        env.insert("PWD".into(), self.cwd.to_string_lossy().into_owned());
        env.remove("OLDPWD");
        LaunchSpec {
            label: label.into(),
            program: self.program.into(),
            args: self.args.into_iter().map(Into::into).collect(),
            env: env.into_iter().map(|(k, v)| (k.into(), v.into())).collect(),
            cwd: self.cwd,
            stdin: StdinSource::Bytes(self.stdin),
            stdio,
            timeout,
            room: None,
        }
    }
}

/// Why a stage cannot be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("provider {provider:?} has no built-in transport (built-ins: opencode, codex, claude)")]
    NotBuiltin { provider: String },
    #[error("{field} {value:?} is not allowed: {reason}")]
    UnsafeValue {
        field: &'static str,
        value: String,
        reason: &'static str,
    },
    #[error(
        "OpenCode model {model:?} must be written PROVIDER/MODEL, as `opencode models` lists it"
    )]
    OpencodeModelWithoutProvider { model: String },
    #[error("CLI version {version:?} of {cli} is not a version number (expected e.g. 1.18.33)")]
    BadVersion { cli: &'static str, version: String },
    #[error("Claude Code effort {effort:?} is not one of low, medium, high, xhigh, max")]
    ClaudeEffort { effort: String },
    #[error(
        "OPENCODE_CONFIG_CONTENT in the agents' environment is not a JSON object, so the \
         stage's config layer cannot be merged over it: {error}"
    )]
    OpencodeInlineConfig { error: String },
    #[error("the report schema cannot be serialized: {error}")]
    Schema { error: String },
    #[error("provider {provider:?}: its command template cannot be expanded: {error}")]
    Template { provider: String, error: String },
    #[error("provider {provider:?} has no `resume` template, so a session cannot be continued")]
    NoResume { provider: String },
}

/// The built-in transports. The strings are the reserved provider names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BuiltinTransport {
    Opencode,
    Codex,
    Claude,
}

impl BuiltinTransport {
    pub const ALL: [BuiltinTransport; 3] = [
        BuiltinTransport::Opencode,
        BuiltinTransport::Codex,
        BuiltinTransport::Claude,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            BuiltinTransport::Opencode => "opencode",
            BuiltinTransport::Codex => "codex",
            BuiltinTransport::Claude => "claude",
        }
    }

    /// The program name the transport launches.
    pub fn program(self) -> &'static str {
        self.as_str()
    }

    /// The built-in transport a provider name selects, if any.
    pub fn for_provider(provider: &ProviderName) -> Option<BuiltinTransport> {
        BuiltinTransport::ALL
            .into_iter()
            .find(|t| t.as_str() == provider.as_str())
    }
}

/// Plans a stage on the built-in transport its route names.
pub fn plan_launch(request: &StageRequest) -> Result<LaunchPlan, PlanError> {
    match BuiltinTransport::for_provider(&request.route.provider) {
        Some(BuiltinTransport::Opencode) => opencode::plan(request),
        Some(BuiltinTransport::Codex) => codex::plan(request),
        Some(BuiltinTransport::Claude) => claude::plan(request),
        None => Err(PlanError::NotBuiltin {
            provider: request.route.provider.to_string(),
        }),
    }
}

/// Plans a stage on `config`'s provider: a built-in transport, or the TOML tool's template.
/// `drives`: the built-in CLI a registered ACP tool runs (`crate::acp::pinned::driven_cli`);
/// `opencode acp` gets the native stages' snapshot-off layer ([`opencode::add_acp_layer`]).
pub fn plan_for_provider(
    request: &StageRequest,
    config: &crate::provider::ProviderConfig,
    drives: Option<BuiltinTransport>,
) -> Result<LaunchPlan, PlanError> {
    if BuiltinTransport::for_provider(&request.route.provider).is_some() {
        return plan_launch(request);
    }
    let mut plan = toml_tool::plan(request, config)?;
    if drives == Some(BuiltinTransport::Opencode) {
        opencode::add_acp_layer(&mut plan, request)?;
    }
    Ok(plan)
}

/// Checks a value that lands inside a CLI's option syntax: letters, digits, `.`, `_`, `-`.
pub(crate) fn safe_token(field: &'static str, value: &str) -> Result<(), PlanError> {
    let bad = |reason| {
        Err(PlanError::UnsafeValue {
            field,
            value: value.to_owned(),
            reason,
        })
    };
    if value.is_empty() {
        return bad("it is empty");
    }
    if value.len() > 64 {
        return bad("it is longer than 64 characters");
    }
    if !value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        return bad("only letters, digits, '.', '_' and '-' are allowed");
    }
    Ok(())
}

/// Checks a model id: non-empty, no whitespace or control characters, not option-like.
pub(crate) fn check_model(model: &str) -> Result<(), PlanError> {
    let bad = |reason| {
        Err(PlanError::UnsafeValue {
            field: "model",
            value: model.to_owned(),
            reason,
        })
    };
    if model.is_empty() {
        return bad("it is empty");
    }
    if model.starts_with('-') {
        return bad("it starts with '-' and would read as an option");
    }
    if model.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return bad("it holds whitespace or control characters");
    }
    Ok(())
}

/// The major version of a semver-ish string (`1.18.33`, `v2.0.20`, `2.1.328 (Claude Code)`).
pub(crate) fn major_version(cli: &'static str, version: &str) -> Result<u64, PlanError> {
    let trimmed = version.trim();
    let trimmed = trimmed.strip_prefix('v').unwrap_or(trimmed);
    let digits: String = trimmed.chars().take_while(|c| c.is_ascii_digit()).collect();
    let rest = &trimmed[digits.len()..];
    if digits.is_empty() || !(rest.is_empty() || rest.starts_with(['.', ' ', '-', '+'])) {
        return Err(PlanError::BadVersion {
            cli,
            version: version.to_owned(),
        });
    }
    digits.parse().map_err(|_| PlanError::BadVersion {
        cli,
        version: version.to_owned(),
    })
}

/// The environment a plan starts from: the request's kept variables.
pub(crate) fn base_env(request: &StageRequest) -> BTreeMap<String, String> {
    request.env.kept.clone()
}

/// Joins a file name under the stage directory.
pub(crate) fn stage_file(request: &StageRequest, name: &str) -> PathBuf {
    request.stage_dir.join(name)
}

pub(crate) fn path_arg(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn major_versions() {
        assert_eq!(major_version("opencode", "1.18.33"), Ok(1));
        assert_eq!(major_version("opencode", "v2.0.20"), Ok(2));
        assert_eq!(major_version("claude", "2.1.328 (Claude Code)"), Ok(2));
        assert_eq!(major_version("codex", "0.169.0\n"), Ok(0));
        assert!(major_version("opencode", "").is_err());
        assert!(major_version("opencode", "x1.2").is_err());
        assert!(major_version("opencode", "12abc").is_err());
        assert!(major_version("opencode", "99999999999999999999999.1").is_err());
    }

    #[test]
    fn safe_tokens() {
        assert!(safe_token("effort", "xhigh").is_ok());
        assert!(safe_token("effort", "high\"; rm").is_err());
        assert!(safe_token("effort", "").is_err());
        assert!(safe_token("effort", &"a".repeat(65)).is_err());
        assert!(check_model("openai/gpt-5.6-sol").is_ok());
        assert!(check_model("--dangerously").is_err());
        assert!(check_model("a b").is_err());
    }

    #[test]
    fn codex_stands_its_sandbox_down_only_inside_the_room() {
        let mut r = request("codex", "gpt-6-sol", None, None);
        let plan = plan_launch(&r).unwrap();
        assert!(
            plan.args
                .windows(2)
                .any(|w| w == ["--sandbox", "read-only"])
        );
        r.confined = true;
        let plan = plan_launch(&r).unwrap();
        assert!(
            plan.args
                .windows(2)
                .any(|w| w == ["--sandbox", "danger-full-access"])
        );
        r.resume_session = Some(SessionId::new("thread-1").unwrap());
        let plan = plan_launch(&r).unwrap();
        assert!(
            plan.args
                .contains(&"sandbox_mode=\"danger-full-access\"".to_owned()),
            "{:?}",
            plan.args
        );
    }

    fn request(
        provider: &str,
        model: &str,
        effort: Option<String>,
        version: Option<String>,
    ) -> StageRequest {
        StageRequest {
            role: Role::Planner,
            route: Route {
                provider: ProviderName::new(provider).unwrap(),
                model: model.into(),
                effort: effort.clone(),
                codex_model_provider: effort,
            },
            workspace: "/ws".into(),
            sandbox: SandboxMode::ReadOnly,
            prompt: "p".into(),
            schema_path: "/s/schema.json".into(),
            schema_json: serde_json::json!({"type": "object"}),
            report_path: "/s/report.json".into(),
            run_dir: "/r".into(),
            stage_dir: "/s".into(),
            resume_session: None,
            env: AgentEnvironment::default(),
            cli_version: version,
            confined: false,
        }
    }

    proptest::proptest! {
        #[test]
        fn planning_never_panics_and_never_splits_values(
            model in ".{0,24}",
            effort in proptest::option::of(".{0,12}"),
            version in proptest::option::of("[v0-9. a-z-]{0,10}"),
        ) {
            for provider in ["opencode", "codex", "claude"] {
                let req = request(provider, &model, effort.clone(), version.clone());
                if let Ok(plan) = plan_launch(&req) {
                    // Accepted values reach the CLI as whole arguments, never as options.
                    proptest::prop_assert!(!plan.args.iter().any(|a| a.contains('\n')));
                    proptest::prop_assert!(plan.args.iter().any(|a| a.contains(model.as_str())));
                    proptest::prop_assert!(!model.starts_with('-'));
                }
            }
        }
    }

    /// Codex hands its schema to a strict API: a plan's optional `prepare` is required there,
    /// while Claude Code, which checks the report itself, gets the schema as it is.
    #[test]
    fn codex_is_handed_the_strict_schema() {
        let required_of = |contents: &str| -> Vec<serde_json::Value> {
            let schema: serde_json::Value = serde_json::from_str(contents).unwrap();
            schema["properties"]["milestones"]["items"]["required"]
                .as_array()
                .cloned()
                .unwrap()
        };
        let mut req = request("codex", "m", None, None);
        req.schema_json = crate::report::ReportKind::Plan.cli_schema();
        let plan = plan_launch(&req).unwrap();
        assert!(required_of(&plan.files[0].contents).contains(&serde_json::json!("prepare")));
        let mut req = request("claude", "m", None, None);
        req.schema_json = crate::report::ReportKind::Plan.cli_schema();
        let plan = plan_launch(&req).unwrap();
        let at = plan.args.iter().position(|a| a == "--json-schema").unwrap();
        assert!(!required_of(&plan.args[at + 1]).contains(&serde_json::json!("prepare")));
    }

    #[test]
    fn builtin_names() {
        for t in BuiltinTransport::ALL {
            let name = ProviderName::new(t.as_str()).unwrap();
            assert_eq!(BuiltinTransport::for_provider(&name), Some(t));
        }
        let kilo = ProviderName::new("kilocode").unwrap();
        assert_eq!(BuiltinTransport::for_provider(&kilo), None);
    }
}
