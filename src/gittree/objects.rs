//! Reading trees under test from the object store (issue 13): what changed between two trees
//! with the blobs on each side ([`GitStore::diff_entries`]), the bytes of blobs
//! ([`GitStore::read_blobs`]), and a tree made of another with some paths taken from a third
//! ([`GitStore::with_paths_from`]), so the base tree is read from git and never checked out.

use std::collections::BTreeMap;
use std::path::Path;

use super::{GitStore, GitTreeError, TreeId, io_error};

/// One side of a changed entry: its mode (`100644`, `100755`, `120000`, `160000`) and object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Side {
    pub mode: String,
    pub object: String,
}

impl Side {
    pub fn is_symlink(&self) -> bool {
        self.mode == "120000"
    }

    pub fn is_gitlink(&self) -> bool {
        self.mode == "160000"
    }
}

/// An entry that differs between two trees: absent on one side when added or removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangedEntry {
    pub path: String,
    pub old: Option<Side>,
    pub new: Option<Side>,
}

fn side(mode: &str, object: &str) -> Option<Side> {
    (mode.bytes().any(|b| b != b'0')).then(|| Side {
        mode: mode.to_owned(),
        object: object.to_owned(),
    })
}

/// The most bytes [`GitStore::read_blobs`] reads in one call (well under what a git command's
/// captured output may hold).
pub const BLOBS_BUDGET: u64 = 64 << 20;

impl GitStore {
    /// The entries that differ from `old` to `new`, in path order, with the mode and object of
    /// each side (recursive, no rename detection). Time is proportional to what changed.
    pub async fn diff_entries(
        &self,
        old: &TreeId,
        new: &TreeId,
    ) -> Result<Vec<ChangedEntry>, GitTreeError> {
        if old == new {
            return Ok(Vec::new());
        }
        if let Some(known) = self.memo.diff(old, new) {
            return Ok(known.as_ref().clone());
        }
        if let Some(changes) = self.odb.diff(old, new) {
            self.memo
                .put_diff(old, new, std::sync::Arc::new(changes.clone()));
            return Ok(changes);
        }
        let changes = self.diff_entries_by_git(old, new).await?;
        self.memo
            .put_diff(old, new, std::sync::Arc::new(changes.clone()));
        Ok(changes)
    }

    /// [`Self::diff_entries`] by `git diff-tree`.
    async fn diff_entries_by_git(
        &self,
        old: &TreeId,
        new: &TreeId,
    ) -> Result<Vec<ChangedEntry>, GitTreeError> {
        let args = [
            "diff-tree",
            "-r",
            "-z",
            "--no-renames",
            "--raw",
            "--full-index",
            old.as_str(),
            new.as_str(),
        ];
        let out = self.git(None, None, &args, None).await?;
        // `:<old mode> <new mode> <old id> <new id> <status>` NUL `<path>` NUL, repeated.
        let mut parts = out.split(|b| *b == 0).filter(|p| !p.is_empty());
        let mut changes = Vec::new();
        while let (Some(meta), Some(path)) = (parts.next(), parts.next()) {
            let meta = String::from_utf8_lossy(meta);
            let fields: Vec<&str> = meta.trim_start_matches(':').split(' ').collect();
            let [old_mode, new_mode, old_id, new_id, ..] = fields[..] else {
                return Err(GitTreeError::Git {
                    args: args.join(" "),
                    dir: self.git_dir.clone(),
                    detail: format!("unexpected line {meta:?}"),
                });
            };
            changes.push(ChangedEntry {
                path: String::from_utf8_lossy(path).into_owned(),
                old: side(old_mode, old_id),
                new: side(new_mode, new_id),
            });
        }
        changes.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(changes)
    }

    /// The bytes of each blob in `objects` (ids), absent for one that is missing, not a blob,
    /// larger than `cap` bytes, or past [`BLOBS_BUDGET`] bytes read in all (in the order
    /// given). Two git commands whatever the count (`cat-file --batch-check` for the sizes,
    /// then `--batch` for those within the caps).
    pub async fn read_blobs(
        &self,
        objects: &[String],
        cap: u64,
    ) -> Result<BTreeMap<String, Vec<u8>>, GitTreeError> {
        if objects.is_empty() {
            return Ok(BTreeMap::new());
        }
        if let Some(known) = self.memo.blobs(objects, cap) {
            return Ok(known.as_ref().clone());
        }
        if let Some(read) = self.read_blobs_loose(objects, cap) {
            self.memo
                .put_blobs(objects, cap, std::sync::Arc::new(read.clone()));
            return Ok(read);
        }
        self.read_blobs_by_git(objects, cap).await
    }

    /// [`Self::read_blobs`] by `git cat-file`.
    async fn read_blobs_by_git(
        &self,
        objects: &[String],
        cap: u64,
    ) -> Result<BTreeMap<String, Vec<u8>>, GitTreeError> {
        let mut out = BTreeMap::new();
        let mut ask = String::new();
        for id in objects {
            ask.push_str(id);
            ask.push('\n');
        }
        let sizes = self
            .git(
                None,
                None,
                &["cat-file", "--batch-check"],
                Some(ask.into_bytes()),
            )
            .await?;
        let mut wanted = String::new();
        let mut asked = std::collections::BTreeSet::new();
        let mut total = 0u64;
        // Every object named exists (none is `missing`): then the answer is one for good.
        let mut all_exist = true;
        for line in String::from_utf8_lossy(&sizes).lines() {
            let fields: Vec<&str> = line.split(' ').collect();
            let [id, "blob", size] = fields[..] else {
                all_exist &= !line.ends_with(" missing");
                continue;
            };
            let Ok(size) = size.parse::<u64>() else {
                continue;
            };
            if size <= cap && total + size <= BLOBS_BUDGET && asked.insert(id.to_owned()) {
                total += size;
                wanted.push_str(id);
                wanted.push('\n');
            }
        }
        if wanted.is_empty() {
            if all_exist {
                self.memo
                    .put_blobs(objects, cap, std::sync::Arc::new(out.clone()));
            }
            return Ok(out);
        }
        let batch = self
            .git(
                None,
                None,
                &["cat-file", "--batch"],
                Some(wanted.into_bytes()),
            )
            .await?;
        // `<id> blob <size>` LF `<content>` LF, repeated.
        let mut rest = &batch[..];
        while let Some(eol) = rest.iter().position(|b| *b == b'\n') {
            let header = String::from_utf8_lossy(&rest[..eol]).into_owned();
            rest = &rest[eol + 1..];
            let fields: Vec<&str> = header.split(' ').collect();
            let [id, _, size] = fields[..] else {
                break;
            };
            let Ok(size) = size.parse::<usize>() else {
                break;
            };
            if rest.len() < size {
                break;
            }
            out.insert(id.to_owned(), rest[..size].to_vec());
            rest = rest.get(size + 1..).unwrap_or_default();
        }
        if all_exist && out.len() == asked.len() {
            self.memo
                .put_blobs(objects, cap, std::sync::Arc::new(out.clone()));
        }
        Ok(out)
    }

    /// [`Self::read_blobs`] in process: `None` unless every object is loose (then git is
    /// asked for all of them).
    fn read_blobs_loose(&self, objects: &[String], cap: u64) -> Option<BTreeMap<String, Vec<u8>>> {
        let mut out = BTreeMap::new();
        let mut total = 0u64;
        for id in objects {
            if out.contains_key(id) {
                continue;
            }
            let left = BLOBS_BUDGET - total;
            let object = self.odb.read_capped(id, cap.min(left))?;
            if let (super::odb::Kind::Blob, Some(data)) = (object.kind, object.data) {
                total += object.size;
                out.insert(id.clone(), data);
            }
        }
        Some(out)
    }

    /// The file at `path` in `tree` (mode, content) when it is read in process (loose objects).
    pub fn file_at(&self, tree: &TreeId, path: &str) -> Option<(u32, Vec<u8>)> {
        self.odb.file_at(tree, path)
    }

    /// The tree `onto` with each `(path, mode, content)` written at its path, in process
    /// (loose objects); `None` when a tree on the way is not loose.
    pub fn with_contents(&self, onto: &TreeId, files: &[(String, u32, Vec<u8>)]) -> Option<TreeId> {
        if files.is_empty() {
            return Some(onto.clone());
        }
        self.odb.with_contents(onto, files)
    }

    /// The regular files at `paths` in `tree` (path, mode, content), read in process where the
    /// objects are loose and by git where they are packed; absent paths, links, submodules and
    /// files over `cap` are left out.
    pub async fn files_at(
        &self,
        tree: &TreeId,
        paths: &[String],
        cap: u64,
    ) -> Result<Vec<(String, u32, Vec<u8>)>, GitTreeError> {
        let mut out = Vec::with_capacity(paths.len());
        let mut packed = Vec::new();
        for path in paths {
            match self.odb.file_at(tree, path) {
                Some((mode, data)) if mode & 0o170000 == 0o100000 => {
                    if data.len() as u64 <= cap {
                        out.push((path.clone(), mode, data));
                    }
                }
                Some(_) => {}
                None => packed.push(path.as_str()),
            }
        }
        if packed.is_empty() {
            return Ok(out);
        }
        // The whole listing, not the paths as arguments: there may be more than a command line
        // holds.
        let packed: std::collections::HashSet<&str> = packed.into_iter().collect();
        let listed = self
            .git(
                None,
                None,
                &["ls-tree", "-r", "-z", "--full-tree", tree.as_str()],
                None,
            )
            .await?;
        let mut found: Vec<(String, u32, String)> = Vec::new();
        for line in listed.split(|b| *b == 0).filter(|l| !l.is_empty()) {
            let Some(tab) = line.iter().position(|b| *b == b'\t') else {
                continue;
            };
            let meta = String::from_utf8_lossy(&line[..tab]);
            if let [mode, "blob", id] = meta.split(' ').collect::<Vec<_>>()[..]
                && let Ok(mode) = u32::from_str_radix(mode, 8)
                && mode & 0o170000 == 0o100000
            {
                let path = String::from_utf8_lossy(&line[tab + 1..]).into_owned();
                if packed.contains(path.as_str()) {
                    found.push((path, mode, id.to_owned()));
                }
            }
        }
        let ids: Vec<String> = found.iter().map(|(_, _, id)| id.clone()).collect();
        let blobs = self.read_blobs(&ids, cap).await?;
        for (path, mode, id) in found {
            if let Some(data) = blobs.get(&id) {
                out.push((path, mode, data.clone()));
            }
        }
        Ok(out)
    }

    /// [`Self::with_contents`], by git where a tree on the way is packed: the blobs written in
    /// process, the tree through `index` (a scratch index file, removed afterwards).
    pub async fn with_contents_anywhere(
        &self,
        onto: &TreeId,
        files: &[(String, u32, Vec<u8>)],
        index: &Path,
    ) -> Result<TreeId, GitTreeError> {
        if let Some(tree) = self.with_contents(onto, files) {
            return Ok(tree);
        }
        let mut info = Vec::new();
        for (path, mode, content) in files {
            let id = self
                .odb
                .write(super::odb::Kind::Blob, content)
                .map_err(io_error(self.git_dir()))?;
            info.extend_from_slice(format!("{mode:o} {id}\t{path}").as_bytes());
            info.push(0);
        }
        if let Some(parent) = index.parent() {
            fs_create(parent)?;
        }
        let _ = std::fs::remove_file(index);
        let result = async {
            self.git(None, Some(index), &["read-tree", onto.as_str()], None)
                .await?;
            self.git(
                None,
                Some(index),
                &["update-index", "-z", "--index-info"],
                Some(info),
            )
            .await?;
            let out = self.git(None, Some(index), &["write-tree"], None).await?;
            TreeId::parse(&String::from_utf8_lossy(&out))
        }
        .await;
        let _ = std::fs::remove_file(index);
        result
    }

    /// The tree `onto` with each of `paths` as it is in `from`: its entry there, or removed
    /// when `from` lacks it. `index` is a scratch index file (removed afterwards) when git
    /// composes it; in process (`odb.rs`) when every tree read is loose.
    pub async fn with_paths_from(
        &self,
        onto: &TreeId,
        from: &TreeId,
        paths: &[String],
        index: &Path,
    ) -> Result<TreeId, GitTreeError> {
        if paths.is_empty() || onto == from {
            return Ok(onto.clone());
        }
        if let Some(tree) = self.odb.with_paths_from(onto, from, paths) {
            return Ok(tree);
        }
        if let Some(parent) = index.parent() {
            fs_create(parent)?;
        }
        let _ = std::fs::remove_file(index);
        let result = self.compose(onto, from, paths, index).await;
        let _ = std::fs::remove_file(index);
        result
    }

    async fn compose(
        &self,
        onto: &TreeId,
        from: &TreeId,
        paths: &[String],
        index: &Path,
    ) -> Result<TreeId, GitTreeError> {
        self.git(None, Some(index), &["read-tree", onto.as_str()], None)
            .await?;
        // The entries of `from` at exactly these paths (literal pathspecs: no glob, no magic).
        let mut args = vec![
            "--literal-pathspecs",
            "ls-tree",
            "-r",
            "-z",
            "--full-tree",
            from.as_str(),
            "--",
        ];
        args.extend(paths.iter().map(String::as_str));
        let listed = self.git(None, None, &args, None).await?;
        let mut found: BTreeMap<String, String> = BTreeMap::new();
        for line in listed.split(|b| *b == 0).filter(|l| !l.is_empty()) {
            let Some(tab) = line.iter().position(|b| *b == b'\t') else {
                continue;
            };
            let meta = String::from_utf8_lossy(&line[..tab]);
            let fields: Vec<&str> = meta.split(' ').collect();
            if let [mode, _, id] = fields[..] {
                found.insert(
                    String::from_utf8_lossy(&line[tab + 1..]).into_owned(),
                    format!("{mode} {id}"),
                );
            }
        }
        let zero = "0".repeat(onto.as_str().len());
        let mut info = Vec::new();
        for path in paths {
            let entry = found
                .get(path)
                .cloned()
                .unwrap_or_else(|| format!("0 {zero}"));
            info.extend_from_slice(format!("{entry}\t{path}").as_bytes());
            info.push(0);
        }
        self.git(
            None,
            Some(index),
            &["update-index", "-z", "--index-info"],
            Some(info),
        )
        .await?;
        let out = self.git(None, Some(index), &["write-tree"], None).await?;
        TreeId::parse(&String::from_utf8_lossy(&out))
    }
}

fn fs_create(dir: &Path) -> Result<(), GitTreeError> {
    std::fs::create_dir_all(dir).map_err(io_error(dir))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    use crate::run::workspace::git_test_env as env;

    #[tokio::test]
    async fn changed_entries_blobs_and_a_tree_with_paths_from_another() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        fs::create_dir_all(ws.join("t")).unwrap();
        crate::run::workspace::git_init_for_tests(&ws).await;
        fs::write(ws.join("a.txt"), "a\n").unwrap();
        fs::write(ws.join("t/test_a.py"), "assert 1\n").unwrap();
        fs::write(ws.join("gone.txt"), "g\n").unwrap();
        fs::write(ws.join("empty"), "").unwrap();
        let store = GitStore::open(&dir.path().join("git"), &ws, &env())
            .await
            .unwrap()
            .unwrap();
        let index = dir.path().join("wt.index");
        let base = store.write_tree(&ws, &index).await.unwrap();
        fs::write(ws.join("t/test_a.py"), "pass\n").unwrap();
        fs::remove_file(ws.join("gone.txt")).unwrap();
        fs::write(ws.join("new.txt"), "n\n").unwrap();
        std::os::unix::fs::symlink("a.txt", ws.join("link")).unwrap();
        let now = store.write_tree(&ws, &index).await.unwrap();
        assert!(store.diff_entries(&base, &base).await.unwrap().is_empty());
        let changed = store.diff_entries(&base, &now).await.unwrap();
        let summary: Vec<(&str, bool, bool)> = changed
            .iter()
            .map(|c| (c.path.as_str(), c.old.is_some(), c.new.is_some()))
            .collect();
        assert_eq!(
            summary,
            [
                ("gone.txt", true, false),
                ("link", false, true),
                ("new.txt", false, true),
                ("t/test_a.py", true, true)
            ]
        );
        assert!(changed[1].new.as_ref().unwrap().is_symlink());
        let test = &changed[3];
        let ids = [
            test.old.clone().unwrap().object,
            test.new.clone().unwrap().object,
            changed[1].new.clone().unwrap().object,
            "0".repeat(40),
        ];
        let blobs = store.read_blobs(&ids, 1 << 20).await.unwrap();
        assert_eq!(blobs[&ids[0]], b"assert 1\n");
        assert_eq!(blobs[&ids[1]], b"pass\n");
        assert_eq!(blobs[&ids[2]], b"a.txt", "a link's blob is its target");
        assert!(!blobs.contains_key(&ids[3]), "a missing object is absent");
        let small = store.read_blobs(&ids[..1], 3).await.unwrap();
        assert!(small.is_empty(), "a blob over the cap is not read");
        // The work tree with the test and the removed file as they were, the new file gone.
        let scratch = dir.path().join("compose.index");
        let paths = ["t/test_a.py", "gone.txt", "new.txt"].map(String::from);
        let composed = store
            .with_paths_from(&now, &base, &paths, &scratch)
            .await
            .unwrap();
        assert!(!scratch.exists(), "the scratch index is removed");
        let left: Vec<String> = store
            .diff_entries(&base, &composed)
            .await
            .unwrap()
            .into_iter()
            .map(|c| c.path)
            .collect();
        assert_eq!(
            left,
            ["link"],
            "only what was not taken from the base differs"
        );
        assert_eq!(
            store
                .with_paths_from(&now, &base, &[], &scratch)
                .await
                .unwrap(),
            now
        );
        // A file's content read in process, and a tree with new contents at two paths (one in
        // a directory it creates), as git reads it back.
        assert_eq!(
            store.file_at(&base, "t/test_a.py"),
            Some((0o100644, b"assert 1\n".to_vec()))
        );
        assert_eq!(store.file_at(&base, "t"), None, "a directory is no file");
        assert_eq!(store.file_at(&now, "gone.txt"), None);
        let written = store
            .with_contents(
                &now,
                &[
                    ("t/test_a.py".into(), 0o100755, b"spliced\n".to_vec()),
                    ("d/e/new.rs".into(), 0o100644, b"fn main() {}\n".to_vec()),
                ],
            )
            .unwrap();
        let listed = store
            .git(None, None, &["ls-tree", "-r", written.as_str()], None)
            .await
            .unwrap();
        let listed = String::from_utf8(listed).unwrap();
        assert!(
            listed.contains("100755 blob ") && listed.contains("\tt/test_a.py"),
            "{listed}"
        );
        assert!(
            listed.contains("\td/e/new.rs") && listed.contains("\tnew.txt"),
            "{listed}"
        );
        assert_eq!(
            store.file_at(&written, "t/test_a.py").unwrap().1,
            b"spliced\n"
        );
        assert_eq!(store.with_contents(&now, &[]), Some(now.clone()));
    }

    /// Commits every file of `ws` (and packs its objects, `gc`).
    async fn commit_all(ws: &std::path::Path, gc: bool) {
        let mut committing = env();
        for (k, v) in [("GIT_AUTHOR_NAME", "t"), ("GIT_AUTHOR_EMAIL", "t@x")] {
            committing.insert(k.into(), v.into());
            committing.insert(k.replace("AUTHOR", "COMMITTER"), v.into());
        }
        let git = crate::run::workspace::git;
        git(ws, &["add", "-A"], &committing).await.unwrap();
        git(ws, &["commit", "-qm", "seed"], &committing)
            .await
            .unwrap();
        if gc {
            git(ws, &["gc", "-q"], &committing).await.unwrap();
        }
    }

    /// Every answer read or written in process is the one git gives (the git paths are the
    /// fallback for objects that are not loose).
    #[tokio::test]
    async fn in_process_answers_are_gits() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        fs::create_dir_all(ws.join("d/e")).unwrap();
        crate::run::workspace::git_init_for_tests(&ws).await;
        fs::write(ws.join("a"), "a\n").unwrap();
        fs::write(ws.join("a.b"), "ab\n").unwrap();
        fs::write(ws.join("d/e/deep.txt"), "deep\n").unwrap();
        fs::write(ws.join("d/x"), "x\n").unwrap();
        fs::write(ws.join("run.sh"), "#!/bin/sh\n").unwrap();
        fs::set_permissions(ws.join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink("a", ws.join("ln")).unwrap();
        commit_all(&ws, false).await;
        let store = GitStore::open(&dir.path().join("git"), &ws, &env())
            .await
            .unwrap()
            .unwrap();
        let index = dir.path().join("wt.index");
        let base = store.write_tree(&ws, &index).await.unwrap();
        fs::remove_dir_all(ws.join("d/e")).unwrap();
        fs::write(ws.join("d/e"), "now a file\n").unwrap();
        fs::write(ws.join("d/x"), "changed\n").unwrap();
        fs::set_permissions(ws.join("run.sh"), fs::Permissions::from_mode(0o644)).unwrap();
        fs::create_dir_all(ws.join("a.d")).unwrap();
        fs::write(ws.join("a.d/n"), "n\n").unwrap();
        let now = store.write_tree(&ws, &index).await.unwrap();
        for tree in [&base, &now] {
            assert_eq!(
                store.odb.entries(tree).unwrap(),
                store.entries_by_git(tree).await.unwrap()
            );
        }
        for (old, new) in [(&base, &now), (&now, &base)] {
            assert_eq!(
                store.odb.diff(old, new).unwrap(),
                store.diff_entries_by_git(old, new).await.unwrap()
            );
        }
        let ids: Vec<String> = store
            .odb
            .diff(&base, &now)
            .unwrap()
            .into_iter()
            .flat_map(|c| [c.old, c.new])
            .flatten()
            .map(|side| side.object)
            .collect();
        for cap in [4, 1 << 20] {
            assert_eq!(
                store.read_blobs_loose(&ids, cap).unwrap(),
                store.read_blobs_by_git(&ids, cap).await.unwrap()
            );
        }
        let scratch = dir.path().join("compose.index");
        for paths in [
            vec!["d/e/deep.txt", "d/e", "run.sh"],
            vec!["d/x", "a.d/n", "missing/too"],
            vec!["d/e"],
            vec!["a.d/n", "d/e/deep.txt"],
        ] {
            let paths: Vec<String> = paths.into_iter().map(String::from).collect();
            for (onto, from) in [(&now, &base), (&base, &now)] {
                let by_git = store.compose(onto, from, &paths, &scratch).await.unwrap();
                let _ = fs::remove_file(&scratch);
                assert_eq!(
                    store.odb.with_paths_from(onto, from, &paths).unwrap(),
                    by_git,
                    "{paths:?}"
                );
            }
        }
        // An index for a tree: the entries `git read-tree` writes, and one git reads as the tree.
        for tree in [&base, &now] {
            let ours = dir.path().join("ours.index");
            let theirs = dir.path().join("theirs.index");
            store.read_tree_into(tree, &ours).await.unwrap();
            store
                .git(None, Some(&theirs), &["read-tree", tree.as_str()], None)
                .await
                .unwrap();
            let read = |path: &Path| crate::gitindex::entries(&fs::read(path).unwrap()).unwrap();
            assert_eq!(read(&ours), read(&theirs));
            let listed = store
                .git(
                    None,
                    Some(&ours),
                    &["diff-index", "--cached", "--raw", tree.as_str()],
                    None,
                )
                .await
                .unwrap();
            assert!(listed.is_empty(), "{}", String::from_utf8_lossy(&listed));
        }
        // The verification commit: the same bytes as `git commit-tree` writes.
        let head = store.head_of(&ws).await.unwrap();
        assert!(head.is_some());
        for parent in [None, head.as_ref()] {
            let ours = store.commit_for(&now, parent).await.unwrap();
            let mut env = store.env.clone();
            env.insert("GIT_DIR".into(), store.git_dir.display().to_string());
            let when = match parent {
                Some(p) => store.memo.commit(p.as_str()).unwrap().1,
                None => "@0 +0000".to_owned(),
            };
            for (name, value) in [
                ("GIT_AUTHOR_NAME", "autocode"),
                ("GIT_AUTHOR_EMAIL", "autocode@localhost"),
                ("GIT_COMMITTER_NAME", "autocode"),
                ("GIT_COMMITTER_EMAIL", "autocode@localhost"),
                ("GIT_AUTHOR_DATE", &when),
                ("GIT_COMMITTER_DATE", &when),
            ] {
                env.insert(name.into(), value.into());
            }
            let mut args = vec!["commit-tree", "--no-gpg-sign", now.as_str()];
            if let Some(p) = parent {
                args.extend(["-p", p.as_str()]);
            }
            let out = super::super::run_git_accepting(
                &store.git_dir,
                &args,
                &env,
                Some(b"autocode: the tree under test\n".to_vec()),
                &[0],
            )
            .await
            .unwrap();
            assert_eq!(ours.as_str(), String::from_utf8_lossy(&out).trim());
        }
    }

    /// Files read and a tree written with new contents where the repository's objects are
    /// packed (a cloned or gc'ed repository): by git, the same answers as in process.
    #[tokio::test]
    async fn files_and_contents_where_the_objects_are_packed() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        fs::create_dir_all(ws.join("tests/unit")).unwrap();
        crate::run::workspace::git_init_for_tests(&ws).await;
        fs::write(ws.join("calc.py"), "def add(a, b):\n    return a + b\n").unwrap();
        fs::write(ws.join("tests/unit/test_calc.py"), "import calc\n").unwrap();
        fs::write(ws.join("tests/data.json"), "{}\n").unwrap();
        commit_all(&ws, true).await;
        let store = GitStore::open(&dir.path().join("git"), &ws, &env())
            .await
            .unwrap()
            .unwrap();
        let index = dir.path().join("wt.index");
        let tree = store.write_tree(&ws, &index).await.unwrap();
        assert_eq!(
            store.file_at(&tree, "calc.py"),
            None,
            "packed: not read in process"
        );
        let paths = ["tests/unit/test_calc.py", "calc.py", "tests", "missing.py"].map(String::from);
        let mut read = store.files_at(&tree, &paths, 1 << 20).await.unwrap();
        read.sort();
        assert_eq!(
            read,
            [
                (
                    "calc.py".to_owned(),
                    0o100644,
                    b"def add(a, b):\n    return a + b\n".to_vec()
                ),
                (
                    "tests/unit/test_calc.py".to_owned(),
                    0o100644,
                    b"import calc\n".to_vec()
                ),
            ]
        );
        let scratch = dir.path().join("contents.index");
        let files = [(
            "tests/unit/test_calc.py".to_owned(),
            0o100644,
            b"import calc\nraise RuntimeError\n".to_vec(),
        )];
        assert_eq!(store.with_contents(&tree, &files), None, "packed trees");
        let written = store
            .with_contents_anywhere(&tree, &files, &scratch)
            .await
            .unwrap();
        assert!(!scratch.exists(), "the scratch index is removed");
        let changed: Vec<String> = store
            .diff_entries(&tree, &written)
            .await
            .unwrap()
            .into_iter()
            .map(|c| c.path)
            .collect();
        assert_eq!(changed, ["tests/unit/test_calc.py"]);
        let again = store
            .files_at(&written, &paths[..1], 1 << 20)
            .await
            .unwrap();
        assert_eq!(again[0].2, b"import calc\nraise RuntimeError\n");
    }
}
