//! The run's result as commits on its branch: after every accepted builder stage autocode
//! commits the worktree's changes on `autocode/<run-id>` itself ([`commit_stage`]); at COMPLETE
//! it summarizes the branch against the user's checkout ([`run_result`]); `autocode apply`
//! merges or squashes it into the user's current branch ([`merge_run_branch`]).
//!
//! autocode runs git outside the agents' room, never with the repository's hooks, fsmonitor or
//! signing (`workspace::SAFE_GIT_ARGS` plus [`COMMIT_ARGS`]). The identity is the user's when
//! git has one configured (`user.name` and `user.email`), otherwise `autocode
//! <autocode@localhost>`; `GIT_AUTHOR_*`/`GIT_COMMITTER_*` in the environment win as in git.
//! What is committed: tracked and untracked-but-not-ignored files, never `.autocode/` nor an
//! environment's directories (`crate::gittree::ENVIRONMENT_DIRS`: `.venv/`, `__pycache__/`).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::isolation::Isolation;
use super::state::RunState;
use super::workspace::{WorkspaceError, git};

/// Options every autocode commit or merge runs with: no signing (no agent, no prompt).
pub const COMMIT_ARGS: [&str; 2] = ["-c", "commit.gpgsign=false"];

/// The identity autocode commits with when git has none configured.
pub const FALLBACK_NAME: &str = "autocode";
pub const FALLBACK_EMAIL: &str = "autocode@localhost";

/// The pathspec that keeps autocode's own directory out of every commit, at any depth.
pub(crate) const NOT_AUTOCODE: &str = ":(glob,exclude)**/.autocode/**";

/// Pathspecs that leave an environment's directories (`crate::gittree::ENVIRONMENT_DIRS`: a
/// virtual environment, bytecode, test caches) out of a commit, at any depth.
fn environment_exclusions() -> Vec<String> {
    crate::gittree::ENVIRONMENT_DIRS
        .iter()
        .map(|dir| format!(":(glob,exclude)**/{dir}/**"))
        .collect()
}

/// `-c user.name=… -c user.email=…` when the repository (or the user's config) lacks either.
async fn identity_args(dir: &Path, env: &BTreeMap<String, String>) -> Vec<String> {
    let configured = match identity_in_place(dir, env) {
        Some(configured) => configured,
        None => {
            // One launch for both keys; git lists every value in precedence order, the last
            // one wins.
            let listed = git(
                dir,
                &["config", "--get-regexp", r"^user\.(name|email)$"],
                env,
            )
            .await
            .unwrap_or_default();
            identity_configured(&listed)
        }
    };
    if configured {
        return Vec::new();
    }
    vec![
        "-c".into(),
        format!("user.name={FALLBACK_NAME}"),
        "-c".into(),
        format!("user.email={FALLBACK_EMAIL}"),
    ]
}

/// Whether git's config sets both `user.name` and `user.email` to something, read in place
/// (`crate::gitconfig`) where the repository and its config files are git's plain case.
fn identity_in_place(dir: &Path, env: &BTreeMap<String, String>) -> Option<bool> {
    let layout = crate::gitrefs::layout(dir, env)?;
    let files = crate::gitconfig::files(env, Some(&layout.common_dir.join("config")))?;
    let entries = crate::gitconfig::read(&files)?;
    let set = |key| {
        crate::gitconfig::last(&entries, key)
            .and_then(|entry| entry.value.as_deref())
            .is_some_and(|value| !value.trim().is_empty())
    };
    Some(set("user.name") && set("user.email"))
}

/// Whether `git config --get-regexp` output sets both `user.name` and `user.email` to something
/// (each key's last value, as git reads it).
fn identity_configured(listed: &str) -> bool {
    let mut name = false;
    let mut email = false;
    for line in listed.lines() {
        let (key, value) = line.split_once(' ').unwrap_or((line, ""));
        let set = !value.trim().is_empty();
        match key {
            "user.name" => name = set,
            "user.email" => email = set,
            _ => {}
        }
    }
    name && email
}

/// Runs `git <COMMIT_ARGS> <identity> args…` in `dir`.
async fn git_committing(
    dir: &Path,
    args: &[&str],
    env: &BTreeMap<String, String>,
) -> Result<String, WorkspaceError> {
    let identity = identity_args(dir, env).await;
    let mut all: Vec<&str> = COMMIT_ARGS.to_vec();
    all.extend(identity.iter().map(String::as_str));
    all.extend_from_slice(args);
    git(dir, &all, env).await
}

/// The commit message of an accepted builder stage.
pub fn stage_message(state: &RunState, milestone: Option<usize>, attempt_dir: &str) -> String {
    let milestones = super::flow::milestones(state);
    let title = milestone
        .and_then(|m| milestones.get(m))
        .and_then(|m| m.get("title").and_then(|t| t.as_str()))
        .map(|t| t.lines().next().unwrap_or_default().trim().to_owned())
        .unwrap_or_default();
    let number = milestone.map(|m| m + 1).unwrap_or(1);
    let head = if title.is_empty() {
        format!("autocode: milestone {number} (stage {attempt_dir})")
    } else {
        format!("autocode: milestone {number} {title:?} (stage {attempt_dir})")
    };
    format!(
        "{head}\n\nRun {} ({}).\nObjective: {}\n",
        state.run_id,
        state.provider,
        state.objective.lines().next().unwrap_or_default()
    )
}

/// Commits every change in the worktree at `root` (tracked, and untracked not ignored; never
/// `.autocode/`) with `message`. `Ok(None)` when nothing changed: no empty commit.
pub async fn commit_stage(
    root: &Path,
    message: &str,
    env: &BTreeMap<String, String>,
) -> Result<Option<String>, WorkspaceError> {
    let environments = environment_exclusions();
    let mut add = vec!["add", "--all", "--", ".", NOT_AUTOCODE];
    add.extend(environments.iter().map(String::as_str));
    git(root, &add, env).await?;
    // Anything under .autocode/ that an earlier index held stays out too. Compared in process
    // where the repository is git's plain case at the work tree's top, else by git.
    let in_process = crate::gitrefs::layout(root, env)
        .filter(|layout| std::fs::canonicalize(root).is_ok_and(|top| top == layout.top))
        .and_then(|layout| crate::gittree::history::index_differs_from_head(&layout));
    let staged = match in_process {
        Some(differs) => differs,
        None => {
            let listed = git(
                root,
                &[
                    "diff",
                    "--cached",
                    "--name-only",
                    "-z",
                    "--",
                    ".",
                    NOT_AUTOCODE,
                ],
                env,
            )
            .await?;
            !listed.trim_matches('\0').is_empty()
        }
    };
    if !staged {
        return Ok(None);
    }
    git_committing(
        root,
        &[
            "commit",
            "--quiet",
            "--no-verify",
            "--no-gpg-sign",
            "-m",
            message,
        ],
        env,
    )
    .await?;
    if let Some(Some(head)) =
        crate::gitrefs::layout(root, env).and_then(|layout| crate::gitrefs::head(&layout))
    {
        return Ok(Some(head));
    }
    let head = git(root, &["rev-parse", "HEAD"], env).await?;
    Ok(Some(head.trim().to_owned()))
}

/// Commits an accepted builder stage of a worktree run; `Ok(None)` for in-place runs and
/// stages that changed nothing.
pub async fn commit_builder_stage(
    state: &RunState,
    milestone: Option<usize>,
    attempt_dir: &str,
    env: &BTreeMap<String, String>,
) -> Result<Option<String>, WorkspaceError> {
    let Isolation::Worktree { path, .. } = &state.isolation else {
        return Ok(None);
    };
    commit_stage(path, &stage_message(state, milestone, attempt_dir), env).await
}

/// Commits the last accepted builder attempt of a worktree run and records the commit in its
/// attempt record (`AttemptRecord::commit`). `Ok(None)`: in place, or nothing changed.
pub async fn record_builder_commit(
    state: &mut RunState,
    milestone: Option<usize>,
    env: &BTreeMap<String, String>,
) -> Result<Option<String>, WorkspaceError> {
    let Some(index) = state.attempts.iter().rposition(|a| {
        a.role == crate::role::Role::Builder && a.status == super::state::AttemptStatus::Accepted
    }) else {
        return Ok(None);
    };
    let dir = state.attempts[index].dir.clone();
    let commit = commit_builder_stage(state, milestone, &dir, env).await?;
    state.attempts[index].commit = commit.clone();
    Ok(commit)
}

/// Where a completed worktree run's result is and how to take it (`--json` and COMPLETE).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunResult {
    /// `autocode/<run-id>`.
    pub branch: String,
    /// The commit the branch is compared with: its merge base with the user's HEAD.
    pub base: String,
    /// Commits on the branch that the user's HEAD does not have.
    pub commits: u64,
    /// `git diff --stat <base>..<branch>`.
    pub diff_stat: String,
    /// The commands that take the result into the user's current branch.
    pub take: Vec<String>,
}

/// The result of a worktree run, compared with the user's current HEAD in `workspace`.
pub async fn run_result(
    workspace: &Path,
    state: &RunState,
    env: &BTreeMap<String, String>,
) -> Result<Option<RunResult>, WorkspaceError> {
    let Isolation::Worktree { branch, .. } = &state.isolation else {
        return Ok(None);
    };
    // The commit walk in process where the repository is git's plain case, else git.
    let known = crate::gitrefs::layout(workspace, env)
        .and_then(|layout| crate::gittree::history::branch_against_head(&layout, branch, env));
    let (base, commits) = match known {
        Some(history) => (history.base, history.commits),
        None => {
            let base = git(workspace, &["merge-base", "HEAD", branch], env).await?;
            let base = base.trim().to_owned();
            let range = format!("{base}..{branch}");
            let commits = git(workspace, &["rev-list", "--count", &range], env).await?;
            (base, commits.trim().parse().unwrap_or(0))
        }
    };
    let range = format!("{base}..{branch}");
    let diff_stat = git(workspace, &["diff", "--stat", &range], env).await?;
    Ok(Some(RunResult {
        branch: branch.clone(),
        commits,
        diff_stat: diff_stat.trim_end().to_owned(),
        take: vec![
            format!("autocode apply {}", state.run_id),
            format!("autocode apply {} --squash", state.run_id),
            format!("git merge {branch}"),
        ],
        base,
    }))
}

/// How `autocode apply` takes the branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MergeMode {
    /// `git merge`: the run's commits join the user's history (fast-forward when possible).
    Merge,
    /// `git merge --squash` and one commit.
    Squash,
}

/// What `apply` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "applied", rename_all = "snake_case")]
pub enum MergeOutcome {
    /// The user's HEAD already contains the branch.
    AlreadyMerged,
    /// An earlier `apply --squash` took the branch as `commit`, which HEAD contains.
    AlreadySquashed { commit: String },
    /// The branch was merged or squashed; `commit` is the user's new HEAD.
    Merged { commit: String },
    /// The merge conflicted in `files` and was aborted: the tree is as it was.
    Conflict { files: Vec<String> },
}

/// Merges (or squashes) `branch` into the current branch of the clean checkout `workspace`.
/// A conflict is aborted and reported, leaving the tree as it was.
pub async fn merge_run_branch(
    workspace: &Path,
    branch: &str,
    mode: MergeMode,
    message: &str,
    env: &BTreeMap<String, String>,
) -> Result<MergeOutcome, WorkspaceError> {
    let contained = git(
        workspace,
        &["rev-list", "--count", &format!("HEAD..{branch}")],
        env,
    )
    .await?;
    if contained.trim() == "0" {
        return Ok(MergeOutcome::AlreadyMerged);
    }
    let merged = match mode {
        MergeMode::Merge => {
            git_committing(
                workspace,
                &[
                    "merge",
                    "--quiet",
                    "--no-verify",
                    "--no-gpg-sign",
                    "--no-edit",
                    "--no-overwrite-ignore",
                    "-m",
                    message,
                    branch,
                ],
                env,
            )
            .await
        }
        MergeMode::Squash => {
            match git_committing(
                workspace,
                &[
                    "merge",
                    "--quiet",
                    "--squash",
                    "--no-overwrite-ignore",
                    branch,
                ],
                env,
            )
            .await
            {
                Ok(_) => {
                    git_committing(
                        workspace,
                        &[
                            "commit",
                            "--quiet",
                            "--no-verify",
                            "--no-gpg-sign",
                            "-m",
                            message,
                        ],
                        env,
                    )
                    .await
                }
                Err(e) => Err(e),
            }
        }
    };
    match merged {
        Ok(_) => {
            let head = git(workspace, &["rev-parse", "HEAD"], env).await?;
            Ok(MergeOutcome::Merged {
                commit: head.trim().to_owned(),
            })
        }
        Err(error) => {
            let conflicted =
                git(workspace, &["diff", "--name-only", "--diff-filter=U"], env).await?;
            let files: Vec<String> = conflicted.lines().map(str::to_owned).collect();
            // The tree was clean before: `reset --merge` puts it back exactly (a squash leaves
            // no MERGE_HEAD for `merge --abort`).
            git(workspace, &["reset", "--quiet", "--merge"], env).await?;
            if files.is_empty() {
                Err(error)
            } else {
                Ok(MergeOutcome::Conflict { files })
            }
        }
    }
}

/// The user's files that merging `branch` into `HEAD` of the clean checkout `workspace` would
/// replace: paths the branch added or changed since the merge base that `HEAD` does not track
/// and that exist on disk (untracked or ignored: a `.env` kept out of git), or whose parent
/// directory exists as something else. Relative to the repository's top level, sorted. `apply`
/// refuses while any exist (`git merge` would silently replace an ignored file).
pub async fn files_merge_would_overwrite(
    workspace: &Path,
    branch: &str,
    env: &BTreeMap<String, String>,
) -> Result<Vec<String>, WorkspaceError> {
    let top = git(workspace, &["rev-parse", "--show-toplevel"], env).await?;
    let top = Path::new(top.trim_end_matches('\n'));
    let base = git(workspace, &["merge-base", "HEAD", branch], env).await?;
    let z_list = |out: String| -> std::collections::BTreeSet<String> {
        out.split('\0')
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect()
    };
    // Written by the merge: changed on the branch since the base (deletions write nothing).
    let written = z_list(
        git(
            workspace,
            &[
                "diff",
                "--name-only",
                "-z",
                "--no-renames",
                "--diff-filter=d",
                base.trim(),
                branch,
            ],
            env,
        )
        .await?,
    );
    // Not tracked by HEAD: present at the branch's tip, absent from HEAD.
    let untracked_in_head = z_list(
        git(
            workspace,
            &[
                "diff",
                "--name-only",
                "-z",
                "--no-renames",
                "--diff-filter=A",
                "HEAD",
                branch,
            ],
            env,
        )
        .await?,
    );
    let mut found = std::collections::BTreeSet::new();
    for path in written.intersection(&untracked_in_head) {
        if std::fs::symlink_metadata(top.join(path)).is_ok() {
            found.insert(path.clone());
            continue;
        }
        // A parent that exists as a file or a link blocks the directory the merge needs.
        let mut prefix = std::path::PathBuf::new();
        let parts: Vec<_> = Path::new(path).components().collect();
        for part in parts.iter().take(parts.len().saturating_sub(1)) {
            prefix.push(part);
            match std::fs::symlink_metadata(top.join(&prefix)) {
                Ok(meta) if !meta.is_dir() => {
                    found.insert(prefix.display().to_string());
                    break;
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
    }
    Ok(found.into_iter().collect())
}

/// What `apply --squash` took, kept in the run's directory ([`SQUASH_RECORD`]) so that `clean`
/// and a second `apply` know the run's result is in the user's history although the branch's
/// commits are not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct SquashRecord {
    pub format_version: u64,
    /// The branch's tip that was squashed.
    pub branch_tip: String,
    /// The one commit the squash made on the user's branch.
    pub commit: String,
}

/// The file name of the [`SquashRecord`] in a run's directory.
pub const SQUASH_RECORD: &str = "applied.json";
const SQUASH_RECORD_VERSION: u64 = 1;

/// Records that `branch_tip` was squashed into `commit`.
pub fn record_squash(
    run_dir: &Path,
    branch_tip: &str,
    commit: &str,
) -> Result<(), crate::store::StoreError> {
    crate::store::write_json(
        &run_dir.join(SQUASH_RECORD),
        &SquashRecord {
            format_version: SQUASH_RECORD_VERSION,
            branch_tip: branch_tip.to_owned(),
            commit: commit.to_owned(),
        },
    )
}

/// The squash commit that holds `branch`'s result, when `apply --squash` recorded one in
/// `run_dir`, the branch still ends where it did then, and that commit is in `HEAD`'s history.
/// An unreadable or stale record is no record: the branch then counts as unmerged.
pub async fn squash_applied(
    workspace: &Path,
    run_dir: &Path,
    branch: &str,
    env: &BTreeMap<String, String>,
) -> Option<String> {
    let record: SquashRecord =
        crate::store::read_versioned_json(&run_dir.join(SQUASH_RECORD), SQUASH_RECORD_VERSION)
            .ok()?;
    let tip = git(
        workspace,
        &["rev-parse", "--verify", "--quiet", branch],
        env,
    )
    .await
    .ok()?;
    if tip.trim() != record.branch_tip {
        return None;
    }
    git(
        workspace,
        &["merge-base", "--is-ancestor", &record.commit, "HEAD"],
        env,
    )
    .await
    .ok()?;
    Some(record.commit)
}

/// Commits on `branch` that `HEAD` of `workspace` lacks (0 when the branch is gone).
pub async fn unmerged_commits(
    workspace: &Path,
    branch: &str,
    env: &BTreeMap<String, String>,
) -> Result<u64, WorkspaceError> {
    let listed = git(workspace, &["branch", "--list", branch], env).await?;
    if listed.trim().is_empty() {
        return Ok(0);
    }
    let count = git(
        workspace,
        &["rev-list", "--count", &format!("HEAD..{branch}")],
        env,
    )
    .await?;
    Ok(count.trim().parse().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::RunId;

    fn env(home: &Path) -> BTreeMap<String, String> {
        [
            ("PATH", std::env::var("PATH").unwrap_or_default()),
            ("HOME", home.to_string_lossy().into_owned()),
            ("GIT_CONFIG_NOSYSTEM", "1".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }

    async fn seeded(ws: &Path, env: &BTreeMap<String, String>) {
        git(ws, &["init", "-q", "-b", "main"], env).await.unwrap();
        std::fs::write(ws.join("a.txt"), "a\n").unwrap();
        std::fs::write(ws.join(".gitignore"), "build/\n").unwrap();
        git(ws, &["add", "."], env).await.unwrap();
        git_committing(ws, &["commit", "-qm", "seed"], env)
            .await
            .unwrap();
    }

    #[test]
    fn an_identity_needs_both_keys_set_by_their_last_value() {
        assert!(identity_configured("user.name Ada\nuser.email ada@x\n"));
        assert!(!identity_configured("user.name Ada\n"));
        assert!(!identity_configured(""));
        // A later (more local) empty value unsets what a global one said.
        assert!(!identity_configured(
            "user.name Ada\nuser.email ada@x\nuser.name \n"
        ));
        assert!(identity_configured(
            "user.email old@x\nuser.name Ada Lovelace\nuser.email ada@x\n"
        ));
    }

    #[tokio::test]
    async fn the_fallback_identity_applies_only_without_a_configured_one() {
        let home = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let env = env(home.path());
        git(dir.path(), &["init", "-q"], &env).await.unwrap();
        assert_eq!(identity_args(dir.path(), &env).await.len(), 4);
        git(dir.path(), &["config", "user.name", "Ada"], &env)
            .await
            .unwrap();
        git(dir.path(), &["config", "user.email", "ada@x"], &env)
            .await
            .unwrap();
        assert!(identity_args(dir.path(), &env).await.is_empty());
    }

    #[tokio::test]
    async fn the_identity_read_in_place_is_the_one_git_lists() {
        let home = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let env = env(home.path());
        git(dir.path(), &["init", "-q"], &env).await.unwrap();
        let gits = || async {
            let listed = git(
                dir.path(),
                &["config", "--get-regexp", r"^user\.(name|email)$"],
                &env,
            )
            .await
            .unwrap_or_default();
            identity_configured(&listed)
        };
        let in_place = || identity_in_place(dir.path(), &env);
        if crate::gitconfig::files(&env, None).is_none() {
            return; // this machine's git keeps its system file elsewhere: git is asked
        }
        let steps: [(&str, &str); 5] = [
            ("none", ""),
            ("global name", "[user]\n\tname = Ada\n"),
            (
                "global both",
                "[user]\n\tname = Ada\n\temail = ada@x # work\n",
            ),
            ("local empty email", "email"),
            ("local email again", "email again"),
        ];
        for (step, text) in steps {
            match text {
                "" => {}
                "email" => {
                    git(dir.path(), &["config", "user.email", ""], &env)
                        .await
                        .unwrap();
                }
                "email again" => {
                    git(dir.path(), &["config", "user.email", "a@y"], &env)
                        .await
                        .unwrap();
                }
                text => std::fs::write(home.path().join(".gitconfig"), text).unwrap(),
            }
            assert_eq!(in_place(), Some(gits().await), "{step}");
        }
        assert_eq!(in_place(), Some(true));
        // What the reader does not take is git's.
        std::fs::write(
            home.path().join(".gitconfig"),
            "[include]\n\tpath = other\n",
        )
        .unwrap();
        assert_eq!(in_place(), None);
    }

    #[tokio::test]
    async fn a_stage_commit_takes_new_and_changed_files_but_not_ignored_autocode_or_environments() {
        let home = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        let env = env(home.path());
        seeded(ws, &env).await;
        let run = RunId::new("20261130-c").unwrap();
        let (tree, branch) = super::super::workspace::create_worktree(ws, &run, &env)
            .await
            .unwrap();
        // Nothing changed: no commit.
        assert_eq!(commit_stage(&tree, "m", &env).await.unwrap(), None);
        std::fs::write(tree.join("a.txt"), "changed\n").unwrap();
        std::fs::write(tree.join("new.txt"), "new\n").unwrap();
        std::fs::create_dir_all(tree.join("build")).unwrap();
        std::fs::write(tree.join("build/out"), "ignored\n").unwrap();
        std::fs::create_dir_all(tree.join(".autocode/evidence")).unwrap();
        std::fs::write(tree.join(".autocode/evidence/r.json"), "{}").unwrap();
        std::fs::create_dir_all(tree.join("sub/.autocode")).unwrap();
        std::fs::write(tree.join("sub/.autocode/x"), "x").unwrap();
        // A virtual environment and bytecode no ignore file names.
        std::fs::create_dir_all(tree.join(".venv/bin")).unwrap();
        std::fs::write(tree.join(".venv/pyvenv.cfg"), "home = /usr/bin\n").unwrap();
        std::os::unix::fs::symlink("/usr/bin/python3", tree.join(".venv/bin/python3")).unwrap();
        std::fs::create_dir_all(tree.join("pkg/__pycache__")).unwrap();
        std::fs::write(tree.join("pkg/__pycache__/m.cpython-311.pyc"), "pyc").unwrap();
        let commit = commit_stage(&tree, "autocode: milestone 1", &env)
            .await
            .unwrap()
            .expect("a commit");
        let files = git(ws, &["show", "--name-only", "--format=", &commit], &env)
            .await
            .unwrap();
        let mut files: Vec<&str> = files.lines().collect();
        files.sort();
        assert_eq!(files, ["a.txt", "new.txt"]);
        let author = git(ws, &["log", "-1", "--format=%an <%ae>", &branch], &env)
            .await
            .unwrap();
        assert_eq!(author.trim(), "autocode <autocode@localhost>");
        // Merging the branch into the clean checkout brings the files.
        let outcome = merge_run_branch(ws, &branch, MergeMode::Squash, "take", &env)
            .await
            .unwrap();
        assert!(
            matches!(outcome, MergeOutcome::Merged { .. }),
            "{outcome:?}"
        );
        assert_eq!(
            std::fs::read_to_string(ws.join("new.txt")).unwrap(),
            "new\n"
        );
        // Squashed: the branch's commit is not an ancestor, but its tree is in.
        assert_eq!(unmerged_commits(ws, &branch, &env).await.unwrap(), 1);
    }

    #[tokio::test]
    async fn a_conflicting_merge_is_aborted_and_leaves_the_tree_as_it_was() {
        let home = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        let env = env(home.path());
        seeded(ws, &env).await;
        let run = RunId::new("20261130-d").unwrap();
        let (tree, branch) = super::super::workspace::create_worktree(ws, &run, &env)
            .await
            .unwrap();
        std::fs::write(tree.join("a.txt"), "theirs\n").unwrap();
        commit_stage(&tree, "m", &env).await.unwrap().unwrap();
        std::fs::write(ws.join("a.txt"), "mine\n").unwrap();
        git_committing(ws, &["commit", "-qam", "mine"], &env)
            .await
            .unwrap();
        let before = git(ws, &["rev-parse", "HEAD"], &env).await.unwrap();
        for mode in [MergeMode::Merge, MergeMode::Squash] {
            let outcome = merge_run_branch(ws, &branch, mode, "take", &env)
                .await
                .unwrap();
            assert_eq!(
                outcome,
                MergeOutcome::Conflict {
                    files: vec!["a.txt".into()]
                }
            );
            assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "mine\n");
            assert_eq!(git(ws, &["rev-parse", "HEAD"], &env).await.unwrap(), before);
            let status = super::super::workspace::uncommitted_changes(ws, &env)
                .await
                .unwrap();
            assert!(status.is_empty(), "{status:?}");
        }
    }
}
