//! `autocode dashboard`: a local web server (axum, loopback only) that shows the runs of one or
//! more workspaces from what their run directories already hold, streams a stage's events live,
//! shows the run's diff, and lets a person make the run's decisions through the same commands
//! the CLI runs.
//!
//! The module owns the server: its routes ([`serve`]), its security layer ([`security`]: the
//! launch token and its cookie, the Host allowlist, the mutation rules, the response headers),
//! the read-only views ([`view`], [`events`], [`diff`], [`scorecards`]), the decisions ([`decide`]) and the
//! embedded assets (`assets/`: plain HTML, CSS and one vanilla JS file; no build step, no CDN).
//! What each page shows is computed by the code the CLI uses (`run::list_runs`,
//! `run::find_run`, `PauseCode::explanation`); nothing is derived a second time here.
//! See `docs/dashboard.md`.

mod assets;
pub mod decide;
mod diff;
mod events;
pub mod liveness;
mod scorecards;
pub mod security;
mod view;

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};

/// Why the dashboard could not start.
#[derive(Debug, thiserror::Error)]
pub enum DashboardError {
    #[error("refusing to listen on {addr}: the dashboard binds a loopback address only")]
    NotLoopback { addr: IpAddr },
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("no randomness for the launch token: {0}")]
    Random(String),
    #[error("cannot write the token file {path}: {source}")]
    TokenFile {
        path: PathBuf,
        source: crate::store::StoreError,
    },
    #[error("the server stopped: {0}")]
    Serve(std::io::Error),
}

/// What `autocode dashboard` was asked for.
#[derive(Debug, Clone)]
pub struct Options {
    /// Canonical workspace directories, in the order given.
    pub workspaces: Vec<PathBuf>,
    pub addr: IpAddr,
    /// 0: any free port.
    pub port: u16,
    /// The environment git and the decision commands run with.
    pub env: BTreeMap<String, String>,
    /// The autocode executable the decisions run (`resume`, `apply`, `clean`).
    pub exe: PathBuf,
    /// Where the token is written (0600) for scripts; `None`: not written.
    pub token_file: Option<PathBuf>,
    /// Scenario result folders whose scorecards the dashboard shows.
    pub scorecards: Vec<PathBuf>,
}

/// The server once it listens: what `autocode dashboard` prints.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Started {
    /// The login URL (carries the token; printed once).
    pub login_url: String,
    pub address: SocketAddr,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_file: Option<PathBuf>,
    pub workspaces: Vec<PathBuf>,
}

/// State every handler shares.
pub struct Shared {
    pub(crate) workspaces: Vec<PathBuf>,
    pub(crate) scorecards: Vec<PathBuf>,
    pub(crate) env: BTreeMap<String, String>,
    pub(crate) exe: PathBuf,
    pub(crate) guard: security::Guard,
    pub(crate) decisions: decide::Ledger,
}

pub type AppState = Arc<Shared>;

/// The routes, with the security layer around every one of them (static files and the event
/// stream included).
fn router(state: AppState) -> Router {
    Router::new()
        .route("/", get(assets::index))
        .route("/app.js", get(assets::script))
        .route("/app.css", get(assets::style))
        .route("/login", get(security::login))
        .route("/api/runs", get(view::runs))
        .route("/api/ws/{ws}/runs/{run}", get(view::run))
        .route("/api/ws/{ws}/runs/{run}/stages/{stage}", get(view::stage))
        .route(
            "/api/ws/{ws}/runs/{run}/stages/{stage}/events",
            get(events::stream),
        )
        .route("/api/ws/{ws}/runs/{run}/files", get(view::run_file))
        .route("/api/ws/{ws}/runs/{run}/diff", get(diff::files))
        .route("/api/ws/{ws}/runs/{run}/diff/file", get(diff::file))
        .route("/api/ws/{ws}/runs/{run}/decide", post(decide::decide))
        .route("/api/decisions/{id}", get(decide::status))
        .route("/api/scorecards", get(scorecards::scorecards))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            security::layer,
        ))
        .with_state(state)
}

/// Binds `options.addr:options.port` (loopback only), calls `ready` with the login URL once it
/// listens, and serves until the process ends.
pub async fn serve(options: Options, ready: impl FnOnce(&Started)) -> Result<(), DashboardError> {
    if !options.addr.is_loopback() {
        return Err(DashboardError::NotLoopback { addr: options.addr });
    }
    let want = SocketAddr::new(options.addr, options.port);
    let listener = tokio::net::TcpListener::bind(want)
        .await
        .map_err(|source| DashboardError::Bind { addr: want, source })?;
    let address = listener
        .local_addr()
        .map_err(|source| DashboardError::Bind { addr: want, source })?;
    let token = security::new_token().map_err(DashboardError::Random)?;
    let host = match address.ip() {
        IpAddr::V6(ip) => format!("[{ip}]"),
        IpAddr::V4(ip) => ip.to_string(),
    };
    let login_url = format!("http://{host}:{}/login?token={token}", address.port());
    if let Some(path) = &options.token_file {
        let text = serde_json::json!({ "url": login_url, "token": token, "port": address.port() });
        crate::store::write_private(path, format!("{text}\n").as_bytes()).map_err(|source| {
            DashboardError::TokenFile {
                path: path.clone(),
                source,
            }
        })?;
    }
    let shared = Arc::new(Shared {
        workspaces: options.workspaces.clone(),
        scorecards: options.scorecards,
        env: options.env,
        exe: options.exe,
        guard: security::Guard::new(token, address),
        decisions: decide::Ledger::default(),
    });
    ready(&Started {
        login_url,
        address,
        token_file: options.token_file,
        workspaces: options.workspaces,
    });
    axum::serve(listener, router(shared))
        .await
        .map_err(DashboardError::Serve)
}
