//! The verification tree's git metadata (issue 24): to the tools that read git (`git describe`,
//! `git log`, `git ls-files`, `git status`, setuptools-scm, hatch-vcs, a build script's
//! `git describe`), the tree under test is a checkout of one commit.
//!
//! Each use rebuilds a small private git directory beside the tree, `<root>/tree.git/`, and the
//! tree's `.git` is a file naming it (`gitdir: …`; in the overlay it is a file of the upper
//! layer, over the work tree's own `.git`, which stays hidden). The directory holds:
//!
//! - `HEAD`, detached at the commit the tree is shown as (`crate::gittree::CommitId`: the work
//!   tree's `HEAD` when it holds exactly the tree, else autocode's commit of the tree over it);
//! - `objects/info/alternates` naming the run's store (`<run>/git/objects`, where that commit
//!   and the tree's objects are) and the repository's object store, read-only;
//! - `packed-refs` with the repository's tags (for `git describe`); no branches (the checkout
//!   is detached, as in CI), the repository's `shallow` file when it has one;
//! - the store's `info/exclude` and `info/attributes` (no filters: the tree holds the bytes the
//!   snapshot read, so `git status` is clean where the tree equals the commit);
//! - an `index` of exactly the tree: the checkout's own index, or the work tree's snapshot index
//!   under an overlay of that snapshot (both with the stat data of the files the family sees, the
//!   mtime kept for git's racy-entry rule), else read from the tree (git hashes each file once).
//!
//! Nothing in it is the user's repository: no config, hooks, refs or object store of it is
//! writable through it, and it lives in the verification root, which no room grants (HOME and
//! the cache are read-only in every room; git commands that would write, such as `git commit`,
//! fail there, and `git status` runs without refreshing the index). What an unconfined check
//! writes there is gone at the next use.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::VerifyTree;
use crate::gittree::{GitTreeError, TreeId};

/// The private git directory in the verification root.
const GIT_DIR: &str = "tree.git";

/// Where the index of the tree comes from.
#[derive(Debug, Clone, Copy)]
pub(super) enum IndexSeed<'a> {
    /// An index holding exactly the tree, with the stat data of the files as the family sees
    /// them: copied, its mtime kept.
    Copy(&'a Path),
    /// Read from the tree (no stat data).
    FromTree,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> GitTreeError + '_ {
    move |source| GitTreeError::Io {
        path: path.to_owned(),
        source,
    }
}

fn write(path: &Path, content: &[u8]) -> Result<(), GitTreeError> {
    std::fs::write(path, content).map_err(io(path))
}

impl VerifyTree {
    /// The private git directory the tree's `.git` names.
    pub fn git_dir(&self) -> PathBuf {
        self.root.join(GIT_DIR)
    }

    /// Rebuilds the private git directory to show `tree` as a checkout, and returns what the
    /// tree's `.git` file holds.
    pub(super) async fn show_as_checkout(
        &self,
        tree: &TreeId,
        seed: IndexSeed<'_>,
    ) -> Result<Vec<u8>, GitTreeError> {
        let store = self.store();
        let head = store.head_of(&self.work_tree).await?;
        let commit = store.commit_for(tree, head.as_ref()).await?;
        let tags = store.tags_of(&self.work_tree).await?;
        let dir = self.git_dir();
        crate::gittree::remove_all(&dir)?;
        for sub in ["objects/info", "refs/heads", "refs/tags", "info"] {
            let path = dir.join(sub);
            std::fs::create_dir_all(&path).map_err(io(&path))?;
        }
        write(&dir.join("HEAD"), format!("{commit}\n").as_bytes())?;
        let mut config = String::from("[core]\n\tbare = false\n\tlogAllRefUpdates = false\n");
        if commit.as_str().len() == 64 {
            config
                .push_str("\trepositoryformatversion = 1\n[extensions]\n\tobjectFormat = sha256\n");
        } else {
            config.push_str("\trepositoryformatversion = 0\n");
        }
        write(&dir.join("config"), config.as_bytes())?;
        let mut alternates = Vec::new();
        for objects in [
            store.git_dir().join("objects"),
            store.repo_common_dir().join("objects"),
        ] {
            alternates.extend_from_slice(objects.as_os_str().as_bytes());
            alternates.push(b'\n');
        }
        write(&dir.join("objects/info/alternates"), &alternates)?;
        write(&dir.join("packed-refs"), &tags)?;
        if let Ok(shallow) = std::fs::read(store.repo_common_dir().join("shallow")) {
            write(&dir.join("shallow"), &shallow)?;
        }
        for name in ["info/exclude", "info/attributes"] {
            if let Ok(bytes) = std::fs::read(store.git_dir().join(name)) {
                write(&dir.join(name), &bytes)?;
            }
        }
        let index = dir.join("index");
        match seed {
            IndexSeed::Copy(from) => {
                let mtime = std::fs::metadata(from)
                    .and_then(|m| m.modified())
                    .map_err(io(from))?;
                std::fs::copy(from, &index).map_err(io(&index))?;
                std::fs::File::options()
                    .write(true)
                    .open(&index)
                    .and_then(|f| f.set_modified(mtime))
                    .map_err(io(&index))?;
            }
            IndexSeed::FromTree => store.read_tree_into(tree, &index).await?,
        }
        let mut gitfile = b"gitdir: ".to_vec();
        gitfile.extend_from_slice(dir.as_os_str().as_bytes());
        gitfile.push(b'\n');
        Ok(gitfile)
    }
}

/// Writes the `.git` file of the checkout in `dir`, whatever a check left there.
pub(super) fn write_git_file(dir: &Path, content: &[u8]) -> Result<(), GitTreeError> {
    let path = dir.join(".git");
    match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.is_dir() => crate::gittree::remove_all(&path)?,
        Ok(_) => std::fs::remove_file(&path).map_err(io(&path))?,
        Err(_) => {}
    }
    write(&path, content)
}
