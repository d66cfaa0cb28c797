//! The exec ledger's file: compact JSON lines written by the party servicing a launch's
//! listener ([`LedgerWriter`]) and read back into whole [`LedgerEntry`]s ([`read`]).
//!
//! One JSON object a line, each written with one `write` (O_APPEND), so a crash leaves whole
//! lines behind; a cut line is skipped. The kinds of line:
//! - entry: the first line of an exec, written before the exec is let through. Either its argv
//!   in full (strings of [`LONG_TEXT`] bytes or more left empty and named by digest in
//!   `argv_texts`), or `same_as: <seq>`: pid, argv, `argv_truncated` and cwd are those of that
//!   earlier entry of the same process (the failed `PATH` probes of one `execvp` fold into
//!   their first entry this way).
//! - text: `{"text": <sha256>, "value": …}`, or `{"text", "base", "keep", "tail"}` (the first
//!   `keep` bytes of the text `base`, then `tail`): a long argv string, stored once per file,
//!   in the same write as the first entry naming it. The reader checks the digest. A text
//!   over [`TEXT_CAP`] bytes is `{"text", "value": <head>, "tail", "elided": <bytes left
//!   out>, "words": <sha256>}`: the digest names the whole string, `words` the whole with each
//!   run of whitespace one space (trimmed), and the entries naming it read with that string's
//!   slot holding its ends (with a note where the bytes were left out) and both digests in
//!   `argv_cut`: evidence matching compares a cited command's digest with them
//!   (`report::ledger`), never the cut text.
//! - attestation: `{"seq", "attestation", "exe"}`, when the keeper settled it. A failed exec
//!   (`exec_failed`, nearly always a `PATH` probe) is instead named in the `failed` list of
//!   the next line written, whatever its kind (or of a line of its own when the writer ends):
//!   lost with that line, the entry reads as `unconfirmed`, which is no more evidence.
//! - exit: `{"seqs": […], "exit": …}`, the end of every entry of one process.
//!
//! An entry of another process whose argv and cwd are those of a recent entry written in full
//! names it (`argv_as: <seq>`, its own `pid`): the same `git status` run again. An entry
//! written with its argv whose cwd is that of a recent one names it (`cwd_as: <seq>`).
//!
//! An exec the keeper answered ENOENT itself (its file does not exist: nearly always a failed
//! `PATH` probe; `linux::absent`) never ran, so its entry line need not be on disk
//! before the answer: it is held and written with the next line, whatever its kind (or when
//! the writer flushes or ends), and the later probes of one `execvp` (same process, argv and
//! cwd, consecutive seqs, the same name) only add their directory to its `absent` list (or
//! `absent_as: <seq>`, the list of that earlier run, with `absent_keep: <n>` its first `n`
//! directories only and `absent` the directories after them) and, when it differs from the first's,
//! their time to `absent_ms`: seq `n + i` is the name in the `i`-th directory, `exec_failed`
//! (the line says `enoent` for both: implausible, and failed). A crash can
//! lose held lines, never the line of an exec that ran.
//!
//! Ledgers written before this format (every line a whole entry, a later line of the same
//! `seq` superseding an earlier one) read the same way. An entry whose text or `same_as`
//! cannot be resolved (its line was lost) is read with an empty argv as `unreadable`: never
//! evidence.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::io::Write;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{Attestation, CutArg, LedgerEntry, LedgerExit};

/// An argv string this long or longer is stored once per file, by digest.
pub const LONG_TEXT: usize = 512;
/// A text longer than this is stored as its first [`TEXT_HEAD`] and last [`TEXT_TAIL`] bytes
/// with the digests of the whole ([`super::CutArg`]): a builder writing a 60 KB source file
/// through a heredoc in `bash -c` (Codex's usual way) still finds its exec in the ledger by
/// digest, and Codex's 38 KB shell-snapshot prelude takes 3 KB.
pub const TEXT_CAP: usize = 4 << 10;
const TEXT_HEAD: usize = 1024;
const TEXT_TAIL: usize = 2048;
/// How many recent argvs (with their cwd) a new entry of another process may name, and how
/// many directory lists of runs of absent execs.
const RECENT_CALLS: usize = 32;
/// How many recent long texts a new one is compared with for a shared prefix.
const BASES: usize = 8;

/// One line of the file, any kind (absent fields are left out).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
struct Line {
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    base: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    keep: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tail: Option<String>,
    /// A text over [`TEXT_CAP`]: how many bytes between `value` (its head) and `tail` are
    /// left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    elided: Option<usize>,
    /// A text over [`TEXT_CAP`]: the digest of the whole with its whitespace collapsed.
    #[serde(skip_serializing_if = "Option::is_none")]
    words: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seq: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seqs: Option<Vec<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    same_as: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pid: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    filename: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    argv: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    argv_texts: Vec<(usize, String)>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    argv_truncated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    cwd: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    at_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    exec_plausible: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    exit: Option<LedgerExit>,
    #[serde(skip_serializing_if = "Option::is_none")]
    attestation: Option<Attestation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    exe: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    failed: Vec<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    absent: Vec<String>,
    /// The later probes' `at_ms` after the first's, when any differs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    absent_ms: Vec<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    absent_as: Option<u64>,
    /// With `absent_as`: how many of that run's directories this run keeps (all when absent),
    /// `absent` then being the directories after them.
    #[serde(skip_serializing_if = "Option::is_none")]
    absent_keep: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    argv_as: Option<u64>,
    /// An absent exec the keeper answered ENOENT: `exec_plausible: false`, `exec_failed`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    enoent: bool,
    /// An entry written with its argv: its cwd is that of this earlier entry.
    #[serde(skip_serializing_if = "Option::is_none")]
    cwd_as: Option<u64>,
}

fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The digest of `text` with each run of whitespace one space, trimmed (how a shell payload is
/// compared with a cited command), computed without building that string.
pub fn words_sha256(text: &str) -> String {
    let mut sha = Sha256::new();
    for (i, word) in text.split_whitespace().enumerate() {
        if i > 0 {
            sha.update(b" ");
        }
        sha.update(word.as_bytes());
    }
    sha.finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The length of the longest common prefix of `a` and `b` that ends on a char boundary.
fn common_prefix(a: &str, b: &str) -> usize {
    let mut at = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    while !a.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// Writes one launch's ledger file. A writer taking over from another (after a keeper loss)
/// starts with nothing known: it names only texts and entries it wrote itself.
pub struct LedgerWriter {
    file: std::fs::File,
    /// Digests of the texts this writer wrote.
    texts: HashSet<String>,
    /// The most recent long texts (digest, value): bases for a later one's shared prefix.
    recent: VecDeque<(String, String)>,
    /// The newest entry this writer wrote for each pid.
    last: HashMap<i32, u64>,
    /// Entries whose exec failed, not written yet (see the module's comment).
    failed: Vec<u64>,
    /// Absent execs not written yet (see the module's comment), in runs.
    held: Vec<Held>,
    /// Recent entries written with their argv in full or by text (seq, argv, truncated, cwd).
    calls: VecDeque<(u64, Vec<String>, bool, String)>,
    /// Recent directory lists of runs of absent execs written in full (first seq, list).
    dirs: VecDeque<(u64, Vec<String>)>,
}

/// A run of absent execs of one process with one argv and cwd and consecutive seqs, for the
/// same name in different directories (the failed `PATH` probes of one `execvp`): one line.
struct Held {
    /// Its text lines and its line, but for the directories of the later probes.
    texts: Vec<u8>,
    line: Line,
    first: LedgerEntry,
    /// The seq a later probe joining the run must have.
    next: u64,
}

/// A filename's directory and last component (`"/a/b"`: `"/a"`, `"b"`; `"/b"`: `""`, `"b"`).
fn split_name(filename: &str) -> (&str, &str) {
    filename.rsplit_once('/').unwrap_or(("", filename))
}

impl LedgerWriter {
    pub fn new(file: std::fs::File) -> Self {
        Self {
            file,
            texts: HashSet::new(),
            recent: VecDeque::new(),
            last: HashMap::new(),
            failed: Vec::new(),
            held: Vec::new(),
            calls: VecDeque::new(),
            dirs: VecDeque::new(),
        }
    }

    /// The newest entry this writer wrote for `pid` (the candidate for `same_as`).
    pub fn last_of(&self, pid: i32) -> Option<u64> {
        self.last.get(&pid).copied()
    }

    /// Writes `bytes` after the absent execs held so far, with one `write` (O_APPEND): a crash
    /// leaves whole lines behind.
    fn write(&mut self, bytes: &[u8]) {
        let mut all = self.held_bytes();
        let bytes = if all.is_empty() {
            bytes
        } else {
            all.extend_from_slice(bytes);
            &all
        };
        if self.file.write_all(bytes).is_err() {
            tracing::warn!("cannot write the exec ledger");
        }
    }

    /// The lines of the absent execs held so far (they are then no longer held).
    fn held_bytes(&mut self) -> Vec<u8> {
        let mut bytes = Vec::new();
        for mut held in std::mem::take(&mut self.held) {
            bytes.extend_from_slice(&held.texts);
            if held.line.absent_ms.iter().all(|&after| after == 0) {
                held.line.absent_ms = Vec::new();
            }
            // The directories of a run are nearly always those of an earlier one, or its start
            // (one `PATH`, searched until the name is found): named by that run's seq, with how
            // many of its directories to keep and the directories after them.
            if !held.line.absent.is_empty() {
                let dirs = std::mem::take(&mut held.line.absent);
                let best = self
                    .dirs
                    .iter()
                    .map(|(seq, earlier)| {
                        let shared = earlier.iter().zip(&dirs).take_while(|(a, b)| a == b);
                        (shared.count(), *seq, earlier.len())
                    })
                    .max_by_key(|(shared, _, _)| *shared)
                    .filter(|(shared, _, _)| *shared > 0);
                match best {
                    Some((shared, seq, len)) => {
                        held.line.absent_as = Some(seq);
                        held.line.absent_keep = (shared < len).then_some(shared);
                        held.line.absent = dirs[shared..].to_vec();
                    }
                    None => held.line.absent.clone_from(&dirs),
                }
                if !self.dirs.iter().any(|(_, earlier)| *earlier == dirs) {
                    if self.dirs.len() == RECENT_CALLS {
                        self.dirs.pop_front();
                    }
                    self.dirs.push_back((held.first.seq, dirs));
                }
            }
            let line = self.finish_line(held.line);
            bytes.extend_from_slice(&line);
        }
        bytes
    }

    /// Writes what is held back (absent execs, failed ones), if anything.
    pub fn flush(&mut self) {
        let bytes = if !self.held.is_empty() {
            self.held_bytes()
        } else if !self.failed.is_empty() {
            self.finish_line(Line::default())
        } else {
            return;
        };
        self.write(&bytes);
    }

    /// `line` with the failed execs held so far, serialized.
    fn finish_line(&mut self, mut line: Line) -> Vec<u8> {
        line.failed = std::mem::take(&mut self.failed);
        let mut bytes = serde_json::to_vec(&line).unwrap_or_default();
        if !bytes.is_empty() {
            bytes.push(b'\n');
        }
        bytes
    }

    /// The text line for `value` (digest `digest`), against the recent text sharing the
    /// longest prefix with it, if that prefix is long.
    fn text_line(&self, digest: &str, value: &str) -> Line {
        if value.len() > TEXT_CAP {
            let mut head = TEXT_HEAD;
            while !value.is_char_boundary(head) {
                head -= 1;
            }
            let mut tail = value.len() - TEXT_TAIL;
            while !value.is_char_boundary(tail) {
                tail += 1;
            }
            return Line {
                text: Some(digest.to_owned()),
                value: Some(value.get(..head).unwrap_or_default().to_owned()),
                tail: Some(value.get(tail..).unwrap_or_default().to_owned()),
                elided: Some(tail - head),
                words: Some(words_sha256(value)),
                ..Line::default()
            };
        }
        let best = self
            .recent
            .iter()
            .map(|(base, text)| (common_prefix(text, value), base))
            .max_by_key(|(keep, _)| *keep);
        match best {
            Some((keep, base)) if keep >= LONG_TEXT => Line {
                text: Some(digest.to_owned()),
                base: Some(base.clone()),
                keep: Some(keep),
                tail: Some(value.get(keep..).unwrap_or_default().to_owned()),
                ..Line::default()
            },
            _ => Line {
                text: Some(digest.to_owned()),
                value: Some(value.to_owned()),
                ..Line::default()
            },
        }
    }

    /// Writes the first line of `entry` (with any text it names first, in the same write).
    /// `previous` is the entry [`LedgerWriter::last_of`] named, if the caller still has it.
    pub fn entry(&mut self, entry: &LedgerEntry, previous: Option<&LedgerEntry>) {
        let (mut bytes, line) = self.entry_line(entry, previous);
        let line = self.finish_line(line);
        bytes.extend_from_slice(&line);
        self.write(&bytes);
    }

    /// Holds the line of an exec answered ENOENT by the keeper (it never ran, so it need not be
    /// on disk before its answer): it goes with the next line written, and a later probe of
    /// the same run only adds its directory to it.
    pub fn absent(&mut self, entry: &LedgerEntry, previous: Option<&LedgerEntry>) {
        let (dir, name) = split_name(&entry.filename);
        if let Some(held) = self.held.last_mut()
            && held.next == entry.seq
            && held.first.same_call(entry)
            && split_name(&held.first.filename).1 == name
        {
            held.line.absent.push(dir.to_owned());
            held.line
                .absent_ms
                .push(entry.at_ms.saturating_sub(held.first.at_ms));
            held.next += 1;
            return;
        }
        let (texts, mut line) = self.entry_line(entry, previous);
        // The keeper's own ENOENT: implausible and failed, said in one short field.
        if !entry.exec_plausible && entry.attestation == Attestation::ExecFailed {
            line.exec_plausible = None;
            line.attestation = None;
            line.enoent = true;
        }
        self.held.push(Held {
            texts,
            line,
            first: entry.clone(),
            next: entry.seq + 1,
        });
    }

    /// The first line of `entry` and the text lines it names (not yet written).
    fn entry_line(
        &mut self,
        entry: &LedgerEntry,
        previous: Option<&LedgerEntry>,
    ) -> (Vec<u8>, Line) {
        let mut bytes = Vec::new();
        let mut line = Line {
            seq: Some(entry.seq),
            filename: Some(entry.filename.clone()),
            at_ms: Some(entry.at_ms),
            exec_plausible: (!entry.exec_plausible).then_some(false),
            exit: entry.exit,
            attestation: (entry.attestation != Attestation::Unconfirmed)
                .then_some(entry.attestation),
            exe: entry.exe.clone(),
            ..Line::default()
        };
        let same = previous.filter(|previous| previous.same_call(entry));
        let other = self
            .calls
            .iter()
            .rev()
            .find(|(_, argv, truncated, cwd)| {
                *truncated == entry.argv_truncated && *cwd == entry.cwd && *argv == entry.argv
            })
            .map(|(seq, ..)| *seq);
        if let Some(previous) = same {
            line.same_as = Some(previous.seq);
        } else if let Some(seq) = other {
            // Another process ran the same argv in the same cwd (`git status` again).
            line.pid = Some(entry.pid);
            line.argv_as = Some(seq);
        } else {
            // The cwd of a recent entry written in full (one worktree, nearly every exec).
            let cwd_as = self
                .calls
                .iter()
                .rev()
                .find(|(.., cwd)| *cwd == entry.cwd)
                .map(|(seq, ..)| *seq);
            if self.calls.len() == RECENT_CALLS {
                self.calls.pop_front();
            }
            self.calls.push_back((
                entry.seq,
                entry.argv.clone(),
                entry.argv_truncated,
                entry.cwd.clone(),
            ));
            let mut argv = Vec::with_capacity(entry.argv.len());
            for (index, arg) in entry.argv.iter().enumerate() {
                if arg.len() < LONG_TEXT {
                    argv.push(arg.clone());
                    continue;
                }
                let digest = sha256_hex(arg);
                if !self.texts.contains(&digest) {
                    if let Ok(text) = serde_json::to_vec(&self.text_line(&digest, arg)) {
                        bytes.extend_from_slice(&text);
                        bytes.push(b'\n');
                    }
                    self.texts.insert(digest.clone());
                    if arg.len() <= TEXT_CAP {
                        if self.recent.len() == BASES {
                            self.recent.pop_front();
                        }
                        self.recent.push_back((digest.clone(), arg.clone()));
                    }
                }
                argv.push(String::new());
                line.argv_texts.push((index, digest));
            }
            line.pid = Some(entry.pid);
            line.argv = Some(argv);
            line.argv_truncated = entry.argv_truncated;
            match cwd_as {
                Some(seq) => line.cwd_as = Some(seq),
                None => line.cwd = Some(entry.cwd.clone()),
            }
        }
        self.last.insert(entry.pid, entry.seq);
        (bytes, line)
    }

    /// Writes an entry's attestation.
    pub fn attestation(&mut self, seq: u64, attestation: Attestation, exe: Option<&str>) {
        if attestation == Attestation::ExecFailed && exe.is_none() {
            self.failed.push(seq);
            return;
        }
        let line = Line {
            seq: Some(seq),
            attestation: Some(attestation),
            exe: exe.map(str::to_owned),
            ..Line::default()
        };
        let bytes = self.finish_line(line);
        self.write(&bytes);
    }

    /// Writes the end of entries (those of one process).
    pub fn exit(&mut self, seqs: &[u64], exit: LedgerExit) {
        if seqs.is_empty() {
            return;
        }
        let line = Line {
            seqs: Some(seqs.to_vec()),
            exit: Some(exit),
            ..Line::default()
        };
        let bytes = self.finish_line(line);
        self.write(&bytes);
    }
}

impl Drop for LedgerWriter {
    /// Writes what is still held.
    fn drop(&mut self) {
        self.flush();
    }
}

/// Reads a ledger file's text (either format) into its entries, in `seq` order.
pub fn read(text: &str) -> Vec<LedgerEntry> {
    let mut entries: BTreeMap<u64, LedgerEntry> = BTreeMap::new();
    let mut texts: HashMap<String, String> = HashMap::new();
    let mut damaged: BTreeSet<u64> = BTreeSet::new();
    // The texts kept only by their ends: the digest of their words, by their digest.
    let mut elided_texts: HashMap<String, String> = HashMap::new();
    // The directory lists of runs of absent execs, by their first seq.
    let mut runs: HashMap<u64, Vec<String>> = HashMap::new();
    for raw in text.lines() {
        let Ok(line) = serde_json::from_str::<Line>(raw) else {
            continue;
        };
        for seq in &line.failed {
            if let Some(entry) = entries.get_mut(seq)
                && entry.attestation == Attestation::Unconfirmed
            {
                entry.attestation = Attestation::ExecFailed;
                entry.exe = None;
            }
        }
        if let Some(digest) = line.text {
            if let (Some(head), Some(tail), Some(elided)) = (&line.value, &line.tail, line.elided) {
                // Its entries name it by digest (`argv_cut`); its ends are no command. A file
                // from before `words` has no such digest: its entries read as cut.
                texts.insert(
                    digest.clone(),
                    format!(
                        "{head}\n[… {elided} bytes left out of the ledger; the whole string's \
                         sha256 is {digest} …]\n{tail}"
                    ),
                );
                elided_texts.insert(digest, line.words.unwrap_or_default());
                continue;
            }
            let value = match (line.value, line.base, line.keep, line.tail) {
                (Some(value), _, _, _) => Some(value),
                (None, Some(base), Some(keep), Some(tail)) => texts
                    .get(&base)
                    .and_then(|base| base.get(..keep))
                    .map(|head| format!("{head}{tail}")),
                _ => None,
            };
            if let Some(value) = value.filter(|value| sha256_hex(value) == digest) {
                texts.insert(digest, value);
            }
            continue;
        }
        if let Some(seqs) = line.seqs {
            for seq in seqs {
                if let Some(entry) = entries.get_mut(&seq) {
                    entry.exit = line.exit.or(entry.exit);
                }
            }
            continue;
        }
        let Some(seq) = line.seq else {
            continue;
        };
        if line.pid.is_none() && line.same_as.is_none() && line.argv_as.is_none() {
            // An attestation settled later; an `unconfirmed` one tells nothing new.
            if let Some(entry) = entries.get_mut(&seq)
                && let Some(attestation) = line.attestation
                && attestation != Attestation::Unconfirmed
            {
                entry.attestation = attestation;
                entry.exe = line.exe;
            }
            continue;
        }
        let mut resolved = true;
        let (pid, argv, argv_truncated, argv_cut, cwd) = match line.same_as.or(line.argv_as) {
            Some(earlier) => match entries.get(&earlier) {
                Some(earlier) if !damaged.contains(&earlier.seq) => (
                    earlier.pid,
                    earlier.argv.clone(),
                    earlier.argv_truncated,
                    earlier.argv_cut.clone(),
                    earlier.cwd.clone(),
                ),
                Some(earlier) => {
                    resolved = false;
                    (earlier.pid, Vec::new(), false, Vec::new(), String::new())
                }
                None => {
                    resolved = false;
                    (0, Vec::new(), false, Vec::new(), String::new())
                }
            },
            None => {
                let mut argv = line.argv.unwrap_or_default();
                for (index, digest) in &line.argv_texts {
                    match (argv.get_mut(*index), texts.get(digest)) {
                        (Some(slot), Some(value)) => slot.clone_from(value),
                        _ => resolved = false,
                    }
                }
                let mut old_cut = false;
                let mut argv_cut = Vec::new();
                for (index, digest) in &line.argv_texts {
                    match elided_texts.get(digest) {
                        Some(words) if words.is_empty() => old_cut = true,
                        Some(words) => argv_cut.push(CutArg {
                            index: *index,
                            sha256: digest.clone(),
                            words_sha256: words.clone(),
                        }),
                        None => {}
                    }
                }
                let cwd = match (line.cwd, line.cwd_as) {
                    (Some(cwd), _) => cwd,
                    (None, Some(earlier)) => match entries.get(&earlier) {
                        Some(earlier) if !damaged.contains(&earlier.seq) => earlier.cwd.clone(),
                        _ => {
                            resolved = false;
                            String::new()
                        }
                    },
                    (None, None) => String::new(),
                };
                (
                    line.pid.unwrap_or_default(),
                    argv,
                    line.argv_truncated || old_cut,
                    argv_cut,
                    cwd,
                )
            }
        };
        // `argv_as` names another process's entry: the pid is this line's own.
        let pid = match (line.same_as, line.argv_as) {
            (None, Some(_)) => line.pid.unwrap_or_default(),
            _ => pid,
        };
        let mut entry = LedgerEntry {
            seq,
            pid,
            filename: line.filename.unwrap_or_default(),
            argv,
            argv_truncated,
            argv_cut,
            cwd,
            at_ms: line.at_ms.unwrap_or_default(),
            exec_plausible: line.exec_plausible.unwrap_or(!line.enoent),
            exit: line.exit,
            attestation: match (line.attestation, line.enoent) {
                (Some(attestation), _) => attestation,
                (None, true) => Attestation::ExecFailed,
                (None, false) => Attestation::Unconfirmed,
            },
            exe: line.exe,
        };
        if resolved {
            damaged.remove(&seq);
        } else {
            damaged.insert(seq);
            entry.argv.clear();
            entry.argv_cut.clear();
        }
        if let Some(earlier) = entries.get(&seq) {
            entry.merge_earlier(earlier);
        }
        // The later probes of a run of absent execs: the same name in other directories.
        let name = split_name(&entry.filename).1.to_owned();
        let dirs = match line.absent_as {
            // A lost earlier run: no probe is read (the seqs of the rest would be misplaced).
            Some(run) => match runs.get(&run) {
                Some(earlier) => {
                    let keep = line.absent_keep.unwrap_or(earlier.len()).min(earlier.len());
                    let mut dirs = earlier[..keep].to_vec();
                    dirs.extend(line.absent);
                    dirs
                }
                None => Vec::new(),
            },
            None => line.absent,
        };
        if !dirs.is_empty() {
            runs.insert(seq, dirs.clone());
        }
        for (step, dir) in (1..).zip(&dirs) {
            let after = line.absent_ms.get(step as usize - 1).copied().unwrap_or(0);
            let probe = LedgerEntry {
                seq: seq + step,
                filename: format!("{dir}/{name}"),
                at_ms: entry.at_ms + after,
                ..entry.clone()
            };
            if resolved {
                damaged.remove(&probe.seq);
            } else {
                damaged.insert(probe.seq);
            }
            entries.insert(probe.seq, probe);
        }
        entries.insert(seq, entry);
    }
    for seq in damaged {
        if let Some(entry) = entries.get_mut(&seq) {
            entry.attestation = Attestation::Unreadable;
            entry.exe = None;
        }
    }
    entries.into_values().collect()
}

#[cfg(test)]
mod tests;
