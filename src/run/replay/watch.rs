//! The test files of the tree under test, watched while a replayed check runs: a check must
//! leave them as it found them. Code under test that rewrites a test module before the runner
//! imports it (a module imported by one test file rewriting the next, `build.rs`, a `pretest`
//! script), or that deletes a test, makes the check run tests that are not the tree's; its output
//! reads as an honest run, and even a file put back afterwards has been written. So every test
//! file the tree holds (by its layout or named by a check, `verify::testfiles`) is looked at
//! when the batch's checks start and after each check, as the family saw it: in the tree on
//! disk, or through the overlay's layers (the upper layer's entry when it has one, a whiteout or
//! an opaque directory above it hiding the lower layer's); a file removed, or whose size or
//! modification time moved, is changed. Its mode, inode and change time are not compared: a
//! `chmod +x` of a test script, or the overlay's copy-up, writes no test. Files the `prepare`
//! steps write are not the tree's and not watched, nor what a check adds (caches, `__pycache__`,
//! snapshots it writes anew). Not seen: a file written and put back with its size and
//! modification time restored (`os.utime`), which only a digest of every test file would see.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::supervise::Overlay;
use crate::verify::testfiles::TestMatcher;

/// The files of the tree under test.
#[derive(Debug, Clone)]
pub enum TreeFiles {
    /// The tree on disk is exactly the tree under test (a clean copy, a checkout): listed when
    /// the batch opens, before its `prepare` steps.
    OnDisk,
    /// Listed by the caller (the tree's git entries): an overlay's directory cannot be listed
    /// from outside its mount namespace.
    Listed(Vec<String>),
}

/// What a file looked like to the check's family (`None`: absent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    size: u64,
    mtime: (i64, i64),
}

impl Seen {
    fn of(path: &Path) -> Option<Seen> {
        let m = std::fs::symlink_metadata(path).ok()?;
        Some(Seen {
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
        })
    }

    /// An overlay whiteout: a character device 0:0.
    fn is_whiteout(path: &Path) -> bool {
        std::fs::symlink_metadata(path)
            .is_ok_and(|m| m.file_type().is_char_device() && m.rdev() == 0)
    }
}

/// The tree's files and where the check's family sees them.
#[derive(Debug)]
pub struct TestFileWatch {
    tree: PathBuf,
    /// The overlay's upper and lower layers, when the family sees the tree through one.
    layers: Option<(PathBuf, PathBuf)>,
    files: Vec<String>,
}

/// The watched files' states when the batch's checks start.
#[derive(Debug)]
pub struct Before(Vec<(String, Option<Seen>)>);

impl TestFileWatch {
    pub fn new(tree: &Path, overlay: Option<&Overlay>, files: TreeFiles) -> TestFileWatch {
        let files = match files {
            TreeFiles::Listed(files) => files,
            TreeFiles::OnDisk if overlay.is_none() => crate::verify::treediff::list_tree(tree),
            // Not listable from here: nothing is watched.
            TreeFiles::OnDisk => Vec::new(),
        };
        TestFileWatch {
            tree: tree.to_owned(),
            layers: overlay.map(|o| (o.upper.clone(), o.lower.clone())),
            files,
        }
    }

    /// The test files of the tree (by layout, or named by one of `commands`) as they are now.
    pub fn before(&self, commands: &[String]) -> Before {
        let matcher = TestMatcher::new(commands);
        Before(
            self.files
                .iter()
                .filter(|f| matcher.is_test(f))
                .map(|f| (f.clone(), self.seen(f)))
                .collect(),
        )
    }

    /// The files of `before` that are not as they were.
    pub fn changed(&self, before: &Before) -> Vec<String> {
        before
            .0
            .iter()
            .filter(|(f, seen)| self.seen(f) != *seen)
            .map(|(f, _)| f.clone())
            .collect()
    }

    /// `rel` as the family sees it.
    fn seen(&self, rel: &str) -> Option<Seen> {
        let Some((upper, lower)) = &self.layers else {
            return Seen::of(&self.tree.join(rel));
        };
        // The upper layer's entry, if any, is what shows; a whiteout above it (a directory
        // removed) hides it, and an opaque directory above it hides the lower layer.
        let mut lower_shows = true;
        let mut dir = upper.clone();
        let parts: Vec<&str> = rel.split('/').collect();
        for part in &parts[..parts.len() - 1] {
            dir.push(part);
            if Seen::is_whiteout(&dir) {
                return None;
            }
            if crate::supervise::overlay_opaque(&dir) {
                lower_shows = false;
            }
        }
        let in_upper = upper.join(rel);
        if Seen::is_whiteout(&in_upper) {
            return None;
        }
        match Seen::of(&in_upper) {
            Some(seen) => Some(seen),
            None if lower_shows => Seen::of(&lower.join(rel)),
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rewritten_or_deleted_test_file_is_changed_and_a_read_or_a_new_file_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path();
        std::fs::create_dir_all(tree.join("tests")).unwrap();
        for f in ["tests/test_a.py", "tests/test_b.py", "test_c.py", "calc.py"] {
            std::fs::write(tree.join(f), "x = 1\n").unwrap();
        }
        let watch = TestFileWatch::new(tree, None, TreeFiles::OnDisk);
        let before = watch.before(&["python3 -m pytest".to_owned()]);
        let watched: Vec<&str> = before.0.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(watched, ["test_c.py", "tests/test_a.py", "tests/test_b.py"]);
        assert!(watch.changed(&before).is_empty());
        std::fs::read(tree.join("tests/test_a.py")).unwrap();
        std::fs::write(tree.join("tests/new_test.py"), "").unwrap();
        std::fs::write(tree.join("calc.py"), "x = 2\n").unwrap();
        let mut mode = std::fs::metadata(tree.join("tests/test_b.py"))
            .unwrap()
            .permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut mode, 0o755);
        std::fs::set_permissions(tree.join("tests/test_b.py"), mode).unwrap();
        assert!(watch.changed(&before).is_empty());
        // The same bytes written back moved the file's modification time.
        let written = std::fs::metadata(tree.join("tests/test_a.py"))
            .unwrap()
            .modified()
            .unwrap();
        std::fs::write(tree.join("tests/test_a.py"), "x = 1\n").unwrap();
        std::fs::File::options()
            .write(true)
            .open(tree.join("tests/test_a.py"))
            .unwrap()
            .set_modified(written + std::time::Duration::from_millis(5))
            .unwrap();
        std::fs::remove_file(tree.join("test_c.py")).unwrap();
        assert_eq!(watch.changed(&before), ["test_c.py", "tests/test_a.py"]);
    }

    #[test]
    fn through_layers_the_upper_entry_shows_and_a_whiteout_hides() {
        let dir = tempfile::tempdir().unwrap();
        let (upper, lower) = (dir.path().join("upper"), dir.path().join("lower"));
        for layer in [&upper, &lower] {
            std::fs::create_dir_all(layer.join("tests")).unwrap();
        }
        std::fs::write(lower.join("tests/test_a.py"), "a\n").unwrap();
        std::fs::write(lower.join("tests/test_b.py"), "b\n").unwrap();
        std::fs::write(upper.join("tests/test_b.py"), "b2\n").unwrap();
        let overlay = Overlay {
            dir: dir.path().join("merged"),
            lower: lower.clone(),
            upper: upper.clone(),
            work: dir.path().join("work"),
        };
        let files = TreeFiles::Listed(vec!["tests/test_a.py".into(), "tests/test_b.py".into()]);
        let watch = TestFileWatch::new(&overlay.dir, Some(&overlay), files);
        let before = watch.before(&["pytest".to_owned()]);
        assert_eq!(before.0[0].1, Seen::of(&lower.join("tests/test_a.py")));
        assert_eq!(before.0[1].1, Seen::of(&upper.join("tests/test_b.py")));
        // A copy-up of test_a keeps its time (what a chmod through the overlay does); a write
        // moves it.
        std::fs::copy(lower.join("tests/test_a.py"), upper.join("tests/test_a.py")).unwrap();
        let lower_time = std::fs::metadata(lower.join("tests/test_a.py"))
            .unwrap()
            .modified()
            .unwrap();
        let copied = std::fs::File::options()
            .write(true)
            .open(upper.join("tests/test_a.py"))
            .unwrap();
        copied.set_modified(lower_time).unwrap();
        assert!(watch.changed(&before).is_empty());
        copied
            .set_modified(lower_time + std::time::Duration::from_secs(1))
            .unwrap();
        assert_eq!(watch.changed(&before), ["tests/test_a.py"]);
        let before = watch.before(&["pytest".to_owned()]);
        if crate::supervise::whiteout(&upper.join("tests/test_b.py.wh")).is_ok() {
            std::fs::remove_file(upper.join("tests/test_b.py")).unwrap();
            std::fs::rename(
                upper.join("tests/test_b.py.wh"),
                upper.join("tests/test_b.py"),
            )
            .unwrap();
            assert_eq!(watch.changed(&before), ["tests/test_b.py"]);
        }
    }
}
