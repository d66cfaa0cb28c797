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
//!   in the same write as the first entry naming it. The reader checks the digest.
//! - attestation: `{"seq", "attestation", "exe"}`, when the keeper settled it. A failed exec
//!   (`exec_failed`, nearly always a `PATH` probe) is instead named in the `failed` list of
//!   the next line written, whatever its kind (or of a line of its own when the writer ends):
//!   lost with that line, the entry reads as `unconfirmed`, which is no more evidence.
//! - exit: `{"seqs": […], "exit": …}`, the end of every entry of one process.
//!
//! Ledgers written before this format (every line a whole entry, a later line of the same
//! `seq` superseding an earlier one) read the same way. An entry whose text or `same_as`
//! cannot be resolved (its line was lost) is read with an empty argv as `unreadable`: never
//! evidence.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::io::Write;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{Attestation, LedgerEntry, LedgerExit};

/// An argv string this long or longer is stored once per file, by digest.
pub const LONG_TEXT: usize = 512;
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
}

fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
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
}

impl LedgerWriter {
    pub fn new(file: std::fs::File) -> Self {
        Self {
            file,
            texts: HashSet::new(),
            recent: VecDeque::new(),
            last: HashMap::new(),
            failed: Vec::new(),
        }
    }

    /// The newest entry this writer wrote for `pid` (the candidate for `same_as`).
    pub fn last_of(&self, pid: i32) -> Option<u64> {
        self.last.get(&pid).copied()
    }

    fn write(&mut self, bytes: &[u8]) {
        // One write per record (O_APPEND): a crash leaves whole lines behind.
        if self.file.write_all(bytes).is_err() {
            tracing::warn!("cannot write the exec ledger");
        }
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
        let same = previous.filter(|previous| {
            previous.pid == entry.pid
                && previous.argv_truncated == entry.argv_truncated
                && previous.cwd == entry.cwd
                && previous.argv == entry.argv
        });
        if let Some(previous) = same {
            line.same_as = Some(previous.seq);
        } else {
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
                    if self.recent.len() == BASES {
                        self.recent.pop_front();
                    }
                    self.recent.push_back((digest.clone(), arg.clone()));
                }
                argv.push(String::new());
                line.argv_texts.push((index, digest));
            }
            line.pid = Some(entry.pid);
            line.argv = Some(argv);
            line.argv_truncated = entry.argv_truncated;
            line.cwd = Some(entry.cwd.clone());
        }
        let line = self.finish_line(line);
        bytes.extend_from_slice(&line);
        self.write(&bytes);
        self.last.insert(entry.pid, entry.seq);
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
    /// Writes the failed execs still held.
    fn drop(&mut self) {
        if !self.failed.is_empty() {
            let bytes = self.finish_line(Line::default());
            self.write(&bytes);
        }
    }
}

/// Reads a ledger file's text (either format) into its entries, in `seq` order.
pub fn read(text: &str) -> Vec<LedgerEntry> {
    let mut entries: BTreeMap<u64, LedgerEntry> = BTreeMap::new();
    let mut texts: HashMap<String, String> = HashMap::new();
    let mut damaged: BTreeSet<u64> = BTreeSet::new();
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
        if line.pid.is_none() && line.same_as.is_none() {
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
        let (pid, argv, argv_truncated, cwd) = match line.same_as {
            Some(earlier) => match entries.get(&earlier) {
                Some(earlier) if !damaged.contains(&earlier.seq) => (
                    earlier.pid,
                    earlier.argv.clone(),
                    earlier.argv_truncated,
                    earlier.cwd.clone(),
                ),
                Some(earlier) => {
                    resolved = false;
                    (earlier.pid, Vec::new(), false, String::new())
                }
                None => {
                    resolved = false;
                    (0, Vec::new(), false, String::new())
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
                (
                    line.pid.unwrap_or_default(),
                    argv,
                    line.argv_truncated,
                    line.cwd.unwrap_or_default(),
                )
            }
        };
        let mut entry = LedgerEntry {
            seq,
            pid,
            filename: line.filename.unwrap_or_default(),
            argv,
            argv_truncated,
            cwd,
            at_ms: line.at_ms.unwrap_or_default(),
            exec_plausible: line.exec_plausible.unwrap_or(true),
            exit: line.exit,
            attestation: line.attestation.unwrap_or_default(),
            exe: line.exe,
        };
        if resolved {
            damaged.remove(&seq);
        } else {
            damaged.insert(seq);
            entry.argv.clear();
        }
        if let Some(earlier) = entries.get(&seq) {
            entry.merge_earlier(earlier);
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
