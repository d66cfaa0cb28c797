//! The commit a tree under test is shown as (issue 24): a verification tree is a checkout to the
//! tools that read git (`git describe`, `git log`, setuptools-scm), so each tree under test has
//! one commit. It is the work tree's `HEAD` when that commit holds exactly the tree, else a
//! commit of the tree whose parent is `HEAD` (none on an unborn branch), written to the store
//! with autocode as author and committer and `HEAD`'s commit time: one tree over one `HEAD` is
//! always the same commit, so the tester's copy and every replay of that tree agree. The
//! repository's tags are read (never written) for `git describe`.

use std::fmt;
use std::path::Path;

use super::odb::Kind;
use super::{GitStore, GitTreeError, TreeId, run_git_accepting};

/// A git commit object id (hex: sha1 or sha256 repositories).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CommitId(String);

impl CommitId {
    pub fn parse(text: &str) -> Result<CommitId, GitTreeError> {
        TreeId::parse(text).map(|id| CommitId(String::from(id)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for CommitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The author and committer of a commit autocode makes of a tree under test.
const AUTHOR: (&str, &str) = ("autocode", "autocode@localhost");

/// The message of that commit.
const MESSAGE: &str = "autocode: the tree under test\n";

/// What a commit object says of itself: its tree and its committer time (`@<seconds> <zone>`,
/// as git reads a date).
pub(super) fn parse_commit(text: &str) -> Option<(TreeId, String)> {
    let mut tree = None;
    let mut when = None;
    for line in text.lines() {
        if line.is_empty() {
            break;
        }
        if let Some(id) = line.strip_prefix("tree ") {
            tree = TreeId::parse(id).ok();
        } else if let Some(who) = line.strip_prefix("committer ") {
            let mut parts = who.rsplitn(3, ' ');
            let zone = parts.next()?;
            let seconds = parts.next()?;
            when = Some(format!("@{seconds} {zone}"));
        }
    }
    Some((tree?, when?))
}

/// The commit object `git commit-tree` writes for `tree` over `head` at `when` (`@<seconds>
/// <zone>`) with autocode as author and committer.
fn commit_object(tree: &TreeId, head: Option<&CommitId>, when: &str) -> String {
    let stamp = when.trim_start_matches('@');
    let who = format!("{} <{}> {stamp}", AUTHOR.0, AUTHOR.1);
    let parent = head.map(|h| format!("parent {h}\n")).unwrap_or_default();
    format!("tree {tree}\n{parent}author {who}\ncommitter {who}\n\n{MESSAGE}")
}

impl GitStore {
    /// The repository's common directory (where its objects, refs and `shallow` file are).
    pub fn repo_common_dir(&self) -> &Path {
        &self.repo_common_dir
    }

    /// The commit of `work_tree`'s `HEAD`, `None` on an unborn branch. Read from the
    /// repository in place (`crate::gitrefs`), else by git; the repository is not written.
    pub async fn head_of(&self, work_tree: &Path) -> Result<Option<CommitId>, GitTreeError> {
        if let Some(head) = crate::gitrefs::layout(work_tree, &self.env)
            .and_then(|layout| crate::gitrefs::head(&layout))
        {
            return head.as_deref().map(CommitId::parse).transpose();
        }
        let out = run_git_accepting(
            work_tree,
            &["rev-parse", "-q", "--verify", "HEAD^{commit}"],
            &self.env,
            None,
            &[0, 1],
        )
        .await?;
        let text = String::from_utf8_lossy(&out);
        match text.trim() {
            "" => Ok(None),
            id => CommitId::parse(id).map(Some),
        }
    }

    /// The commit `tree` is shown as, over `head` (the work tree's `HEAD`): `head` itself when
    /// it holds exactly `tree`, else a commit written to the store (see the module's comment).
    pub async fn commit_for(
        &self,
        tree: &TreeId,
        head: Option<&CommitId>,
    ) -> Result<CommitId, GitTreeError> {
        let mut env = self.env.clone();
        env.insert(
            "GIT_DIR".into(),
            self.git_dir.to_string_lossy().into_owned(),
        );
        let when = match head {
            Some(head) => {
                let (head_tree, when) = match self.memo.commit(head.as_str()) {
                    Some(known) => known,
                    None => {
                        let text = match self.odb.read(head.as_str(), Kind::Commit) {
                            Some(data) => data,
                            None => {
                                run_git_accepting(
                                    &self.git_dir,
                                    &["cat-file", "commit", head.as_str()],
                                    &env,
                                    None,
                                    &[0],
                                )
                                .await?
                            }
                        };
                        let text = String::from_utf8_lossy(&text);
                        let parsed = parse_commit(&text).ok_or_else(|| GitTreeError::Git {
                            args: format!("cat-file commit {head}"),
                            dir: self.git_dir.clone(),
                            detail: "not a commit object autocode can read".into(),
                        })?;
                        self.memo.put_commit(head.as_str(), parsed.clone());
                        parsed
                    }
                };
                if &head_tree == tree {
                    return Ok(head.clone());
                }
                when
            }
            None => "@0 +0000".to_owned(),
        };
        // Written in process as `git commit-tree` writes it (same bytes, so the same id).
        if tree.as_str().len() == 40 {
            let object = commit_object(tree, head, &when);
            let written = self.odb.write(Kind::Commit, object.as_bytes());
            if let Ok(id) = written {
                return CommitId::parse(&id);
            }
        }
        let mut args = vec!["commit-tree", "--no-gpg-sign", tree.as_str()];
        if let Some(head) = head {
            args.extend(["-p", head.as_str()]);
        }
        for (name, value) in [
            ("GIT_AUTHOR_NAME", AUTHOR.0),
            ("GIT_AUTHOR_EMAIL", AUTHOR.1),
            ("GIT_COMMITTER_NAME", AUTHOR.0),
            ("GIT_COMMITTER_EMAIL", AUTHOR.1),
            ("GIT_AUTHOR_DATE", &when),
            ("GIT_COMMITTER_DATE", &when),
        ] {
            env.insert(name.into(), value.into());
        }
        let out = run_git_accepting(
            &self.git_dir,
            &args,
            &env,
            Some(MESSAGE.as_bytes().to_vec()),
            &[0],
        )
        .await?;
        CommitId::parse(&String::from_utf8_lossy(&out))
    }

    /// The repository's tags as the lines of a `packed-refs` file (`<object> refs/tags/<name>`),
    /// read from `work_tree`'s repository (in place when it is a plain one, else by git).
    pub async fn tags_of(&self, work_tree: &Path) -> Result<Vec<u8>, GitTreeError> {
        if let Some(tags) =
            crate::gitrefs::layout(work_tree, &self.env).and_then(|l| crate::gitrefs::tags(&l))
        {
            return Ok(tags);
        }
        run_git_accepting(
            work_tree,
            &[
                "for-each-ref",
                "--format=%(objectname) %(refname)",
                "refs/tags/",
            ],
            &self.env,
            None,
            &[0],
        )
        .await
    }

    /// Writes `index` to hold exactly `tree` (no stat data: git compares each file's content
    /// the first time it looks): in process when the tree's objects are loose
    /// (`index_file.rs`), else by `git read-tree`.
    pub async fn read_tree_into(&self, tree: &TreeId, index: &Path) -> Result<(), GitTreeError> {
        if let Some(bytes) = self
            .odb
            .index_entries(tree)
            .and_then(super::index_file::index_bytes)
        {
            // Derived from the tree and written before anything reads it: atomic, not synced.
            return crate::store::write_atomic_as(index, &bytes, crate::store::Durability::Derived)
                .map_err(|e| GitTreeError::Io {
                    path: index.to_owned(),
                    source: std::io::Error::other(e.to_string()),
                });
        }
        self.git(None, Some(index), &["read-tree", tree.as_str()], None)
            .await
            .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_object_gives_its_tree_and_committer_time() {
        let text = "tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\nparent 0123456789012345678901234567890123456789\nauthor A U <a@x> 1700000000 +0100\ncommitter C O <c@x> 1700000500 -0230\n\nmessage\ncommitter not this\n";
        let (tree, when) = parse_commit(text).unwrap();
        assert_eq!(tree.as_str(), "4b825dc642cb6eb9a060e54bf8d69288fbee4904");
        assert_eq!(when, "@1700000500 -0230");
        assert!(parse_commit("tree nothex\ncommitter a 1 +0000\n").is_none());
        assert!(CommitId::parse("HEAD").is_err());
    }
}
