//! The verification tree as an overlay (issue 13): instead of writing the tree under test into
//! the verification tree, a confined family (the tester, each replay, the checks on the base)
//! sees the run's work tree through an overlay mounted over the tree's directory in its own
//! mount namespace (`crate::supervise::Overlay`), with an upper layer prepared here so that
//! what it sees is exactly the tree under test, closed like the checkout:
//!
//! - every entry of the work tree that its snapshot does not hold — `.git`, `.autocode/`,
//!   ignored files and directories, empty directories, FIFOs, sockets — is hidden by a
//!   whiteout (found by listing the directories the snapshot's index holds files in, never an
//!   ignored one);
//! - every path where the tree under test differs from that snapshot (the base's files, a
//!   tree with some paths from the base) is written from git, or hidden when the tree lacks it;
//! - every symlink of the tree that leads outside, lexically or resolved through the tree's
//!   own directories and links, is hidden and named in the report, as the checkout names it;
//! - `.git` is a file naming the verification root's private git directory, as in the checkout
//!   (`gitdir.rs`).
//!
//! The work is proportional to the directories of the tree and to what differs, not to the
//! size of its files: nothing of the tree is written. The lower layer is never written (what
//! the family writes lands in the upper layer, which the next use replaces), and no agent runs
//! while it is used (the family of every stage is dead, verified, before autocode goes on); an
//! `--in-place` workspace the person may edit meanwhile is checked after each replay by the
//! caller ([`Layer::lower_tree`]). What cannot be shown this way (a submodule, a directory the
//! tree needs where an ignored one lies, more than 64 MB of differing content, overlay xattrs
//! in the work tree) is [`LayerError::Unsupported`]: the caller checks the tree out instead.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::VerifyTree;
use crate::gittree::{GitTreeError, TreeId};
use crate::run::replay::{CopyReport, stays_inside};
use crate::supervise::Overlay;

/// The directory of the overlay's layers in the verification root.
const LAYER: &str = "layer";

/// The most symlinks one resolution follows (as the kernel's `ELOOP` limit).
const MAX_HOPS: usize = 40;

#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    /// The tree cannot be shown as an overlay of the work tree; the caller checks it out.
    #[error("{0}")]
    Unsupported(String),
    #[error(transparent)]
    Git(#[from] GitTreeError),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> LayerError + '_ {
    move |source| LayerError::Io {
        path: path.to_owned(),
        source,
    }
}

/// An overlay ready to mount, and what the tree under test leaves out.
#[derive(Debug, Clone)]
pub struct Layer {
    pub overlay: Overlay,
    pub report: CopyReport,
    /// The work tree's tree the layer was made over (what the lower layer must still hold).
    pub lower_tree: TreeId,
}

/// What an entry of a tree is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    File,
    Link(Vec<u8>),
}

/// A tree as paths: its files and links, and every directory that holds one.
#[derive(Debug, Default, Clone)]
struct TreeView {
    entries: HashMap<Vec<u8>, Kind>,
    dirs: HashSet<Vec<u8>>,
}

impl TreeView {
    fn add_dirs_of(&mut self, path: &[u8]) {
        let mut end = path.len();
        while let Some(slash) = path[..end].iter().rposition(|b| *b == b'/') {
            if !self.dirs.insert(path[..slash].to_vec()) {
                break;
            }
            end = slash;
        }
    }
}

fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    if dir.is_empty() {
        name.to_vec()
    } else {
        [dir, b"/", name].concat()
    }
}

fn parent(path: &[u8]) -> &[u8] {
    path.iter()
        .rposition(|b| *b == b'/')
        .map_or(&[][..], |slash| &path[..slash])
}

fn os(path: &[u8]) -> &Path {
    Path::new(std::ffi::OsStr::from_bytes(path))
}

fn text(path: &[u8]) -> String {
    String::from_utf8_lossy(path).into_owned()
}

const MODE_LINK: u32 = 0o120000;
const MODE_GITLINK: u32 = 0o160000;

/// What a layer reads of the work tree at its snapshot: the snapshot's files, links (with
/// their targets) and directories, and what the work tree holds beyond them. The caller keeps
/// it for the next layer over the same snapshot while the snapshot's fast path proves the work
/// tree unchanged since it was read (`crate::snapshot::Snapshotter::watch_proof`: every
/// directory's stat, so its names and its xattrs, and every entry's stat, so an empty file's
/// xattrs, are as recorded).
#[derive(Debug)]
pub struct LowerView {
    lower: PathBuf,
    lower_index: PathBuf,
    lower_tree: TreeId,
    snapshot: TreeView,
    /// Names the work tree holds beyond its snapshot (hidden by whiteouts), in walk order.
    beyond: Vec<Vec<u8>>,
}

impl LowerView {
    /// Reads the snapshot's private index and lists the directories it holds files in.
    fn read(lower: &Path, lower_index: &Path, lower_tree: &TreeId) -> Result<Self, LayerError> {
        let bytes = std::fs::read(lower_index).map_err(io(lower_index))?;
        let entries = crate::gitindex::entries(&bytes).ok_or_else(|| {
            LayerError::Unsupported(format!("{} is not an index", lower_index.display()))
        })?;
        drop(bytes);
        // The snapshot's files: the work tree holds exactly these, as these kinds.
        let mut snapshot = TreeView::default();
        // Its empty files: only an empty file can be an overlay whiteout by its xattrs.
        let mut empty: HashSet<Vec<u8>> = HashSet::new();
        for entry in &entries {
            let kind = match entry.mode & 0o170000 {
                MODE_GITLINK => {
                    return Err(LayerError::Unsupported(format!(
                        "`{}` is a submodule",
                        text(&entry.path)
                    )));
                }
                MODE_LINK => Kind::Link(Vec::new()),
                _ => Kind::File,
            };
            if entry.flags & 0x3000 != 0 {
                return Err(LayerError::Unsupported(format!(
                    "`{}` is unmerged in the snapshot's index",
                    text(&entry.path)
                )));
            }
            if kind == Kind::File && entry.size == 0 {
                empty.insert(entry.path.clone());
            }
            snapshot.add_dirs_of(&entry.path);
            snapshot.entries.insert(entry.path.clone(), kind);
        }
        drop(entries);
        let links = snapshot
            .entries
            .values()
            .filter(|kind| matches!(kind, Kind::Link(_)))
            .count();

        // What the work tree holds beyond its snapshot. An overlay reads its own xattrs in the
        // lower layer too (an empty file can be a whiteout, a directory opaque): an agent can
        // set them on its files, so a lower layer that has one is not used.
        let planted = |path: &Path| -> Result<(), LayerError> {
            if crate::supervise::has_overlay_xattr(path) {
                return Err(LayerError::Unsupported(format!(
                    "{} carries overlay attributes",
                    path.display()
                )));
            }
            Ok(())
        };
        let mut beyond = Vec::new();
        let mut links_read = 0;
        let mut pending: Vec<Vec<u8>> = vec![Vec::new()];
        while let Some(dir) = pending.pop() {
            let path = lower.join(os(&dir));
            planted(&path)?;
            let listing = std::fs::read_dir(&path).map_err(io(&path))?;
            for item in listing {
                let item = item.map_err(io(&path))?;
                let rel = join(&dir, item.file_name().as_bytes());
                let kind = item.file_type().map_err(io(&item.path()))?;
                match snapshot.entries.get_mut(&rel) {
                    Some(Kind::Link(target)) if kind.is_symlink() => {
                        let link = item.path();
                        *target = std::fs::read_link(&link)
                            .map_err(io(&link))?
                            .into_os_string()
                            .into_vec();
                        links_read += 1;
                        continue;
                    }
                    Some(Kind::File) if kind.is_file() => {
                        if empty.contains(&rel) {
                            planted(&item.path())?;
                        }
                        continue;
                    }
                    Some(_) => {
                        return Err(LayerError::Unsupported(format!(
                            "`{}` changed kind since the snapshot",
                            text(&rel)
                        )));
                    }
                    None => {}
                }
                if snapshot.dirs.contains(&rel) {
                    if !kind.is_dir() {
                        return Err(LayerError::Unsupported(format!(
                            "`{}` is no longer a directory since the snapshot",
                            text(&rel)
                        )));
                    }
                    pending.push(rel);
                } else {
                    beyond.push(rel);
                }
            }
        }
        if links_read != links {
            return Err(LayerError::Unsupported(
                "a symlink of the snapshot is gone from the work tree".into(),
            ));
        }
        Ok(LowerView {
            lower: lower.to_owned(),
            lower_index: lower_index.to_owned(),
            lower_tree: lower_tree.clone(),
            snapshot,
            beyond,
        })
    }
}

impl VerifyTree {
    /// The overlay that shows exactly `tree` over `lower` (the work tree, whose snapshot
    /// `lower_tree` was just taken from the private index `lower_index`). The previous use's
    /// upper layer (whatever a check or the tester wrote) is removed first.
    pub async fn layer(
        &self,
        tree: &TreeId,
        lower: &Path,
        lower_index: &Path,
        lower_tree: &TreeId,
    ) -> Result<Layer, LayerError> {
        self.layer_known(tree, lower, lower_index, lower_tree, &mut None)
            .await
    }

    /// [`Self::layer`], reusing `known` when it was read over the same snapshot (the caller
    /// empties it unless the work tree is proven unchanged since: [`LowerView`]); what this
    /// layer read is left there.
    pub async fn layer_known(
        &self,
        tree: &TreeId,
        lower: &Path,
        lower_index: &Path,
        lower_tree: &TreeId,
        known: &mut Option<LowerView>,
    ) -> Result<Layer, LayerError> {
        let lower_view = match known.take() {
            Some(view)
                if view.lower == lower
                    && view.lower_index == lower_index
                    && view.lower_tree == *lower_tree =>
            {
                view
            }
            _ => LowerView::read(lower, lower_index, lower_tree)?,
        };
        let layer = self.layer_over(tree, &lower_view).await;
        if layer.is_ok() {
            *known = Some(lower_view);
        }
        layer
    }

    async fn layer_over(&self, tree: &TreeId, lower_view: &LowerView) -> Result<Layer, LayerError> {
        let (lower, lower_tree) = (lower_view.lower.as_path(), &lower_view.lower_tree);
        let changes = self.store().diff_entries(lower_tree, tree).await?;
        if changes
            .iter()
            .any(|c| c.new.as_ref().is_some_and(|n| n.is_gitlink()))
        {
            return Err(LayerError::Unsupported("the tree holds a submodule".into()));
        }
        // The blobs the tree under test has where the work tree differs.
        let wanted: Vec<String> = changes
            .iter()
            .filter_map(|c| c.new.as_ref().map(|n| n.object.clone()))
            .collect();
        let blobs = self.store().read_blobs(&wanted, u64::MAX).await?;
        if let Some(missing) = wanted.iter().find(|id| !blobs.contains_key(*id)) {
            return Err(LayerError::Unsupported(format!(
                "blob {missing} could not be read (more than {} MB differ?)",
                crate::gittree::BLOBS_BUDGET >> 20
            )));
        }

        let root = self.root().join(LAYER);
        let overlay = Overlay {
            dir: self.dir(),
            lower: lower.to_owned(),
            upper: root.join("upper"),
            work: root.join("work"),
        };
        if let Some((_, path)) = overlay.unnameable_layer() {
            return Err(LayerError::Unsupported(format!(
                "{} cannot be named in an overlay's mount options",
                path.display()
            )));
        }
        crate::gittree::remove_all(&root)?;
        for dir in [&overlay.dir, &overlay.upper, &overlay.work] {
            std::fs::create_dir_all(dir).map_err(io(dir))?;
        }
        let upper = Upper {
            root: &overlay.upper,
            lower,
        };

        // 1. Hide what the work tree holds beyond its snapshot.
        for rel in &lower_view.beyond {
            upper.whiteout(rel)?;
        }

        // 2. The tree under test where it differs from the snapshot (the snapshot itself when
        // nothing does: the tester's tree and the replays of the work tree).
        let mut view = Cow::Borrowed(&lower_view.snapshot);
        if !changes.is_empty() {
            let view = view.to_mut();
            for change in &changes {
                let path = change.path.as_bytes().to_vec();
                view.entries.remove(&path);
                if let Some(new) = &change.new {
                    let content = &blobs[&new.object];
                    view.entries.insert(
                        path,
                        if new.is_symlink() {
                            Kind::Link(content.clone())
                        } else {
                            Kind::File
                        },
                    );
                }
            }
            view.dirs.clear();
            let paths: Vec<Vec<u8>> = view.entries.keys().cloned().collect();
            for path in &paths {
                view.add_dirs_of(path);
            }
            // A directory the snapshot had that the tree lacks is not in the view: hidden
            // whole (at its top), unless the tree has a file there, which hides it.
            let mut gone: Vec<&Vec<u8>> = lower_view
                .snapshot
                .dirs
                .iter()
                .filter(|d| !view.dirs.contains(*d) && !view.entries.contains_key(*d))
                .filter(|d| {
                    let up = parent(d);
                    up.is_empty() || view.dirs.contains(up)
                })
                .collect();
            gone.sort();
            for dir in gone {
                upper.whiteout(dir)?;
            }
        }
        let files = view.entries.len();
        for change in &changes {
            let path = change.path.as_bytes();
            match &change.new {
                None => {
                    // Hidden already when its directory is a file in the tree, or no longer
                    // a directory; a directory in the tree is written beneath, below.
                    let dir = parent(path);
                    if !view.dirs.contains(path) && (dir.is_empty() || view.dirs.contains(dir)) {
                        upper.whiteout(path)?;
                    }
                }
                Some(new) => {
                    upper.write(path, &new.mode, &blobs[&new.object])?;
                }
            }
        }

        // 3. Close it: links that lead outside are hidden and named, in path order, as the
        // checkout's `close` does (first lexically, then resolved through what remains).
        let links: BTreeMap<Vec<u8>, Vec<u8>> = view
            .entries
            .iter()
            .filter_map(|(path, kind)| match kind {
                Kind::Link(target) => Some((path.clone(), target.clone())),
                Kind::File => None,
            })
            .collect();
        let mut unclosed = Vec::new();
        let mut kept = Vec::new();
        for (path, target) in &links {
            if stays_inside(&text(path), os(target)) {
                kept.push(path);
            } else {
                unclosed.push(format!(
                    "`{}` is a symlink to {} (outside the tree)",
                    text(path),
                    os(target).display()
                ));
                view.to_mut().entries.remove(path);
                upper.hide(path)?;
            }
        }
        for path in kept {
            if let Resolved::Outside(real) = view.resolve(path, &overlay.dir) {
                unclosed.push(format!(
                    "`{}` resolves to {} (outside the tree)",
                    text(path),
                    real.display()
                ));
                view.to_mut().entries.remove(path);
                upper.hide(path)?;
            }
        }
        // 4. Its `.git`: a file of the upper layer over the work tree's (hidden above).
        let seed = if tree == lower_tree {
            super::gitdir::IndexSeed::Copy(&lower_view.lower_index)
        } else {
            super::gitdir::IndexSeed::FromTree
        };
        let gitfile = self.show_as_checkout(tree, seed).await?;
        upper.write(b".git", "100644", &gitfile)?;
        Ok(Layer {
            report: CopyReport { files, unclosed },
            overlay,
            lower_tree: lower_tree.clone(),
        })
    }
}

/// The upper layer being prepared, over `lower`.
struct Upper<'a> {
    root: &'a Path,
    lower: &'a Path,
}

impl Upper<'_> {
    /// Makes `dir` a directory in the upper layer (and its parents). A parent hidden by a
    /// whiteout is made a directory again only if what it hides is not one (the merged view
    /// would show its content: that needs an opaque directory, left to the checkout).
    fn make_dir(&self, dir: &[u8]) -> Result<(), LayerError> {
        if dir.is_empty() {
            return Ok(());
        }
        let path = self.root.join(os(dir));
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => return Ok(()),
            Ok(_) => {
                if self
                    .lower
                    .join(os(dir))
                    .symlink_metadata()
                    .is_ok_and(|m| m.is_dir())
                {
                    return Err(LayerError::Unsupported(format!(
                        "the tree needs a directory `{}` where the work tree has one it hides",
                        text(dir)
                    )));
                }
                std::fs::remove_file(&path).map_err(io(&path))?;
            }
            Err(_) => self.make_dir(parent(dir))?,
        }
        std::fs::create_dir(&path).map_err(io(&path))
    }

    /// Hides `rel`. A directory the upper layer already holds there (made to hold whiteouts of
    /// what lies beneath, such as an empty directory beyond the snapshot) goes with it: the
    /// whiteout hides all of it.
    fn whiteout(&self, rel: &[u8]) -> Result<(), LayerError> {
        self.make_dir(parent(rel))?;
        let path = self.root.join(os(rel));
        if path.symlink_metadata().is_ok_and(|m| m.is_dir()) {
            std::fs::remove_dir_all(&path).map_err(io(&path))?;
        }
        crate::supervise::whiteout(&path).map_err(io(&path))
    }

    /// Hides `rel` whatever the upper layer holds there now.
    fn hide(&self, rel: &[u8]) -> Result<(), LayerError> {
        let path = self.root.join(os(rel));
        if path.symlink_metadata().is_ok() {
            std::fs::remove_file(&path).map_err(io(&path))?;
        }
        self.whiteout(rel)
    }

    fn write(&self, rel: &[u8], mode: &str, content: &[u8]) -> Result<(), LayerError> {
        self.make_dir(parent(rel))?;
        let path = self.root.join(os(rel));
        if path.symlink_metadata().is_ok_and(|m| !m.is_dir()) {
            std::fs::remove_file(&path).map_err(io(&path))?;
        }
        if mode == "120000" {
            std::os::unix::fs::symlink(os(content), &path).map_err(io(&path))
        } else {
            std::fs::write(&path, content).map_err(io(&path))?;
            let bits = if mode == "100755" { 0o755 } else { 0o644 };
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(bits))
                .map_err(io(&path))
        }
    }
}

/// Where a link of the tree leads, as `realpath` would find it in a checkout.
#[derive(Debug, PartialEq, Eq)]
enum Resolved {
    /// Inside the tree, or nowhere (a dangling link is harmless and kept, as by the checkout).
    Kept,
    /// Outside the tree, to this existing path.
    Outside(PathBuf),
}

impl TreeView {
    /// Resolves the link at `link` through the tree's own directories and links; a path that
    /// leaves the tree is resolved on the real file system from the tree's directory `dir`.
    fn resolve(&self, link: &[u8], dir: &Path) -> Resolved {
        let mut at: Vec<Vec<u8>> = parent(link)
            .split(|b| *b == b'/')
            .filter(|p| !p.is_empty())
            .map(<[u8]>::to_vec)
            .collect();
        // The link's own name is the first component looked up: its target follows.
        let mut rest: VecDeque<Vec<u8>> =
            VecDeque::from([link.rsplit(|b| *b == b'/').next().unwrap_or(link).to_vec()]);
        let mut hops = 0;
        while let Some(part) = rest.pop_front() {
            match &part[..] {
                b"" | b"." => {}
                b".." => {
                    if at.pop().is_none() {
                        let mut outside = dir.join("..");
                        for part in &rest {
                            outside.push(os(part));
                        }
                        return outside_path(outside, dir);
                    }
                }
                name => {
                    at.push(name.to_vec());
                    let path = at.join(&b'/');
                    if self.dirs.contains(&path) {
                        continue;
                    }
                    match self.entries.get(&path) {
                        Some(Kind::Link(target)) => {
                            hops += 1;
                            if hops > MAX_HOPS {
                                return Resolved::Kept;
                            }
                            at.pop();
                            let parts = target.split(|b| *b == b'/').map(<[u8]>::to_vec);
                            if target.first() == Some(&b'/') {
                                let mut outside = PathBuf::from(os(target));
                                for part in &rest {
                                    outside.push(os(part));
                                }
                                return outside_path(outside, dir);
                            }
                            for (i, part) in parts.enumerate() {
                                rest.insert(i, part);
                            }
                        }
                        Some(Kind::File) => {
                            if rest.iter().any(|p| !p.is_empty()) {
                                // Not a directory: `realpath` fails, the link dangles.
                                return Resolved::Kept;
                            }
                        }
                        None => return Resolved::Kept,
                    }
                }
            }
        }
        Resolved::Kept
    }
}

/// A path that left the tree: outside if it exists and is not back inside `dir`.
fn outside_path(path: PathBuf, dir: &Path) -> Resolved {
    let root = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned());
    match std::fs::canonicalize(&path) {
        Ok(real) if !real.starts_with(&root) => Resolved::Outside(real),
        _ => Resolved::Kept,
    }
}

#[cfg(test)]
mod tests;
