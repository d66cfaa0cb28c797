//! Direct connections: the named endpoints the `autocode` provider talks to, and their keys.
//!
//! Files (never read from a project): `$XDG_CONFIG_HOME/autocode/direct/endpoints.toml`
//! (default `~/.config/autocode/direct/`), and the keys in `auth.json` beside it — file 0600,
//! directory 0700 — each bound to the base URL it was given for: an endpoint whose URL changed
//! has no key until one is given again. Keys are never printed and never enter a launch record.
//!
//! A route's model names an endpoint's model as `ENDPOINT/MODEL`, or `MODEL` alone when exactly
//! one endpoint lists it. The transport identity of a direct route is the endpoint's kind, base
//! URL, protocol and models (not the key: rotating it keeps the identity).

use std::collections::BTreeMap;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::http::{self, Auth, Secret};
use super::protocol::{Protocol, TokenField};

/// What kind of server an endpoint is (decides defaults: protocol, auth header, token field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EndpointKind {
    #[serde(rename = "openai")]
    Openai,
    #[serde(rename = "anthropic")]
    Anthropic,
    #[serde(rename = "openai-compatible")]
    OpenaiCompatible,
    #[serde(rename = "ollama")]
    Ollama,
    #[serde(rename = "llama.cpp")]
    LlamaCpp,
    #[serde(rename = "vllm")]
    Vllm,
    #[serde(rename = "lmstudio")]
    Lmstudio,
}

impl EndpointKind {
    pub const ALL: [EndpointKind; 7] = [
        EndpointKind::Openai,
        EndpointKind::Anthropic,
        EndpointKind::OpenaiCompatible,
        EndpointKind::Ollama,
        EndpointKind::LlamaCpp,
        EndpointKind::Vllm,
        EndpointKind::Lmstudio,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EndpointKind::Openai => "openai",
            EndpointKind::Anthropic => "anthropic",
            EndpointKind::OpenaiCompatible => "openai-compatible",
            EndpointKind::Ollama => "ollama",
            EndpointKind::LlamaCpp => "llama.cpp",
            EndpointKind::Vllm => "vllm",
            EndpointKind::Lmstudio => "lmstudio",
        }
    }

    pub fn parse(text: &str) -> Option<EndpointKind> {
        EndpointKind::ALL.into_iter().find(|k| k.as_str() == text)
    }

    /// The base URL used when none is given (`None`: one must be given).
    pub fn default_base_url(self) -> Option<&'static str> {
        match self {
            EndpointKind::Openai => Some("https://api.openai.com/v1"),
            EndpointKind::Anthropic => Some("https://api.anthropic.com/v1"),
            EndpointKind::OpenaiCompatible => None,
            EndpointKind::Ollama => Some("http://127.0.0.1:11434/v1"),
            EndpointKind::LlamaCpp => Some("http://127.0.0.1:8080/v1"),
            EndpointKind::Vllm => Some("http://127.0.0.1:8000/v1"),
            EndpointKind::Lmstudio => Some("http://127.0.0.1:1234/v1"),
        }
    }

    pub fn default_protocol(self) -> Protocol {
        match self {
            EndpointKind::Anthropic => Protocol::AnthropicMessages,
            _ => Protocol::ChatCompletions,
        }
    }

    /// Local servers take `max_tokens`; OpenAI's API wants `max_completion_tokens`.
    pub fn default_token_field(self) -> TokenField {
        match self {
            EndpointKind::Openai | EndpointKind::OpenaiCompatible => {
                TokenField::MaxCompletionTokens
            }
            _ => TokenField::MaxTokens,
        }
    }

    /// Whether a key is expected (local servers usually take none).
    pub fn needs_key(self) -> bool {
        matches!(
            self,
            EndpointKind::Openai | EndpointKind::Anthropic | EndpointKind::OpenaiCompatible
        )
    }
}

/// One model an endpoint serves, with its family (for the cross-model rule).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointModel {
    pub id: String,
    pub family: String,
}

/// One named endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Endpoint {
    pub name: String,
    pub kind: EndpointKind,
    pub base_url: String,
    pub protocol: Protocol,
    #[serde(default)]
    pub token_field: TokenField,
    /// Ask for streamed responses (a server that answers plain JSON is read as such).
    #[serde(default = "streams")]
    pub stream: bool,
    /// The response cap the runtime requests (`max_tokens`, `max_output_tokens`): absent, the
    /// runtime's default ([`crate::direct::runtime::DEFAULT_MAX_OUTPUT_TOKENS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    #[serde(default, rename = "model")]
    pub models: Vec<EndpointModel>,
}

impl Endpoint {
    /// What the transport identity records (no key). The response cap appears only when set,
    /// so endpoints saved before the setting existed keep their identity.
    pub fn identity(&self) -> Value {
        let mut identity = json!({
            "endpoint": self.name,
            "kind": self.kind.as_str(),
            "base_url": self.base_url,
            "protocol": self.protocol.as_str(),
            "token_field": self.token_field,
            "models": self.models,
        });
        if let Some(cap) = self.max_output_tokens {
            identity["max_output_tokens"] = json!(cap);
        }
        identity
    }

    /// The response cap requested of this endpoint's models.
    pub fn output_cap(&self) -> u32 {
        self.max_output_tokens
            .unwrap_or(crate::direct::runtime::DEFAULT_MAX_OUTPUT_TOKENS)
    }
}

fn streams() -> bool {
    true
}

/// `endpoints.toml`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointsFile {
    #[serde(default, rename = "endpoint")]
    pub endpoints: Vec<Endpoint>,
}

/// One stored key and the URL it was given for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct StoredKey {
    base_url: String,
    key: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct AuthFile {
    #[serde(default)]
    keys: BTreeMap<String, StoredKey>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConnectionsError {
    #[error("no configuration directory: set XDG_CONFIG_HOME or HOME")]
    NoConfigDir,
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error(
        "{path} must be private (mode {expected:o}), it is {found:o}; fix with chmod {expected:o} {path}"
    )]
    NotPrivate {
        path: PathBuf,
        expected: u32,
        found: u32,
    },
    #[error(transparent)]
    Url(#[from] http::UrlError),
    #[error("{0}")]
    Invalid(String),
    #[error("no direct endpoint serves model `{model}`{}", if known.is_empty() { "; set one up with `autocode connections setup`".to_owned() } else { format!(" (configured: {})", known.join(", ")) })]
    UnknownModel { model: String, known: Vec<String> },
    #[error("model `{model}` is served by several endpoints ({}); name one as ENDPOINT/{model}", endpoints.join(", "))]
    AmbiguousModel {
        model: String,
        endpoints: Vec<String>,
    },
    #[error(
        "endpoint {name} needs its key again: it was given for another URL, or never (`autocode connections setup --name {name} --key-stdin`)"
    )]
    KeyMissing { name: String },
}

/// The direct-connections directory under `config_home` (`$XDG_CONFIG_HOME`).
pub fn dir_under(config_home: &Path) -> PathBuf {
    config_home.join("autocode").join("direct")
}

/// The directory from an environment: `$XDG_CONFIG_HOME`, else `$HOME/.config`.
pub fn dir_from_env(get: impl Fn(&str) -> Option<String>) -> Result<PathBuf, ConnectionsError> {
    let home = get("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            get("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".config"))
        })
        .ok_or(ConnectionsError::NoConfigDir)?;
    Ok(dir_under(&home))
}

/// An endpoint name is letters, digits, `-`, `_` and `.` (it prefixes route models).
pub fn check_name(name: &str) -> Result<(), ConnectionsError> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(ConnectionsError::Invalid(format!(
            "endpoint name `{name}`: use letters, digits, `-`, `_` and `.`"
        )));
    }
    Ok(())
}

/// The endpoints and keys in one directory.
#[derive(Debug, Clone)]
pub struct Connections {
    dir: PathBuf,
    pub file: EndpointsFile,
}

/// A route's model resolved to its endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub endpoint: Endpoint,
    pub model: EndpointModel,
}

impl Connections {
    /// Loads `dir` (absent files: no endpoints).
    pub fn load(dir: &Path) -> Result<Connections, ConnectionsError> {
        let path = dir.join("endpoints.toml");
        let file = match std::fs::read_to_string(&path) {
            Ok(text) => {
                toml::from_str::<EndpointsFile>(&text).map_err(|e| ConnectionsError::Parse {
                    path: path.clone(),
                    message: e.to_string(),
                })?
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => EndpointsFile::default(),
            Err(source) => return Err(ConnectionsError::Io { path, source }),
        };
        for endpoint in &file.endpoints {
            http::check_base_url(&endpoint.base_url)?;
        }
        Ok(Connections {
            dir: dir.to_owned(),
            file,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn endpoint(&self, name: &str) -> Option<&Endpoint> {
        self.file.endpoints.iter().find(|e| e.name == name)
    }

    /// `ENDPOINT/MODEL`, or `MODEL` served by exactly one endpoint.
    pub fn resolve(&self, route_model: &str) -> Result<Resolved, ConnectionsError> {
        if let Some((name, model)) = route_model.split_once('/')
            && let Some(endpoint) = self.endpoint(name)
            && let Some(m) = endpoint.models.iter().find(|m| m.id == model)
        {
            return Ok(Resolved {
                endpoint: endpoint.clone(),
                model: m.clone(),
            });
        }
        let serving: Vec<(&Endpoint, &EndpointModel)> = self
            .file
            .endpoints
            .iter()
            .filter_map(|e| {
                e.models
                    .iter()
                    .find(|m| m.id == route_model)
                    .map(|m| (e, m))
            })
            .collect();
        match serving.as_slice() {
            [(endpoint, model)] => Ok(Resolved {
                endpoint: (*endpoint).clone(),
                model: (*model).clone(),
            }),
            [] => Err(ConnectionsError::UnknownModel {
                model: route_model.to_owned(),
                known: self.roster(),
            }),
            many => Err(ConnectionsError::AmbiguousModel {
                model: route_model.to_owned(),
                endpoints: many.iter().map(|(e, _)| e.name.clone()).collect(),
            }),
        }
    }

    /// Every configured model as `ENDPOINT/MODEL`.
    pub fn roster(&self) -> Vec<String> {
        self.file
            .endpoints
            .iter()
            .flat_map(|e| e.models.iter().map(move |m| format!("{}/{}", e.name, m.id)))
            .collect()
    }

    /// The authentication of `endpoint`: its stored key when bound to its current URL.
    pub fn auth(&self, endpoint: &Endpoint) -> Result<Auth, ConnectionsError> {
        let keys = self.read_auth()?;
        let key = keys
            .keys
            .get(&endpoint.name)
            .filter(|k| k.base_url == endpoint.base_url)
            .map(|k| Secret::new(k.key.clone()));
        match (key, endpoint.kind.needs_key()) {
            (None, true) => Err(ConnectionsError::KeyMissing {
                name: endpoint.name.clone(),
            }),
            (None, false) => Ok(Auth::None),
            (Some(key), _) => Ok(match endpoint.protocol {
                Protocol::AnthropicMessages => Auth::AnthropicKey(key),
                _ => Auth::Bearer(key),
            }),
        }
    }

    /// Whether `endpoint` has a key bound to its URL (metadata only; the key is not returned).
    pub fn has_key(&self, endpoint: &Endpoint) -> bool {
        self.read_auth().is_ok_and(|a| {
            a.keys
                .get(&endpoint.name)
                .is_some_and(|k| k.base_url == endpoint.base_url)
        })
    }

    /// `endpoint` needs a key and none is stored for its URL: what is wrong, and the command
    /// that fixes it.
    pub fn key_problem(&self, endpoint: &Endpoint) -> Option<(String, String)> {
        (endpoint.kind.needs_key() && !self.has_key(endpoint)).then(|| {
            (
                format!(
                    "endpoint {} has no key stored for {}",
                    endpoint.name, endpoint.base_url
                ),
                format!(
                    "printf %s \"$KEY\" | autocode connections setup --name {} --kind {} --key-stdin",
                    endpoint.name,
                    endpoint.kind.as_str()
                ),
            )
        })
    }

    /// What keeps the configured endpoints from serving a run, each as (what, the command that
    /// fixes it); empty: configured. `connections check` and `doctor` both say these.
    pub fn setup_problems(&self) -> Vec<(String, String)> {
        if self.file.endpoints.is_empty() {
            return vec![(
                "no direct endpoint is configured".to_owned(),
                "autocode connections setup --name NAME --kind KIND --model ID=FAMILY [--key-stdin]"
                    .to_owned(),
            )];
        }
        let mut problems = Vec::new();
        for endpoint in &self.file.endpoints {
            problems.extend(self.key_problem(endpoint));
            if endpoint.models.is_empty() {
                problems.push((
                    format!("endpoint {} names no model", endpoint.name),
                    format!(
                        "autocode connections setup --name {} --kind {} --model ID=FAMILY",
                        endpoint.name,
                        endpoint.kind.as_str()
                    ),
                ));
            }
        }
        problems
    }

    fn auth_path(&self) -> PathBuf {
        self.dir.join("auth.json")
    }

    fn read_auth(&self) -> Result<AuthFile, ConnectionsError> {
        let path = self.auth_path();
        match std::fs::metadata(&path) {
            Ok(meta) => {
                let mode = meta.permissions().mode() & 0o777;
                if mode & 0o077 != 0 {
                    return Err(ConnectionsError::NotPrivate {
                        path,
                        expected: 0o600,
                        found: mode,
                    });
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(AuthFile::default()),
            Err(source) => return Err(ConnectionsError::Io { path, source }),
        }
        let bytes = std::fs::read(&path).map_err(|source| ConnectionsError::Io {
            path: path.clone(),
            source,
        })?;
        serde_json::from_slice(&bytes).map_err(|e| ConnectionsError::Parse {
            path,
            message: e.to_string(),
        })
    }

    /// Adds or replaces `endpoint`; with `key`, stores it bound to the endpoint's URL. A URL
    /// change without a key drops the old key (it was for another destination).
    pub fn save_endpoint(
        &mut self,
        endpoint: Endpoint,
        key: Option<Secret>,
    ) -> Result<(), ConnectionsError> {
        http::check_base_url(&endpoint.base_url)?;
        check_name(&endpoint.name)?;
        self.ensure_dir()?;
        let mut auth = self.read_auth()?;
        match key {
            Some(key) => {
                // Whatever path the key came by, only a well-formed one is stored.
                let key = http::Secret::parse(key.expose()).map_err(|e| {
                    ConnectionsError::Invalid(format!("endpoint {}: {e}", endpoint.name))
                })?;
                auth.keys.insert(
                    endpoint.name.clone(),
                    StoredKey {
                        base_url: endpoint.base_url.clone(),
                        key: key.expose().to_owned(),
                    },
                );
            }
            None => {
                if auth
                    .keys
                    .get(&endpoint.name)
                    .is_some_and(|k| k.base_url != endpoint.base_url)
                {
                    auth.keys.remove(&endpoint.name);
                }
            }
        }
        self.write_private(
            &self.auth_path(),
            &serde_json::to_vec_pretty(&auth)
                .map_err(|e| ConnectionsError::Invalid(e.to_string()))?,
        )?;
        match self
            .file
            .endpoints
            .iter_mut()
            .find(|e| e.name == endpoint.name)
        {
            Some(slot) => *slot = endpoint,
            None => self.file.endpoints.push(endpoint),
        }
        let text = toml::to_string_pretty(&self.file)
            .map_err(|e| ConnectionsError::Invalid(e.to_string()))?;
        self.write_private(&self.dir.join("endpoints.toml"), text.as_bytes())
    }

    fn ensure_dir(&self) -> Result<(), ConnectionsError> {
        let io = |source| ConnectionsError::Io {
            path: self.dir.clone(),
            source,
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(io)?;
        std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o700)).map_err(io)
    }

    /// Writes `bytes` to `path` through a 0600 temporary file and a rename.
    fn write_private(&self, path: &Path, bytes: &[u8]) -> Result<(), ConnectionsError> {
        crate::store::write_private(path, bytes).map_err(|e| ConnectionsError::Io {
            path: path.to_owned(),
            source: match e {
                crate::store::StoreError::Write { source, .. } => source,
                other => std::io::Error::other(other),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(name: &str, url: &str, kind: EndpointKind, models: &[(&str, &str)]) -> Endpoint {
        Endpoint {
            name: name.into(),
            kind,
            base_url: url.into(),
            protocol: kind.default_protocol(),
            token_field: kind.default_token_field(),
            stream: true,
            max_output_tokens: None,
            models: models
                .iter()
                .map(|(id, family)| EndpointModel {
                    id: (*id).into(),
                    family: (*family).into(),
                })
                .collect(),
        }
    }

    #[test]
    fn keys_are_private_bound_to_their_url_and_never_in_the_endpoints_file() {
        let home = tempfile::tempdir().unwrap();
        let dir = dir_under(home.path());
        let mut c = Connections::load(&dir).unwrap();
        let cloud = endpoint(
            "cloud",
            "https://api.anthropic.com/v1",
            EndpointKind::Anthropic,
            &[("claude-x", "anthropic")],
        );
        c.save_endpoint(cloud.clone(), Some(Secret::new("sk-ant-secret")))
            .unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("auth.json")), 0o600);
        let endpoints = std::fs::read_to_string(dir.join("endpoints.toml")).unwrap();
        assert!(!endpoints.contains("sk-ant"));
        let c = Connections::load(&dir).unwrap();
        assert_eq!(
            c.auth(&cloud).unwrap(),
            Auth::AnthropicKey(Secret::new("sk-ant-secret"))
        );
        assert!(!format!("{:?}", c.auth(&cloud).unwrap()).contains("secret"));
        // A changed URL needs the key again.
        let mut moved = cloud.clone();
        moved.base_url = "https://proxy.example.com/v1".into();
        assert!(matches!(
            c.auth(&moved),
            Err(ConnectionsError::KeyMissing { .. })
        ));
        let mut c = c;
        c.save_endpoint(moved.clone(), None).unwrap();
        assert!(!c.has_key(&moved));
        assert!(
            !std::fs::read_to_string(dir.join("auth.json"))
                .unwrap()
                .contains("sk-ant")
        );
        // A readable auth file is refused.
        std::fs::set_permissions(
            dir.join("auth.json"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        assert!(matches!(
            c.auth(&moved),
            Err(ConnectionsError::NotPrivate { .. })
        ));
    }

    #[test]
    fn models_resolve_by_endpoint_or_alone() {
        let home = tempfile::tempdir().unwrap();
        let mut c = Connections::load(&dir_under(home.path())).unwrap();
        c.save_endpoint(
            endpoint(
                "a",
                "http://127.0.0.1:1/v1",
                EndpointKind::Ollama,
                &[("m1", "qwen"), ("m2", "qwen")],
            ),
            None,
        )
        .unwrap();
        c.save_endpoint(
            endpoint(
                "b",
                "http://localhost:2/v1",
                EndpointKind::Vllm,
                &[("m2", "llama")],
            ),
            None,
        )
        .unwrap();
        assert_eq!(c.resolve("m1").unwrap().endpoint.name, "a");
        assert_eq!(c.resolve("b/m2").unwrap().model.family, "llama");
        assert!(matches!(
            c.resolve("m2"),
            Err(ConnectionsError::AmbiguousModel { .. })
        ));
        assert!(matches!(
            c.resolve("nope"),
            Err(ConnectionsError::UnknownModel { .. })
        ));
        // A local endpoint needs no key.
        assert_eq!(c.auth(c.endpoint("a").unwrap()).unwrap(), Auth::None);
        // Plain http off loopback is refused.
        assert!(
            c.save_endpoint(
                endpoint("x", "http://example.com/v1", EndpointKind::Vllm, &[]),
                None
            )
            .is_err()
        );
    }
}
