//! Provider lookup, listing, the default provider, and the configs autocode refuses to read.
//!
//! Lookup of `--provider NAME`: the built-ins `opencode`, `codex` and `claude` always win (a
//! user file with a reserved name is never read; [`Registry::ignored_configs`] names it); else
//! `<user_dir>/NAME.toml`; else the bundled `providers/NAME.toml`. The registry only reads the
//! explicit [`ConfigPaths`] it is given, built from an environment map, never the current
//! directory: files inside a project or workspace are never loaded.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::builtin::{BUILTIN_NAMES, BUNDLED, builtin, bundled_label, bundled_text, is_builtin};
use super::config::{
    ConfigError, ConfigErrorDetail, ConfigProblem, ConfigWarning, LoadedConfig, ProviderConfig,
    load_config,
};
use super::cross_model::SameFamilyPair;
use super::location::{KeyPath, line_text, locate, position_of};
use crate::ids::{InvalidId, ProviderName};

/// An environment map (as handed to a launch): names to values.
pub type Env = BTreeMap<OsString, OsString>;

/// The only places the registry reads from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigPaths {
    /// `$XDG_CONFIG_HOME/autocode/providers` (default `$HOME/.config/autocode/providers`).
    pub user_dir: PathBuf,
    /// `$XDG_CONFIG_HOME/autocode/config.toml`.
    pub user_config_file: PathBuf,
}

fn env_path(env: &Env, name: &str) -> Option<PathBuf> {
    let value = env.get(&OsString::from(name))?;
    let path = PathBuf::from(value);
    // XDG: relative paths are invalid and ignored; an empty value is unset.
    path.is_absolute().then_some(path)
}

impl ConfigPaths {
    /// From `XDG_CONFIG_HOME` (absolute), else `HOME/.config`.
    pub fn from_env(env: &Env) -> Result<Self, RegistryError> {
        let base = env_path(env, "XDG_CONFIG_HOME")
            .or_else(|| env_path(env, "HOME").map(|home| home.join(".config")))
            .ok_or(RegistryError::NoConfigHome)?;
        Ok(Self::under(&base.join("autocode")))
    }

    /// The paths under one autocode config directory.
    pub fn under(autocode_dir: &Path) -> Self {
        ConfigPaths {
            user_dir: autocode_dir.join("providers"),
            user_config_file: autocode_dir.join("config.toml"),
        }
    }
}

/// Where a provider comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    Builtin,
    Bundled,
    User,
}

/// The configuration's source: `builtin`, `bundled:providers/NAME.toml`, or a user file path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    Builtin,
    Bundled(String),
    User(PathBuf),
}

impl fmt::Display for ConfigSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigSource::Builtin => f.write_str("builtin"),
            ConfigSource::Bundled(label) => f.write_str(label),
            ConfigSource::User(path) => write!(f, "{}", path.display()),
        }
    }
}

impl Serialize for ConfigSource {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// A provider ready to use: its validated configuration and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResolvedProvider {
    pub name: ProviderName,
    pub kind: ProviderKind,
    pub source: ConfigSource,
    /// sha256 hex of the file bytes (built-ins: of their canonical JSON).
    pub fingerprint: String,
    pub config: ProviderConfig,
    pub warnings: Vec<ConfigWarning>,
    pub same_family_pairs: Vec<SameFamilyPair>,
}

/// Whether a listed provider loads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum LoadStatus {
    Ok {
        warnings: Vec<ConfigWarning>,
        same_family_pairs: Vec<SameFamilyPair>,
    },
    Error {
        /// The rendered error (file:line:col, key, reason).
        message: String,
        error: ConfigError,
    },
}

/// One row of `providers list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProviderListing {
    pub name: String,
    pub kind: ProviderKind,
    pub source: ConfigSource,
    pub fingerprint: Option<String>,
    /// A user file that replaces a bundled one of the same name.
    pub shadows_bundled: bool,
    #[serde(flatten)]
    pub status: LoadStatus,
}

/// Why autocode does not read a config file it found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum IgnoredReason {
    /// A user file named like a built-in provider.
    ReservedName { name: String },
    /// A file inside the workspace: project files are never provider definitions.
    InsideWorkspace,
}

impl fmt::Display for IgnoredReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IgnoredReason::ReservedName { name } => write!(
                f,
                "`{name}` is a built-in provider name; --provider {name} always selects the built-in"
            ),
            IgnoredReason::InsideWorkspace => {
                f.write_str("config files inside a workspace are never loaded")
            }
        }
    }
}

/// A config file autocode found and will not read (for `doctor`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IgnoredConfig {
    pub path: PathBuf,
    #[serde(flatten)]
    pub reason: IgnoredReason,
    pub message: String,
}

/// Where the default provider came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DefaultSource {
    /// `AUTOCODE_PROVIDER`.
    Env,
    /// `default_provider` in the user config file.
    ConfigFile { path: PathBuf },
    /// Neither was set: `opencode`.
    Fallback,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DefaultProvider {
    pub name: ProviderName,
    pub source: DefaultSource,
}

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("unknown provider `{name}` (known: {known}); a user provider goes in {user_dir}/{name}.toml", known = .known.join(", "), user_dir = .user_dir.display())]
    UnknownProvider {
        name: String,
        known: Vec<String>,
        user_dir: PathBuf,
    },
    #[error("{0}")]
    Config(ConfigError),
    #[error("cannot read {path}: {source}", path = .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("neither XDG_CONFIG_HOME nor HOME is set to an absolute path")]
    NoConfigHome,
    #[error("{0}")]
    InvalidName(#[source] InvalidId),
    #[error("AUTOCODE_PROVIDER: {0}")]
    InvalidEnvDefault(#[source] InvalidId),
}

impl From<ConfigError> for RegistryError {
    fn from(error: ConfigError) -> Self {
        RegistryError::Config(error)
    }
}

/// sha256 hex of `bytes`.
pub fn fingerprint(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The fingerprint of a built-in: sha256 of its canonical JSON.
pub fn builtin_fingerprint(config: &ProviderConfig) -> String {
    // Serializing plain data with string keys cannot fail; an empty hash would still differ.
    fingerprint(&serde_json::to_vec(config).unwrap_or_default())
}

/// The provider registry over explicit paths.
#[derive(Debug, Clone)]
pub struct Registry {
    paths: ConfigPaths,
}

fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, RegistryError> {
    // Provider TOML and config.toml: regular files only, non-blocking, at most CONFIG_CAP.
    match crate::bounded_read::read(path, crate::bounded_read::CONFIG_CAP) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(RegistryError::Read {
            path: path.to_owned(),
            source,
        }),
    }
}

fn unreadable(path: &Path, message: String) -> ConfigError {
    ConfigError::new(ConfigErrorDetail {
        file: path.to_owned(),
        position: None,
        key: None,
        problem: ConfigProblem::Unreadable { message },
        source_line: None,
    })
}

fn load_bytes(path: &Path, bytes: &[u8]) -> Result<LoadedConfig, ConfigError> {
    let text =
        std::str::from_utf8(bytes).map_err(|e| unreadable(path, format!("not UTF-8 ({e})")))?;
    load_config(path, text)
}

fn resolved(
    kind: ProviderKind,
    source: ConfigSource,
    fingerprint: String,
    loaded: LoadedConfig,
) -> ResolvedProvider {
    ResolvedProvider {
        name: loaded.config.name.clone(),
        kind,
        source,
        fingerprint,
        config: loaded.config,
        warnings: loaded.warnings,
        same_family_pairs: loaded.same_family_pairs,
    }
}

impl Registry {
    pub fn new(paths: ConfigPaths) -> Self {
        Registry { paths }
    }

    pub fn paths(&self) -> &ConfigPaths {
        &self.paths
    }

    fn user_file(&self, name: &str) -> PathBuf {
        self.paths.user_dir.join(format!("{name}.toml"))
    }

    /// The provider `--provider NAME` selects.
    pub fn resolve(&self, name: &ProviderName) -> Result<ResolvedProvider, RegistryError> {
        let name = name.as_str();
        if let Some(config) = builtin(name) {
            let fingerprint = builtin_fingerprint(&config);
            let same_family_pairs = config.same_family_pairs();
            return Ok(ResolvedProvider {
                name: config.name.clone(),
                kind: ProviderKind::Builtin,
                source: ConfigSource::Builtin,
                fingerprint,
                config,
                warnings: Vec::new(),
                same_family_pairs,
            });
        }
        let path = self.user_file(name);
        if let Some(bytes) = read_optional(&path)? {
            let loaded = load_bytes(&path, &bytes)?;
            return Ok(resolved(
                ProviderKind::User,
                ConfigSource::User(path),
                fingerprint(&bytes),
                loaded,
            ));
        }
        if let Some(text) = bundled_text(name) {
            let label = bundled_label(name);
            let loaded = load_config(Path::new(&label), text)?;
            return Ok(resolved(
                ProviderKind::Bundled,
                ConfigSource::Bundled(label),
                fingerprint(text.as_bytes()),
                loaded,
            ));
        }
        Err(RegistryError::UnknownProvider {
            name: name.to_owned(),
            known: self.list().into_iter().map(|l| l.name).collect(),
            user_dir: self.paths.user_dir.clone(),
        })
    }

    /// [`Registry::resolve`] for a name as typed (`--provider NAME`).
    pub fn resolve_name(&self, name: &str) -> Result<ResolvedProvider, RegistryError> {
        let name = ProviderName::new(name).map_err(RegistryError::InvalidName)?;
        self.resolve(&name)
    }

    /// The `*.toml` files in the user directory, sorted, as (stem, path).
    fn user_files(&self) -> Vec<(String, PathBuf)> {
        let Ok(entries) = std::fs::read_dir(&self.paths.user_dir) else {
            return Vec::new();
        };
        let mut files: Vec<(String, PathBuf)> = entries
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            // Not only regular files: a FIFO or a device named `*.toml` is listed with the
            // error reading it gives, instead of vanishing from the list.
            .filter(|path| path.extension().is_some_and(|e| e == "toml") && !path.is_dir())
            .filter_map(|path| {
                let stem = path.file_stem()?.to_str()?.to_owned();
                Some((stem, path))
            })
            .collect();
        files.sort();
        files
    }

    /// Every provider: built-ins first, then bundled and user files by name. A user file named
    /// like a built-in is left out (see [`Registry::ignored_configs`]).
    pub fn list(&self) -> Vec<ProviderListing> {
        let mut out: Vec<ProviderListing> = BUILTIN_NAMES
            .iter()
            .filter_map(|n| builtin(n))
            .map(|config| ProviderListing {
                name: config.name.to_string(),
                kind: ProviderKind::Builtin,
                source: ConfigSource::Builtin,
                fingerprint: Some(builtin_fingerprint(&config)),
                shadows_bundled: false,
                status: LoadStatus::Ok {
                    warnings: Vec::new(),
                    same_family_pairs: config.same_family_pairs(),
                },
            })
            .collect();
        let mut files: BTreeMap<String, ProviderListing> = BTreeMap::new();
        for (name, text) in BUNDLED {
            let label = bundled_label(name);
            let status = status_of(load_config(Path::new(&label), text));
            files.insert(
                name.to_owned(),
                ProviderListing {
                    name: name.to_owned(),
                    kind: ProviderKind::Bundled,
                    source: ConfigSource::Bundled(label),
                    fingerprint: Some(fingerprint(text.as_bytes())),
                    shadows_bundled: false,
                    status,
                },
            );
        }
        for (stem, path) in self.user_files() {
            if is_builtin(&stem) {
                continue;
            }
            let (fingerprint, status) =
                match crate::bounded_read::read(&path, crate::bounded_read::CONFIG_CAP) {
                    Ok(bytes) => (
                        Some(fingerprint(&bytes)),
                        status_of(
                            check_name(&path, &stem).and_then(|()| load_bytes(&path, &bytes)),
                        ),
                    ),
                    Err(e) => (None, status_of(Err(unreadable(&path, e.to_string())))),
                };
            let shadows_bundled = bundled_text(&stem).is_some();
            files.insert(
                stem.clone(),
                ProviderListing {
                    name: stem,
                    kind: ProviderKind::User,
                    source: ConfigSource::User(path),
                    fingerprint,
                    shadows_bundled,
                    status,
                },
            );
        }
        out.extend(files.into_values());
        out
    }

    /// Config files autocode found and will not read: user files with a reserved name and, given
    /// a workspace, provider-looking files inside it.
    pub fn ignored_configs(&self, workspace: Option<&Path>) -> Vec<IgnoredConfig> {
        let mut out = Vec::new();
        for name in BUILTIN_NAMES {
            let path = self.user_file(name);
            if path.exists() {
                out.push(ignored(
                    path,
                    IgnoredReason::ReservedName {
                        name: name.to_owned(),
                    },
                ));
            }
        }
        if let Some(workspace) = workspace {
            let mut found = Vec::new();
            for dir in [
                workspace.join(".autocode").join("providers"),
                workspace.join("providers"),
            ] {
                if let Ok(entries) = std::fs::read_dir(&dir) {
                    found.extend(
                        entries
                            .filter_map(Result::ok)
                            .map(|e| e.path())
                            .filter(|p| p.extension().is_some_and(|e| e == "toml")),
                    );
                }
            }
            for file in ["opencode.toml", "claude.toml", "codex.toml"] {
                let path = workspace.join(file);
                if path.exists() {
                    found.push(path);
                }
            }
            found.sort();
            out.extend(
                found
                    .into_iter()
                    .map(|p| ignored(p, IgnoredReason::InsideWorkspace)),
            );
        }
        out
    }

    /// The provider new runs use: `AUTOCODE_PROVIDER`, else `default_provider` in the user
    /// config file, else `opencode`. Other keys of that file belong to other settings and are
    /// not checked here.
    pub fn default_provider(&self, env: &Env) -> Result<DefaultProvider, RegistryError> {
        if let Some(value) = env.get(&OsString::from("AUTOCODE_PROVIDER"))
            && !value.is_empty()
        {
            let name = ProviderName::new(value.to_string_lossy().into_owned())
                .map_err(RegistryError::InvalidEnvDefault)?;
            return Ok(DefaultProvider {
                name,
                source: DefaultSource::Env,
            });
        }
        let path = &self.paths.user_config_file;
        if let Some(bytes) = read_optional(path)?
            && let Some(name) = default_from_settings(path, &bytes)?
        {
            return Ok(DefaultProvider {
                name,
                source: DefaultSource::ConfigFile { path: path.clone() },
            });
        }
        Ok(DefaultProvider {
            name: ProviderName::new("opencode").map_err(RegistryError::InvalidEnvDefault)?,
            source: DefaultSource::Fallback,
        })
    }
}

fn check_name(path: &Path, stem: &str) -> Result<(), ConfigError> {
    ProviderName::new(stem)
        .map(|_| ())
        .map_err(|e| unreadable(path, format!("the file name is not a provider name: {e}")))
}

fn status_of(result: Result<LoadedConfig, ConfigError>) -> LoadStatus {
    match result {
        Ok(loaded) => LoadStatus::Ok {
            warnings: loaded.warnings,
            same_family_pairs: loaded.same_family_pairs,
        },
        Err(error) => LoadStatus::Error {
            message: error.to_string(),
            error,
        },
    }
}

fn ignored(path: PathBuf, reason: IgnoredReason) -> IgnoredConfig {
    IgnoredConfig {
        path,
        message: reason.to_string(),
        reason,
    }
}

#[derive(Deserialize)]
struct UserSettings {
    default_provider: Option<String>,
}

/// `default_provider` from the user config file, with located errors.
fn default_from_settings(path: &Path, bytes: &[u8]) -> Result<Option<ProviderName>, ConfigError> {
    let text =
        std::str::from_utf8(bytes).map_err(|e| unreadable(path, format!("not UTF-8 ({e})")))?;
    let located = |offset: Option<usize>, key: &str, problem: ConfigProblem| {
        let position = offset.map(|o| position_of(text, o));
        ConfigError::new(ConfigErrorDetail {
            file: path.to_owned(),
            position,
            key: Some(key.to_owned()),
            problem,
            source_line: position.and_then(|p| line_text(text, p.line).map(str::to_owned)),
        })
    };
    let doc = super::config::parse_document(text).map_err(|e| {
        located(
            e.span().map(|s| s.start),
            "default_provider",
            ConfigProblem::Syntax {
                message: e.message().trim().to_owned(),
            },
        )
    })?;
    let key = KeyPath::key("default_provider");
    let offset = locate(doc.get_ref(), &key).map(|s| s.start);
    let settings: UserSettings = serde::Deserialize::deserialize(toml::Deserializer::from(doc))
        .map_err(|e| {
            located(
                e.span().map(|s| s.start).or(offset),
                "default_provider",
                ConfigProblem::Schema {
                    message: e.message().trim().to_owned(),
                },
            )
        })?;
    settings
        .default_provider
        .map(|value| {
            ProviderName::new(value).map_err(|e| {
                located(
                    offset,
                    "default_provider",
                    ConfigProblem::Schema {
                        message: e.to_string(),
                    },
                )
            })
        })
        .transpose()
}

#[cfg(test)]
mod tests;
