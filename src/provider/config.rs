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
use super::family::{Family, family_of};
use super::location::{KeyPath, Position, key_on_line, line_text, locate, path_at, position_of};
use super::template::{Placeholder, TemplateSyntaxError, placeholders_in};
use crate::ids::ProviderName;
use crate::role::{Role, RoleKey};

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
}

impl OutputMode {
    pub fn builtin_only(self) -> bool {
        matches!(self, OutputMode::CodexEvents | OutputMode::ClaudeEvents)
    }
    pub fn as_str(self) -> &'static str {
        match self {
            OutputMode::ReportFile => "report_file",
            OutputMode::OpencodeEvents => "opencode_events",
            OutputMode::CodexEvents => "codex_events",
            OutputMode::ClaudeEvents => "claude_events",
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

fn check_argv(key: KeyPath, argv: &[String], what: &'static str) -> Result<(), Invalid> {
    if argv.is_empty() {
        return Err(invalid(key, ConfigProblem::Empty { what }));
    }
    if let Some(i) = argv.iter().position(String::is_empty) {
        return Err(invalid(
            key.push_index(i),
            ConfigProblem::Empty {
                what: "a command argument",
            },
        ));
    }
    Ok(())
}

/// The placeholders of every argument, or the first syntax error with its key.
fn template_placeholders(
    key: &KeyPath,
    argv: &[String],
) -> Result<Vec<(usize, Vec<Placeholder>)>, Invalid> {
    argv.iter()
        .enumerate()
        .map(|(i, arg)| {
            placeholders_in(arg).map(|ps| (i, ps)).map_err(|source| {
                invalid(
                    key.clone().push_index(i),
                    ConfigProblem::Template { source },
                )
            })
        })
        .collect()
}

/// Every check a configuration must pass (see the module doc and `docs/providers-registry.md`).
pub fn validate_config(config: &ProviderConfig, origin: Origin) -> Result<(), Invalid> {
    let command_key = KeyPath::key("command");
    check_argv(command_key.clone(), &config.command, "command")?;
    let command_uses = template_placeholders(&command_key, &config.command)?;
    let first_use = |wanted: Placeholder| {
        command_uses
            .iter()
            .find(|(_, ps)| ps.contains(&wanted))
            .map(|(i, _)| *i)
    };
    if let Some(i) = first_use(Placeholder::Session) {
        return Err(invalid(
            command_key.push_index(i),
            ConfigProblem::PlaceholderNotAllowed {
                placeholder: Placeholder::Session,
                reason: "a session is only known when resuming; put it in resume",
            },
        ));
    }
    if config.prompt == PromptMode::File && first_use(Placeholder::PromptFile).is_none() {
        return Err(invalid(
            KeyPath::key("prompt"),
            ConfigProblem::PromptFileMissing,
        ));
    }
    if origin == Origin::File && config.output.builtin_only() {
        return Err(invalid(
            KeyPath::key("output"),
            ConfigProblem::BuiltinOutputMode {
                mode: config.output.as_str(),
            },
        ));
    }
    match config.sandbox_adapter {
        None => {
            if let Some(i) = first_use(Placeholder::SandboxArgs) {
                return Err(invalid(
                    command_key.push_index(i),
                    ConfigProblem::SandboxArgsWithoutAdapter,
                ));
            }
        }
        Some(SandboxAdapter::CodexArtifacts) => check_codex_artifacts(config, &command_uses)?,
    }
    if let Some(resume) = &config.resume {
        let key = KeyPath::key("resume");
        check_argv(key.clone(), resume, "resume")?;
        let uses = template_placeholders(&key, resume)?;
        if let Some((i, _)) = uses
            .iter()
            .find(|(_, ps)| ps.contains(&Placeholder::SandboxArgs))
        {
            return Err(invalid(
                key.push_index(*i),
                ConfigProblem::PlaceholderNotAllowed {
                    placeholder: Placeholder::SandboxArgs,
                    reason: "only the command takes the sandbox splice",
                },
            ));
        }
        if !uses
            .iter()
            .any(|(_, ps)| ps.contains(&Placeholder::Session))
        {
            return Err(invalid(key, ConfigProblem::ResumeWithoutSession));
        }
    }
    if config.models_command.is_some() && config.models.is_some() {
        return Err(invalid(KeyPath::key("models"), ConfigProblem::ModelsTwice));
    }
    if let Some(command) = &config.models_command {
        check_argv(KeyPath::key("models_command"), command, "models_command")?;
    }
    if let Some(models) = &config.models {
        let key = KeyPath::key("models");
        if models.is_empty() {
            return Err(invalid(key, ConfigProblem::Empty { what: "models" }));
        }
        if let Some(i) = models.iter().position(|m| m.trim().is_empty()) {
            return Err(invalid(
                key.push_index(i),
                ConfigProblem::Empty { what: "a model id" },
            ));
        }
    }
    if let Some(command) = &config.version_command {
        check_argv(KeyPath::key("version_command"), command, "version_command")?;
    }
    check_roles(config)?;
    if let Some(auth) = &config.auth {
        check_auth(auth)?;
    }
    if let Some(retry) = &config.builder_retry {
        check_builder_retry(config, retry)?;
    }
    if let Some(connection) = &config.connection {
        let key = KeyPath::key("connection");
        if let Some(command) = &connection.login_command {
            check_argv(
                key.clone().push_key("login_command"),
                command,
                "login_command",
            )?;
        }
        if let Some(command) = &connection.status_command {
            check_argv(key.push_key("status_command"), command, "status_command")?;
        }
    }
    Ok(())
}

fn check_roles(config: &ProviderConfig) -> Result<(), Invalid> {
    for key in REQUIRED_ROLE_KEYS {
        if !config.roles.contains_key(&key) {
            return Err(invalid(
                KeyPath::key("roles"),
                ConfigProblem::MissingRole { key: key.as_str() },
            ));
        }
    }
    for (role_key, route) in &config.roles {
        let key = KeyPath::key("roles").push_key(role_key.as_str());
        if route.model.trim().is_empty() {
            return Err(invalid(
                key.push_key("model"),
                ConfigProblem::Empty { what: "model" },
            ));
        }
        for (field, value) in [
            ("effort", &route.effort),
            ("light_effort", &route.light_effort),
        ] {
            if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
                return Err(invalid(
                    key.clone().push_key(field),
                    ConfigProblem::Empty {
                        what: "an effort (leave it out for the tool's default)",
                    },
                ));
            }
        }
    }
    Ok(())
}

fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn check_auth(auth: &AuthConfig) -> Result<(), Invalid> {
    let key = KeyPath::key("auth");
    check_argv(
        key.clone().push_key("command"),
        &auth.command,
        "auth.command",
    )?;
    for (i, name) in auth.forbid_env.iter().enumerate() {
        if !is_env_name(name) {
            return Err(invalid(
                key.clone().push_key("forbid_env").push_index(i),
                ConfigProblem::BadEnvName { name: name.clone() },
            ));
        }
    }
    for (i, route) in auth.routes.iter().enumerate() {
        let route_key = key.clone().push_key("routes").push_index(i);
        if route.models.is_empty() {
            return Err(invalid(
                route_key.push_key("models"),
                ConfigProblem::Empty {
                    what: "a route's model prefix",
                },
            ));
        }
        if let Err(error) = regex::Regex::new(&route.pattern) {
            // The regex crate's message spans several lines; keep its last (the reason).
            let message = error.to_string();
            let reason = message.lines().last().unwrap_or(&message).trim();
            return Err(invalid(
                route_key.push_key("pattern"),
                ConfigProblem::BadPattern {
                    message: reason.trim_start_matches("error: ").to_owned(),
                },
            ));
        }
        if route.expect.is_empty() {
            return Err(invalid(
                route_key.push_key("expect"),
                ConfigProblem::Empty { what: "expect" },
            ));
        }
    }
    Ok(())
}

/// Families whose other members may not check the strong model (the reference's rule).
fn checker_family_guarded(family: &Family) -> bool {
    matches!(family, Family::Glm | Family::Mimo)
}

fn check_builder_retry(config: &ProviderConfig, retry: &BuilderRetry) -> Result<(), Invalid> {
    let key = KeyPath::key("builder_retry");
    let bad = |field: &str, reason: String| {
        Err(invalid(
            key.clone().push_key(field),
            ConfigProblem::BuilderRetry { reason },
        ))
    };
    for (field, value) in [
        ("strong_model", &retry.strong_model),
        ("checker_model", &retry.checker_model),
        ("strong_effort", &retry.strong_effort),
    ] {
        if value.trim().is_empty() {
            return bad(field, format!("{field} must not be empty"));
        }
    }
    if let Some(builder) = config.roles.get(&RoleKey::Terra)
        && builder.model == retry.strong_model
    {
        return bad(
            "strong_model",
            format!(
                "strong_model {:?} is already the Builder's (terra) model",
                retry.strong_model
            ),
        );
    }
    if retry.checker_model == retry.strong_model {
        return bad(
            "checker_model",
            "checker_model must differ from strong_model".to_owned(),
        );
    }
    let strong_family = family_of(&retry.strong_model);
    if checker_family_guarded(&strong_family) && family_of(&retry.checker_model) == strong_family {
        return bad(
            "checker_model",
            format!(
                "checker_model {:?} is in strong_model's {strong_family} family",
                retry.checker_model
            ),
        );
    }
    if let Some(models) = &config.models {
        for (field, model) in [
            ("strong_model", &retry.strong_model),
            ("checker_model", &retry.checker_model),
        ] {
            if !models.contains(model) {
                return bad(
                    field,
                    format!("{field} {model:?} is not in the static models list"),
                );
            }
        }
    }
    Ok(())
}

/// Flags the codex artifact adapter refuses outright (it owns sandbox and profile policy).
const ADAPTER_REFUSED_FLAGS: &[(&str, &str)] = &[
    (
        "--sandbox",
        "a legacy sandbox flag; {sandbox_args} sets the sandbox",
    ),
    (
        "-s",
        "a legacy sandbox flag; {sandbox_args} sets the sandbox",
    ),
    ("--add-dir", "additional writable roots"),
    ("--profile", "configuration profiles"),
    ("-p", "configuration profiles"),
    (
        "--dangerously-bypass-approvals-and-sandbox",
        "bypassing the sandbox",
    ),
    ("--yolo", "bypassing the sandbox"),
    ("--full-auto", "a sandbox policy override"),
];

/// `-c key=value` keys the adapter reserves (policy and project trust). `approval_policy` is
/// left to the user, as in the reference example.
const ADAPTER_RESERVED_CONFIG_KEYS: &[&str] = &[
    "sandbox_mode",
    "sandbox_permissions",
    "sandbox_workspace_write",
    "default_permissions",
    "permissions",
    "profile",
    "profiles",
    "projects",
];

fn check_config_override(value: &str) -> Result<(), String> {
    let Some((key, val)) = value.split_once('=') else {
        return Err(format!(
            "-c {value:?} is not a key=value override (JSON blobs are not config overrides)"
        ));
    };
    let key = key.trim();
    let key_ok = !key.is_empty()
        && key.split('.').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        });
    if !key_ok {
        return Err(format!(
            "-c {value:?} is not a key=value override (JSON blobs are not config overrides)"
        ));
    }
    if val.trim().is_empty() {
        return Err(format!("-c {value:?} has an empty value"));
    }
    if let Some(reserved) = ADAPTER_RESERVED_CONFIG_KEYS
        .iter()
        .find(|r| key == **r || key.starts_with(&format!("{r}.")))
    {
        return Err(format!(
            "-c {key}=... sets {reserved}, a policy key the adapter reserves"
        ));
    }
    Ok(())
}

fn check_codex_artifacts(
    config: &ProviderConfig,
    command_uses: &[(usize, Vec<Placeholder>)],
) -> Result<(), Invalid> {
    let command_key = KeyPath::key("command");
    let refuse = |i: usize, reason: String| {
        Err(invalid(
            command_key.clone().push_index(i),
            ConfigProblem::AdapterRefused { reason },
        ))
    };
    if config.output != OutputMode::ReportFile {
        return Err(invalid(
            KeyPath::key("output"),
            ConfigProblem::AdapterRefused {
                reason: "the adapter is for output = \"report_file\" commands".to_owned(),
            },
        ));
    }
    if let Some((i, _)) = command_uses
        .iter()
        .find(|(_, ps)| ps.contains(&Placeholder::Sandbox))
    {
        return refuse(*i, "legacy {sandbox}; use {sandbox_args}".to_owned());
    }
    if !command_uses
        .iter()
        .any(|(_, ps)| ps.contains(&Placeholder::SandboxArgs))
    {
        return Err(invalid(
            command_key,
            ConfigProblem::AdapterRefused {
                reason: "the command needs a {sandbox_args} argument".to_owned(),
            },
        ));
    }
    let args = &config.command;
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with('-') => (flag, Some(value)),
            _ => (arg, None),
        };
        if let Some((_, why)) = ADAPTER_REFUSED_FLAGS.iter().find(|(f, _)| *f == flag) {
            return refuse(i, format!("{flag} ({why})"));
        }
        match flag {
            "-C" | "--cd" => {
                let value = match inline {
                    Some(v) => Some(v),
                    None => {
                        i += 1;
                        args.get(i).map(String::as_str)
                    }
                };
                if value != Some("{workspace}") {
                    return refuse(
                        i.min(args.len().saturating_sub(1)),
                        format!("{flag} must be followed by exactly {{workspace}}"),
                    );
                }
            }
            "-c" | "--config" => {
                let value = match inline {
                    Some(v) => Some(v),
                    None => {
                        i += 1;
                        args.get(i).map(String::as_str)
                    }
                };
                let Some(value) = value else {
                    return refuse(args.len() - 1, format!("{flag} without a value"));
                };
                if let Err(reason) = check_config_override(value) {
                    return refuse(i, reason);
                }
            }
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"name = "t"
command = ["tool", "--model", "{model}", "--variant", "{effort}"]
prompt = "stdin"
output = "opencode_events"
resume = ["--session", "{session}"]

[roles]
astra = { model = "openai/gpt-6-sol", effort = "high" }
terra = { model = "zhipuai-coding-plan/glm-5.3", effort = "medium" }
sol = { model = "openai/gpt-6-sol", effort = "high" }
completion = { model = "openai/gpt-6-sol", effort = "medium" }
glm = { model = "zhipuai-coding-plan/glm-5.3", effort = "medium" }
plan_reviewer = { model = "openai/gpt-6-sol", effort = "high" }
"#;

    fn load(text: &str) -> Result<LoadedConfig, ConfigError> {
        load_config(Path::new("/cfg/t.toml"), text)
    }

    fn with(replace: &str, by: &str) -> String {
        assert!(BASE.contains(replace), "{replace}");
        BASE.replacen(replace, by, 1)
    }

    fn err(text: &str) -> ConfigError {
        match load(text) {
            Ok(ok) => panic!("expected an error, loaded {ok:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn base_loads_clean() {
        let loaded = load(BASE).unwrap();
        assert!(loaded.warnings.is_empty());
        assert!(loaded.same_family_pairs.is_empty());
        assert_eq!(loaded.config.output, OutputMode::OpencodeEvents);
        assert_eq!(
            loaded.config.route(Role::Requirements).unwrap().model,
            "zhipuai-coding-plan/glm-5.3"
        );
        assert_eq!(loaded.config.model_listing(), ModelListing::None);
    }

    #[test]
    fn defaults_apply() {
        let text = with("prompt = \"stdin\"\noutput = \"opencode_events\"\n", "");
        let config = load(&text).unwrap().config;
        assert_eq!(config.prompt, PromptMode::Stdin);
        assert_eq!(config.output, OutputMode::ReportFile);
    }

    /// (text, line, column, key, words the message must hold)
    #[test]
    fn errors_name_line_column_and_key() {
        let cases: Vec<(String, usize, usize, &str, &str)> = vec![
            (
                with("\"{model}\"", "\"{modle}\""),
                2,
                31,
                "command[2]",
                "unknown placeholder {modle}",
            ),
            (
                with("prompt = \"stdin\"", "prompt = \"file\""),
                3,
                1,
                "prompt",
                "{prompt_file}",
            ),
            (
                with("prompt = \"stdin\"", "prompt = \"files\""),
                3,
                10,
                "prompt",
                "unknown variant",
            ),
            (
                with("\"tool\",", "\"tool\", \"{sandbox_args}\","),
                2,
                20,
                "command[1]",
                "sandbox_adapter",
            ),
            (
                with("output = \"opencode_events\"", "output = \"codex_events\""),
                4,
                1,
                "output",
                "built-in",
            ),
            (
                with("[\"--session\", \"{session}\"]", "[\"--continue\"]"),
                5,
                1,
                "resume",
                "{session}",
            ),
            (
                with("\"{effort}\"]", "\"{effort}\", \"{session}\"]"),
                2,
                67,
                "command[5]",
                "resume",
            ),
            (
                with(
                    "astra = { model = \"openai/gpt-6-sol\", effort = \"high\" }\n",
                    "",
                ),
                7,
                2,
                "roles",
                "astra",
            ),
            (
                with("effort = \"medium\" }\nglm", "effort = \"\" }\nglm"),
                11,
                44,
                "roles.completion.effort",
                "must not be empty",
            ),
            (
                with("sol = {", "luna = {"),
                10,
                1,
                "roles.luna",
                "unknown variant",
            ),
            (
                with("command = [", "command = 3 #["),
                2,
                11,
                "command",
                "invalid type",
            ),
            (
                with("name = \"t\"", "name = \"other\""),
                1,
                1,
                "name",
                "differs from the file name",
            ),
            (
                with("name = \"t\"", "name = \"../x\""),
                1,
                8,
                "name",
                "invalid provider name",
            ),
            (
                format!("{BASE}models = [\"a\"]\n"),
                14,
                1,
                "roles.models",
                "unknown variant",
            ),
        ];
        for (text, line, column, key, words) in cases {
            let e = err(&text);
            let rendered = e.to_string();
            assert_eq!(
                (e.position.map(|p| (p.line, p.column)), e.key.as_deref()),
                (Some((line, column)), Some(key)),
                "{rendered}"
            );
            assert!(rendered.contains(words), "{rendered}");
            assert!(
                rendered.starts_with(&format!("/cfg/t.toml:{line}:{column}: key `{key}`: ")),
                "{rendered}"
            );
        }
    }

    #[test]
    fn syntax_errors_are_located() {
        let e = err("name = \"t\"\ncommand = [\"a\",\n[roles]\n");
        assert!(matches!(e.problem, ConfigProblem::Syntax { .. }), "{e}");
        assert_eq!(e.position.map(|p| p.line), Some(3), "{e}");
        let e = err("name = \"t\"\ncommand = \"unterminated\n");
        assert_eq!(e.position.map(|p| p.line), Some(2), "{e}");
        assert_eq!(e.key.as_deref(), Some("command"), "{e}");
        let rendered = e.to_string();
        assert!(rendered.lines().count() <= 4, "{rendered}");
        assert!(
            rendered.contains(" 2 | command = \"unterminated"),
            "{rendered}"
        );
    }

    #[test]
    fn unknown_keys_are_warnings_with_lines() {
        let text =
            format!("{BASE}\n[connection]\nstatus_command = [\"x\", \"status\"]\nsurprise = 1\n")
                .replace("glm = { model", "glm = { colour = \"red\", model");
        let loaded = load(&text).unwrap();
        let keys: Vec<_> = loaded.warnings.iter().map(|w| w.key.as_str()).collect();
        assert_eq!(keys, ["roles.glm.colour", "connection.surprise"]);
        let lines: Vec<_> = loaded
            .warnings
            .iter()
            .map(|w| w.position.map(|p| p.line))
            .collect();
        assert_eq!(lines, [Some(12), Some(17)]);
        assert!(
            loaded.warnings[0]
                .to_string()
                .starts_with("/cfg/t.toml:12:9: warning: key `roles.glm.colour`")
        );
    }

    fn adapter(command: &str) -> String {
        format!(
            "name = \"t\"\nsandbox_adapter = \"codex_artifacts\"\ncommand = {command}\n{}",
            &BASE[BASE.find("[roles]").unwrap_or(0)..]
        )
    }

    #[test]
    fn adapter_refusals() {
        let ok = [
            r#"["codex", "exec", "{sandbox_args}", "-C", "{workspace}", "-c", "model_reasoning_effort=\"{effort}\"", "-c", "approval_policy=\"never\"", "-o", "{report}", "-"]"#,
            r#"["codex", "exec", "{sandbox_args}", "--cd={workspace}", "--config", "a.b=1"]"#,
        ];
        for command in ok {
            let text = adapter(command);
            assert!(load(&text).is_ok(), "{command}: {:?}", load(&text).err());
        }
        let refused: [(&str, &str, &str); 13] = [
            (r#"["codex", "exec"]"#, "command", "{sandbox_args}"),
            (
                r#"["codex", "{sandbox_args}", "--sandbox", "{sandbox}"]"#,
                "command[3]",
                "{sandbox}",
            ),
            (
                r#"["codex", "{sandbox_args}", "--sandbox", "read-only"]"#,
                "command[2]",
                "legacy sandbox",
            ),
            (
                r#"["codex", "{sandbox_args}", "-C", "/tmp"]"#,
                "command[3]",
                "exactly {workspace}",
            ),
            (
                r#"["codex", "{sandbox_args}", "--cd", "{workspace}/sub"]"#,
                "command[3]",
                "exactly {workspace}",
            ),
            (
                r#"["codex", "{sandbox_args}", "-C"]"#,
                "command[2]",
                "exactly {workspace}",
            ),
            (
                r#"["codex", "{sandbox_args}", "--add-dir", "/x"]"#,
                "command[2]",
                "writable roots",
            ),
            (
                r#"["codex", "{sandbox_args}", "-p", "work"]"#,
                "command[2]",
                "profiles",
            ),
            (
                r#"["codex", "{sandbox_args}", "--dangerously-bypass-approvals-and-sandbox"]"#,
                "command[2]",
                "bypassing",
            ),
            (
                r#"["codex", "{sandbox_args}", "-c", "sandbox_mode=\"danger-full-access\""]"#,
                "command[3]",
                "reserves",
            ),
            (
                r#"["codex", "{sandbox_args}", "-c", "sandbox_workspace_write.network_access=true"]"#,
                "command[3]",
                "reserves",
            ),
            (
                r#"["codex", "{sandbox_args}", "-c", "{{\"a\":1}}"]"#,
                "command[3]",
                "JSON blobs",
            ),
            (
                r#"["codex", "{sandbox_args}", "-c", "novalue"]"#,
                "command[3]",
                "key=value",
            ),
        ];
        for (command, key, words) in refused {
            let e = err(&adapter(command));
            assert_eq!(e.key.as_deref(), Some(key), "{command}: {e}");
            assert!(e.to_string().contains(words), "{command}: {e}");
        }
    }

    #[test]
    fn builder_retry_rules() {
        let retry = |strong: &str, checker: &str| {
            format!(
                "{BASE}\n[builder_retry]\nstrong_model = \"{strong}\"\nchecker_model = \"{checker}\"\n"
            )
        };
        let loaded = load(&retry("openai/gpt-6-sol", "zhipuai-coding-plan/glm-5.3")).unwrap();
        assert_eq!(loaded.config.builder_retry.unwrap().strong_effort, "xhigh");
        let cases = [
            (
                retry("zhipuai-coding-plan/glm-5.3", "openai/gpt-6-sol"),
                "builder_retry.strong_model",
                "Builder",
            ),
            (
                retry("openai/gpt-6-sol", "openai/gpt-6-sol"),
                "builder_retry.checker_model",
                "differ",
            ),
            (
                retry("zai/glm-5.2", "zhipuai-coding-plan/glm-5.3"),
                "builder_retry.checker_model",
                "glm family",
            ),
            (
                retry("xiaomi/mimo-v2", "mimo-v3"),
                "builder_retry.checker_model",
                "mimo family",
            ),
        ];
        for (text, key, words) in cases {
            let e = err(&text);
            assert_eq!(e.key.as_deref(), Some(key), "{e}");
            assert!(e.to_string().contains(words), "{e}");
        }
        let listed = format!(
            "{}models = [\"openai/gpt-6-sol\"]\n{}",
            &BASE[..BASE.find("[roles]").unwrap_or(0)],
            &retry("openai/gpt-6-sol", "zhipuai-coding-plan/glm-5.3")
                [BASE.find("[roles]").unwrap_or(0)..]
        );
        let e = err(&listed);
        assert_eq!(e.key.as_deref(), Some("builder_retry.checker_model"), "{e}");
        assert!(e.to_string().contains("static models list"), "{e}");
    }

    #[test]
    fn auth_checks() {
        let auth = |pattern: &str, env: &str| {
            format!(
                "{BASE}\n[auth]\ncommand = [\"kilo\", \"auth\", \"list\"]\nforbid_env = [\"{env}\"]\n\n[[auth.routes]]\nmodels = \"openai/\"\nbilling = \"pay per token\"\npattern = '{pattern}'\nexpect = \"oauth\"\n"
            )
        };
        let loaded = load(&auth(r"^OpenAI\s+(\S+)$", "OPENAI_API_KEY")).unwrap();
        let route = &loaded.config.auth.unwrap().routes[0];
        assert_eq!(route.billing, Some(Billing::PayPerToken));
        assert_eq!(route.display_name(), "openai/");
        let e = err(&auth(r"^OpenAI\s+(\S+$", "OPENAI_API_KEY"));
        assert_eq!(e.key.as_deref(), Some("auth.routes[0].pattern"), "{e}");
        assert_eq!(e.position.map(|p| p.line), Some(22), "{e}");
        assert!(e.to_string().contains("does not compile"), "{e}");
        let e = err(&auth("x", "BAD NAME"));
        assert_eq!(e.key.as_deref(), Some("auth.forbid_env[0]"), "{e}");
    }

    #[test]
    fn models_sources() {
        let both = format!("models_command = [\"t\", \"models\"]\nmodels = [\"a\"]\n{BASE}");
        assert_eq!(err(&both).key.as_deref(), Some("models"));
        let listed = format!("models = [\"a\", \"b\"]\n{BASE}");
        let config = load(&listed).unwrap().config;
        assert_eq!(
            config.model_listing(),
            ModelListing::Static(&["a".into(), "b".into()])
        );
    }

    #[test]
    fn serialization_is_stable() {
        let config = load(BASE).unwrap().config;
        let json = serde_json::to_value(&config).unwrap();
        assert_eq!(json["output"], "opencode_events");
        assert_eq!(json["roles"]["plan_reviewer"]["model"], "openai/gpt-6-sol");
        let error = err(&with("\"{model}\"", "\"{x}\""));
        let json = serde_json::to_value(&error).unwrap();
        assert_eq!(json["key"], "command[2]");
        assert_eq!(json["position"]["line"], 2);
        assert_eq!(json["problem"]["kind"], "template");
    }
}
