//! The object store read and written in process (issue 29): loose objects of the store's own
//! directory and of the repository's it borrows (`objects/info/alternates`, followed as git
//! follows them), inflated and deflated with `flate2`, named by SHA-1. This is git's plain case;
//! anything else (an object only in a pack, a sha256 repository) reads as `None` and the caller
//! asks git as before, so an answer from here is always the one git would give.
//!
//! Trees are walked ([`Odb::entries`], [`Odb::diff`]) and composed ([`Odb::with_paths_from`])
//! here, and objects written as git writes loose objects (not synced: git's default
//! `core.fsync` does not sync loose objects either).

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use super::{ChangedEntry, Entry, Side, TreeId};

/// The length of a SHA-1 id in hex: the only object format read here.
const SHA1_HEX: usize = 40;

/// How deep alternates are followed (git's limit).
const ALTERNATE_DEPTH: usize = 5;

/// What an object is (the word in its header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Blob,
    Tree,
    Commit,
    Tag,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Blob => "blob",
            Kind::Tree => "tree",
            Kind::Commit => "commit",
            Kind::Tag => "tag",
        }
    }

    fn from_word(word: &[u8]) -> Option<Kind> {
        match word {
            b"blob" => Some(Kind::Blob),
            b"tree" => Some(Kind::Tree),
            b"commit" => Some(Kind::Commit),
            b"tag" => Some(Kind::Tag),
            _ => None,
        }
    }
}

/// A loose object's header, and its content when it was read.
pub(super) struct Object {
    pub kind: Kind,
    pub size: u64,
    pub data: Option<Vec<u8>>,
}

/// One entry of a tree object: its canonical mode (as git reads it) and its id.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TreeEntry {
    name: Vec<u8>,
    mode: u32,
    id: String,
}

pub(super) const MODE_TREE: u32 = 0o040000;

impl TreeEntry {
    fn is_tree(&self) -> bool {
        self.mode == MODE_TREE
    }

    /// The mode as `ls-tree` and `diff-tree` print it.
    fn mode_text(&self) -> String {
        format!("{:06o}", self.mode)
    }
}

/// Git's `canon_mode`: what a mode read from a tree object means.
fn canon_mode(mode: u32) -> u32 {
    match mode & 0o170000 {
        0o100000 => 0o100000 | if mode & 0o100 != 0 { 0o755 } else { 0o644 },
        0o120000 => 0o120000,
        0o040000 => MODE_TREE,
        _ => 0o160000,
    }
}

/// The object directories of a store: its own first (where objects are written), then every
/// alternate.
#[derive(Debug, Clone)]
pub(super) struct Odb {
    dirs: Vec<PathBuf>,
}

impl Odb {
    /// The object directories of the git directory `git_dir`.
    pub(super) fn open(git_dir: &Path) -> Odb {
        let own = git_dir.join("objects");
        let mut dirs = vec![own.clone()];
        let mut next = vec![own];
        for _ in 0..ALTERNATE_DEPTH {
            let mut found = Vec::new();
            for dir in &next {
                let Ok(text) = fs::read_to_string(dir.join("info/alternates")) else {
                    continue;
                };
                for line in text.lines() {
                    let line = line.trim();
                    if line.is_empty() || line.starts_with('#') || line.starts_with('"') {
                        continue;
                    }
                    let path = dir.join(line);
                    let path = fs::canonicalize(&path).unwrap_or(path);
                    if !dirs.contains(&path) {
                        dirs.push(path.clone());
                        found.push(path);
                    }
                }
            }
            next = found;
        }
        Odb { dirs }
    }

    fn loose_path(dir: &Path, id: &str) -> PathBuf {
        dir.join(&id[..2]).join(&id[2..])
    }

    /// The object directories, the store's own first.
    pub(super) fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// Whether a directory holds the object `id` loose.
    pub(super) fn has_loose(&self, id: &str) -> bool {
        id.len() == SHA1_HEX
            && self
                .dirs
                .iter()
                .any(|dir| Self::loose_path(dir, id).exists())
    }

    /// The loose object `id`: its header, and its content when it is at most `cap` bytes.
    /// `None` when no directory holds it loose, or it cannot be read as one.
    pub(super) fn read_capped(&self, id: &str, cap: u64) -> Option<Object> {
        if id.len() != SHA1_HEX || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let file = self
            .dirs
            .iter()
            .find_map(|dir| fs::File::open(Self::loose_path(dir, id)).ok())?;
        let mut inflate = flate2::read::ZlibDecoder::new(io::BufReader::new(file));
        let mut header = Vec::with_capacity(32);
        let mut byte = [0u8; 1];
        loop {
            inflate.read_exact(&mut byte).ok()?;
            if byte[0] == 0 {
                break;
            }
            header.push(byte[0]);
            if header.len() > 32 {
                return None;
            }
        }
        let space = header.iter().position(|b| *b == b' ')?;
        let kind = Kind::from_word(&header[..space])?;
        let size: u64 = std::str::from_utf8(&header[space + 1..])
            .ok()?
            .parse()
            .ok()?;
        if size > cap {
            return Some(Object {
                kind,
                size,
                data: None,
            });
        }
        let mut data = Vec::with_capacity(usize::try_from(size).ok()?);
        inflate.read_to_end(&mut data).ok()?;
        (data.len() as u64 == size).then_some(Object {
            kind,
            size,
            data: Some(data),
        })
    }

    /// The content of the loose object `id` when it is of `kind`.
    pub(super) fn read(&self, id: &str, kind: Kind) -> Option<Vec<u8>> {
        let object = self.read_capped(id, u64::MAX)?;
        (object.kind == kind).then_some(object.data?)
    }

    /// Writes `data` as an object of `kind` (a no-op when a directory holds it loose already)
    /// and gives its id.
    pub(super) fn write(&self, kind: Kind, data: &[u8]) -> io::Result<String> {
        let id = object_id(kind, data);
        let header = format!("{} {}\0", kind.word(), data.len());
        if self
            .dirs
            .iter()
            .any(|dir| Self::loose_path(dir, &id).exists())
        {
            return Ok(id);
        }
        let path = Self::loose_path(&self.dirs[0], &id);
        let parent = path.parent().expect("a loose path has a parent");
        fs::create_dir_all(parent)?;
        let mut deflate =
            flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        deflate.write_all(header.as_bytes())?;
        deflate.write_all(data)?;
        let bytes = deflate.finish()?;
        // Whole or absent under its name: written aside, then renamed (as git does).
        let mut tmp = tempfile::Builder::new()
            .prefix("tmp_obj_")
            .tempfile_in(parent)?;
        tmp.write_all(&bytes)?;
        let tmp = tmp.into_temp_path();
        fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o444))?;
        tmp.persist(&path).map_err(|e| e.error)?;
        Ok(id)
    }

    /// The entries of the tree `id`, in the tree's order.
    fn tree(&self, id: &str) -> Option<Vec<TreeEntry>> {
        parse_tree(&self.read(id, Kind::Tree)?)
    }

    /// Every entry of `tree` but trees, recursively, in git's order (`git ls-tree -r`).
    pub(super) fn entries(&self, tree: &TreeId) -> Option<Vec<Entry>> {
        Some(
            self.index_entries(tree)?
                .into_iter()
                .map(|(mode, _, path)| Entry {
                    mode: format!("{mode:06o}"),
                    path: String::from_utf8_lossy(&path).into_owned(),
                })
                .collect(),
        )
    }

    /// Every entry of `tree` but trees, recursively, as an index holds them: canonical mode,
    /// object id (hex) and the path's bytes, in the tree's order (which is the index's).
    pub(super) fn index_entries(&self, tree: &TreeId) -> Option<Vec<(u32, String, Vec<u8>)>> {
        let mut out = Vec::new();
        self.walk_raw(tree.as_str(), &[], &mut out)?;
        Some(out)
    }

    fn walk_raw(
        &self,
        id: &str,
        prefix: &[u8],
        out: &mut Vec<(u32, String, Vec<u8>)>,
    ) -> Option<()> {
        for entry in self.tree(id)? {
            let mut path = prefix.to_vec();
            path.extend_from_slice(&entry.name);
            if entry.is_tree() {
                path.push(b'/');
                self.walk_raw(&entry.id, &path, out)?;
            } else {
                out.push((entry.mode, entry.id, path));
            }
        }
        Some(())
    }

    /// The entries that differ from `old` to `new` with both sides, in path order (`git
    /// diff-tree -r --no-renames --raw`): subtrees with one id are not read.
    pub(super) fn diff(&self, old: &TreeId, new: &TreeId) -> Option<Vec<ChangedEntry>> {
        let mut out = Vec::new();
        self.diff_into("", Some(old.as_str()), Some(new.as_str()), &mut out)?;
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Some(out)
    }

    fn diff_into(
        &self,
        prefix: &str,
        old: Option<&str>,
        new: Option<&str>,
        out: &mut Vec<ChangedEntry>,
    ) -> Option<()> {
        let by_name = |id: Option<&str>| -> Option<BTreeMap<Vec<u8>, TreeEntry>> {
            Some(match id {
                Some(id) => self
                    .tree(id)?
                    .into_iter()
                    .map(|e| (e.name.clone(), e))
                    .collect(),
                None => BTreeMap::new(),
            })
        };
        let old = by_name(old)?;
        let new = by_name(new)?;
        let mut names: Vec<&Vec<u8>> = old.keys().chain(new.keys()).collect();
        names.sort();
        names.dedup();
        for name in names {
            let (o, n) = (old.get(name), new.get(name));
            if let (Some(o), Some(n)) = (o, n)
                && o == n
            {
                continue;
            }
            let path = format!("{prefix}{}", String::from_utf8_lossy(name));
            let sub = format!("{path}/");
            let o_tree = o.filter(|e| e.is_tree()).map(|e| e.id.as_str());
            let n_tree = n.filter(|e| e.is_tree()).map(|e| e.id.as_str());
            if o_tree.is_some() || n_tree.is_some() {
                self.diff_into(&sub, o_tree, n_tree, out)?;
            }
            let side = |e: Option<&TreeEntry>| {
                e.filter(|e| !e.is_tree()).map(|e| Side {
                    mode: e.mode_text(),
                    object: e.id.clone(),
                })
            };
            let (o_side, n_side) = (side(o), side(n));
            if o_side.is_some() || n_side.is_some() {
                out.push(ChangedEntry {
                    path,
                    old: o_side,
                    new: n_side,
                });
            }
        }
        Some(())
    }

    /// The entry at `path` in `tree` (not a tree itself): its mode and id.
    fn lookup(&self, tree: &str, path: &str) -> Option<Option<(u32, String)>> {
        let mut id = tree.to_owned();
        let mut parts = path.split('/').peekable();
        while let Some(part) = parts.next() {
            let entries = self.tree(&id)?;
            let Some(entry) = entries.into_iter().find(|e| e.name == part.as_bytes()) else {
                return Some(None);
            };
            match (parts.peek().is_some(), entry.is_tree()) {
                (true, true) => id = entry.id,
                (false, false) => return Some(Some((entry.mode, entry.id))),
                _ => return Some(None),
            }
        }
        Some(None)
    }

    /// The tree `onto` with each of `paths` as it is in `from`: its entry there, or removed
    /// when `from` has none (what `git update-index --index-info` then `git write-tree` give).
    pub(super) fn with_paths_from(
        &self,
        onto: &TreeId,
        from: &TreeId,
        paths: &[String],
    ) -> Option<TreeId> {
        let mut root = Node::Stored(onto.as_str().to_owned());
        for path in paths {
            let parts: Vec<&str> = path.split('/').collect();
            if parts
                .iter()
                .any(|p| p.is_empty() || *p == "." || *p == "..")
            {
                return None;
            }
            let entry = self.lookup(from.as_str(), path)?;
            root.set(self, &parts, entry)?;
        }
        let id = root.write(self)?;
        TreeId::parse(&id).ok()
    }
}

impl Odb {
    /// The file at `path` in `tree`: its mode and content. `None`: absent, a tree, or not
    /// readable in process (packed).
    pub(super) fn file_at(&self, tree: &TreeId, path: &str) -> Option<(u32, Vec<u8>)> {
        let (mode, id) = self.lookup(tree.as_str(), path)??;
        let data = self.read(&id, Kind::Blob)?;
        Some((mode, data))
    }

    /// The tree `onto` with each `(path, mode, content)` written as a blob at its path. `None`
    /// when a tree on the way cannot be read in process.
    pub(super) fn with_contents(
        &self,
        onto: &TreeId,
        files: &[(String, u32, Vec<u8>)],
    ) -> Option<TreeId> {
        let mut root = Node::Stored(onto.as_str().to_owned());
        for (path, mode, content) in files {
            let parts: Vec<&str> = path.split('/').collect();
            if parts
                .iter()
                .any(|p| p.is_empty() || *p == "." || *p == "..")
            {
                return None;
            }
            let id = self.write(Kind::Blob, content).ok()?;
            root.set(self, &parts, Some((*mode, id)))?;
        }
        let id = root.write(self)?;
        TreeId::parse(&id).ok()
    }
}

/// The name git gives an object of `kind` with `data` (SHA-1 of its header and data, in hex).
pub(super) fn object_id(kind: Kind, data: &[u8]) -> String {
    let header = format!("{} {}\0", kind.word(), data.len());
    let mut sha = ring::digest::Context::new(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY);
    sha.update(header.as_bytes());
    sha.update(data);
    sha.finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A tree being composed: as stored, or read and changed.
enum Node {
    Stored(String),
    Leaf(u32, String),
    Dir(BTreeMap<Vec<u8>, Node>),
}

impl Node {
    fn load(&mut self, odb: &Odb) -> Option<&mut BTreeMap<Vec<u8>, Node>> {
        if let Node::Stored(id) = self {
            let entries = odb.tree(id)?;
            *self = Node::Dir(
                entries
                    .into_iter()
                    .map(|e| {
                        let node = if e.is_tree() {
                            Node::Stored(e.id)
                        } else {
                            Node::Leaf(e.mode, e.id)
                        };
                        (e.name, node)
                    })
                    .collect(),
            );
        }
        match self {
            Node::Dir(map) => Some(map),
            _ => None,
        }
    }

    /// Puts `entry` at `parts` (removing what is there when `None`), replacing a file that
    /// stands where a directory is needed and a directory where a file goes.
    fn set(&mut self, odb: &Odb, parts: &[&str], entry: Option<(u32, String)>) -> Option<()> {
        let map = self.load(odb)?;
        let name = parts[0].as_bytes().to_vec();
        if parts.len() == 1 {
            match entry {
                Some((mode, id)) => {
                    map.insert(name, Node::Leaf(mode, id));
                }
                None => {
                    if matches!(map.get(&name), Some(Node::Leaf(..))) {
                        map.remove(&name);
                    }
                }
            }
            return Some(());
        }
        match map.get(&name) {
            Some(Node::Leaf(..)) | None if entry.is_none() => return Some(()),
            Some(Node::Leaf(..)) | None => {
                map.insert(name.clone(), Node::Dir(BTreeMap::new()));
            }
            _ => {}
        }
        let child = map.get_mut(&name)?;
        child.set(odb, &parts[1..], entry)?;
        if let Node::Dir(sub) = child
            && sub.is_empty()
        {
            map.remove(&name);
        }
        Some(())
    }

    /// Writes what changed and gives this node's id (an empty directory is never written:
    /// the caller leaves it out).
    fn write(&self, odb: &Odb) -> Option<String> {
        match self {
            Node::Stored(id) | Node::Leaf(_, id) => Some(id.clone()),
            Node::Dir(map) => {
                let mut items: Vec<(Vec<u8>, u32, String)> = Vec::new();
                for (name, node) in map {
                    let mode = match node {
                        Node::Leaf(mode, _) => *mode,
                        Node::Dir(sub) if sub.is_empty() => continue,
                        _ => MODE_TREE,
                    };
                    items.push((name.clone(), mode, node.write(odb)?));
                }
                // Git's order: a tree's name sorts as if it ended with '/'.
                items.sort_by_key(|a| sort_key(&a.0, a.1));
                let mut data = Vec::new();
                for (name, mode, id) in items {
                    data.extend_from_slice(format!("{mode:o} ").as_bytes());
                    data.extend_from_slice(&name);
                    data.push(0);
                    data.extend_from_slice(&unhex(&id)?);
                }
                odb.write(Kind::Tree, &data).ok()
            }
        }
    }
}

/// Git's order of a tree's entries: a tree's name sorts as if it ended with '/'.
pub(super) fn sort_key(name: &[u8], mode: u32) -> Vec<u8> {
    let mut key = name.to_vec();
    if mode == MODE_TREE {
        key.push(b'/');
    }
    key
}

pub(super) fn unhex(id: &str) -> Option<Vec<u8>> {
    (0..id.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(id.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The entries of a tree object's content (`<octal mode> <name>\0<20-byte id>`, repeated).
fn parse_tree(mut data: &[u8]) -> Option<Vec<TreeEntry>> {
    let mut out = Vec::new();
    while !data.is_empty() {
        let space = data.iter().position(|b| *b == b' ')?;
        let mode = u32::from_str_radix(std::str::from_utf8(&data[..space]).ok()?, 8).ok()?;
        let rest = &data[space + 1..];
        let nul = rest.iter().position(|b| *b == 0)?;
        let name = rest[..nul].to_vec();
        let raw = rest.get(nul + 1..nul + 1 + SHA1_HEX / 2)?;
        out.push(TreeEntry {
            name,
            mode: canon_mode(mode),
            id: raw.iter().map(|b| format!("{b:02x}")).collect(),
        });
        data = &rest[nul + 1 + SHA1_HEX / 2..];
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_are_read_as_git_reads_them_and_trees_sort_as_git_sorts() {
        assert_eq!(canon_mode(0o100664), 0o100644);
        assert_eq!(canon_mode(0o100775), 0o100755);
        assert_eq!(canon_mode(0o40000), MODE_TREE);
        assert_eq!(canon_mode(0o160000), 0o160000);
        let mut names = [
            (b"a".to_vec(), MODE_TREE),
            (b"a.b".to_vec(), 0o100644),
            (b"a-".to_vec(), 0o100644),
        ];
        names.sort_by_key(|a| sort_key(&a.0, a.1));
        let order: Vec<&[u8]> = names.iter().map(|n| n.0.as_slice()).collect();
        assert_eq!(order, [&b"a-"[..], b"a.b", b"a"]);
        assert!(parse_tree(b"100644 x\0short").is_none());
    }
}
