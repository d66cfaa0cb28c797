//! Which runs autocode trusts: the checks a run must pass before `status`, `resume`, `clean`, the
//! scenario harness or the dashboard act on it: its run state tagged by this user's key
//! (`run::integrity`) and of a known format, its directory not tracked by the workspace's git
//! (a run committed to a repository could be anyone's), and its worktree where its state says.
//! See `docs/run-lifecycle.md` ("Run state only autocode wrote").

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::integrity::{KEY_FILE, KeyError, key_dir, key_for_workspace, process_key};
use super::isolation::Isolation;
use super::state::RunState;
use super::workspace::{self, WorkspaceError};
use crate::store::StoreError;

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
mod tests {
    use super::*;

    #[test]
    fn git_is_skipped_only_where_it_could_find_nothing() {
        let root = tempfile::tempdir().unwrap();
        let none = BTreeMap::new();
        let deep = root.path().join("a/b");
        fs::create_dir_all(&deep).unwrap();
        // Outside any repository, nothing below it can be in one either (when the temporary
        // directory itself is inside a repository, both answers are `true`).
        assert_eq!(
            could_be_in_git_repository(&deep, &none),
            could_be_in_git_repository(root.path(), &none)
        );
        let git_dir = BTreeMap::from([("GIT_DIR".to_owned(), "/elsewhere".to_owned())]);
        assert!(could_be_in_git_repository(&deep, &git_dir));
        // A `.git` file (a linked worktree) two levels up.
        fs::write(root.path().join("a/.git"), "gitdir: /elsewhere\n").unwrap();
        assert!(could_be_in_git_repository(&deep, &none));
        // A bare repository's own directory.
        let bare = root.path().join("bare.git");
        fs::create_dir_all(bare.join("objects")).unwrap();
        fs::write(bare.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        assert!(could_be_in_git_repository(&bare.join("objects"), &none));
        // A path that cannot be resolved leaves the answer to git.
        assert!(could_be_in_git_repository(
            &root.path().join("missing"),
            &none
        ));
    }

    #[test]
    fn only_variables_that_move_the_index_send_the_read_to_git() {
        for key in [
            "GIT_DIR",
            "GIT_WORK_TREE",
            "GIT_COMMON_DIR",
            "GIT_INDEX_FILE",
            "GIT_CEILING_DIRECTORIES",
            "GIT_CONFIG_PARAMETERS",
            "GIT_CONFIG_GLOBAL",
            "GIT_TEST_SPLIT_INDEX",
        ] {
            assert!(changes_the_index_read(key), "{key}");
        }
        // Common in users' environments, and beside the point of which paths are tracked.
        for key in [
            "GIT_SSL_CAINFO",
            "GIT_AUTHOR_NAME",
            "GIT_EDITOR",
            "GIT_PAGER",
            "GIT_TERMINAL_PROMPT",
        ] {
            assert!(!changes_the_index_read(key), "{key}");
        }
        let index = BTreeMap::from([("GIT_INDEX_FILE".to_owned(), "/elsewhere".to_owned())]);
        let repo = tempfile::tempdir().unwrap();
        fs::create_dir_all(repo.path().join(".git")).unwrap();
        fs::write(repo.path().join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        assert_eq!(tracked_run_dirs_from_index(repo.path(), &index), None);
        let editor = BTreeMap::from([("GIT_EDITOR".to_owned(), "vi".to_owned())]);
        if !git_variable_set(&BTreeMap::new(), changes_the_index_read) {
            // No index yet: nothing tracked, read without git.
            assert_eq!(
                tracked_run_dirs_from_index(repo.path(), &editor),
                Some(BTreeSet::new())
            );
        }
    }
}
