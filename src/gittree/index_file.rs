//! An index file written in process for a tree (issue 29: `git read-tree <tree>` was a git
//! process per verification tree): the entries of the tree with no stat data, as `read-tree`
//! writes them, so git compares each file's content the first time it looks.
//!
//! The format is git's version 2 (`Documentation/gitformat-index.txt`): the `DIRC` header, one
//! entry per blob, symlink and gitlink in path order (40 bytes of stat data, here zero but the
//! mode, the object id, the flags holding the path's length, the path, 1–8 NULs to a multiple of
//! 8 bytes), and the SHA-1 of everything before it. No extension is written: the cache tree
//! `read-tree` adds is an optimization git rebuilds when it wants one. Only SHA-1 ids are taken.

/// The bytes of a version 2 index holding exactly `entries` (mode, hex object id, path bytes),
/// at stage 0. `None` when an id is not a SHA-1 id or an entry's path is empty.
pub(super) fn index_bytes(mut entries: Vec<(u32, String, Vec<u8>)>) -> Option<Vec<u8>> {
    const STAT_WORDS_BEFORE_MODE: usize = 6;
    const STAT_WORDS_AFTER_MODE: usize = 3;
    const NAME_MASK: usize = 0x0fff;
    entries.sort_by(|a, b| a.2.cmp(&b.2));
    let count = u32::try_from(entries.len()).ok()?;
    let mut out = Vec::with_capacity(12 + entries.len() * 96 + 20);
    out.extend_from_slice(b"DIRC");
    out.extend_from_slice(&2u32.to_be_bytes());
    out.extend_from_slice(&count.to_be_bytes());
    for (mode, id, path) in &entries {
        if path.is_empty() || id.len() != 40 {
            return None;
        }
        let start = out.len();
        out.resize(out.len() + STAT_WORDS_BEFORE_MODE * 4, 0);
        out.extend_from_slice(&mode.to_be_bytes());
        out.resize(out.len() + STAT_WORDS_AFTER_MODE * 4, 0);
        for at in (0..40).step_by(2) {
            out.push(u8::from_str_radix(id.get(at..at + 2)?, 16).ok()?);
        }
        let flags = u16::try_from(path.len().min(NAME_MASK)).ok()?;
        out.extend_from_slice(&flags.to_be_bytes());
        out.extend_from_slice(path);
        // git's `ondisk_ce_size`: (62 + length + 8) rounded down to a multiple of 8.
        let size = (62 + path.len() + 8) & !7;
        out.resize(start + size, 0);
    }
    let digest = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, &out);
    out.extend_from_slice(digest.as_ref());
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_padded_to_eight_bytes_and_read_back() {
        let id = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391".to_owned();
        let bytes = index_bytes(vec![
            (0o100755, id.clone(), b"b/run.sh".to_vec()),
            (0o100644, id.clone(), b"a".to_vec()),
            (0o120000, id.clone(), b"a-link".to_vec()),
        ])
        .unwrap();
        // Header 12, entries of 62 + name rounded up with at least one NUL, trailer 20.
        assert_eq!(bytes.len(), 12 + 64 + 72 + 72 + 20);
        let entries = crate::gitindex::entries(&bytes).expect("a readable index");
        let paths: Vec<&[u8]> = entries.iter().map(|e| e.path.as_slice()).collect();
        assert_eq!(paths, [&b"a"[..], b"a-link", b"b/run.sh"]);
        assert_eq!(entries[2].mode, 0o100755);
        assert_eq!(entries[1].mode, 0o120000);
        assert!(entries.iter().all(|e| e.stage() == 0 && e.size == 0));
        assert!(index_bytes(vec![(0o100644, "nothex".into(), b"a".to_vec())]).is_none());
    }
}
