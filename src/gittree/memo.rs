//! Answers about objects, remembered (issue 29): a tree, a commit and a blob never change once
//! written (their id is their content), so what git said about them once is what it would say
//! again. The verification of one stage asks the same questions more than once (the tester's
//! replay and the gate compare the same two trees); each answer here spares a git process.
//!
//! Only successful answers about named objects are kept, a few of each kind (the most recent),
//! so memory stays bounded whatever the run's length; an answer that depends on more than the
//! objects (which blobs fit a cap) is kept with that input in its key.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use super::{ChangedEntry, Entry, TreeId};

/// How many answers of each kind are kept.
const KEPT: usize = 4;

/// A few recent answers, oldest first.
#[derive(Debug)]
struct Recent<K, V> {
    items: VecDeque<(K, V)>,
}

impl<K, V> Default for Recent<K, V> {
    fn default() -> Self {
        Recent {
            items: VecDeque::new(),
        }
    }
}

impl<K: PartialEq, V: Clone> Recent<K, V> {
    fn get(&self, key: &K) -> Option<V> {
        self.items
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    }

    fn put(&mut self, key: K, value: V) {
        self.items.retain(|(k, _)| k != &key);
        if self.items.len() == KEPT {
            self.items.pop_front();
        }
        self.items.push_back((key, value));
    }
}

/// The objects asked for with the size cap, and the contents that came back by object id.
type BlobsAsked = (Vec<String>, u64);
type BlobsRead = Arc<BTreeMap<String, Vec<u8>>>;

#[derive(Debug, Default)]
struct Answers {
    diffs: Recent<(TreeId, TreeId), Arc<Vec<ChangedEntry>>>,
    entries: Recent<TreeId, Arc<Vec<Entry>>>,
    blobs: Recent<BlobsAsked, BlobsRead>,
    /// A commit's tree and committer time (`parse_commit`).
    commits: Recent<String, (TreeId, String)>,
}

/// The answers a store (and every clone of it) has had from git.
#[derive(Debug, Clone, Default)]
pub(super) struct Memo(Arc<Mutex<Answers>>);

impl Memo {
    fn with<T>(&self, f: impl FnOnce(&mut Answers) -> T) -> T {
        // A panic elsewhere while holding the lock leaves answers that are still true.
        let mut answers = self.0.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut answers)
    }

    pub(super) fn diff(&self, old: &TreeId, new: &TreeId) -> Option<Arc<Vec<ChangedEntry>>> {
        self.with(|a| a.diffs.get(&(old.clone(), new.clone())))
    }

    pub(super) fn put_diff(&self, old: &TreeId, new: &TreeId, value: Arc<Vec<ChangedEntry>>) {
        self.with(|a| a.diffs.put((old.clone(), new.clone()), value));
    }

    pub(super) fn entries(&self, tree: &TreeId) -> Option<Arc<Vec<Entry>>> {
        self.with(|a| a.entries.get(tree))
    }

    pub(super) fn put_entries(&self, tree: &TreeId, value: Arc<Vec<Entry>>) {
        self.with(|a| a.entries.put(tree.clone(), value));
    }

    pub(super) fn blobs(
        &self,
        objects: &[String],
        cap: u64,
    ) -> Option<Arc<BTreeMap<String, Vec<u8>>>> {
        self.with(|a| a.blobs.get(&(objects.to_vec(), cap)))
    }

    pub(super) fn put_blobs(
        &self,
        objects: &[String],
        cap: u64,
        value: Arc<BTreeMap<String, Vec<u8>>>,
    ) {
        self.with(|a| a.blobs.put((objects.to_vec(), cap), value));
    }

    pub(super) fn commit(&self, id: &str) -> Option<(TreeId, String)> {
        self.with(|a| a.commits.get(&id.to_owned()))
    }

    pub(super) fn put_commit(&self, id: &str, value: (TreeId, String)) {
        self.with(|a| a.commits.put(id.to_owned(), value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_recent_answers_are_kept_and_a_repeated_key_is_replaced() {
        let mut recent: Recent<u32, u32> = Recent::default();
        for n in 0..6 {
            recent.put(n, n * 10);
        }
        assert_eq!(recent.get(&0), None);
        assert_eq!(recent.get(&5), Some(50));
        recent.put(5, 7);
        assert_eq!(recent.get(&5), Some(7));
        assert_eq!(recent.items.len(), KEPT);
    }
}
