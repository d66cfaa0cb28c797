//! Provider configuration: the TOML format, its types, loading and validation.
//!
//! Invariants: a [`LoadedConfig`] has passed every check in [`validate_config`]; every load
//! failure is one [`ConfigError`] naming the file, line, column and key (TOML syntax errors
//! included); unknown keys never fail a load, they become [`ConfigWarning`]s. Verifier pairs on
//! the same model family are reported in `same_family_pairs`, not as warnings: the run engine
//! decides what they mean (a cross-model pause unless independence is waived).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::cross_model::{SameFamilyPair, same_family_pairs};
use super::family::family_of;
use super::location::{KeyPath, Position, key_on_line, line_text, locate, path_at, position_of};
use super::template::{Placeholder, TemplateSyntaxError};
use crate::ids::ProviderName;
use crate::role::{Role, RoleKey};

mod confine;
mod loads;
#[cfg(test)]
mod tests;
mod validate;

pub use confine::{ConfineConfig, Expanded, WritableSyntax, check_writable, expand_writable};
pub use loads::{FIELD_PROJECT_CONFIG, LoadsConfig, ProjectEntrySyntax, check_project_entry};
pub use validate::validate_config;

/// How the stage prompt reaches the tool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromptMode {
    /// On standard input.
    #[default]
    Stdin,
    /// In a file whose path the command receives as `{prompt_file}`.
    File,
}

/// How the result comes back. `codex_events` and `claude_events` are the built-in transports'
/// own streams and are refused in TOML files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputMode {
    /// The tool writes exactly one JSON object to `{report}`.
    #[default]
    ReportFile,
    /// OpenCode-format JSON events on stdout.
    OpencodeEvents,
    /// `codex exec --json` events (built-in codex only).
    CodexEvents,
    /// `claude -p --output-format stream-json` rows (built-in claude only).
    ClaudeEvents,
    /// The Agent Client Protocol on stdin/stdout: autocode is the client and serves the
    /// agent's terminal and file requests itself (`src/acp/`).
    Acp,
    /// autocode's own runtime talks to the model itself (built-in `autocode` only, `src/direct/`;
    /// never read from a file).
    #[serde(skip_deserializing)]
    DirectRuntime,
}

impl OutputMode {
    pub fn builtin_only(self) -> bool {
        matches!(
            self,
            OutputMode::CodexEvents | OutputMode::ClaudeEvents | OutputMode::DirectRuntime
        )
    }
    pub fn as_str(self) -> &'static str {
        match self {
            OutputMode::ReportFile => "report_file",
            OutputMode::OpencodeEvents => "opencode_events",
            OutputMode::CodexEvents => "codex_events",
            OutputMode::ClaudeEvents => "claude_events",
            OutputMode::Acp => "acp",
            OutputMode::DirectRuntime => "direct_runtime",
        }
    }
}

/// The opt-in sandbox adapters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxAdapter {
    /// Codex with a derived permission profile, spliced in through `{sandbox_args}`.
    CodexArtifacts,
}

/// The model and reasoning levels of one `[roles]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteSpec {
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
    /// The plan reviewer's lighter effort for clear, small tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub light_effort: Option<String>,
}

impl RouteSpec {
    pub fn new(model: &str, effort: Option<&str>) -> Self {
        RouteSpec {
            model: model.to_owned(),
            effort: effort.map(str::to_owned),
            light_effort: None,
        }
    }
}

/// How a route is billed (the `billing` key of an auth route).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Billing {
    #[serde(rename = "subscription")]
    Subscription,
    #[serde(rename = "pay per token")]
    PayPerToken,
}

/// One `[[auth.routes]]` entry: models with this prefix need this login.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthRoute {
    /// A model id prefix such as `openai/`.
    pub models: String,
    /// Matched against each line of the auth listing; group 1 (or the whole match) is compared.
    pub pattern: String,
    pub expect: String,
    /// The login name the tool prints; the prefix when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub billing: Option<Billing>,
}

impl AuthRoute {
    pub fn display_name(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.models)
    }
}

/// The `[auth]` table: how the tool's login is checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthConfig {
    pub command: Vec<String>,
    #[serde(default)]
    pub forbid_env: Vec<String>,
    #[serde(default)]
    pub routes: Vec<AuthRoute>,
}

fn default_strong_effort() -> String {
    "xhigh".to_owned()
}

/// The `[builder_retry]` table: the Builder's stronger attempt and where checkers move.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuilderRetry {
    pub strong_model: String,
    pub checker_model: String,
    #[serde(default = "default_strong_effort")]
    pub strong_effort: String,
}

/// The `[connection]` table: the backend's own login and status commands.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub login_command: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_command: Option<Vec<String>>,
}

/// One provider's configuration, as written in its TOML file (or built in).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderConfig {
    pub name: ProviderName,
    /// The stage command template (argv, no shell).
    pub command: Vec<String>,
    #[serde(default)]
    pub prompt: PromptMode,
    #[serde(default)]
    pub output: OutputMode,
    /// Arguments that resume a session (`{session}`); absent: every stage starts fresh.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<Vec<String>>,
    /// A command printing one model id per line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub models_command: Option<Vec<String>>,
    /// A static model list (instead of `models_command`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub models: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_command: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_adapter: Option<SandboxAdapter>,
    #[serde(default)]
    pub roles: BTreeMap<RoleKey, RouteSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub builder_retry: Option<BuilderRetry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection: Option<ConnectionConfig>,
    /// `[confine]`: the state paths the CLI writes outside the workspace (the agent's room).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confine: Option<ConfineConfig>,
    /// `[loads]`: the configuration a registered tool loads from the project and from HOME.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loads: Option<LoadsConfig>,
}

/// Where a provider's model list comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum ModelListing<'a> {
    Command(&'a [String]),
    Static(&'a [String]),
    None,
}

/// The `[roles]` keys every provider must define (`requirements` falls back to `glm`).
pub const REQUIRED_ROLE_KEYS: [RoleKey; 6] = [
    RoleKey::Astra,
    RoleKey::Terra,
    RoleKey::Sol,
    RoleKey::Completion,
    RoleKey::Glm,
    RoleKey::PlanReviewer,
];

impl ProviderConfig {
    /// The program the provider runs: its version command's, else its command's.
    pub fn program(&self) -> Option<String> {
        self.version_command
            .as_ref()
            .and_then(|v| v.first())
            .or_else(|| self.command.first())
            .cloned()
    }

    pub fn model_listing(&self) -> ModelListing<'_> {
        match (&self.models_command, &self.models) {
            (Some(command), _) => ModelListing::Command(command),
            (None, Some(models)) => ModelListing::Static(models),
            (None, None) => ModelListing::None,
        }
    }

    /// The route of `role`: its `[roles]` key, `requirements` falling back to `glm`.
    pub fn route(&self, role: Role) -> Option<&RouteSpec> {
        let key = RoleKey::for_role(role);
        self.roles.get(&key).or_else(|| match key {
            RoleKey::Requirements => self.roles.get(&RoleKey::Glm),
            _ => None,
        })
    }

    /// Every role's resolved route (roles without one are left out).
    pub fn resolved_routes(&self) -> BTreeMap<Role, RouteSpec> {
        Role::ALL
            .into_iter()
            .filter_map(|role| self.route(role).map(|r| (role, r.clone())))
            .collect()
    }

    /// The `[confine] writable` templates (none when the table is absent).
    pub fn writable_templates(&self) -> &[String] {
        self.confine.as_ref().map_or(&[], |c| c.writable.as_slice())
    }

    /// The `[confine] allow_connect` destinations (checked when the file loaded).
    pub fn allow_connect(&self) -> Vec<crate::supervise::net::NetAllow> {
        self.confine.as_ref().map_or_else(Vec::new, |c| {
            c.allow_connect
                .iter()
                .filter_map(|entry| entry.parse().ok())
                .collect()
        })
    }

    /// The `[confine] write_through` templates (none when the table is absent).
    pub fn write_through_templates(&self) -> &[String] {
        self.confine
            .as_ref()
            .map_or(&[], |c| c.write_through.as_slice())
    }

    pub fn same_family_pairs(&self) -> Vec<SameFamilyPair> {
        same_family_pairs(&self.resolved_routes())
    }
}

/// What is wrong with a configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ConfigProblem {
    #[error("TOML syntax: {message}")]
    Syntax { message: String },
    #[error("{message}")]
    Schema { message: String },
    #[error("could not read the file: {message}")]
    Unreadable { message: String },
    #[error("{source}")]
    Template {
        #[source]
        source: TemplateSyntaxError,
    },
    #[error("{placeholder} is not allowed here ({reason})")]
    PlaceholderNotAllowed {
        placeholder: Placeholder,
        reason: &'static str,
    },
    #[error("prompt = \"file\" needs a {{prompt_file}} argument in command")]
    PromptFileMissing,
    #[error("{{sandbox_args}} needs sandbox_adapter = \"codex_artifacts\"")]
    SandboxArgsWithoutAdapter,
    #[error("sandbox_adapter = \"codex_artifacts\" refuses this: {reason}")]
    AdapterRefused { reason: String },
    #[error("resume must hold a {{session}} argument")]
    ResumeWithoutSession,
    #[error(
        "resume is not for output = \"acp\": an ACP agent's session is continued in the protocol (session/resume or session/load, as the agent advertises)"
    )]
    ResumeWithAcp,
    #[error("output = \"{mode}\" is only for the built-in providers")]
    BuiltinOutputMode { mode: &'static str },
    #[error("{what} must not be empty")]
    Empty { what: &'static str },
    #[error("give models_command or a static models list, not both")]
    ModelsTwice,
    #[error("[roles] must define `{key}`")]
    MissingRole { key: &'static str },
    #[error("the auth pattern does not compile: {message}")]
    BadPattern { message: String },
    #[error("{name:?} is not an environment variable name")]
    BadEnvName { name: String },
    #[error("[builder_retry]: {reason}")]
    BuilderRetry { reason: String },
    #[error("[confine]: {message}")]
    Confine { message: String },
    #[error("[loads]: {message}")]
    Loads { message: String },
    #[error("name {name:?} differs from the file name {file_stem:?}")]
    NameMismatch { name: String, file_stem: String },
}

/// A configuration that failed to load, with where and why (boxed: it travels in `Result`s;
/// read its fields through `Deref`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct ConfigError(Box<ConfigErrorDetail>);

impl ConfigError {
    pub fn new(detail: ConfigErrorDetail) -> Self {
        ConfigError(Box::new(detail))
    }
}

impl std::ops::Deref for ConfigError {
    type Target = ConfigErrorDetail;
    fn deref(&self) -> &ConfigErrorDetail {
        &self.0
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The content of a [`ConfigError`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigErrorDetail {
    pub file: PathBuf,
    pub position: Option<Position>,
    /// The key path the problem is about (`auth.routes[0].pattern`), when known.
    pub key: Option<String>,
    pub problem: ConfigProblem,
    /// The offending source line, for the caret display.
    #[serde(skip)]
    pub source_line: Option<String>,
}

impl fmt::Display for ConfigErrorDetail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(p) = self.position {
            write!(f, ":{}:{}", p.line, p.column)?;
        }
        if let Some(key) = &self.key {
            write!(f, ": key `{key}`")?;
        }
        write!(f, ": {}", self.problem)?;
        if let (Some(p), Some(line)) = (self.position, &self.source_line) {
            let gutter = p.line.to_string();
            let pad = " ".repeat(gutter.len());
            let shown: String = line.chars().take(160).collect();
            let caret = " ".repeat(p.column.saturating_sub(1).min(160));
            write!(f, "\n {gutter} | {shown}\n {pad} | {caret}^")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        None
    }
}

/// A key the loader did not use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigWarning {
    pub file: PathBuf,
    pub position: Option<Position>,
    pub key: String,
    pub message: String,
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(p) = self.position {
            write!(f, ":{}:{}", p.line, p.column)?;
        }
        write!(f, ": warning: key `{}`: {}", self.key, self.message)
    }
}

/// A configuration that loaded, with what the loader noticed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoadedConfig {
    pub config: ProviderConfig,
    pub warnings: Vec<ConfigWarning>,
    pub same_family_pairs: Vec<SameFamilyPair>,
}

/// A validation failure before it is placed in a file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("key `{key}`: {problem}")]
pub struct Invalid {
    pub key: KeyPath,
    pub problem: ConfigProblem,
}

fn invalid(key: KeyPath, problem: ConfigProblem) -> Invalid {
    Invalid { key, problem }
}

/// Which output modes a configuration may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Compiled-in built-in providers (all output modes).
    Builtin,
    /// A TOML file, bundled or the user's.
    File,
}

fn serde_path(path: &serde_ignored::Path<'_>) -> KeyPath {
    use serde_ignored::Path as P;
    match path {
        P::Root => KeyPath::root(),
        P::Seq { parent, index } => serde_path(parent).push_index(*index),
        P::Map { parent, key } => serde_path(parent).push_key(key),
        P::Some { parent } | P::NewtypeStruct { parent } | P::NewtypeVariant { parent } => {
            serde_path(parent)
        }
    }
}

/// Loads one provider TOML. `path` is only used to name the file in errors and warnings, and
/// its stem must equal `name` (the registry finds `NAME.toml` by name).
pub fn load_config(path: &Path, text: &str) -> Result<LoadedConfig, ConfigError> {
    let fail = |offset: Option<usize>, key: Option<String>, problem| {
        let position = offset.map(|o| position_of(text, o));
        ConfigError::new(ConfigErrorDetail {
            file: path.to_owned(),
            position,
            key,
            problem,
            source_line: position.and_then(|p| line_text(text, p.line).map(str::to_owned)),
        })
    };
    let doc = match parse_document(text) {
        Ok(doc) => doc,
        Err(error) => {
            let offset = error.span().map(|s| s.start);
            let key = offset
                .and_then(|o| line_text(text, position_of(text, o).line))
                .and_then(key_on_line);
            return Err(fail(
                offset,
                key,
                ConfigProblem::Syntax {
                    message: error.message().trim().to_owned(),
                },
            ));
        }
    };
    let mut ignored: Vec<KeyPath> = Vec::new();
    let deserializer = toml::Deserializer::from(doc.clone());
    let parsed: Result<ProviderConfig, toml::de::Error> =
        serde_ignored::deserialize(deserializer, |p| ignored.push(serde_path(&p)));
    let config = match parsed {
        Ok(config) => config,
        Err(error) => {
            let offset = error.span().map(|s| s.start);
            // A missing field is reported on its table's span: name the field under that table
            // (the whole document's span means the top level).
            let table = match error.span() {
                Some(span) if span == doc.span() => KeyPath::root(),
                Some(span) => path_at(doc.get_ref(), span.start),
                None => KeyPath::root(),
            };
            let key = match missing_field(error.message()) {
                Some(field) => Some(table.push_key(field)),
                None => Some(table).filter(|k| !k.is_root()),
            }
            .map(|k| k.to_string());
            return Err(fail(
                offset,
                key,
                ConfigProblem::Schema {
                    message: error.message().trim().to_owned(),
                },
            ));
        }
    };
    let locate_key = |key: &KeyPath| locate(doc.get_ref(), key).map(|s| s.start);
    if let Some(stem) = path.file_stem().and_then(|s| s.to_str())
        && path.extension().is_some_and(|e| e == "toml")
        && stem != config.name.as_str()
    {
        let key = KeyPath::key("name");
        return Err(fail(
            locate_key(&key),
            Some(key.to_string()),
            ConfigProblem::NameMismatch {
                name: config.name.to_string(),
                file_stem: stem.to_owned(),
            },
        ));
    }
    if let Err(Invalid { key, problem }) = validate_config(&config, Origin::File) {
        return Err(fail(locate_key(&key), Some(key.to_string()), problem));
    }
    let mut warnings: Vec<ConfigWarning> = ignored
        .into_iter()
        .map(|key| ConfigWarning {
            file: path.to_owned(),
            position: locate_key(&key).map(|o| position_of(text, o)),
            key: key.to_string(),
            message: "unknown key (ignored)".to_owned(),
        })
        .collect();
    warnings.sort_by_key(|w| w.position.map(|p| (p.line, p.column)));
    let same_family_pairs = config.same_family_pairs();
    Ok(LoadedConfig {
        config,
        warnings,
        same_family_pairs,
    })
}

/// The field named by serde's "missing field `x`" message.
fn missing_field(message: &str) -> Option<&str> {
    message
        .trim()
        .strip_prefix("missing field `")?
        .split('`')
        .next()
}

/// Parses the span-carrying document. On failure, the error that comes first in the text: the
/// parser recovers and may report a consequence (a missing comma on the next line) before its
/// cause (an unterminated string).
pub(crate) fn parse_document(
    text: &str,
) -> Result<toml::Spanned<toml::de::DeTable<'_>>, toml::de::Error> {
    let (doc, errors) = toml::de::DeTable::parse_recoverable(text);
    match errors
        .into_iter()
        .min_by_key(|e| e.span().map_or(usize::MAX, |s| s.start))
    {
        Some(first) => Err(first),
        None => Ok(doc),
    }
}
