//! Run state only autocode wrote: the per-user tag key, tagged run records, and the checks a run
//! must pass before `status`, `resume`, `clean` or the scenario harness act on it.
//!
//! The key (32 random bytes) lives in `$XDG_STATE_HOME/autocode/run-state.key` (default
//! `~/.local/state/autocode/`), file mode 0600 in a 0700 directory, created on first use
//! (race-safe: a complete key file is hard-linked into place, so two processes creating it at
//! once both end up reading the one that won). It is never used from inside the workspace. The
//! tag format itself is `crate::store`'s ([`store::write_tagged_json`]); the tag's context is the
//! file's path below `.autocode/runs/`, so a record copied to another run or attempt does not
//! verify. See `docs/run-lifecycle.md` ("Run state only autocode wrote").

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::state::{Isolation, RunState};
use super::workspace::{self, WorkspaceError};
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
    if let Some(state) = var("XDG_STATE_HOME").map(PathBuf::from)
        && state.is_absolute()
    {
        return Ok(state.join("autocode"));
    }
    match var("HOME").map(PathBuf::from) {
        Some(home) if home.is_absolute() => Ok(home.join(".local/state/autocode")),
        _ => Err(KeyError::NoHome),
    }
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

/// Reads the run state of `dir` (`run.json` and the attempt log it commits to), tag and format
/// version checked (no placement checks: see [`verify_run`]).
pub fn read_run_state(dir: &Path) -> Result<RunState, StoreError> {
    let key = process_key().map_err(|e| StoreError::NoKey {
        path: super::checkpoint::state_path(dir),
        reason: e.to_string(),
    })?;
    super::checkpoint::read(dir, key)
}

/// Why a run is refused.
#[derive(Debug, thiserror::Error)]
pub enum RunIntegrityError {
    #[error("run {run}: its run state was made by an older autocode (no integrity tag in {path})")]
    OlderAutocode { run: String, path: PathBuf },
    #[error(
        "run {run}: its run state was made by an older autocode (format {found}; this autocode reads format {expected})"
    )]
    OlderFormat {
        run: String,
        found: u64,
        expected: u64,
    },
    #[error(
        "run {run}: its run state was made by a newer autocode (format {found}; this autocode reads format {expected})"
    )]
    NewerFormat {
        run: String,
        found: u64,
        expected: u64,
    },
    #[error(
        "run {run}: {path} does not verify: it was changed by something other than autocode (or made with another user's key)"
    )]
    Tampered { run: String, path: PathBuf },
    #[error("run {run}: {path} is corrupt, not a run state autocode wrote ({detail})")]
    Corrupt {
        run: String,
        path: PathBuf,
        detail: String,
    },
    #[error(
        "run {run}: {path} does not verify under the run-state key {key}, which was made after this run's last checkpoint: the key changed, so every run made with the old key is refused"
    )]
    KeyChanged {
        run: String,
        path: PathBuf,
        key: PathBuf,
    },
    #[error("run {run}: the run state names run {recorded}, not the directory it is in")]
    IdMismatch { run: String, recorded: String },
    #[error("run {run}: the run state belongs to workspace {recorded}, not {workspace}")]
    ForeignWorkspace {
        run: String,
        recorded: PathBuf,
        workspace: PathBuf,
    },
    #[error(
        "run {run}: its work tree {work_tree} is neither the workspace nor .autocode/worktrees/{run}"
    )]
    ForeignWorkTree { run: String, work_tree: PathBuf },
    #[error("run {run}: its run directory {dir} is tracked by git (it came with the repository)")]
    Tracked { run: String, dir: PathBuf },
    #[error("run {run}: cannot read its run state")]
    Unreadable {
        run: String,
        #[source]
        source: StoreError,
    },
    #[error("run {run}: the run-state key is unavailable")]
    Key {
        run: String,
        #[source]
        source: KeyError,
    },
    #[error("run {run}: cannot ask git whether its run directory is tracked")]
    Git {
        run: String,
        #[source]
        source: WorkspaceError,
    },
}

impl RunIntegrityError {
    /// What the user can do about it.
    pub fn hint(&self) -> String {
        match self {
            Self::OlderAutocode { .. } => "finish or inspect it with the autocode that made it, or start a new run; this autocode acts only on runs it can verify".into(),
            Self::OlderFormat { .. } => "finish it with that version of autocode or start a new run".into(),
            Self::NewerFormat { .. } => "finish it with the autocode that made it (or a newer one), or start a new run".into(),
            Self::Corrupt { run, .. } => format!("the run cannot be resumed: look at .autocode/runs/{run}/ (its branch autocode/{run} keeps the accepted stages: `git log autocode/{run}`), then remove that directory and start a new run"),
            Self::KeyChanged { key, .. } => format!("put the old key back at {} if you have a copy (a backup of that file); without it these runs cannot be resumed, but their branches autocode/<run-id> keep the accepted stages", key.display()),
            Self::Tampered { .. } | Self::IdMismatch { .. } => "autocode does not act on run state it did not write; start a new run (the run directory is left as it is for inspection)".into(),
            Self::ForeignWorkspace { .. } | Self::ForeignWorkTree { .. } => "a run works only in its own workspace or its own worktree; start a new run here".into(),
            Self::Tracked { .. } => "run directories are never taken from a repository: untrack .autocode/ (git rm -r --cached .autocode) and start a new run".into(),
            Self::Unreadable { .. } => "the run directory is damaged or from another format; start a new run".into(),
            Self::Key { .. } => "the key lives in $XDG_STATE_HOME/autocode/ (default ~/.local/state/autocode/), mode 0600 in a 0700 directory, outside any workspace".into(),
            Self::Git { .. } => "check that git works in the workspace".into(),
        }
    }
}

/// The variables that point git at a repository or change where it looks (git(1),
/// "Environment Variables"); the others (GIT_SSL_CAINFO, GIT_AUTHOR_NAME…) do not.
fn changes_discovery(key: &str) -> bool {
    matches!(
        key,
        "GIT_DIR" | "GIT_WORK_TREE" | "GIT_COMMON_DIR" | "GIT_DISCOVERY_ACROSS_FILESYSTEM"
    ) || key.starts_with("GIT_CONFIG")
}

/// The variables that change which index git reads for a directory, or whether it finds one:
/// those of [`changes_discovery`], the index file, the ceiling (git stops sooner than the
/// reader would), and git's test knobs.
fn changes_the_index_read(key: &str) -> bool {
    changes_discovery(key)
        || matches!(key, "GIT_INDEX_FILE" | "GIT_CEILING_DIRECTORIES")
        || key.starts_with("GIT_TEST_")
}

/// Whether `env` or this process's environment sets a variable `matters` says counts (a name
/// that is not UTF-8 always counts).
fn git_variable_set(env: &BTreeMap<String, String>, matters: fn(&str) -> bool) -> bool {
    env.keys().any(|key| matters(key))
        || std::env::vars_os().any(|(key, _)| key.to_str().is_none_or(matters))
}

/// Whether git could find a repository for `dir` — `false` only when it certainly cannot, so
/// the caller may skip starting git (a supervised launch costs milliseconds, most of `status`'s
/// time in a plain directory). Git finds a repository through `GIT_DIR` (or another variable
/// that changes discovery, or configuration from the environment), a `.git` entry in `dir` or
/// one of its ancestors, or an ancestor that is itself a repository (a bare one holds `HEAD`).
/// Any of these, or an entry that cannot be looked at, answers `true` and git decides as
/// before. `GIT_CEILING_DIRECTORIES` and file-system boundaries only stop git sooner, so
/// ignoring them errs toward `true`.
pub fn could_be_in_git_repository(dir: &Path, env: &BTreeMap<String, String>) -> bool {
    if git_variable_set(env, changes_discovery) {
        return true;
    }
    let Ok(dir) = fs::canonicalize(dir) else {
        return true;
    };
    let present = |path: PathBuf| match fs::symlink_metadata(path) {
        Ok(_) => true,
        Err(e) => e.kind() != io::ErrorKind::NotFound,
    };
    dir.ancestors()
        .any(|ancestor| present(ancestor.join(".git")) || present(ancestor.join("HEAD")))
}

/// [`tracked_run_dirs`] without git: a plain repository's index read in place (`None`: git
/// must be asked — a variable that changes which index git reads is set, or the repository is
/// not a plain case).
pub fn tracked_run_dirs_from_index(
    workspace: &Path,
    env: &BTreeMap<String, String>,
) -> Option<BTreeSet<String>> {
    if git_variable_set(env, changes_the_index_read) {
        return None;
    }
    match crate::gitindex::tracked_under(workspace) {
        crate::gitindex::Answer::Tracked(paths) => {
            Some(run_names(paths.iter().map(String::as_str)))
        }
        crate::gitindex::Answer::AskGit => None,
    }
}

/// Whether answering [`tracked_run_dirs`] for `workspace` starts git (a supervised launch).
pub fn tracking_needs_git(workspace: &Path, env: &BTreeMap<String, String>) -> bool {
    could_be_in_git_repository(workspace, env)
        && tracked_run_dirs_from_index(workspace, env).is_none()
}

/// The run directory names under `.autocode/runs/` that git tracks in `workspace` (empty when
/// the workspace is not in a git work tree).
pub async fn tracked_run_dirs(
    workspace: &Path,
    env: &BTreeMap<String, String>,
) -> Result<BTreeSet<String>, WorkspaceError> {
    if !could_be_in_git_repository(workspace, env) {
        return Ok(BTreeSet::new());
    }
    if let Some(names) = tracked_run_dirs_from_index(workspace, env) {
        return Ok(names);
    }
    // One git launch where there is a work tree; outside one `ls-files` fails, and only then
    // does `rev-parse` tell "not a repository" (nothing tracked) from a failing git.
    let listed =
        match workspace::git(workspace, &["ls-files", "-z", "--", ".autocode/runs"], env).await {
            Ok(listed) => listed,
            Err(error) => {
                return if workspace::git(workspace, &["rev-parse", "--is-inside-work-tree"], env)
                    .await
                    .is_err()
                {
                    Ok(BTreeSet::new())
                } else {
                    Err(error)
                };
            }
        };
    Ok(run_names(listed.split('\0')))
}

/// The run directory names of tracked paths (relative to the workspace).
fn run_names<'a>(paths: impl Iterator<Item = &'a str>) -> BTreeSet<String> {
    paths
        .filter_map(|p| p.strip_prefix(".autocode/runs/"))
        .filter_map(|p| p.split('/').next())
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect()
}

/// A run state without a tag: an older autocode's JSON, or bytes that are not JSON at all.
fn untagged(run: &str, path: PathBuf) -> RunIntegrityError {
    let bytes = crate::bounded_read::read(&path, crate::bounded_read::RECORD_CAP);
    let parsed = bytes
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).map_err(|e| e.to_string()));
    match parsed {
        Ok(serde_json::Value::Object(_)) => RunIntegrityError::OlderAutocode {
            run: run.to_owned(),
            path,
        },
        Ok(_) => RunIntegrityError::Corrupt {
            run: run.to_owned(),
            path,
            detail: "JSON, but not an object".into(),
        },
        Err(detail) => RunIntegrityError::Corrupt {
            run: run.to_owned(),
            path,
            detail,
        },
    }
}

/// A run state whose tag does not verify: changed by something else, or the key changed since
/// it was written (the key file is newer than the run state).
fn mismatched(run: &str, path: PathBuf) -> RunIntegrityError {
    let modified = |p: &Path| fs::metadata(p).and_then(|m| m.modified()).ok();
    let key = key_dir().map(|dir| dir.join(KEY_FILE));
    if let Ok(key) = key
        && let (Some(key_made), Some(written)) = (modified(&key), modified(&path))
        && key_made > written
    {
        return RunIntegrityError::KeyChanged {
            run: run.to_owned(),
            path,
            key,
        };
    }
    RunIntegrityError::Tampered {
        run: run.to_owned(),
        path,
    }
}

/// Checks everything but git: the tag, the id, the workspace and the work tree.
pub fn verify_untracked(workspace: &Path, dir: &Path) -> Result<RunState, RunIntegrityError> {
    let run = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    key_for_workspace(workspace).map_err(|source| RunIntegrityError::Key {
        run: run.clone(),
        source,
    })?;
    let state = read_run_state(dir).map_err(|e| match e {
        StoreError::Untagged { path } => untagged(&run, path),
        StoreError::TagMismatch { path } => mismatched(&run, path),
        StoreError::Version {
            found, expected, ..
        } if found < expected => RunIntegrityError::OlderFormat {
            run: run.clone(),
            found,
            expected,
        },
        StoreError::Version {
            found, expected, ..
        } => RunIntegrityError::NewerFormat {
            run: run.clone(),
            found,
            expected,
        },
        other => RunIntegrityError::Unreadable {
            run: run.clone(),
            source: other,
        },
    })?;
    if state.run_id.as_str() != run {
        return Err(RunIntegrityError::IdMismatch {
            run,
            recorded: state.run_id.to_string(),
        });
    }
    let same = |a: &Path, b: &Path| a == b || fs::canonicalize(a).ok() == fs::canonicalize(b).ok();
    if !same(&state.workspace, workspace) {
        return Err(RunIntegrityError::ForeignWorkspace {
            run,
            recorded: state.workspace.clone(),
            workspace: workspace.to_owned(),
        });
    }
    let (own_worktree, _) = workspace::worktree_location(workspace, &state.run_id);
    let placed = match &state.isolation {
        Isolation::InPlace => state.work_tree == workspace,
        Isolation::Worktree { path, .. } => {
            *path == own_worktree && super::isolation::within_worktree(&state.work_tree, path)
        }
    };
    if !placed {
        return Err(RunIntegrityError::ForeignWorkTree {
            run,
            work_tree: state.work_tree.clone(),
        });
    }
    Ok(state)
}

/// Everything a run must pass before autocode acts on it: not tracked by git, a tag that
/// verifies, its own id, its own workspace and work tree. `workspace` is canonical.
pub async fn verify_run(
    workspace: &Path,
    dir: &Path,
    env: &BTreeMap<String, String>,
) -> Result<RunState, RunIntegrityError> {
    let run = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tracked =
        tracked_run_dirs(workspace, env)
            .await
            .map_err(|source| RunIntegrityError::Git {
                run: run.clone(),
                source,
            })?;
    if tracked.contains(&run) {
        return Err(RunIntegrityError::Tracked {
            run,
            dir: dir.to_owned(),
        });
    }
    verify_untracked(workspace, dir)
}

#[cfg(test)]
#[path = "integrity_tests.rs"]
mod tests;
