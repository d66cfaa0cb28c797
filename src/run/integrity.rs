//! Records only autocode wrote: the per-user tag key and tagged run records (the checks a whole
//! run must pass before anything acts on it are `run::trust`'s).
//!
//! The key (32 random bytes) lives in `$XDG_STATE_HOME/autocode/run-state.key` (default
//! `~/.local/state/autocode/`), file mode 0600 in a 0700 directory, created on first use
//! (race-safe: a complete key file is hard-linked into place, so two processes creating it at
//! once both end up reading the one that won). It is never used from inside the workspace. The
//! tag format itself is `crate::store`'s ([`store::write_tagged_json`]); the tag's context is the
//! file's path below `.autocode/runs/`, so a record copied to another run or attempt does not
//! verify. See `docs/run-lifecycle.md` ("Run state only autocode wrote").

use std::ffi::OsString;
use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::store::{self, Durability, StoreError, TagKey};

/// The key file's name inside the key directory.
pub const KEY_FILE: &str = "run-state.key";

/// Why the key cannot be had.
#[derive(Debug, Clone, thiserror::Error)]
pub enum KeyError {
    #[error("neither XDG_STATE_HOME (absolute) nor HOME is set: nowhere to keep the run-state key")]
    NoHome,
    #[error("{path}: {detail}")]
    Io { path: PathBuf, detail: String },
    #[error("{path} is not owned by this user")]
    NotOwned { path: PathBuf },
    #[error("{path} is readable or writable by others (mode {mode:o}); it must be 0600")]
    Exposed { path: PathBuf, mode: u32 },
    #[error("{path} is not a {expected} (a symlink or something else is in its place)")]
    WrongKind {
        path: PathBuf,
        expected: &'static str,
    },
    #[error("{path} holds {len} bytes, not a {expected}-byte key")]
    WrongLength {
        path: PathBuf,
        len: u64,
        expected: usize,
    },
    #[error("the run-state key directory {key_dir} is inside the workspace {workspace}")]
    InsideWorkspace {
        key_dir: PathBuf,
        workspace: PathBuf,
    },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> KeyError + '_ {
    move |e| KeyError::Io {
        path: path.to_owned(),
        detail: e.to_string(),
    }
}

/// `$XDG_STATE_HOME/autocode` when XDG_STATE_HOME is absolute, else `$HOME/.local/state/autocode`.
pub fn key_dir_from(var: impl Fn(&str) -> Option<OsString>) -> Result<PathBuf, KeyError> {
    crate::store::user_state_dir_from(var).ok_or(KeyError::NoHome)
}

/// The key directory of this process's environment.
pub fn key_dir() -> Result<PathBuf, KeyError> {
    key_dir_from(|name| std::env::var_os(name))
}

/// Creates `dir` (0700) if needed and makes sure it is ours and closed to others.
fn prepare_dir(dir: &Path) -> Result<(), KeyError> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io_err(dir))?;
    let meta = fs::symlink_metadata(dir).map_err(io_err(dir))?;
    if !meta.is_dir() {
        return Err(KeyError::WrongKind {
            path: dir.to_owned(),
            expected: "directory",
        });
    }
    if meta.uid() != nix::unistd::geteuid().as_raw() {
        return Err(KeyError::NotOwned {
            path: dir.to_owned(),
        });
    }
    if meta.mode() & 0o077 != 0 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(io_err(dir))?;
    }
    Ok(())
}

/// Reads an existing key file; `Ok(None)` when there is none yet.
fn read_key(path: &Path) -> Result<Option<TagKey>, KeyError> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(path)(e)),
    };
    if !meta.is_file() {
        return Err(KeyError::WrongKind {
            path: path.to_owned(),
            expected: "regular file",
        });
    }
    if meta.uid() != nix::unistd::geteuid().as_raw() {
        return Err(KeyError::NotOwned {
            path: path.to_owned(),
        });
    }
    if meta.mode() & 0o077 != 0 {
        return Err(KeyError::Exposed {
            path: path.to_owned(),
            mode: meta.mode() & 0o7777,
        });
    }
    if meta.len() != TagKey::LEN as u64 {
        return Err(KeyError::WrongLength {
            path: path.to_owned(),
            len: meta.len(),
            expected: TagKey::LEN,
        });
    }
    let mut bytes = [0u8; TagKey::LEN];
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(io_err(path))?;
    Ok(Some(TagKey::from_bytes(bytes)))
}

/// The key in `dir`, created (with `dir`) when absent. Concurrent creators end with one key: each
/// writes a complete candidate to its own temporary file and hard-links it to the key's name; the
/// link fails for all but the first, and everyone reads what is there.
pub fn load_or_create_key(dir: &Path) -> Result<TagKey, KeyError> {
    prepare_dir(dir)?;
    let path = dir.join(KEY_FILE);
    if let Some(key) = read_key(&path)? {
        return Ok(key);
    }
    let mut bytes = [0u8; TagKey::LEN];
    fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(io_err(Path::new("/dev/urandom")))?;
    let mut nonce = [0u8; 8];
    fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut nonce))
        .map_err(io_err(Path::new("/dev/urandom")))?;
    let temp = dir.join(format!(
        ".{KEY_FILE}.{}.{}.partial",
        std::process::id(),
        u64::from_le_bytes(nonce)
    ));
    let written = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)?;
        file.write_all(&bytes)?;
        file.sync_all()?;
        match fs::hard_link(&temp, &path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        fs::File::open(dir)?.sync_all()
    })();
    let _ = fs::remove_file(&temp);
    written.map_err(io_err(&path))?;
    read_key(&path)?.ok_or_else(|| KeyError::Io {
        path: path.clone(),
        detail: "the key vanished while it was created".into(),
    })
}

static PROCESS_KEY: OnceLock<Result<TagKey, KeyError>> = OnceLock::new();

/// This process's key (from [`key_dir`]), loaded or created once.
pub fn process_key() -> Result<&'static TagKey, KeyError> {
    PROCESS_KEY
        .get_or_init(|| key_dir().and_then(|dir| load_or_create_key(&dir)))
        .as_ref()
        .map_err(Clone::clone)
}

/// The key, refused when its directory is (or would be) inside `workspace` (a workspace is not a
/// safe place: agents write there and repositories carry it). Checked before the key is created.
pub fn key_for_workspace(workspace: &Path) -> Result<&'static TagKey, KeyError> {
    let dir = resolved(&key_dir()?);
    let ws = fs::canonicalize(workspace).map_err(io_err(workspace))?;
    if dir.starts_with(&ws) {
        return Err(KeyError::InsideWorkspace {
            key_dir: dir,
            workspace: ws,
        });
    }
    process_key()
}

/// `path` with its deepest existing ancestor canonicalized (the rest may not exist yet).
fn resolved(path: &Path) -> PathBuf {
    let mut missing = Vec::new();
    let mut existing = path;
    loop {
        if let Ok(canonical) = fs::canonicalize(existing) {
            return missing
                .iter()
                .rev()
                .fold(canonical, |acc: PathBuf, part| acc.join(part));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name.to_owned());
                existing = parent;
            }
            _ => return path.to_owned(),
        }
    }
}

/// The tag context of a record: its path below `.autocode/runs/` (`<run-id>/run.json`,
/// `<run-id>/stages/004-builder-1/report.json`), or its file name elsewhere.
pub fn context_for(path: &Path) -> String {
    let parts: Vec<&std::ffi::OsStr> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect();
    let start = parts
        .windows(2)
        .rposition(|w| w[0] == ".autocode" && w[1] == "runs")
        .map(|i| i + 2)
        .unwrap_or(parts.len().saturating_sub(1));
    parts[start..]
        .iter()
        .map(|p| p.to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// Writes a run record with its tag, in one atomic write, durable now.
pub fn write_record<T: Serialize>(path: &Path, value: &T) -> Result<(), StoreError> {
    write_record_as(path, value, Durability::Now)
}

/// Writes a stage record with its tag, in one atomic write made durable by the run's next
/// checkpoint (`run::checkpoint::commit`), before any state that refers to it.
pub fn write_stage_record<T: Serialize>(path: &Path, value: &T) -> Result<(), StoreError> {
    write_record_as(path, value, Durability::Deferred)
}

fn write_record_as<T: Serialize>(
    path: &Path,
    value: &T,
    durability: Durability,
) -> Result<(), StoreError> {
    let key = process_key().map_err(|e| StoreError::NoKey {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    store::write_tagged_json_as(path, value, key, &context_for(path), durability)
}

/// Reads a run record, refusing it unless its tag verifies. A receipt the keeper wrote after
/// autocode died carries no tag and is refused here (`StoreError::Untagged`): callers judge such
/// an attempt as interrupted rather than trusting it.
pub fn read_record<T: DeserializeOwned>(path: &Path) -> Result<T, StoreError> {
    let key = process_key().map_err(|e| StoreError::NoKey {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    store::read_tagged_json(path, key, &context_for(path))
}

#[cfg(test)]
#[path = "integrity_tests.rs"]
mod tests;
