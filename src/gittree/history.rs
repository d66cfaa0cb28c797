//! What a worktree run asks of the person's repository about its commits, read from the
//! repository's loose objects and index in process (issue 29: a git process a question): whether
//! the index holds anything `HEAD` does not before the builder's commit (`git diff --cached`),
//! and, when the run is done, the merge base of `HEAD` and the run's branch (`git merge-base
//! HEAD <branch>`) and the number of commits the branch has that the base has not (`git rev-list
//! --count <base>..<branch>`).
//!
//! Only git's plain case is answered: a plain layout (`crate::gitrefs`) and index
//! (`crate::gitindex`), no replace refs, grafts or shallow boundary, every object read a loose
//! one, one best common ancestor (a criss-cross history has several, and git picks among them),
//! and at most [`WALK_LIMIT`] commits. Anything else answers `None` and the caller asks git.

use std::collections::{HashSet, VecDeque};

use super::odb::{Kind, Odb};
use crate::gitrefs::Layout;

/// The most commits one answer walks; a longer history is git's (it reads the commit graph).
const WALK_LIMIT: usize = 20_000;

/// The branch against `HEAD`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchHistory {
    /// The merge base of `HEAD` and the branch.
    pub base: String,
    /// Commits reachable from the branch and not from the base.
    pub commits: u64,
}

/// The branch `branch` (a short name, `refs/heads/<branch>`) against `HEAD` in `layout`'s
/// repository, or `None` (ask git). `env` is the environment git would run with.
pub fn branch_against_head(
    layout: &Layout,
    branch: &str,
    env: &std::collections::BTreeMap<String, String>,
) -> Option<BranchHistory> {
    if ["GIT_REPLACE_REF_BASE", "GIT_GRAFT_FILE", "GIT_SHALLOW_FILE"]
        .iter()
        .any(|key| env.contains_key(*key))
        || crate::gitrefs::history_is_rewritten(layout)?
    {
        return None;
    }
    let head = crate::gitrefs::head(layout)??;
    let tip = crate::gitrefs::branch(layout, branch)?;
    let odb = Odb::open(&layout.common_dir);
    let ours = ancestors(&odb, &head)?;
    // The branch's own commits, and where its walk meets HEAD's history.
    let mut only_branch = HashSet::new();
    let mut met = Vec::new();
    let mut queue = VecDeque::from([tip]);
    while let Some(id) = queue.pop_front() {
        if ours.contains(&id) {
            if !met.contains(&id) {
                met.push(id);
            }
            continue;
        }
        if !only_branch.insert(id.clone()) {
            continue;
        }
        if only_branch.len() > WALK_LIMIT {
            return None;
        }
        queue.extend(parents(&odb, &id)?);
    }
    // The best common ancestors are the meeting points no other meeting point descends from.
    let below: Vec<HashSet<String>> = if met.len() > 1 {
        met.iter()
            .map(|id| ancestors(&odb, id))
            .collect::<Option<_>>()?
    } else {
        Vec::new()
    };
    let best: Vec<String> = met
        .iter()
        .enumerate()
        .filter(|(i, candidate)| {
            !below
                .iter()
                .enumerate()
                .any(|(j, under)| j != *i && under.contains(*candidate))
        })
        .map(|(_, candidate)| candidate.clone())
        .collect();
    // With one best common ancestor every common ancestor is below it, so the branch's own
    // commits are exactly what `base..branch` lists.
    let [base] = <[String; 1]>::try_from(best).ok()?;
    Some(BranchHistory {
        base,
        commits: only_branch.len() as u64,
    })
}

/// Whether the index of `layout`'s work tree holds anything its `HEAD` does not, outside every
/// `.autocode/` directory (`git diff --cached --name-only -- . ':(glob,exclude)**/.autocode/**'`
/// run at the top of the work tree is not empty). `None`: git must be asked.
pub fn index_differs_from_head(layout: &Layout) -> Option<bool> {
    let index = match std::fs::read(layout.index()) {
        Ok(bytes) => crate::gitindex::entries(&bytes)?,
        // No index yet: git reads it as empty.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(_) => return None,
    };
    let outside = |path: &[u8]| {
        let mut parts: Vec<&[u8]> = path.split(|b| *b == b'/').collect();
        parts.pop();
        !parts.contains(&&b".autocode"[..])
    };
    let mut staged = Vec::with_capacity(index.len());
    for entry in &index {
        // Conflicts, `add -N` and sparse entries are git's to compare.
        if entry.stage() != 0 || entry.extended_flags != 0 {
            return None;
        }
        if outside(&entry.path) {
            staged.push((entry.mode, hex(&entry.oid), entry.path.clone()));
        }
    }
    let committed = match crate::gitrefs::head(layout)? {
        None => Vec::new(),
        Some(head) => {
            let odb = Odb::open(&layout.common_dir);
            let commit = odb.read(&head, Kind::Commit)?;
            let (tree, _) = super::commit::parse_commit(&String::from_utf8_lossy(&commit))?;
            let mut entries = odb.index_entries(&tree)?;
            entries.retain(|(_, _, path)| outside(path));
            entries.sort_by(|a, b| a.2.cmp(&b.2));
            entries
        }
    };
    Some(staged != committed)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The parents of the loose commit `id`.
fn parents(odb: &Odb, id: &str) -> Option<Vec<String>> {
    let data = odb.read(id, Kind::Commit)?;
    let mut parents = Vec::new();
    for line in data.split(|b| *b == b'\n') {
        if line.is_empty() {
            break;
        }
        if let Some(parent) = line.strip_prefix(b"parent ") {
            let parent = std::str::from_utf8(parent).ok()?;
            if parent.len() != 40 || !parent.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            parents.push(parent.to_owned());
        }
    }
    Some(parents)
}

/// `id` and every commit it descends from.
fn ancestors(odb: &Odb, id: &str) -> Option<HashSet<String>> {
    let mut seen = HashSet::new();
    let mut queue = VecDeque::from([id.to_owned()]);
    while let Some(id) = queue.pop_front() {
        if !seen.insert(id.clone()) {
            continue;
        }
        if seen.len() > WALK_LIMIT {
            return None;
        }
        queue.extend(parents(odb, &id)?);
    }
    Some(seen)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::workspace::{git, git_init_for_tests, git_test_env};

    /// What git says: the merge base and the count, or `None` when `merge-base` fails.
    async fn by_git(ws: &std::path::Path, branch: &str) -> Option<BranchHistory> {
        let env = git_test_env();
        let base = git(ws, &["merge-base", "HEAD", branch], &env).await.ok()?;
        let base = base.trim().to_owned();
        let count = git(
            ws,
            &["rev-list", "--count", &format!("{base}..{branch}")],
            &env,
        )
        .await
        .unwrap();
        Some(BranchHistory {
            base,
            commits: count.trim().parse().unwrap(),
        })
    }

    /// A new repository under `dir` and the environment that commits in it.
    async fn repository(
        dir: &std::path::Path,
    ) -> (
        std::path::PathBuf,
        std::collections::BTreeMap<String, String>,
    ) {
        let ws = dir.join("ws");
        git_init_for_tests(&ws).await;
        let mut env = git_test_env();
        for (k, v) in [("GIT_AUTHOR_NAME", "t"), ("GIT_AUTHOR_EMAIL", "t@x")] {
            env.insert(k.into(), v.into());
            env.insert(k.replace("AUTHOR", "COMMITTER"), v.into());
        }
        (ws, env)
    }

    fn in_process(ws: &std::path::Path, branch: &str) -> Option<BranchHistory> {
        let env = git_test_env();
        branch_against_head(&crate::gitrefs::layout(ws, &env)?, branch, &env)
    }

    #[tokio::test]
    async fn the_index_against_head_is_what_git_diff_cached_says() {
        let dir = tempfile::tempdir().unwrap();
        let (ws, env) = repository(dir.path()).await;
        use crate::run::commit::NOT_AUTOCODE;
        let check = |label: &'static str| {
            let (ws, env) = (ws.clone(), env.clone());
            async move {
                git(&ws, &["add", "--all", "--", ".", NOT_AUTOCODE], &env)
                    .await
                    .unwrap();
                let listed = git(
                    &ws,
                    &[
                        "diff",
                        "--cached",
                        "--name-only",
                        "-z",
                        "--",
                        ".",
                        NOT_AUTOCODE,
                    ],
                    &env,
                )
                .await
                .unwrap();
                let layout = crate::gitrefs::layout(&ws, &env).unwrap();
                assert_eq!(
                    index_differs_from_head(&layout),
                    Some(!listed.trim_matches('\0').is_empty()),
                    "{label}: git lists {listed:?}"
                );
                if !listed.is_empty() {
                    git(&ws, &["commit", "-qm", label], &env).await.unwrap();
                }
            }
        };
        use std::os::unix::fs::PermissionsExt;
        check("an unborn branch, nothing added").await;
        std::fs::write(ws.join("a.txt"), "a\n").unwrap();
        std::fs::create_dir_all(ws.join("sub/.autocode")).unwrap();
        std::fs::write(ws.join("sub/.autocode/state"), "s\n").unwrap();
        check("an unborn branch, a file added").await;
        check("nothing changed").await;
        std::fs::create_dir_all(ws.join(".autocode/runs")).unwrap();
        std::fs::write(ws.join(".autocode/runs/x"), "x\n").unwrap();
        std::fs::write(ws.join("sub/.autocode/state"), "changed\n").unwrap();
        check("only .autocode changed").await;
        std::fs::write(ws.join("sub/.autocode-not"), "n\n").unwrap();
        check("a name that only starts like it").await;
        std::fs::set_permissions(ws.join("a.txt"), std::fs::Permissions::from_mode(0o755)).unwrap();
        check("a mode changed").await;
        std::fs::remove_file(ws.join("a.txt")).unwrap();
        check("a file removed").await;
        std::os::unix::fs::symlink("sub", ws.join("link")).unwrap();
        check("a symlink added").await;
        git(&ws, &["gc", "-q"], &env).await.unwrap();
        std::fs::write(ws.join("b.txt"), "b\n").unwrap();
        git(&ws, &["add", "b.txt"], &env).await.unwrap();
        let layout = crate::gitrefs::layout(&ws, &env).unwrap();
        assert_eq!(
            index_differs_from_head(&layout),
            None,
            "packed: git's to say"
        );
    }

    #[tokio::test]
    async fn the_walk_answers_as_git_does_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let (ws, env) = repository(dir.path()).await;
        let run = |args: Vec<&'static str>| {
            let (ws, env) = (ws.clone(), env.clone());
            async move { git(&ws, &args, &env).await.unwrap() }
        };
        let commit =
            |message: &'static str| run(vec!["commit", "-q", "--allow-empty", "-m", message]);
        run(vec!["checkout", "-q", "-b", "main"]).await;
        commit("a").await;
        commit("b").await;
        run(vec!["branch", "autocode/r1"]).await;
        // Already merged: the branch is HEAD's ancestor.
        commit("c").await;
        let merged = in_process(&ws, "autocode/r1").unwrap();
        assert_eq!(Some(merged.clone()), by_git(&ws, "autocode/r1").await);
        assert_eq!(merged.commits, 0);
        // Diverged, with a merge of main into the branch.
        run(vec!["checkout", "-q", "autocode/r1"]).await;
        commit("r1").await;
        run(vec!["merge", "-q", "--no-edit", "--no-ff", "main"]).await;
        commit("r2").await;
        run(vec!["checkout", "-q", "main"]).await;
        commit("d").await;
        let diverged = in_process(&ws, "autocode/r1").unwrap();
        assert_eq!(Some(diverged.clone()), by_git(&ws, "autocode/r1").await);
        assert_eq!(diverged.commits, 3);
        // Packed refs are read as loose ones.
        run(vec!["pack-refs", "--all"]).await;
        assert_eq!(in_process(&ws, "autocode/r1"), Some(diverged));
        // Criss-cross: two best common ancestors; git picks one, so git is asked.
        run(vec!["checkout", "-q", "-b", "x", "main"]).await;
        run(vec!["checkout", "-q", "-b", "y", "main"]).await;
        commit("y1").await;
        run(vec!["checkout", "-q", "x"]).await;
        commit("x1").await;
        run(vec!["merge", "-q", "--no-edit", "y~0"]).await;
        run(vec!["checkout", "-q", "y"]).await;
        run(vec!["merge", "-q", "--no-edit", "x~1"]).await;
        run(vec!["checkout", "-q", "x"]).await;
        assert_eq!(in_process(&ws, "y"), None);
        // Unrelated histories: git's merge-base fails, and this walk does not answer.
        run(vec!["checkout", "-q", "--orphan", "alone"]).await;
        commit("alone").await;
        assert_eq!(by_git(&ws, "main").await, None);
        assert_eq!(in_process(&ws, "main"), None);
        // A tag of the same name shadows the branch in a revision: git's to read.
        run(vec!["checkout", "-q", "main"]).await;
        run(vec!["tag", "autocode/r1", "main~1"]).await;
        assert_eq!(in_process(&ws, "autocode/r1"), None);
        // Packed objects are not read here.
        run(vec!["gc", "-q"]).await;
        assert_eq!(in_process(&ws, "x"), None);
    }
}
