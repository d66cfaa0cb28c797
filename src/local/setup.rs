//! `autocode local setup [MODEL]`: find a running local model server on this machine (or the
//! one named), get the model onto it (Ollama: a streamed, resumable `/api/pull`, only after its
//! size was shown and confirmed), read the context the server really runs the model with, run
//! the readiness canaries, and save the endpoint as a direct connection with its model's family.
//!
//! Loopback only: a local server is never reached over the network. Everything here is
//! blocking (the project's HTTP client, `crate::direct::http`); the CLI (`cli::local`) calls it
//! off the async runtime and supplies the person's answers and the progress display.

use serde::Serialize;
use serde_json::{Value, json};

use crate::direct::connections::{
    Connections, ConnectionsError, Endpoint, EndpointKind, EndpointModel,
};
use crate::direct::http::{self, Auth, Client, HttpFailure};
use crate::direct::preflight::{self, Check, PreflightInput};
use crate::models::Catalogue;

/// The usual loopback addresses of the local servers, in the order they are tried.
pub const KNOWN_SERVERS: [(EndpointKind, &str); 4] = [
    (EndpointKind::Ollama, "http://127.0.0.1:11434/v1"),
    (EndpointKind::LlamaCpp, "http://127.0.0.1:8080/v1"),
    (EndpointKind::Lmstudio, "http://127.0.0.1:1234/v1"),
    (EndpointKind::Vllm, "http://127.0.0.1:8000/v1"),
];

/// How long finding a server may take, per address.
pub const PROBE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(3);

/// A running server and the models it lists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FoundServer {
    pub kind: EndpointKind,
    pub base_url: String,
    pub models: Vec<String>,
}

/// Why setup stopped.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(
        "no local model server answers on 127.0.0.1 (tried Ollama :11434, llama.cpp :8080, LM Studio :1234, vLLM :8000); start one, or name it with --url"
    )]
    NoServer,
    #[error("{0} is not a loopback address: `local setup` only talks to a server on this machine")]
    NotLoopback(String),
    #[error("{url}: {failure}")]
    Unreachable { url: String, failure: HttpFailure },
    #[error(transparent)]
    Url(#[from] http::UrlError),
    #[error("name the model: the server lists {0}")]
    WhichModel(String),
    #[error("the {kind} server does not list {model} (it lists: {listed}); {fix}")]
    ModelAbsent {
        kind: &'static str,
        model: String,
        listed: String,
        fix: String,
    },
    #[error(
        "the pull of {model} was not confirmed: nothing was downloaded{}",
        size.map(|s| format!(" (it is {})", crate::local::gb(s))).unwrap_or_default()
    )]
    NotConfirmed { model: String, size: Option<u64> },
    #[error(
        "autocode does not know the download size of {0} (it is not in the model catalogue); pull it with `ollama pull {0}` yourself, or pass --yes to pull it without a size"
    )]
    UnknownSize(String),
    #[error(
        "the pull of {model} was interrupted at {done}; run the same setup again to continue it (Ollama keeps what it has)"
    )]
    PullInterrupted { model: String, done: String },
    #[error("Ollama refused the pull of {model}: {message}")]
    PullRefused { model: String, message: String },
    #[error(
        "the family of {0} is unknown (it is not in the model catalogue); give it with --family FAMILY"
    )]
    UnknownFamily(String),
    #[error(transparent)]
    Connections(#[from] ConnectionsError),
}

fn client(base_url: &str) -> Result<Client, SetupError> {
    if !http::check_base_url(base_url)? {
        return Err(SetupError::NotLoopback(base_url.to_owned()));
    }
    Ok(Client::new(base_url, Auth::None)?)
}

/// The server's root (the base URL without its `/v1`).
pub fn root(base_url: &str) -> &str {
    base_url.trim_end_matches('/').trim_end_matches("/v1")
}

/// The base URL of a `--url` (a root gets `/v1`).
pub fn base_url_of(url: &str) -> String {
    let url = url.trim_end_matches('/');
    if url.ends_with("/v1") {
        url.to_owned()
    } else {
        format!("{url}/v1")
    }
}

/// What the server at `base_url` is: Ollama answers `/api/tags`, llama.cpp `/props`, vLLM
/// lists its models as `owned_by: "vllm"`, LM Studio is told by its port or its own
/// `/api/v0/models`; anything else that
/// lists models is a generic OpenAI-compatible server.
pub fn identify(base_url: &str) -> Result<FoundServer, SetupError> {
    let client = client(base_url)?.with_deadline(PROBE_DEADLINE);
    let root = root(base_url);
    let listed = client
        .get(&format!("{base_url}/models"))
        .map_err(|failure| SetupError::Unreachable {
            url: base_url.to_owned(),
            failure,
        })?;
    let listed: Value = serde_json::from_slice(&listed).unwrap_or(Value::Null);
    let data = listed["data"].as_array().cloned().unwrap_or_default();
    let mut models: Vec<String> = data
        .iter()
        .filter_map(|m| m["id"].as_str().map(str::to_owned))
        .collect();
    let kind = if let Ok(tags) = client.get(&format!("{root}/api/tags")) {
        // Ollama's own list holds every pulled model (its /v1/models does too).
        let tags: Value = serde_json::from_slice(&tags).unwrap_or(Value::Null);
        for name in tags["models"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["name"].as_str())
        {
            if !models.iter().any(|m| m == name) {
                models.push(name.to_owned());
            }
        }
        EndpointKind::Ollama
    } else if client.get(&format!("{root}/props")).is_ok() {
        EndpointKind::LlamaCpp
    } else if data.iter().any(|m| m["owned_by"] == "vllm") {
        EndpointKind::Vllm
    } else if root.ends_with(":1234") || client.get(&format!("{root}/api/v0/models")).is_ok() {
        EndpointKind::Lmstudio
    } else {
        EndpointKind::OpenaiCompatible
    };
    Ok(FoundServer {
        kind,
        base_url: base_url.to_owned(),
        models,
    })
}

/// The server at `url`, or the first known local server that answers.
pub fn discover(url: Option<&str>) -> Result<FoundServer, SetupError> {
    match url {
        Some(url) => identify(&base_url_of(url)),
        None => KNOWN_SERVERS
            .iter()
            .find_map(|(_, base)| identify(base).ok())
            .ok_or(SetupError::NoServer),
    }
}

/// One line of Ollama's pull stream, as shown to the person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PullEvent {
    /// A phase (`pulling manifest`, `verifying sha256 digest`, `writing manifest`).
    Status(String),
    /// Bytes of one layer: how many are there of how many.
    Progress {
        digest: String,
        completed: u64,
        total: u64,
    },
}

/// Pulls `model` into the Ollama server at `base_url`, handing each step to `progress`. Ends
/// with Ollama's `success`, or a typed error: refused, or interrupted (a second pull continues
/// from what Ollama kept).
pub fn ollama_pull(
    base_url: &str,
    model: &str,
    mut progress: impl FnMut(&PullEvent),
) -> Result<(), SetupError> {
    let client = client(base_url)?;
    let url = format!("{}/api/pull", root(base_url));
    let mut success = false;
    let mut refused = None;
    let mut last = (0u64, 0u64);
    let streamed = client.post_json_lines(&url, &json!({"model": model, "stream": true}), |line| {
        let Ok(event) = serde_json::from_slice::<Value>(line) else {
            return true;
        };
        if let Some(error) = event["error"].as_str() {
            refused = Some(error.to_owned());
            return false;
        }
        let status = event["status"].as_str().unwrap_or_default();
        if status == "success" {
            success = true;
            return false;
        }
        match (event["total"].as_u64(), event["digest"].as_str()) {
            (Some(total), Some(digest)) => {
                let completed = event["completed"].as_u64().unwrap_or(0);
                last = (completed, total);
                progress(&PullEvent::Progress {
                    digest: digest.to_owned(),
                    completed,
                    total,
                });
            }
            _ => progress(&PullEvent::Status(status.to_owned())),
        }
        true
    });
    if let Some(message) = refused {
        return Err(SetupError::PullRefused {
            model: model.to_owned(),
            message,
        });
    }
    if success {
        return Ok(());
    }
    let done = match last {
        (_, 0) => "the start".to_owned(),
        (completed, total) => format!(
            "{} of {} ({}%)",
            crate::local::gb(completed),
            crate::local::gb(total),
            completed.saturating_mul(100) / total
        ),
    };
    Err(SetupError::PullInterrupted {
        model: model.to_owned(),
        done: match streamed {
            Err(e) => format!("{done} ({e})"),
            Ok(()) => done,
        },
    })
}

/// The download size of an Ollama tag, from the catalogue (its `ollama` tag's first
/// quantization, the one Ollama's tag ships).
pub fn ollama_size(catalogue: &Catalogue, tag: &str) -> Option<u64> {
    catalogue
        .local()
        .find(|(_, local)| local.ollama.as_deref() == Some(tag))
        .and_then(|(_, local)| local.quants.first().map(|q| q.download_bytes))
}

/// The family of a served model: its catalogue entry, by id or by Ollama tag.
pub fn family_of(catalogue: &Catalogue, model: &str) -> Option<String> {
    catalogue
        .local()
        .find(|(_, local)| local.ollama.as_deref() == Some(model))
        .map(|(entry, _)| entry.family.clone())
        .or_else(|| {
            let bare = model.trim_end_matches(".gguf").to_ascii_lowercase();
            catalogue.entry_for(&bare).map(|e| e.family.clone())
        })
}

/// What the readiness checks found.
#[derive(Debug, Clone, Serialize)]
pub struct Readiness {
    /// The context the server runs the model with (not the trained maximum), when it said.
    pub context: Option<u64>,
    pub checks: Vec<Check>,
    /// What the server said about the model, as the readiness cache keys a pass
    /// (`crate::direct::readiness::CanaryCache`).
    pub fingerprint: String,
}

impl Readiness {
    pub fn ok(&self) -> bool {
        self.checks.iter().all(|c| c.ok)
    }
}

/// The metadata checks and, when the server and model are there, the canaries — the same
/// checks a run's preflight makes (`crate::direct::preflight`).
pub fn readiness(endpoint: &Endpoint, model: &str, marker: &str) -> Result<Readiness, SetupError> {
    let client = client(&endpoint.base_url)?;
    let input = PreflightInput {
        endpoint,
        model,
        needed_context: preflight::STAGE_CONTEXT,
        canary_tokens: preflight::CANARY_TOKENS,
        marker,
    };
    let metadata = preflight::metadata(&client, &input);
    let fingerprint = metadata.facts.fingerprint();
    let context = metadata.context;
    let reachable = metadata.reachable();
    let mut checks = metadata.checks;
    if reachable {
        checks.extend(preflight::canaries(&client, &input, context));
    }
    Ok(Readiness {
        context,
        checks,
        fingerprint,
    })
}

/// The endpoint `local setup` saves for `model` on `server`.
pub fn endpoint_for(server: &FoundServer, name: &str, model: &str, family: &str) -> Endpoint {
    Endpoint {
        name: name.to_owned(),
        kind: server.kind,
        base_url: server.base_url.clone(),
        protocol: server.kind.default_protocol(),
        token_field: server.kind.default_token_field(),
        stream: true,
        max_output_tokens: None,
        models: vec![EndpointModel {
            id: model.to_owned(),
            family: family.to_owned(),
        }],
    }
}

/// Saves `endpoint` (no key: a local server takes none), keeping the models another setup
/// saved on the same endpoint.
pub fn save(connections: &mut Connections, mut endpoint: Endpoint) -> Result<(), SetupError> {
    if let Some(old) = connections.endpoint(&endpoint.name)
        && old.base_url == endpoint.base_url
    {
        for model in &old.models {
            if !endpoint.models.iter().any(|m| m.id == model.id) {
                endpoint.models.push(model.clone());
            }
        }
    }
    connections.save_endpoint(endpoint, None)?;
    Ok(())
}

/// The command lines that use the saved model.
pub fn routes(endpoint: &str, model: &str) -> Vec<String> {
    vec![
        format!(
            "autocode run --local {endpoint}/{model} \"OBJECTIVE\"   (requirements, planner, builder here; the verifiers on a cloud provider of another family)"
        ),
        format!(
            "autocode --provider autocode --single-model {endpoint}/{model} \"OBJECTIVE\"   (every role here, independence waived)"
        ),
    ]
}
