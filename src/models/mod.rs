//! The model catalogue: models as data. One TOML file compiled in (`data/models.toml`) merged
//! with the user's `$XDG_CONFIG_HOME/autocode/models.toml` (default `~/.config/autocode/`): per
//! model its family, context window, output cap, tool-call support, dated prices, and for models
//! that run locally the runtimes that serve them, their quantizations with download sizes, their
//! parameters and the KV-cache shape that sizes their memory. `crate::prices` (the cost ledger)
//! and `crate::local` (hardware-aware recommendations) read it; `autocode models --catalogue`
//! shows it. A malformed user file is an error naming the file, line and key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::provider::location::{self, KeyPath};

const BUILTIN_TOML: &str = include_str!("../../data/models.toml");

/// How a built-in file is named in errors and in `sources`.
pub const BUILTIN_SOURCE: &str = "builtin:data/models.toml";

/// One dated list price, USD per million tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub date: String,
    pub input: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read: Option<f64>,
    pub output: f64,
}

/// A program that serves local models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Runtime {
    #[serde(rename = "llama.cpp")]
    LlamaCpp,
    #[serde(rename = "ollama")]
    Ollama,
    #[serde(rename = "lmstudio")]
    Lmstudio,
    #[serde(rename = "vllm")]
    Vllm,
}

impl Runtime {
    pub fn as_str(self) -> &'static str {
        match self {
            Runtime::LlamaCpp => "llama.cpp",
            Runtime::Ollama => "ollama",
            Runtime::Lmstudio => "lmstudio",
            Runtime::Vllm => "vllm",
        }
    }
}

/// One quantization of a local model's weights.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quant {
    /// `Q4_K_M`, `Q8_0`, `MXFP4`, …
    pub name: String,
    /// The weights file's size; the weights take about as much memory when loaded.
    pub download_bytes: u64,
    /// The size was downloaded and checked here (else the published size, rounded).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub measured: bool,
}

/// What running a model locally takes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocalFacts {
    pub runtimes: Vec<Runtime>,
    /// Ollama's name for it (`ollama pull NAME`), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ollama: Option<String>,
    /// Parameters in billions: all of them, and those active per token (mixture of experts).
    pub params_total_b: f64,
    pub params_active_b: f64,
    /// The KV cache's shape: bytes per token = 2 × layers × kv_heads × head_dim × 2 (f16).
    pub layers: u32,
    pub kv_heads: u32,
    pub head_dim: u32,
    #[serde(rename = "quant")]
    pub quants: Vec<Quant>,
}

impl LocalFacts {
    /// KV-cache bytes per token of context, f16 keys and values.
    pub fn kv_bytes_per_token(&self) -> u64 {
        2 * u64::from(self.layers) * u64::from(self.kv_heads) * u64::from(self.head_dim) * 2
    }
}

/// One model of the catalogue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub family: String,
    pub context_window: u32,
    pub output_cap: u32,
    pub tool_calls: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub price: Vec<Price>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<LocalFacts>,
    /// Where the entry comes from: [`BUILTIN_SOURCE`] or the user file's path.
    #[serde(default, skip_deserializing)]
    pub source: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogueFile {
    #[serde(default)]
    model: Vec<ModelEntry>,
}

/// Why a catalogue file was refused: where, which key, what.
#[derive(Debug, thiserror::Error)]
pub enum CatalogueError {
    #[error("{file}:{line}:{column}: {key}: {message}", file = file.display())]
    Invalid {
        file: PathBuf,
        line: usize,
        column: usize,
        /// The key path (`model[2].local.quant[0].download_bytes`), or `(top level)`.
        key: String,
        message: String,
    },
    #[error("{}: {source}", file.display())]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
}

/// The merged catalogue, ordered by id.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Catalogue {
    pub models: Vec<ModelEntry>,
    /// The files merged, built-in first.
    pub sources: Vec<String>,
}

impl Catalogue {
    /// The compiled-in catalogue alone, parsed once (checked by a test, so a malformed file
    /// cannot ship).
    pub fn builtin() -> Catalogue {
        static BUILTIN: std::sync::OnceLock<Catalogue> = std::sync::OnceLock::new();
        BUILTIN
            .get_or_init(|| Catalogue {
                models: parse(Path::new(BUILTIN_SOURCE), BUILTIN_TOML).unwrap_or_default(),
                sources: vec![BUILTIN_SOURCE.to_owned()],
            })
            .clone()
    }

    /// The built-in catalogue with the user's file (when it exists) merged over it: a user entry
    /// replaces the built-in entry of the same id, a new id is added.
    pub fn load(user_file: Option<&Path>) -> Result<Catalogue, CatalogueError> {
        let mut catalogue = Catalogue::builtin();
        let Some(file) = user_file else {
            return Ok(catalogue);
        };
        let text = match std::fs::read_to_string(file) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(catalogue),
            Err(source) => {
                return Err(CatalogueError::Read {
                    file: file.to_owned(),
                    source,
                });
            }
        };
        let user = parse(file, &text)?;
        catalogue.merge(user);
        catalogue.sources.push(file.display().to_string());
        Ok(catalogue)
    }

    fn merge(&mut self, entries: Vec<ModelEntry>) {
        let mut by_id: BTreeMap<String, ModelEntry> = std::mem::take(&mut self.models)
            .into_iter()
            .map(|m| (m.id.clone(), m))
            .collect();
        for entry in entries {
            by_id.insert(entry.id.clone(), entry);
        }
        self.models = by_id.into_values().collect();
    }

    pub fn get(&self, id: &str) -> Option<&ModelEntry> {
        self.models.iter().find(|m| m.id == id)
    }

    /// The models with local facts.
    pub fn local(&self) -> impl Iterator<Item = (&ModelEntry, &LocalFacts)> {
        self.models
            .iter()
            .filter_map(|m| m.local.as_ref().map(|l| (m, l)))
    }

    /// The entries the model a route names matches: the id itself or the id followed by a `-`
    /// suffix (a dated snapshot), after any `provider/` prefix.
    fn matching<'a>(&'a self, model: &str) -> impl Iterator<Item = &'a ModelEntry> + use<'a> {
        let bare = model.rsplit('/').next().unwrap_or(model).to_owned();
        self.models
            .iter()
            .filter(move |m| bare == m.id || bare.starts_with(&format!("{}-", m.id)))
    }

    /// The entry of the model a route names (the longest matching id).
    pub fn entry_for(&self, model: &str) -> Option<&ModelEntry> {
        self.matching(model).max_by_key(|m| m.id.len())
    }

    /// The newest price of the model a route names (the longest matching id with a price).
    pub fn price_for(&self, model: &str) -> Option<&Price> {
        self.matching(model)
            .flat_map(|m| m.price.iter().map(move |p| (m.id.len(), p)))
            .max_by(|(a_len, a), (b_len, b)| a_len.cmp(b_len).then(a.date.cmp(&b.date)))
            .map(|(_, p)| p)
    }
}

/// The user's catalogue file from an environment: `$XDG_CONFIG_HOME/autocode/models.toml`
/// (absolute), else `$HOME/.config/autocode/models.toml`.
pub fn user_file(get: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let absolute = |name: &str| get(name).map(PathBuf::from).filter(|p| p.is_absolute());
    let base =
        absolute("XDG_CONFIG_HOME").or_else(|| absolute("HOME").map(|h| h.join(".config")))?;
    Some(base.join("autocode").join("models.toml"))
}

fn parse(file: &Path, text: &str) -> Result<Vec<ModelEntry>, CatalogueError> {
    let invalid = |offset: Option<usize>, key: Option<KeyPath>, message: String| {
        let position = location::position_of(text, offset.unwrap_or(0));
        CatalogueError::Invalid {
            file: file.to_owned(),
            line: position.line,
            column: position.column,
            key: key
                .filter(|k| !k.is_root())
                .map_or_else(|| "(top level)".to_owned(), |k| k.to_string()),
            message,
        }
    };
    let doc = crate::provider::config::parse_document(text).map_err(|e| {
        let offset = e.span().map(|s| s.start);
        let key = offset
            .and_then(|o| location::line_text(text, location::position_of(text, o).line))
            .and_then(location::key_on_line)
            .map(|k| KeyPath::key(&k));
        invalid(offset, key, e.message().trim().to_owned())
    })?;
    let parsed: Result<CatalogueFile, toml::de::Error> =
        CatalogueFile::deserialize(toml::Deserializer::from(doc.clone()));
    let mut models = match parsed {
        Ok(file) => file.model,
        Err(e) => {
            let offset = e.span().map(|s| s.start);
            let mut key = offset.map(|o| location::path_at(doc.get_ref(), o));
            // A missing field is reported on its table: name the field under it.
            if let Some(field) = e
                .message()
                .split('`')
                .nth(1)
                .filter(|_| e.message().starts_with("missing field"))
            {
                key = Some(key.unwrap_or_else(KeyPath::root).push_key(field));
            }
            return Err(invalid(offset, key, e.message().trim().to_owned()));
        }
    };
    // What serde cannot say: each with the key it concerns.
    let at = |index: usize, rest: &[&str]| {
        let mut path = KeyPath::key("model").push_index(index);
        for k in rest {
            path = path.push_key(k);
        }
        let offset = location::locate(doc.get_ref(), &path).map(|s| s.start);
        (offset, path)
    };
    let mut seen = BTreeMap::new();
    for (index, model) in models.iter_mut().enumerate() {
        model.source = if file == Path::new(BUILTIN_SOURCE) {
            BUILTIN_SOURCE.to_owned()
        } else {
            file.display().to_string()
        };
        let problem = if model.id.trim().is_empty() || model.id.contains(char::is_whitespace) {
            Some((vec!["id"], "an id is one word, not empty".to_owned()))
        } else if let Some(first) = seen.insert(model.id.clone(), index) {
            Some((
                vec!["id"],
                format!("`{}` is also model[{first}]: one entry per id", model.id),
            ))
        } else if model.family.trim().is_empty() {
            Some((vec!["family"], "the family must not be empty".to_owned()))
        } else if model.context_window == 0 {
            Some((vec!["context_window"], "must be more than 0".to_owned()))
        } else if model.output_cap == 0 {
            Some((vec!["output_cap"], "must be more than 0".to_owned()))
        } else if let Some(p) = model.price.iter().position(|p| {
            chrono::NaiveDate::parse_from_str(&p.date, "%Y-%m-%d").is_err()
                || [Some(p.input), Some(p.output), p.cache_read, p.cache_write]
                    .into_iter()
                    .flatten()
                    .any(|v| !v.is_finite() || v < 0.0)
        }) {
            Some((
                vec!["price"],
                format!("price[{p}]: a YYYY-MM-DD date and prices of 0 or more"),
            ))
        } else if let Some(local) = &model.local {
            local_problem(local)
        } else {
            None
        };
        if let Some((keys, message)) = problem {
            let (offset, path) = at(index, &keys);
            return Err(invalid(offset, Some(path), message));
        }
    }
    Ok(models)
}

fn local_problem(local: &LocalFacts) -> Option<(Vec<&'static str>, String)> {
    let positive = |v: f64| v.is_finite() && v > 0.0;
    if local.runtimes.is_empty() {
        Some((
            vec!["local", "runtimes"],
            "name at least one runtime".into(),
        ))
    } else if !positive(local.params_total_b) || !positive(local.params_active_b) {
        Some((
            vec!["local", "params_total_b"],
            "parameters must be more than 0".into(),
        ))
    } else if local.params_active_b > local.params_total_b {
        Some((
            vec!["local", "params_active_b"],
            "active parameters cannot exceed the total".into(),
        ))
    } else if local.layers == 0 || local.kv_heads == 0 || local.head_dim == 0 {
        Some((
            vec!["local", "layers"],
            "layers, kv_heads and head_dim must be more than 0".into(),
        ))
    } else if local.quants.is_empty() {
        Some((
            vec!["local", "quant"],
            "name at least one quantization".into(),
        ))
    } else if local
        .quants
        .iter()
        .any(|q| q.download_bytes == 0 || q.name.trim().is_empty())
    {
        Some((
            vec!["local", "quant"],
            "each quantization needs a name and a download size".into(),
        ))
    } else {
        None
    }
}

#[cfg(test)]
mod tests;
