//! The tree a private index holds, written in process instead of by `git write-tree` (issue
//! 29: the process per snapshot): every directory of the index's entries becomes a tree object
//! written loose into the store, except where the index's cache tree (its `TREE` extension)
//! still names a tree for the directory that covers exactly its entries and that the store
//! has (loose, or in a pack of the repository it borrows): that tree is used as it is, as git
//! uses it.
//!
//! A tree the store already has is not written again. Only git's plain case is written: a
//! SHA-1 index this reader takes ([`crate::gitindex::entries_and_extensions`]), every entry at
//! stage 0, none added with `git add -N`, every mode one a tree can hold, and pack indexes
//! that `packs.rs` reads (version 2, at most 32 MiB of them). Anything else answers `None` and
//! the caller runs `git write-tree`. Unlike git, the index file is not rewritten with the new
//! cache tree: the directories `git add` invalidated are hashed again at the next snapshot (in
//! memory; a tree already written is not written again).

use std::collections::HashMap;

use super::TreeId;
use super::odb::{Kind, MODE_TREE, Odb, object_id, sort_key};
use super::packs::PackIndexes;
use crate::gitindex::{self, EXTENDED_INTENT_TO_ADD, IndexEntry, OID_LEN};

type Oid = [u8; OID_LEN];

/// A directory of the cache tree: how many index entries its tree covers, and the tree
/// (`None`: invalidated).
type Cached = (usize, Option<Oid>);

/// Writes the tree of the index file `index` (its bytes) into `odb`'s own directory. `None`:
/// not the plain case; ask git.
pub(super) fn write(odb: &Odb, index: &[u8]) -> Option<TreeId> {
    let (entries, extensions) = gitindex::entries_and_extensions(index)?;
    let plain = entries.iter().all(|entry| {
        entry.stage() == 0
            && entry.extended_flags & EXTENDED_INTENT_TO_ADD == 0
            && matches!(entry.mode, 0o100644 | 0o100755 | 0o120000 | 0o160000)
            && !entry.path.is_empty()
    });
    if !plain {
        return None;
    }
    let cache = extensions
        .iter()
        .find(|(signature, _)| signature == b"TREE")
        .and_then(|(_, body)| cache_tree(body))
        .unwrap_or_default();
    let mut writer = Writer {
        odb,
        cache,
        packs: PackIndexes::default(),
    };
    let root = writer.tree(b"", &entries, 0)?;
    TreeId::parse(&hex(&root)).ok()
}

struct Writer<'a> {
    odb: &'a Odb,
    cache: HashMap<Vec<u8>, Cached>,
    packs: PackIndexes,
}

impl Writer<'_> {
    /// The tree of the directory `dir` (no trailing `/`; the root is empty), whose entries are
    /// `entries` (in index order), each path starting with `dir/` (`skip` bytes).
    fn tree(&mut self, dir: &[u8], entries: &[IndexEntry], skip: usize) -> Option<Oid> {
        if let Some(&(count, Some(oid))) = self.cache.get(dir)
            && count == entries.len()
            && self.has(&oid)?
        {
            return Some(oid);
        }
        let mut items: Vec<(&[u8], u32, Oid)> = Vec::new();
        let mut at = 0;
        while at < entries.len() {
            let rest = entries[at].path.get(skip..)?;
            let Some(slash) = rest.iter().position(|&b| b == b'/') else {
                items.push((rest, entries[at].mode, entries[at].oid));
                at += 1;
                continue;
            };
            // The entries of one directory are contiguous in index order.
            let prefix = &entries[at].path[..skip + slash + 1];
            let end = at
                + entries[at..]
                    .iter()
                    .take_while(|entry| entry.path.starts_with(prefix))
                    .count();
            let oid = self.tree(&prefix[..prefix.len() - 1], &entries[at..end], prefix.len())?;
            items.push((&rest[..slash], MODE_TREE, oid));
            at = end;
        }
        items.sort_by_cached_key(|(name, mode, _)| sort_key(name, *mode));
        if items.windows(2).any(|pair| pair[0].0 == pair[1].0)
            || items.iter().any(|i| i.0.is_empty())
        {
            return None;
        }
        let mut data = Vec::new();
        for (name, mode, oid) in items {
            data.extend_from_slice(format!("{mode:o} ").as_bytes());
            data.extend_from_slice(name);
            data.push(0);
            data.extend_from_slice(&oid);
        }
        // Written unless the store has it (a tree `git add` invalidated is often unchanged).
        let oid = unhex(&object_id(Kind::Tree, &data))?;
        if !self.has(&oid)? {
            self.odb.write(Kind::Tree, &data).ok()?;
        }
        Some(oid)
    }

    /// Whether the store has the object, loose or packed. `None`: its packs cannot be read
    /// here (then git writes the tree: writing every tree loose instead would cost a large
    /// repository thousands of files at every snapshot).
    fn has(&mut self, oid: &Oid) -> Option<bool> {
        if self.odb.has_loose(&hex(oid)) {
            return Some(true);
        }
        self.packs.contains(self.odb.dirs(), oid)
    }
}

/// The cache tree's directories by path: `path NUL entry_count SP subtree_count LF [oid]`,
/// each directory followed by its subtrees (`Documentation/gitformat-index.txt`, "Cache
/// tree"). `None`: it does not parse (then nothing is taken from it).
fn cache_tree(mut body: &[u8]) -> Option<HashMap<Vec<u8>, Cached>> {
    let mut cache = HashMap::new();
    // (the directory's path, how many of its subtrees are still to come)
    let mut open: Vec<(Vec<u8>, usize)> = Vec::new();
    while !body.is_empty() {
        let nul = body.iter().position(|&b| b == 0)?;
        let name = &body[..nul];
        let newline = body.iter().position(|&b| b == b'\n')?;
        let counts = std::str::from_utf8(body.get(nul + 1..newline)?).ok()?;
        let (entries, subtrees) = counts.split_once(' ')?;
        let entries: i64 = entries.parse().ok()?;
        let subtrees: usize = subtrees.parse().ok()?;
        body = &body[newline + 1..];
        let oid = if entries >= 0 {
            let oid: Oid = body.get(..OID_LEN)?.try_into().ok()?;
            body = &body[OID_LEN..];
            Some(oid)
        } else {
            None
        };
        let path = match open.last_mut() {
            None if name.is_empty() => Vec::new(),
            Some((parent, left)) if *left > 0 && !name.is_empty() => {
                *left -= 1;
                if parent.is_empty() {
                    name.to_vec()
                } else {
                    [parent.as_slice(), b"/", name].concat()
                }
            }
            _ => return None,
        };
        let count = usize::try_from(entries).unwrap_or(0);
        cache.insert(path.clone(), (count, oid));
        open.push((path, subtrees));
        while open.last().is_some_and(|(_, left)| *left == 0) {
            open.pop();
        }
    }
    open.is_empty().then_some(cache)
}

fn hex(oid: &[u8]) -> String {
    oid.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(id: &str) -> Option<Oid> {
    super::odb::unhex(id)?.try_into().ok()
}

#[cfg(test)]
mod tests;
