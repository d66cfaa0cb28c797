//! Readiness of one direct route's model before a run relies on it, and the cache of passed
//! canaries.
//!
//! Which endpoints are checked ([`is_local`]): a loopback base URL, or a local server kind
//! (ollama, llama.cpp, vllm, lmstudio, wherever it runs). Those are where a model can be absent,
//! a context silently small, a chat template without tool calls, and the canaries cost nothing
//! but time. Cloud endpoints (openai, anthropic, openai-compatible off loopback) get no live
//! check at a run's start: canaries cost money there, and `/models` is not implemented alike by
//! every gateway; `autocode connections check --provider autocode --live` checks them on request.
//!
//! The cheap checks ([`super::preflight::metadata`]) run every time. The canaries
//! ([`super::preflight::canaries`], two real model requests: 40-60 s on a 1.5B model on two
//! cores) run when no passed result is cached for the same endpoint identity (kind, base URL,
//! protocol, token field, streaming), model, canary version and fingerprint of what the server
//! reported ([`super::preflight::ServerFacts`]), younger than [`CACHE_MAX_AGE`]. A failed canary
//! is never cached and removes the entry. The cache is one JSON file in autocode's state
//! directory (`$XDG_STATE_HOME/autocode/`, never a workspace), written atomically, 0600.

use std::collections::BTreeMap;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::connections::{Endpoint, EndpointKind};
use super::http::{self, Client};
use super::preflight::{self, Check, PreflightInput};

/// How long a passed canary stays trusted.
pub const CACHE_MAX_AGE: Duration = Duration::hours(24);
/// The cache file in autocode's state directory.
pub const CACHE_FILE: &str = "direct-readiness.json";
/// Bumped when the canaries change: older passes no longer count.
const CANARY_VERSION: u32 = 2;

/// Whether `endpoint` is a local server (see the module comment).
pub fn is_local(endpoint: &Endpoint) -> bool {
    matches!(
        endpoint.kind,
        EndpointKind::Ollama | EndpointKind::LlamaCpp | EndpointKind::Vllm | EndpointKind::Lmstudio
    ) || http::check_base_url(&endpoint.base_url).unwrap_or(false)
}

/// Whether the canaries may come from the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CanaryMode {
    /// A passed result younger than [`CACHE_MAX_AGE`] with the same fingerprint counts.
    #[default]
    Cached,
    /// Run them again (`autocode doctor --recheck`).
    Fresh,
}

/// Where the canaries' verdict came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Canaries {
    /// Run now.
    Ran,
    /// A pass of `passed_at` was reused.
    Cached { passed_at: DateTime<Utc> },
    /// Not run: a cheap check failed first.
    Skipped,
}

/// One route model's readiness.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelReadiness {
    pub endpoint: String,
    pub model: String,
    pub base_url: String,
    pub checks: Vec<Check>,
    pub canaries: Canaries,
    /// The fingerprint of what the server reported (the cache key's last part).
    pub fingerprint: String,
}

impl ModelReadiness {
    pub fn ok(&self) -> bool {
        self.checks.iter().all(|c| c.ok)
    }
}

/// Checks `model` of `endpoint`: the metadata every time, the canaries unless `cache` holds a
/// pass (see the module comment). Blocking.
pub fn check_model(
    client: &Client,
    endpoint: &Endpoint,
    model: &str,
    cache: Option<&CanaryCache>,
    mode: CanaryMode,
) -> ModelReadiness {
    let marker = format!("ac-canary-{}", random_hex());
    let input = PreflightInput {
        endpoint,
        model,
        needed_context: preflight::STAGE_CONTEXT,
        canary_tokens: preflight::CANARY_TOKENS,
        marker: &marker,
    };
    let metadata = preflight::metadata(client, &input);
    let fingerprint = metadata.facts.fingerprint();
    let mut out = ModelReadiness {
        endpoint: endpoint.name.clone(),
        model: model.to_owned(),
        base_url: endpoint.base_url.clone(),
        checks: Vec::new(),
        canaries: Canaries::Skipped,
        fingerprint: fingerprint.clone(),
    };
    let ok = metadata.ok();
    out.checks = metadata.checks;
    if !ok {
        return out;
    }
    let now = Utc::now();
    if mode == CanaryMode::Cached
        && let Some(passed_at) = cache.and_then(|c| c.passed(endpoint, model, &fingerprint, now))
    {
        for name in ["tool_call", "long_prompt"] {
            out.checks.push(Check {
                name,
                ok: true,
                detail: format!(
                    "passed at {} (cached; `autocode doctor --recheck` runs it again)",
                    passed_at.format("%Y-%m-%d %H:%M UTC")
                ),
                fix: None,
            });
        }
        out.canaries = Canaries::Cached { passed_at };
        return out;
    }
    let canaries = preflight::canaries(client, &input, metadata.context);
    let passed = canaries.len() == 2 && canaries.iter().all(|c| c.ok);
    out.checks.extend(canaries);
    out.canaries = Canaries::Ran;
    if let Some(cache) = cache {
        let written = if passed {
            cache.record_pass(endpoint, model, &fingerprint, now)
        } else {
            cache.forget(endpoint, model)
        };
        if let Err(e) = written {
            tracing::warn!(error = %e, "cannot update the direct readiness cache");
        }
    }
    out
}

fn random_hex() -> String {
    let mut bytes = [0u8; 8];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        let _ = std::io::Read::read_exact(&mut f, &mut bytes);
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct CacheFile {
    #[serde(default)]
    entries: BTreeMap<String, CacheEntry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct CacheEntry {
    endpoint: String,
    base_url: String,
    model: String,
    fingerprint: String,
    passed_at: DateTime<Utc>,
}

/// The passed canaries, in one file of autocode's state directory.
#[derive(Debug, Clone)]
pub struct CanaryCache {
    path: PathBuf,
}

impl CanaryCache {
    /// The cache in `state_dir` (`$XDG_STATE_HOME/autocode`).
    pub fn in_dir(state_dir: &Path) -> CanaryCache {
        CanaryCache {
            path: state_dir.join(CACHE_FILE),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The entry's key: the endpoint's identity as the canaries see it, and the model.
    fn key(endpoint: &Endpoint, model: &str) -> String {
        use sha2::{Digest, Sha256};
        let identity = json!({
            "kind": endpoint.kind.as_str(),
            "base_url": endpoint.base_url,
            "protocol": endpoint.protocol.as_str(),
            "token_field": endpoint.token_field,
            "stream": endpoint.stream,
            "model": model,
            "canary_version": CANARY_VERSION,
            "needed_context": preflight::STAGE_CONTEXT,
            "canary_tokens": preflight::CANARY_TOKENS,
        });
        Sha256::digest(identity.to_string().as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// An unreadable or absent file is an empty cache (it only saves time).
    fn read(&self) -> CacheFile {
        crate::bounded_read::read(&self.path, 1 << 20)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default()
    }

    /// When the canaries last passed for this identity, model and fingerprint, if within
    /// [`CACHE_MAX_AGE`] of `now` (and not in its future).
    pub fn passed(
        &self,
        endpoint: &Endpoint,
        model: &str,
        fingerprint: &str,
        now: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        let file = self.read();
        let entry = file.entries.get(&Self::key(endpoint, model))?;
        let age = now - entry.passed_at;
        (entry.fingerprint == fingerprint
            && entry.base_url == endpoint.base_url
            && age < CACHE_MAX_AGE
            && age > -Duration::minutes(5))
        .then_some(entry.passed_at)
    }

    /// Records a pass (expired entries are dropped on the way).
    pub fn record_pass(
        &self,
        endpoint: &Endpoint,
        model: &str,
        fingerprint: &str,
        now: DateTime<Utc>,
    ) -> std::io::Result<()> {
        let mut file = self.read();
        file.entries
            .retain(|_, e| now - e.passed_at < CACHE_MAX_AGE);
        file.entries.insert(
            Self::key(endpoint, model),
            CacheEntry {
                endpoint: endpoint.name.clone(),
                base_url: endpoint.base_url.clone(),
                model: model.to_owned(),
                fingerprint: fingerprint.to_owned(),
                passed_at: now,
            },
        );
        self.write(&file)
    }

    /// Drops the entry of `endpoint`'s `model` (a failed canary).
    pub fn forget(&self, endpoint: &Endpoint, model: &str) -> std::io::Result<()> {
        let mut file = self.read();
        if file.entries.remove(&Self::key(endpoint, model)).is_none() {
            return Ok(());
        }
        self.write(&file)
    }

    /// Written through a 0600 temporary file beside the cache and a rename
    /// ([`crate::store::write_private`]), in a 0700 directory.
    fn write(&self, file: &CacheFile) -> std::io::Result<()> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        let bytes = serde_json::to_vec_pretty(file).map_err(std::io::Error::other)?;
        crate::store::write_private(&self.path, &bytes).map_err(std::io::Error::other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::direct::connections::EndpointModel;
    use crate::direct::protocol::Protocol;

    fn endpoint(kind: EndpointKind, url: &str) -> Endpoint {
        Endpoint {
            name: "e".into(),
            kind,
            base_url: url.into(),
            protocol: Protocol::ChatCompletions,
            token_field: kind.default_token_field(),
            stream: true,
            max_output_tokens: None,
            models: vec![EndpointModel {
                id: "m".into(),
                family: "f".into(),
            }],
        }
    }

    #[test]
    fn local_means_a_local_kind_or_a_loopback_url() {
        let cases = [
            (EndpointKind::Ollama, "https://gpu.example.com/v1", true),
            (EndpointKind::LlamaCpp, "http://127.0.0.1:8080/v1", true),
            (EndpointKind::Vllm, "https://vllm.internal.example/v1", true),
            (EndpointKind::Lmstudio, "http://localhost:1234/v1", true),
            (EndpointKind::OpenaiCompatible, "http://[::1]:9000/v1", true),
            (
                EndpointKind::OpenaiCompatible,
                "https://openrouter.ai/api/v1",
                false,
            ),
            (EndpointKind::Openai, "https://api.openai.com/v1", false),
            (
                EndpointKind::Anthropic,
                "https://api.anthropic.com/v1",
                false,
            ),
        ];
        for (kind, url, local) in cases {
            assert_eq!(is_local(&endpoint(kind, url)), local, "{kind:?} {url}");
        }
    }

    #[test]
    fn a_pass_is_reused_only_for_the_same_identity_fingerprint_and_age() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CanaryCache::in_dir(&dir.path().join("state/autocode"));
        let e = endpoint(EndpointKind::LlamaCpp, "http://127.0.0.1:8080/v1");
        let now = Utc::now();
        assert_eq!(cache.passed(&e, "m", "fp1", now), None);
        cache.record_pass(&e, "m", "fp1", now).unwrap();
        let mode = |p: &Path| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(p).unwrap().permissions().mode() & 0o777
        };
        assert_eq!(mode(cache.path()), 0o600);
        assert_eq!(mode(cache.path().parent().unwrap()), 0o700);
        assert_eq!(cache.passed(&e, "m", "fp1", now), Some(now));
        // Another fingerprint, model, URL, protocol or stream flag is another entry.
        assert_eq!(cache.passed(&e, "m", "fp2", now), None);
        assert_eq!(cache.passed(&e, "other", "fp1", now), None);
        let mut moved = e.clone();
        moved.base_url = "http://127.0.0.1:8081/v1".into();
        assert_eq!(cache.passed(&moved, "m", "fp1", now), None);
        let mut unstreamed = e.clone();
        unstreamed.stream = false;
        assert_eq!(cache.passed(&unstreamed, "m", "fp1", now), None);
        // Bounded age, and no pass from the future.
        assert_eq!(
            cache.passed(&e, "m", "fp1", now + CACHE_MAX_AGE + Duration::seconds(1)),
            None
        );
        assert_eq!(cache.passed(&e, "m", "fp1", now - Duration::hours(1)), None);
        // A failure forgets it.
        cache.forget(&e, "m").unwrap();
        assert_eq!(cache.passed(&e, "m", "fp1", now), None);
        // A corrupt file is an empty cache, and is replaced by the next pass.
        std::fs::write(cache.path(), "{not json").unwrap();
        assert_eq!(cache.passed(&e, "m", "fp1", now), None);
        cache.record_pass(&e, "m", "fp1", now).unwrap();
        assert_eq!(cache.passed(&e, "m", "fp1", now), Some(now));
        let leftovers: Vec<_> = std::fs::read_dir(cache.path().parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers.len(), 1, "{leftovers:?}");
    }
}
