//! Versions probed by earlier autocode processes (issue 29, item 1): a version probe is a
//! process start (for Codex and Claude Code a node start, a tenth of a second), paid by every
//! run's preflight. The answer is kept in the user's state directory (`version-probes.json`,
//! mode 0600, unreadable from every room) and given again only while every file the probe ran
//! is the same unchanged file: the executable the command resolves to and each file the probe's
//! family executed, read from its exec ledger (a wrapper such as Codex's `codex.js` execs the
//! native binary; replacing either one is another answer). A file is the same when its canonical
//! path, device, inode, size, mtime and ctime are (ctime cannot be set back from user space).
//! What the key names besides (argv, environment, working directory) is stored as a digest: the
//! environment holds secrets. A probe whose ledger cannot name every file that ran (an exec it
//! could not attest) is not kept.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::supervise::{Attestation, LedgerEntry};

/// Entries kept (the most recent ones).
const MAX_ENTRIES: usize = 64;

/// The file an executable is, as far as a cached answer about it goes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(super) struct ExecutableStamp {
    path: PathBuf,
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl ExecutableStamp {
    pub(super) fn of(path: &Path) -> Option<ExecutableStamp> {
        use std::os::unix::fs::MetadataExt;
        let path = std::fs::canonicalize(path).ok()?;
        let meta = std::fs::metadata(&path).ok()?;
        Some(ExecutableStamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
            path,
        })
    }

    /// Still the same file.
    fn holds(&self) -> bool {
        ExecutableStamp::of(&self.path).as_ref() == Some(self)
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct CacheFile {
    entries: Vec<CachedVersion>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct CachedVersion {
    /// sha256 of the question: argv, environment, working directory ([`question_digest`]).
    question: String,
    version: String,
    /// The executable the command resolved to, then every file the probe executed.
    ran: Vec<ExecutableStamp>,
}

/// The digest of a question: each list counted and each part length-prefixed, so no two
/// questions share one.
pub(super) fn question_digest<'a>(
    argv: &[String],
    env: impl ExactSizeIterator<Item = (&'a OsStr, &'a OsStr)>,
    cwd: &Path,
) -> String {
    let mut hash = Sha256::new();
    let mut part = |bytes: &[u8]| {
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(bytes);
    };
    part(&(argv.len() as u64).to_le_bytes());
    for arg in argv {
        part(arg.as_bytes());
    }
    part(&(env.len() as u64).to_le_bytes());
    for (name, value) in env {
        part(name.as_bytes());
        part(value.as_bytes());
    }
    part(cwd.as_os_str().as_bytes());
    format!("{:x}", hash.finalize())
}

/// The cache file of this process's user, if it has a home.
pub(super) fn default_file() -> Option<PathBuf> {
    crate::store::user_state_dir_from(|name| std::env::var_os(name))
        .map(|dir| dir.join("version-probes.json"))
}

fn read(file: &Path) -> CacheFile {
    crate::bounded_read::read_to_string(file, crate::bounded_read::RECORD_CAP)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

/// The version an earlier process probed for `question`, when `entry` (the executable the
/// command resolves to now) and every file that probe ran are unchanged.
pub(super) fn lookup(file: &Path, question: &str, entry: &ExecutableStamp) -> Option<String> {
    read(file)
        .entries
        .into_iter()
        .find(|cached| cached.question == question)
        .filter(|cached| cached.ran.first() == Some(entry) && cached.ran.iter().all(|s| s.holds()))
        .map(|cached| cached.version)
}

/// The files a probe's family executed, from its ledger: `None` when an exec is neither
/// attested (with the executable the kernel ran) nor known to have failed, or when there is no
/// ledger (a boundary that keeps none: the probe's own exec is always in one).
pub(super) fn executed(ledger: &[LedgerEntry]) -> Option<Vec<ExecutableStamp>> {
    if ledger.is_empty() {
        return None;
    }
    let mut ran = Vec::new();
    for exec in ledger {
        match exec.attestation {
            Attestation::ExecFailed => continue,
            Attestation::Attested => {}
            _ => return None,
        }
        let exe = exec.exe.as_deref()?;
        ran.push(ExecutableStamp::of(Path::new(exe))?);
        // A script's own file (its interpreter is `exe`).
        let named = Path::new(&exec.cwd).join(&exec.filename);
        ran.push(ExecutableStamp::of(&named)?);
    }
    Some(ran)
}

/// Keeps `version` for `question`: `entry` first, then the files the probe ran. Best effort: a
/// cache that cannot be written only means the next process probes again.
pub(super) fn remember(
    file: &Path,
    question: String,
    version: &str,
    entry: ExecutableStamp,
    executed: Vec<ExecutableStamp>,
) {
    let mut ran = vec![entry];
    for stamp in executed {
        if !ran.contains(&stamp) {
            ran.push(stamp);
        }
    }
    let mut cache = read(file);
    cache.entries.retain(|cached| cached.question != question);
    cache.entries.insert(
        0,
        CachedVersion {
            question,
            version: version.to_owned(),
            ran,
        },
    );
    cache.entries.truncate(MAX_ENTRIES);
    let Some(dir) = file.parent() else { return };
    // Created as the run-state key's directory is (0700), when this is its first file.
    if std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(dir)
        .is_err()
    {
        return;
    }
    if let Ok(bytes) = serde_json::to_vec(&cache)
        && let Err(e) = crate::store::write_private(file, &bytes)
    {
        tracing::debug!("the version cache is not written: {e}");
    }
}
