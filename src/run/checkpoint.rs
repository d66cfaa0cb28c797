//! The run state on disk (format 2) and its one durable commit per change.
//!
//! A run directory holds the state in two files:
//! - `run.json`, the *head*: every member of [`RunState`] but the attempts (written as `[]`),
//!   compact JSON with its integrity tag, replaced atomically (temp file → fsync → rename →
//!   directory fsync) at every checkpoint. It stays small: its size does not grow with stages.
//! - `attempts.jsonl`, the *attempt log*: append-only, one compact line per new or changed
//!   attempt record, `{"index":N,"attempt":{…}}`; the last line for an index is its record.
//!
//! The head commits to the log: [`LogCommit`] (inside the tagged head) names how many bytes and
//! lines of the log belong to the state and a SHA-256 hash chain over those lines, so the
//! attempts are exactly as verified as the head. Bytes past the committed length are a write
//! that a crash cut off before its head was written: readers ignore them and the next commit
//! truncates them.
//!
//! One commit ([`commit`]) is: the stage files and activity lines written since the last commit
//! made durable (`store::sync_deferred`: one fsync per file, one per directory), the changed
//! attempts appended to the log (one write, one fdatasync, skipped when no attempt changed),
//! then the head replaced. Its cost grows with what changed, not with past stages. A crash
//! anywhere leaves the previous head and the log prefix it commits (the previous state), or
//! the new ones. See `docs/run-lifecycle.md`, "The run state on disk".

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::integrity;
use super::state::{AttemptRecord, LogCommit, RUN_FORMAT, RunState};
use crate::store::{self, StoreError, TagKey};

/// The head's file name in a run directory.
pub const STATE_FILE: &str = "run.json";
/// The attempt log's file name in a run directory.
pub const ATTEMPTS_LOG: &str = "attempts.jsonl";

/// A [`LogCommit`] being extended, its chain kept as raw bytes.
#[derive(Debug, Clone)]
struct Chain {
    bytes: u64,
    lines: u64,
    link: [u8; 32],
}

impl Chain {
    fn start() -> Chain {
        Chain {
            bytes: 0,
            lines: 0,
            link: [0; 32],
        }
    }

    /// The chain `commit` names; `None` when its hex is not a chain link.
    fn of(commit: &LogCommit) -> Option<Chain> {
        if commit.lines == 0 && commit.bytes == 0 && commit.chain.is_empty() {
            return Some(Chain::start());
        }
        let hex = commit.chain.as_bytes();
        if hex.len() != 64 {
            return None;
        }
        let mut link = [0u8; 32];
        for (i, pair) in hex.chunks_exact(2).enumerate() {
            link[i] = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
        }
        Some(Chain {
            bytes: commit.bytes,
            lines: commit.lines,
            link,
        })
    }

    fn step(&mut self, line: &[u8]) {
        let mut hasher = Sha256::new();
        hasher.update(self.link);
        hasher.update(line);
        self.link = hasher.finalize().into();
        self.lines += 1;
        self.bytes += line.len() as u64;
    }

    fn commit(&self) -> LogCommit {
        LogCommit {
            bytes: self.bytes,
            lines: self.lines,
            chain: if self.lines == 0 {
                String::new()
            } else {
                hex(&self.link)
            },
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[derive(Serialize)]
struct LineOut<'a> {
    index: usize,
    attempt: &'a AttemptRecord,
}

#[derive(Deserialize)]
struct LineIn {
    index: usize,
    attempt: AttemptRecord,
}

/// What this process last committed of each attempt, to append only what changed.
#[derive(Debug, Clone, Default)]
pub struct AttemptLog {
    written: Vec<AttemptRecord>,
}

impl AttemptLog {
    /// The log of a state just read from disk (or just created): its attempts are committed.
    pub fn of(state: &RunState) -> AttemptLog {
        AttemptLog {
            written: state.attempts.clone(),
        }
    }
}

fn write_err(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Write {
        path: path.to_owned(),
        source,
    }
}

/// One durable commit of `state` into `dir` (see the module comment), tagged with this
/// process's key.
pub fn commit(dir: &Path, state: &mut RunState, log: &mut AttemptLog) -> Result<(), StoreError> {
    let path = dir.join(STATE_FILE);
    let key = integrity::process_key().map_err(|e| StoreError::NoKey {
        path,
        reason: e.to_string(),
    })?;
    commit_with(dir, state, log, key)
}

/// [`commit`] with the given key.
pub fn commit_with(
    dir: &Path,
    state: &mut RunState,
    log: &mut AttemptLog,
    key: &TagKey,
) -> Result<(), StoreError> {
    // The run directory itself is fsynced once, after the head's rename below.
    store::sync_deferred(dir, false)?;
    let changed: Vec<usize> = state
        .attempts
        .iter()
        .enumerate()
        .filter(|(i, attempt)| log.written.get(*i) != Some(*attempt))
        .map(|(i, _)| i)
        .collect();
    if !changed.is_empty() {
        let path = dir.join(ATTEMPTS_LOG);
        let mut next = Chain::of(&state.attempts_log)
            .ok_or_else(|| StoreError::TagMismatch { path: path.clone() })?;
        let mut buf = Vec::with_capacity(512 * changed.len());
        for &index in &changed {
            let start = buf.len();
            serde_json::to_writer(
                &mut buf,
                &LineOut {
                    index,
                    attempt: &state.attempts[index],
                },
            )
            .map_err(|e| write_err(&path)(std::io::Error::other(e)))?;
            buf.push(b'\n');
            next.step(&buf[start..]);
        }
        let mut file = store::open_owned(
            &path,
            OpenOptions::new().create(true).truncate(false).write(true),
            true,
        )?;
        // Whatever lies past the committed length was cut off by a crash: it goes.
        file.set_len(state.attempts_log.bytes)
            .and_then(|()| file.seek(SeekFrom::Start(state.attempts_log.bytes)))
            .and_then(|_| file.write_all(&buf))
            .and_then(|()| file.sync_data())
            .map_err(write_err(&path))?;
        state.attempts_log = next.commit();
    }
    // The head; its directory fsync also makes a newly created log's entry durable, and the
    // entries of the deferred files written directly in the run directory.
    let attempts = std::mem::take(&mut state.attempts);
    let head = dir.join(STATE_FILE);
    let written = store::write_tagged_json(&head, state, key, &integrity::context_for(&head));
    state.attempts = attempts;
    written?;
    for index in changed {
        let record = state.attempts[index].clone();
        match log.written.get_mut(index) {
            Some(slot) => *slot = record,
            None => log.written.push(record),
        }
    }
    Ok(())
}

/// Reads the state of `dir`: the head's tag and format version checked over its raw bytes, the
/// head deserialized straight into [`RunState`], then the committed attempt log streamed line by
/// line (memory bounded by one line plus the records) and checked against the head's commit.
pub fn read(dir: &Path, key: &TagKey) -> Result<RunState, StoreError> {
    let path = dir.join(STATE_FILE);
    let mut state: RunState =
        store::read_tagged_versioned_json(&path, RUN_FORMAT, key, &integrity::context_for(&path))?;
    state.attempts = read_log(&dir.join(ATTEMPTS_LOG), &state.attempts_log)?;
    Ok(state)
}

/// The attempts of the committed part of the log at `path`.
fn read_log(path: &Path, commit: &LogCommit) -> Result<Vec<AttemptRecord>, StoreError> {
    let mismatch = || StoreError::TagMismatch {
        path: path.to_owned(),
    };
    let Some(expected) = Chain::of(commit) else {
        return Err(mismatch());
    };
    if expected.lines == 0 {
        return if expected.bytes == 0 {
            Ok(Vec::new())
        } else {
            Err(mismatch())
        };
    }
    let read_err = |source| StoreError::Read {
        path: path.to_owned(),
        source,
    };
    let file = File::open(path).map_err(read_err)?;
    let mut reader = BufReader::with_capacity(1 << 16, file.take(commit.bytes));
    let mut seen = Chain::start();
    let mut attempts: Vec<AttemptRecord> = Vec::new();
    let mut unreadable: Option<StoreError> = None;
    let mut line = Vec::new();
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).map_err(read_err)? == 0 {
            break;
        }
        seen.step(&line);
        if unreadable.is_some() {
            continue;
        }
        match serde_json::from_slice::<LineIn>(&line) {
            Ok(LineIn { index, attempt }) if index < attempts.len() => attempts[index] = attempt,
            Ok(LineIn { index, attempt }) if index == attempts.len() => attempts.push(attempt),
            Ok(_) => unreadable = Some(mismatch()),
            Err(source) => {
                unreadable = Some(StoreError::Parse {
                    path: path.to_owned(),
                    source,
                })
            }
        }
    }
    // The chain first: a changed log is tampering, whatever it parses as.
    if (seen.bytes, seen.lines, seen.link) != (expected.bytes, expected.lines, expected.link) {
        return Err(mismatch());
    }
    match unreadable {
        Some(e) => Err(e),
        None => Ok(attempts),
    }
}

/// The head's path in `dir`.
pub fn state_path(dir: &Path) -> PathBuf {
    dir.join(STATE_FILE)
}

#[cfg(test)]
#[path = "checkpoint_tests.rs"]
mod tests;
