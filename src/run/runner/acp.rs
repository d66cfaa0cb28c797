//! The ACP part of a stage attempt (`output = "acp"`, `crate::acp`): the agent is launched like
//! any CLI (`attempt`), but with a stdin pipe; autocode speaks the session on its stdin and
//! stdout, feeds every line and every served event to the attempt's [`Intake`], and, once the
//! prompt is answered, closes stdin and ends the agent's family at once ([`end_agent`]: an ACP
//! agent is a server and does not exit on its own; one that closed its stdout first is exiting
//! and gets [`AGENT_EXIT_GRACE`]).
//!
//! What it records beside the CLI's artifacts: `acp-client.jsonl` (every message autocode sent),
//! `acp.json` (the agent's `initialize` answer, whether an earlier session was continued and
//! how, how many terminals and file requests it used, and so whether its commands ran in
//! autocode's terminal), `acp-replay.jsonl` (the history replayed during `session/load`, apart
//! from the stage's events) and `commands.json` (the boundary's receipt of every terminal
//! command).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use super::attempt::MAX_LINE;
use super::intake::Intake;
use crate::acp::{self, AcpEnd, AcpStage, Feed};
use crate::direct::tools::ShellContext;
use crate::pause::PauseCode;
use crate::run::integrity;
use crate::supervise::{Canceller, Room, Running};

/// autocode's own side of the session, one JSON-RPC message a line.
pub(super) const CLIENT_LOG: &str = "acp-client.jsonl";
/// The history an agent replayed while answering `session/load`, one message a line: kept for
/// a person to read, never parsed into the stage's events or evidence.
pub(super) const REPLAY_LOG: &str = "acp-replay.jsonl";

/// How long an agent that closed its stdout may take to exit before its family is ended.
pub const AGENT_EXIT_GRACE: Duration = Duration::from_secs(10);

/// How long an ACP agent may send nothing while none of its terminals runs, when the run sets
/// no `--max-idle-minutes` (which is the bound when it does). Both pinned agents stream the
/// model's output as it comes (message and thought chunks), so a silence this long is an
/// agent that stopped making progress (measured: the Claude Code 2.1.44 inside
/// `claude-code-acp` 0.16.2 spinning after a builder's command rewrote `~/.claude.json`),
/// never a stage left to hang until someone notices.
pub const DEFAULT_SILENCE: Duration = Duration::from_secs(5 * 60);

/// The longest one terminal command may run (the stage's own limit applies when shorter).
pub const TERMINAL_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// What the session needs from the attempt.
pub(super) struct AcpLaunch {
    pub(super) cwd: PathBuf,
    pub(super) env: BTreeMap<String, String>,
    pub(super) room: Option<Room>,
    pub(super) writable: bool,
    pub(super) prompt: String,
    /// The earlier attempt's session a same-stage repair continues.
    pub(super) resume: Option<String>,
    pub(super) model: String,
    pub(super) label: String,
    pub(super) timeout: Option<Duration>,
    /// The run's `--max-idle-minutes`, if set ([`DEFAULT_SILENCE`] otherwise).
    pub(super) idle: Option<Duration>,
    pub(super) client_log: PathBuf,
    /// Where the history replayed during `session/load` is kept, apart from the stage's
    /// events (never parsed into them).
    pub(super) replay_log: PathBuf,
}

/// Speaks the session to its end.
pub(super) async fn session(
    running: &mut Running,
    intake: &mut Intake<'_>,
    launch: AcpLaunch,
) -> AcpEnd {
    let (Some(stdin), Some(stdout)) = (running.stdin(), running.stdout()) else {
        return AcpEnd {
            failure: Some("the agent's stdin and stdout could not be taken".into()),
            ..AcpEnd::default()
        };
    };
    let stage = AcpStage {
        cwd: launch.cwd.clone(),
        prompt: launch.prompt,
        resume: launch.resume,
        model: Some(launch.model),
        writable: launch.writable,
        shell: ShellContext {
            cwd: launch.cwd,
            env: launch.env,
            room: launch.room,
            timeout: launch
                .timeout
                .map_or(TERMINAL_TIMEOUT, |t| t.min(TERMINAL_TIMEOUT)),
        },
        label: launch.label,
        max_line: MAX_LINE,
        client_log: Some(launch.client_log),
        idle: Some(running.idle_holder()),
        silence: Some(launch.idle.unwrap_or(DEFAULT_SILENCE)),
    };
    let mut replay_log: Option<std::io::BufWriter<std::fs::File>> = None;
    let end = acp::drive(stage, stdin, stdout, |feed| match feed {
        Feed::Line(line) => intake.line(line, None, MAX_LINE),
        Feed::Oversized(bytes) => intake.line(&[], Some(bytes), MAX_LINE),
        Feed::Served(event) => intake.event(event),
        Feed::Replayed(line) => {
            if replay_log.is_none() {
                replay_log = std::fs::File::create(&launch.replay_log)
                    .ok()
                    .map(std::io::BufWriter::new);
            }
            if let Some(log) = replay_log.as_mut() {
                let _ = log.write_all(line).and_then(|()| log.write_all(b"\n"));
            }
        }
    })
    .await;
    if let Some(mut log) = replay_log {
        let _ = log.flush();
    }
    end
}

/// The usage of a stage's turn from Claude Code's session transcript, for an agent that drives
/// Claude Code (Zed's adapter reports none over ACP; `events::claude_transcript`): the file
/// `<config dir>/projects/*/<session>.jsonl`, where the config dir is `CLAUDE_CONFIG_DIR` or
/// `~/.claude` as the agent saw it, looked for first in the upper directory of the stage's
/// private layer that covers it (HOME's, or `/tmp`'s for a HOME beneath `/tmp`: where the
/// agent's writes land), then in place. Counts what was written from `since` (the launch) on.
/// Like a native stream's usage, it is the agent's own account, used for budgets and cost,
/// never as evidence.
pub(super) fn claude_transcript_usage(
    session: &str,
    layers: &[crate::supervise::Overlay],
    env: &BTreeMap<String, String>,
    since: chrono::DateTime<chrono::Utc>,
) -> Option<crate::events::Usage> {
    if session.is_empty() || session.contains(['/', '\\']) || session.starts_with('.') {
        return None;
    }
    let config = match env.get("CLAUDE_CONFIG_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env.get("HOME")?).join(".claude"),
    };
    let mut places = Vec::new();
    // The deepest layer over the config dir is the one its writes land in.
    if let Some((layer, beneath)) = layers
        .iter()
        .filter_map(|layer| Some((layer, config.strip_prefix(&layer.dir).ok()?)))
        .min_by_key(|(_, beneath)| beneath.components().count())
    {
        places.push(layer.upper.join(beneath));
    }
    places.push(config);
    let file = format!("{session}.jsonl");
    for config in places {
        let Ok(projects) = std::fs::read_dir(config.join("projects")) else {
            continue;
        };
        for project in projects.flatten() {
            let path = project.path().join(&file);
            if let Ok(opened) = std::fs::File::open(&path) {
                return crate::events::claude_transcript::usage_since(
                    std::io::BufReader::with_capacity(1 << 16, opened),
                    since,
                );
            }
        }
    }
    tracing::info!(
        session,
        "no Claude Code transcript of the session was found"
    );
    None
}

/// Ends the agent's family once the session is over (abort the task once it has exited): at
/// once when the agent still listens (the session is spoken to its end, nothing it could still
/// write is read; both pinned agents wait for more requests after stdin closes, which cost
/// 10 s a stage before), after [`AGENT_EXIT_GRACE`] when it closed its stdout (it is exiting
/// and its own exit status is worth waiting for).
pub(super) fn end_agent(end: &AcpEnd, canceller: Canceller) -> tokio::task::JoinHandle<()> {
    let grace = if end.stream_closed {
        AGENT_EXIT_GRACE
    } else {
        Duration::ZERO
    };
    tokio::spawn(async move {
        tokio::time::sleep(grace).await;
        canceller.cancel();
    })
}

/// Whether the agent's commands ran in autocode's terminal (full evidence) or with its own
/// tools (degraded: its command events count only where the kernel's ledger backs them).
pub fn evidence_mode(end: &AcpEnd) -> &'static str {
    if end.terminals_created > 0 {
        "autocode_terminal"
    } else {
        "agent_tools"
    }
}

/// Writes `acp.json` and `commands.json`.
pub(super) fn record(dir: &Path, end: &AcpEnd) {
    let _ = integrity::write_stage_record(
        &dir.join("acp.json"),
        &json!({
            "protocol_version": acp::PROTOCOL_VERSION,
            "agent": end.agent,
            "prompt_answered": end.prompt_answered,
            "continued": end.continued.map(acp::Continuation::method),
            "replayed_updates": end.replayed_updates,
            "model_selection": end.model_selection,
            "terminals_created": end.terminals_created,
            "file_requests": end.file_requests,
            "evidence": evidence_mode(end),
            "failure": end.failure,
        }),
    );
    let receipts: Vec<serde_json::Value> = end
        .receipts
        .iter()
        .map(|(id, receipt)| json!({"evidence_id": id, "receipt": receipt}))
        .collect();
    let _ =
        integrity::write_stage_record(&dir.join("commands.json"), &json!({ "commands": receipts }));
}

/// Why the attempt stops for what happened in the session, if it does.
pub(super) fn stop_reason(end: &AcpEnd, stage: &str) -> Option<(PauseCode, String)> {
    if let Some(command) = end.unverified.first() {
        return Some((
            PauseCode::PausedProcessCleanup,
            format!(
                "{stage}: the boundary could not verify that every process of the terminal command `{command}` is gone (see commands.json)"
            ),
        ));
    }
    if let Some(silence) = end.silent {
        return Some((
            PauseCode::PausedStageTimeout,
            format!(
                "{stage}: the ACP agent sent nothing for {} s while none of its commands ran, and its family was stopped (it stopped making progress; see stdout.log and stderr.log; --max-idle-minutes sets this bound)",
                silence.as_secs()
            ),
        ));
    }
    end.failure.as_ref().map(|failure| {
        (
            PauseCode::PausedProviderUncertain,
            format!("{stage}: the ACP session failed: {failure}"),
        )
    })
}
