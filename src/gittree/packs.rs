//! Which objects the packs of a store's object directories hold, read from their version 2
//! `.idx` files (git's `Documentation/gitformat-pack.txt`, "Version 2 pack-*.idx files"): a
//! fan-out table of 256 counts, then the sorted object names. Only presence is answered here;
//! no pack is ever inflated. An index of another version, or one that does not parse, makes
//! the answer unknown (`None`) and the caller does what it does without one.

use std::fs;
use std::io;
use std::path::PathBuf;

const MAGIC: [u8; 4] = [0xff, b't', b'O', b'c'];
const HEADER: usize = 8;
const FANOUT: usize = 256 * 4;
const NAME: usize = 20;

/// The pack indexes of some object directories, read at the first question.
#[derive(Debug, Default)]
pub(super) struct PackIndexes {
    loaded: Option<Option<Vec<Vec<u8>>>>,
}

impl PackIndexes {
    /// Whether a pack in `dirs` holds the object named `oid`. `None`: a pack index there is
    /// not one this reader takes.
    pub(super) fn contains(&mut self, dirs: &[PathBuf], oid: &[u8; NAME]) -> Option<bool> {
        let indexes = self.loaded.get_or_insert_with(|| load(dirs)).as_ref()?;
        Some(indexes.iter().any(|index| holds(index, oid)))
    }
}

/// At most this many bytes of pack indexes are read (about 1.2 million objects): a larger
/// store's answers are git's, which maps its indexes instead of reading them.
const INDEXES_CAP: u64 = 32 << 20;

/// Every `pack/*.idx` with its `.pack` beside it, checked as version 2.
fn load(dirs: &[PathBuf]) -> Option<Vec<Vec<u8>>> {
    let mut indexes = Vec::new();
    let mut total = 0u64;
    for dir in dirs {
        let listing = match fs::read_dir(dir.join("pack")) {
            Ok(listing) => listing,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(_) => return None,
        };
        for entry in listing {
            let path = entry.ok()?.path();
            if path.extension().is_none_or(|ext| ext != "idx")
                || !path.with_extension("pack").exists()
            {
                continue;
            }
            total += fs::metadata(&path).ok()?.len();
            if total > INDEXES_CAP {
                return None;
            }
            let bytes = fs::read(&path).ok()?;
            if bytes.get(..4)? != MAGIC || bytes.get(4..8)? != [0, 0, 0, 2] {
                return None;
            }
            let count = count_below(&bytes, 256)?;
            if bytes.len() < HEADER + FANOUT + count * NAME {
                return None;
            }
            indexes.push(bytes);
        }
    }
    Some(indexes)
}

/// The fan-out entry `byte - 1`: how many names sort before the first byte `byte`.
fn count_below(index: &[u8], byte: usize) -> Option<usize> {
    if byte == 0 {
        return Some(0);
    }
    let at = HEADER + (byte - 1) * 4;
    Some(u32::from_be_bytes(index.get(at..at + 4)?.try_into().ok()?) as usize)
}

fn holds(index: &[u8], oid: &[u8; NAME]) -> bool {
    let first = usize::from(oid[0]);
    let (Some(low), Some(high), Some(total)) = (
        count_below(index, first),
        count_below(index, first + 1),
        count_below(index, 256),
    ) else {
        return false;
    };
    // `load` checked that `total` names fit; a fan-out that is not monotonic is no answer.
    if low > high || high > total {
        return false;
    }
    let name = |i: usize| &index[HEADER + FANOUT + i * NAME..HEADER + FANOUT + (i + 1) * NAME];
    let (mut low, mut high) = (low, high);
    while low < high {
        let mid = low + (high - low) / 2;
        match name(mid).cmp(oid.as_slice()) {
            std::cmp::Ordering::Equal => return true,
            std::cmp::Ordering::Less => low = mid + 1,
            std::cmp::Ordering::Greater => high = mid,
        }
    }
    false
}
