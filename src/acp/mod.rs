//! autocode as an Agent Client Protocol client (`output = "acp"`, protocol version 1, JSON-RPC
//! 2.0 over the agent's stdin and stdout, one message per line).
//!
//! The agent is a supervised subprocess like any CLI (its family in the stage's room, under the
//! boundary, in the exec ledger). What it asks of its client is served by autocode itself, the
//! way the direct runtime serves tool calls (`crate::direct::tools`): every `terminal/create`
//! runs as its own supervised family in the same room, so its exit code, output cap, receipt
//! and ledger entries are autocode's own; `fs/*` requests are confined to the stage's tree and
//! refused to read-only roles; permission requests are answered by the role's policy.
//!
//! Sub-modules: [`client`] (the session: handshake, prompt, request loop, cancel),
//! [`pinned`] (the pinned agents scripted setups register as tools) and
//! [`serve`] (terminals, files, permissions). The agent's stdout is parsed by
//! `crate::events::AcpParser`; the stage attempt that uses both is `run::runner` (`docs/transports.md`).

pub mod client;
pub mod pinned;
pub mod serve;

pub use client::{AcpEnd, AcpStage, Continuation, Feed, PROTOCOL_VERSION, drive};
pub use pinned::PinnedAcpAgent;

/// What `providers show` and `doctor` say about an ACP tool's evidence.
pub const EVIDENCE_NOTE: &str = "ACP client: commands the agent runs in autocode's terminal are full evidence; commands it runs with its own tools are degraded (evidence only where the exec ledger backs them); each stage's acp.json says which the agent used (measured: claude-code-acp 0.16.2 uses autocode's terminal, opencode 1.18.33 `opencode acp` its own tools)";
