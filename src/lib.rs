//! autocode: drives coding-agent CLIs (OpenCode, Codex, Claude Code and tools registered with
//! one TOML file) through a pipeline of roles whose every report is checked, never believed.
//!
//! Module map (each module is crate-like: it owns its types and exposes a small surface):
//! - [`ids`] and [`role`]: newtypes and the exhaustive role/sandbox enums shared by everything.
//! - [`provider`]: the provider registry (built-ins, bundled and user TOML), validation,
//!   placeholder expansion, model families and auth checks.
//! - [`agent_env`]: the pure policy that decides which variables an agent process sees.
//! - [`transport`]: turns a stage request into the exact process to launch, per CLI.
//! - [`events`]: reads each CLI's raw stream into one normalized event stream.
//! - [`supervise`]: the process-ownership boundary; the only place that starts processes and the
//!   only place with `unsafe`.
//! - [`verify`]: what "verified" means, as pure judgments of texts, trees and check output:
//!   the objective's units and commands, vacuous checks, test counts and names, test files and
//!   tree differences (the run engine replays and decides through `run::gate`).
//! - [`scripted_model`]: a loopback model server that lets the real CLIs run offline.
//! - [`models`]: the model catalogue as data (prices, windows, local facts); [`local`]: which
//!   of its local models fit this machine.
//! - [`dashboard`]: the local web view of runs and their decisions (`autocode dashboard`).
//! - [`cli`]: the command-line surface; [`error`]: the edge error with exit codes and hints.

pub mod acp;
pub mod agent_env;
pub mod bounded_read;
pub mod cli;
pub mod conformance;
pub mod dashboard;
pub mod demo;
pub mod direct;
pub mod error;
pub mod events;
pub mod exec;
pub mod gitconfig;
pub mod gitindex;
pub mod gitrefs;
pub mod gittree;
pub mod ids;
pub mod local;
pub mod mcp;
pub mod models;
pub mod notify;
pub mod pause;
pub mod prices;
pub mod provider;
pub mod report;
pub mod role;
pub mod run;
pub mod scenario;
pub mod scripted_model;
pub mod snapshot;
pub mod store;
pub mod supervise;
pub mod term_text;
pub mod transport;
pub mod verify;
