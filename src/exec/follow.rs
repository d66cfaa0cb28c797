//! Tails a run directory into `autocode-exec/1` lines: `attempts.jsonl` (stage starts and
//! ends), each ended stage's `events.jsonl` and `ledger.jsonl` (its commands and the ledger's
//! verdicts) and `activity.jsonl`. Reads are incremental (a byte offset per file, complete lines
//! only) and bounded (a chunk at a time; a line past [`MAX_LINE`] is skipped), so following a
//! long run holds no more than a line and a chunk. Used by `autocode exec` while its own run
//! goes on, and by `autocode events --follow` for a run started elsewhere.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::{ActivityLine, CommandLine, ExecLine, LedgerVerdict, StageEndLine, StageStartLine};
use super::{StageStatus, Usage};
use crate::events::NormalizedEvent;
use crate::report::ledger::{LedgerMatch, exit_as_code};
use crate::run::state::{AttemptPurpose, AttemptRecord, AttemptStatus};

/// The longest line followed; a longer one is skipped whole.
pub const MAX_LINE: usize = 4 << 20;
/// How much is read at once.
const CHUNK: usize = 64 << 10;

/// One file read from where the last read stopped.
#[derive(Debug)]
struct Tail {
    path: PathBuf,
    offset: u64,
    partial: Vec<u8>,
    /// The line being read is longer than [`MAX_LINE`]: dropped up to its newline.
    oversized: bool,
}

impl Tail {
    fn new(path: PathBuf) -> Tail {
        Tail {
            path,
            offset: 0,
            partial: Vec::new(),
            oversized: false,
        }
    }

    /// Calls `line` for each complete line written since the last call (a file that does not
    /// exist yet has none). A file shorter than what was read (replaced) is read again.
    fn read_new(&mut self, mut line: impl FnMut(&[u8])) -> std::io::Result<()> {
        let mut file = match File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        let len = file.metadata()?.len();
        if len < self.offset {
            self.offset = 0;
            self.partial.clear();
            self.oversized = false;
        }
        file.seek(SeekFrom::Start(self.offset))?;
        let mut file = file.take(len - self.offset);
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = file.read(&mut buf)?;
            if n == 0 {
                return Ok(());
            }
            self.offset += n as u64;
            let mut rest = &buf[..n];
            while !rest.is_empty() {
                let (piece, ended) = match rest.iter().position(|b| *b == b'\n') {
                    Some(at) => (&rest[..at], true),
                    None => (rest, false),
                };
                rest = &rest[(piece.len() + usize::from(ended)).min(rest.len())..];
                if !self.oversized {
                    if self.partial.len() + piece.len() > MAX_LINE {
                        self.oversized = true;
                        self.partial = Vec::new();
                    } else {
                        self.partial.extend_from_slice(piece);
                    }
                }
                if ended {
                    if !self.oversized {
                        line(&self.partial);
                    }
                    self.partial.clear();
                    self.oversized = false;
                }
            }
        }
    }
}

#[derive(Deserialize)]
struct AttemptLogLine {
    index: usize,
    attempt: AttemptRecord,
}

#[derive(Deserialize)]
struct ActivityLogLine {
    at: DateTime<Utc>,
    event: String,
    #[serde(default)]
    detail: Option<String>,
}

/// Follows one run directory.
#[derive(Debug)]
pub struct Follower {
    dir: PathBuf,
    attempts: Tail,
    activity: Tail,
    /// Attempt index → whether its end was emitted.
    stages: BTreeMap<usize, bool>,
}

impl Follower {
    pub fn new(dir: PathBuf) -> Follower {
        Follower {
            attempts: Tail::new(dir.join("attempts.jsonl")),
            activity: Tail::new(dir.join("activity.jsonl")),
            dir,
            stages: BTreeMap::new(),
        }
    }

    /// Emits, in time order, the lines for what the run wrote since the last call.
    pub fn poll(&mut self, emit: &mut dyn FnMut(ExecLine)) {
        let mut lines: Vec<(DateTime<Utc>, ExecLine)> = Vec::new();
        let mut records: Vec<(usize, AttemptRecord)> = Vec::new();
        if let Err(e) = self.attempts.read_new(|bytes| {
            if let Ok(line) = serde_json::from_slice::<AttemptLogLine>(bytes) {
                records.push((line.index, line.attempt));
            }
        }) {
            tracing::warn!(error = %e, "cannot read attempts.jsonl");
        }
        for (index, attempt) in records {
            self.attempt_lines(index, &attempt, &mut lines);
        }
        if let Err(e) = self.activity.read_new(|bytes| {
            if let Ok(line) = serde_json::from_slice::<ActivityLogLine>(bytes) {
                lines.push((
                    line.at,
                    ExecLine::Activity(ActivityLine {
                        at: line.at,
                        event: line.event,
                        detail: line.detail,
                    }),
                ));
            }
        }) {
            tracing::warn!(error = %e, "cannot read activity.jsonl");
        }
        // Stable: a stage's start, commands and end keep their order at equal times.
        lines.sort_by_key(|(at, _)| *at);
        for (_, line) in lines {
            emit(line);
        }
    }

    fn attempt_lines(
        &mut self,
        index: usize,
        attempt: &AttemptRecord,
        lines: &mut Vec<(DateTime<Utc>, ExecLine)>,
    ) {
        let ended = match self.stages.get(&index) {
            Some(ended) => *ended,
            None => {
                lines.push((
                    attempt.started_at,
                    ExecLine::StageStart(StageStartLine {
                        stage: attempt.dir.clone(),
                        role: attempt.role,
                        route: format!("{}/{}", attempt.route.provider, attempt.route.model),
                        purpose: purpose_name(&attempt.purpose).to_owned(),
                        at: attempt.started_at,
                    }),
                ));
                self.stages.insert(index, false);
                false
            }
        };
        let status = match &attempt.status {
            AttemptStatus::Running => return,
            _ if ended => return,
            AttemptStatus::Accepted => (StageStatus::Accepted, None, None),
            AttemptStatus::Rejected { reason } => (StageStatus::Rejected, Some(reason), None),
            AttemptStatus::Paused { code } => (StageStatus::Paused, None, Some(*code)),
            AttemptStatus::Abandoned => (StageStatus::Abandoned, None, None),
        };
        self.stages.insert(index, true);
        let at = attempt.finished_at.unwrap_or(attempt.started_at);
        let stage_dir = self.dir.join("stages").join(&attempt.dir);
        for command in stage_commands(&stage_dir, &attempt.dir) {
            lines.push((at, ExecLine::Command(command)));
        }
        lines.push((
            at,
            ExecLine::StageEnd(StageEndLine {
                stage: attempt.dir.clone(),
                role: attempt.role,
                status: status.0,
                reason: status.1.cloned(),
                pause_code: status.2,
                tokens: tokens(&attempt.usage),
                cost_usd: attempt.usage.cost_usd,
                commit: attempt.commit.clone(),
                at: attempt.finished_at,
            }),
        ));
    }
}

fn tokens(usage: &Usage) -> u64 {
    usage.total_tokens()
}

fn purpose_name(purpose: &AttemptPurpose) -> &'static str {
    match purpose {
        AttemptPurpose::Fresh => "fresh",
        AttemptPurpose::ReportRepair { .. } => "report_repair",
        AttemptPurpose::ShellCommandCorrection { .. } => "shell_command_correction",
        AttemptPurpose::TransportRetry { .. } => "transport_retry",
        AttemptPurpose::Rework { .. } => "rework",
    }
}

/// The finished commands of an ended stage's event log, each with the ledger's verdict.
fn stage_commands(stage_dir: &Path, stage: &str) -> Vec<CommandLine> {
    let ledger_path = stage_dir.join("ledger.jsonl");
    let ledger = if ledger_path.exists() {
        crate::supervise::read_ledger(&ledger_path).ok()
    } else {
        None
    };
    let mut commands = Vec::new();
    let mut events = Tail::new(stage_dir.join("events.jsonl"));
    let read = events.read_new(|bytes| {
        // Most events are not commands: only those lines are parsed.
        if !contains(bytes, b"command_finished") {
            return;
        }
        let Ok(NormalizedEvent::CommandFinished {
            evidence_id,
            command,
            exit_code,
            ..
        }) = serde_json::from_slice::<NormalizedEvent>(bytes)
        else {
            return;
        };
        let verdict = match (&ledger, exit_code) {
            (None, _) => LedgerVerdict::NoLedger,
            (Some(ledger), Some(code)) => {
                match crate::report::ledger::ledger_match(&command, code, ledger) {
                    LedgerMatch::Matched { seq } => LedgerVerdict::Attested { seq },
                    LedgerMatch::NotMatched { reason, .. } => LedgerVerdict::NotAttested { reason },
                }
            }
            (Some(ledger), None) => LedgerVerdict::NoExitCode {
                attested_exit: crate::report::ledger::attested_exit(&command, ledger)
                    .map(exit_as_code),
            },
        };
        commands.push(CommandLine {
            stage: stage.to_owned(),
            event: evidence_id.as_str().to_owned(),
            command,
            exit_code,
            ledger: verdict,
        });
    });
    if let Err(e) = read {
        tracing::warn!(error = %e, stage, "cannot read the stage's events.jsonl");
    }
    commands
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_tail_yields_complete_lines_once_and_skips_an_oversized_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("log.jsonl");
        let mut tail = Tail::new(path.clone());
        let mut seen = Vec::new();
        tail.read_new(|l| seen.push(l.to_vec())).expect("absent");
        assert!(seen.is_empty());
        let mut file = File::create(&path).expect("create");
        file.write_all(b"one\ntw").expect("write");
        tail.read_new(|l| seen.push(l.to_vec())).expect("read");
        assert_eq!(seen, [b"one".to_vec()]);
        file.write_all(b"o\n").expect("write");
        let long = vec![b'x'; MAX_LINE + 1];
        file.write_all(&long).expect("write");
        file.write_all(b"\nthree\n").expect("write");
        tail.read_new(|l| seen.push(l.to_vec())).expect("read");
        assert_eq!(seen, [b"one".to_vec(), b"two".to_vec(), b"three".to_vec()]);
        tail.read_new(|l| seen.push(l.to_vec())).expect("read");
        assert_eq!(seen.len(), 3, "nothing new, nothing again");
        // Replaced by a shorter file: read from its start.
        std::fs::write(&path, b"four\n").expect("replace");
        tail.read_new(|l| seen.push(l.to_vec())).expect("read");
        assert_eq!(seen.last().map(Vec::as_slice), Some(&b"four"[..]));
    }
}
