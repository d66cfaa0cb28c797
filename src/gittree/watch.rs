//! The fast path of a snapshot (issue 13): proving, without launching git, that `git add -A` +
//! `git write-tree` with the private index would give the tree id it gave last time.
//!
//! After each snapshot written by git, a [`Watcher`] records a watch state: the tree id; the
//! private index file's identity; the index's entries with the stat data git stored; the stat of
//! every directory of the work tree where a new file could enter the tree (every directory but
//! `.git`, autocode's `.autocode/` and directories git excludes as a whole, asked of
//! `git check-ignore`); and the stat of every ignore input (each `.gitignore` in a watched
//! directory, the private `info/exclude`, the user's excludes file and every git config file
//! that could name another; the store's own inputs, which autocode writes when it opens the
//! store, also by content). The next snapshot answers the recorded tree id when all of it still
//! holds, each entry compared as git compares it (`ie_match_stat`: mode type and executable
//! bit, ctime, mtime, inode, uid, gid, size, each truncated to 32 bits; an entry racily clean by
//! git's rule is hashed, as git does); any doubt is a [`Doubt`] and the snapshot is written by
//! git again. The trust argument is in `docs/run-lifecycle.md` ("Snapshots without git").

use std::collections::HashSet;
use std::ffi::{CString, OsStr};
use std::fmt;
use std::fs;
use std::io::{self, Read};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{FileStat, Mode};

use super::{GitStore, TreeId};
use crate::gitindex::IndexEntry;
use record::{ConfigInputs, Listing};

/// The blob id of empty content: an entry git stored with size 0 and another id is smudged.
const EMPTY_BLOB: [u8; 20] = [
    0xe6, 0x9d, 0xe2, 0x9b, 0xb2, 0xd1, 0xd6, 0x43, 0x4b, 0x8b, 0x29, 0xae, 0x77, 0x5a, 0xd8, 0xc2,
    0xe4, 0x8c, 0x53, 0x91,
];

/// Rounds of `git check-ignore` (one per depth of directories no index entry is beneath) before
/// the watch gives up.
const MAX_IGNORE_ROUNDS: usize = 16;

/// Entries past which the lstat pass is split over a thread per core.
const PARALLEL_ENTRIES: usize = 4096;

/// Which way a snapshot's tree id was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotPath {
    /// Proven unchanged from the watch state: no git launched.
    Watched,
    /// The watch state's tree, no git launched, but some file's stat moved below the second
    /// while its bytes stayed its blob (the same content saved again): the same tree, not a
    /// proof that nothing moved; the watch expects the new stat from now on.
    Refreshed,
    /// `git add -A` + `git write-tree` (and a new watch state).
    Written,
}

/// Why the fast path did not answer (logged; every one falls back to git).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Doubt {
    /// No watch state (the first snapshot, or the last could not record one).
    NoState,
    /// Another work tree or index than the one recorded.
    OtherTree,
    /// The private index file is not the one recorded.
    Index,
    /// An ignore input (a `.gitignore`, an excludes file, a config file) changed.
    Input(PathBuf),
    /// A watched directory's stat changed (an entry added, removed or renamed in it).
    Dir(PathBuf),
    /// A tracked path's stat no longer matches the index.
    Entry(PathBuf),
    /// A racily clean entry's content no longer hashes to its blob.
    RacyContent(PathBuf),
    /// A tracked path whose stat differs from the index only below the second and whose
    /// content no longer hashes to its blob: a same-size rewrite with its mtime put back within
    /// the second of its last ctime. git built without `USE_NSEC` (Debian's, among others)
    /// compares whole seconds and keeps the old blob; the snapshot is git's all the same.
    BelowGitsClock(PathBuf),
}

impl fmt::Display for Doubt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Doubt::NoState => f.write_str("no watch state"),
            Doubt::OtherTree => f.write_str("another work tree or index"),
            Doubt::Index => f.write_str("the private index changed"),
            Doubt::Input(p) => write!(f, "ignore input {} changed", p.display()),
            Doubt::Dir(p) => write!(f, "directory {} changed", p.display()),
            Doubt::Entry(p) => write!(f, "{} changed", p.display()),
            Doubt::RacyContent(p) => write!(f, "racily clean {} changed", p.display()),
            Doubt::BelowGitsClock(p) => {
                write!(f, "{} changed within the second git compares", p.display())
            }
        }
    }
}

/// Why no watch state was recorded after a written snapshot (logged; the next snapshot is
/// written by git too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unwatchable {
    /// Not a SHA-1 store.
    ObjectFormat,
    /// The index cannot be read, or is not a plain one (split, sparse, another version).
    Index(String),
    /// An entry git would not compare by stat alone: a gitlink, an unmerged path, an
    /// assume-unchanged, skip-worktree or intent-to-add entry.
    Entry(PathBuf),
    /// A directory or ignore input changed after the snapshot began (or within the clock tick
    /// it began in): what git saw is not known to be what was recorded.
    Racy(PathBuf),
    /// A directory could not be listed, or `git check-ignore` / `git config` failed.
    Walk(String),
}

impl fmt::Display for Unwatchable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unwatchable::ObjectFormat => f.write_str("not a SHA-1 store"),
            Unwatchable::Index(why) => write!(f, "index: {why}"),
            Unwatchable::Entry(p) => write!(f, "entry {} is not compared by stat", p.display()),
            Unwatchable::Racy(p) => write!(f, "{} changed during the snapshot", p.display()),
            Unwatchable::Walk(why) => f.write_str(why),
        }
    }
}

/// The stat fields a watch compares (full precision: its own lstat, not git's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    dev: u64,
    ino: u64,
    mode: u32,
    uid: u32,
    gid: u32,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl Stat {
    fn of(meta: &fs::Metadata) -> Stat {
        Stat {
            dev: meta.dev(),
            ino: meta.ino(),
            mode: meta.mode(),
            uid: meta.uid(),
            gid: meta.gid(),
            size: meta.size(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            ctime_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
        }
    }

    fn of_raw(st: &FileStat) -> Stat {
        Stat {
            dev: st.st_dev,
            ino: st.st_ino,
            mode: st.st_mode,
            uid: st.st_uid,
            gid: st.st_gid,
            size: st.st_size as u64,
            mtime_ns: i128::from(st.st_mtime) * 1_000_000_000 + i128::from(st.st_mtime_nsec),
            ctime_ns: i128::from(st.st_ctime) * 1_000_000_000 + i128::from(st.st_ctime_nsec),
        }
    }

    fn newest_ns(&self) -> i128 {
        self.mtime_ns.max(self.ctime_ns)
    }
}

/// lstat: `Ok(None)` when nothing is there (absent, or a parent is not a directory).
fn lstat(path: &Path) -> io::Result<Option<Stat>> {
    match fs::symlink_metadata(path) {
        Ok(meta) => Ok(Some(Stat::of(&meta))),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// An ignore or config input: its own stat and its target's (git follows a symlinked excludes
/// or config file). `None`: absent.
type InputStat = (Option<Stat>, Option<Stat>);

fn input_stat(path: &Path) -> io::Result<InputStat> {
    let followed = match fs::metadata(path) {
        Ok(meta) => Some(Stat::of(&meta)),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            None
        }
        Err(e) => return Err(e),
    };
    Ok((lstat(path)?, followed))
}

/// Consecutive index entries of one directory: each is looked up relative to the directory
/// (one path component a lookup, not the whole path).
#[derive(Debug)]
struct Group {
    dir: PathBuf,
    /// The directory relative to the work tree (`.` for its top).
    rel: CString,
    /// The directory's own recorded stat (checked on the descriptor the group opens).
    stat: Option<Stat>,
    entries: Vec<(CString, IndexEntry)>,
}

/// The recorded state of a work tree at a tree id.
#[derive(Debug)]
struct Watch {
    /// Unique in the process ([`WatchProof`]).
    id: u64,
    tree: TreeId,
    work_tree: PathBuf,
    index: PathBuf,
    index_stat: Stat,
    /// Whole seconds of the index file's mtime (git's racy rule, at its coarsest).
    index_mtime_sec: i64,
    /// The index entries (stat data as git stored it), by runs of the same directory.
    groups: Vec<Group>,
    /// Every directory an index entry is beneath (relative, `/`-separated).
    indexed_dirs: HashSet<Vec<u8>>,
    dirs: Vec<(PathBuf, Stat)>,
    inputs: Vec<(PathBuf, InputStat)>,
    /// The store's own inputs trusted by their content (changed within the racy window but
    /// read the same before and after git ran): compared by content as well as by stat.
    private: Vec<(PathBuf, PrivateContent)>,
}

/// The inputs in the store's own git directory, written only by autocode (`GitStore::init`).
const PRIVATE_INPUTS: [&str; 3] = ["config", "info/exclude", "info/attributes"];

/// A private input's bytes (`None`: absent or unreadable).
type PrivateContent = Option<Vec<u8>>;

fn read_private(path: &Path) -> PrivateContent {
    fs::read(path).ok()
}

/// One recorded watch state, as [`Watcher::proof`] names it: two snapshots with the same proof
/// found everything the watch compares as it was recorded (every watched directory's stat, so
/// its names and xattrs; every entry's stat; the ignore inputs), and nothing of it changed
/// between them (a change moves a ctime, which never comes back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchProof(u64);

impl WatchProof {
    fn next() -> u64 {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }
}

/// Where the clock of the racy rule comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchClock {
    /// The mtime the kernel gives a marker file in the store's git directory, written before
    /// git starts (the same clock as the work tree's timestamps).
    Marker,
    /// A fixed time in nanoseconds since the epoch (tests of the racy rule).
    Fixed(i128),
    /// No fast path: every snapshot is written by git and nothing is recorded (the cost before
    /// the fast path, for benches; a way out if the fast path is ever in doubt).
    Off,
}

/// The fast path's state for one work tree and its private index (kept by a `Snapshotter`).
#[derive(Debug)]
pub struct Watcher {
    state: Option<Watch>,
    /// The state a doubt dismissed: its parsed index is reused when git left the index as it was.
    stale: Option<Watch>,
    /// The store's own inputs as they read before git started ([`Self::start`]).
    private_before: Vec<(PathBuf, PrivateContent)>,
    config: Option<ConfigInputs>,
    /// `git check-ignore`'s answers at the last record.
    answers: Option<record::IgnoreAnswers>,
    /// Directory listings of the last record, by path relative to the work tree.
    listings: std::collections::HashMap<Vec<u8>, Listing>,
    clock: WatchClock,
    /// Snapshots answered from the watch state, and written by git.
    pub watched: u64,
    pub written: u64,
    /// Racily clean entries hashed by the fast path.
    pub hashed: u64,
    /// Why the last snapshot was written by git, and why the last record failed (if it did).
    pub last_doubt: Option<Doubt>,
    pub last_unwatchable: Option<Unwatchable>,
}

impl Default for Watcher {
    fn default() -> Self {
        Watcher::new(WatchClock::Marker)
    }
}

impl Watcher {
    pub fn new(clock: WatchClock) -> Watcher {
        Watcher {
            state: None,
            stale: None,
            private_before: Vec::new(),
            config: None,
            listings: std::collections::HashMap::new(),
            answers: None,
            clock,
            watched: 0,
            written: 0,
            hashed: 0,
            last_doubt: None,
            last_unwatchable: None,
        }
    }

    /// The watch state the last snapshot recorded or was proven unchanged from (`None`: the
    /// last snapshot was written by git and recorded nothing).
    pub fn proof(&self) -> Option<WatchProof> {
        self.state.as_ref().map(|watch| WatchProof(watch.id))
    }

    /// Forgets the watch state: the next snapshot is written by git.
    pub fn forget(&mut self) {
        self.state = None;
        self.stale = None;
    }

    /// The recorded tree id when nothing it depends on changed, and how it was proven
    /// ([`SnapshotPath::Watched`] or [`SnapshotPath::Refreshed`]).
    pub(super) fn unchanged(
        &mut self,
        work_tree: &Path,
        index: &Path,
    ) -> Option<(TreeId, SnapshotPath)> {
        let verdict = match &self.state {
            None => Err(Doubt::NoState),
            Some(w) if w.work_tree != work_tree || w.index != index => Err(Doubt::OtherTree),
            Some(w) => w
                .check(&mut self.hashed)
                .map(|refreshed| (w.tree.clone(), refreshed)),
        };
        match verdict {
            Ok((tree, refreshed)) => {
                let mut path = SnapshotPath::Watched;
                if !refreshed.is_empty()
                    && let Some(watch) = self.state.as_mut()
                {
                    // The same tree, but not the same stat: the watch now expects the stat it
                    // found (its bytes hash to the entry), and it is another watch state, so a
                    // proof taken before does not vouch for this one.
                    watch.refresh(&refreshed);
                    watch.id = WatchProof::next();
                    path = SnapshotPath::Refreshed;
                }
                self.watched += 1;
                self.last_doubt = None;
                Some((tree, path))
            }
            Err(doubt) => {
                tracing::debug!(%doubt, "snapshot written by git");
                self.stale = self.state.take();
                self.written += 1;
                self.last_doubt = Some(doubt);
                None
            }
        }
    }

    /// The time before git starts: whatever changed at or after it is not trusted. Also reads
    /// the store's own inputs (autocode writes them when it opens the store, often within the
    /// clock tick of the first snapshot): one that reads the same after git ran is trusted by
    /// its content instead of its time.
    pub(super) fn start(&mut self, git_dir: &Path) -> Option<i128> {
        self.private_before = PRIVATE_INPUTS
            .iter()
            .map(|name| {
                let path = git_dir.join(name);
                let content = read_private(&path);
                (path, content)
            })
            .collect();
        match self.clock {
            WatchClock::Off => None,
            WatchClock::Fixed(ns) => Some(ns),
            WatchClock::Marker => {
                let path = git_dir.join("watch.stamp");
                let file = fs::File::create(&path).ok()?;
                std::io::Write::write_all(&mut &file, b"x").ok()?;
                Some(Stat::of(&file.metadata().ok()?).mtime_ns)
            }
        }
    }

    /// Records the watch state of `tree`, just written by git with `index`; `since` is from
    /// [`Self::start`], taken before git began.
    pub(super) async fn record(
        &mut self,
        store: &GitStore,
        work_tree: &Path,
        index: &Path,
        tree: &TreeId,
        since: Option<i128>,
    ) {
        self.state = None;
        if self.clock == WatchClock::Off {
            return;
        }
        let result = match since {
            Some(since) => self.build(store, work_tree, index, tree, since).await,
            None => Err(Unwatchable::Walk("no clock for the racy rule".into())),
        };
        match result {
            Ok(watch) => {
                self.state = Some(watch);
                self.last_unwatchable = None;
            }
            Err(why) => {
                tracing::debug!(%why, "no watch state for the next snapshot");
                self.last_unwatchable = Some(why);
            }
        }
    }
}

/// An entry found equal to git's stat but below the second, its bytes still its blob: the
/// nanoseconds the watch expects from now on (group's relative dir, entry name, ctime, mtime).
type Refresh = (CString, CString, u32, u32);

impl Watch {
    /// Takes the stats [`Self::check`] found below the second as the ones to expect.
    fn refresh(&mut self, refreshed: &[Refresh]) {
        for (rel, name, ctime_nsec, mtime_nsec) in refreshed {
            let entry = self
                .groups
                .iter_mut()
                .filter(|group| &group.rel == rel)
                .flat_map(|group| group.entries.iter_mut())
                .find(|(entry_name, _)| entry_name == name);
            if let Some((_, entry)) = entry {
                entry.ctime.nsec = *ctime_nsec;
                entry.mtime.nsec = *mtime_nsec;
            }
        }
    }

    /// `Ok`: `git add -A` + `git write-tree` with the index would give `self.tree`; with the
    /// entries whose stat moved only below the second while their bytes stayed their blob.
    fn check(&self, hashed: &mut u64) -> Result<Vec<Refresh>, Doubt> {
        if lstat(&self.index).ok().flatten() != Some(self.index_stat) {
            return Err(Doubt::Index);
        }
        for (path, stat) in &self.inputs {
            if input_stat(path).ok().as_ref() != Some(stat) {
                return Err(Doubt::Input(path.clone()));
            }
        }
        for (path, content) in &self.private {
            if read_private(path) != *content {
                return Err(Doubt::Input(path.clone()));
            }
        }
        for (path, stat) in &self.dirs {
            if lstat(path).ok().flatten().as_ref() != Some(stat) {
                return Err(Doubt::Dir(path.clone()));
            }
        }
        let root = nix::fcntl::open(
            &self.work_tree,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|_| Doubt::Dir(self.work_tree.clone()))?;
        let refreshed: std::sync::Mutex<Vec<Refresh>> = std::sync::Mutex::new(Vec::new());
        let check_groups = |chunk: &[Group],
                            stop: &std::sync::atomic::AtomicBool|
         -> Result<Option<u64>, Doubt> {
            let mut hashed = 0;
            for group in chunk {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    return Ok(None);
                }
                let dir = nix::fcntl::openat(
                    &root,
                    group.rel.as_c_str(),
                    OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                    Mode::empty(),
                )
                .map_err(|_| Doubt::Dir(group.dir.clone()))?;
                let stat =
                    nix::sys::stat::fstat(&dir).map_err(|_| Doubt::Dir(group.dir.clone()))?;
                if Some(Stat::of_raw(&stat)) != group.stat {
                    return Err(Doubt::Dir(group.dir.clone()));
                }
                for (name, entry) in &group.entries {
                    let doubt = || Doubt::Entry(group.dir.join(OsStr::from_bytes(name.as_bytes())));
                    let stat = nix::sys::stat::fstatat(
                        &dir,
                        name.as_c_str(),
                        AtFlags::AT_SYMLINK_NOFOLLOW,
                    )
                    .map_err(|_| doubt())?;
                    let racy = i64::from(entry.mtime.sec) >= self.index_mtime_sec;
                    let below_the_second = match stat_matches(entry, &stat) {
                        StatMatch::Same => false,
                        StatMatch::BelowTheSecond => true,
                        StatMatch::Differs => return Err(doubt()),
                    };
                    if below_the_second {
                        // git may or may not see the difference (it does with `USE_NSEC`):
                        // either way its blob is the content's when the content hashes to it.
                        hashed += 1;
                        let path = group.dir.join(OsStr::from_bytes(name.as_bytes()));
                        if blob_id(&path, &stat).as_ref() != Some(&entry.oid) {
                            return Err(if racy {
                                Doubt::RacyContent(path)
                            } else {
                                Doubt::BelowGitsClock(path)
                            });
                        }
                        if let Ok(mut refreshed) = refreshed.lock() {
                            refreshed.push((
                                group.rel.clone(),
                                name.clone(),
                                stat.st_ctime_nsec as u32,
                                stat.st_mtime_nsec as u32,
                            ));
                        }
                    }
                    if racy && !below_the_second {
                        hashed += 1;
                        let path = group.dir.join(OsStr::from_bytes(name.as_bytes()));
                        if blob_id(&path, &stat).as_ref() != Some(&entry.oid) {
                            return Err(Doubt::RacyContent(path));
                        }
                    }
                }
            }
            Ok(Some(hashed))
        };
        // A doubt on one thread stops the others at their next directory.
        let stop = std::sync::atomic::AtomicBool::new(false);
        // `Err(None)`: stopped by another thread's doubt.
        let check = |chunk: &[Group]| -> Result<u64, Option<Doubt>> {
            match check_groups(chunk, &stop) {
                Ok(Some(hashed)) => Ok(hashed),
                Ok(None) => Err(None),
                Err(doubt) => {
                    stop.store(true, std::sync::atomic::Ordering::Relaxed);
                    Err(Some(doubt))
                }
            }
        };
        let total: usize = self.groups.iter().map(|g| g.entries.len()).sum();
        let threads = if total > PARALLEL_ENTRIES {
            std::thread::available_parallelism().map_or(1, usize::from)
        } else {
            1
        };
        // Runs of groups of about as many entries each, one a thread.
        let mut chunks: Vec<&[Group]> = Vec::with_capacity(threads);
        let mut start = 0;
        let mut seen = 0;
        for (at, group) in self.groups.iter().enumerate() {
            seen += group.entries.len();
            if seen * threads >= total * (chunks.len() + 1) && chunks.len() + 1 < threads {
                chunks.push(&self.groups[start..=at]);
                start = at + 1;
            }
        }
        chunks.push(&self.groups[start..]);
        let results: Vec<Result<u64, Option<Doubt>>> = std::thread::scope(|scope| {
            let (mine, others) = chunks.split_first().expect("one chunk at least");
            let others: Vec<_> = others
                .iter()
                .map(|chunk| scope.spawn(|| check(chunk)))
                .collect();
            let mut results = vec![check(mine)];
            for other in others {
                results.push(
                    other
                        .join()
                        .unwrap_or_else(|_| Err(Some(Doubt::Entry(self.work_tree.clone())))),
                );
            }
            results
        });
        let mut count = 0;
        let mut stopped = false;
        for result in results {
            match result {
                Ok(n) => count += n,
                Err(Some(doubt)) => return Err(doubt),
                Err(None) => stopped = true,
            }
        }
        if stopped {
            // Unreachable: a thread stops only after another's doubt, returned above.
            return Err(Doubt::Entry(self.work_tree.clone()));
        }
        *hashed += count;
        Ok(refreshed
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner()))
    }
}

/// How a file's stat compares with the stat data git stored for its index entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StatMatch {
    Same,
    /// Equal but for the nanoseconds of ctime or mtime: git built without `USE_NSEC` calls the
    /// entry clean, one built with it hashes the file again.
    BelowTheSecond,
    Differs,
}

/// Compares `st` with the stat data git stored for `entry`, as git's `ie_match_stat` compares
/// them (`core.checkStat=default`, `core.trustctime=true`, `core.fileMode=true`), telling apart
/// a difference only in nanoseconds.
fn stat_matches(entry: &IndexEntry, st: &FileStat) -> StatMatch {
    let mode = match st.st_mode & libc::S_IFMT {
        libc::S_IFREG if st.st_mode & 0o100 != 0 => 0o100755,
        libc::S_IFREG => 0o100644,
        libc::S_IFLNK => 0o120000,
        _ => return StatMatch::Differs,
    };
    let whole = mode == entry.mode
        && st.st_ctime as u32 == entry.ctime.sec
        && st.st_mtime as u32 == entry.mtime.sec
        && st.st_ino as u32 == entry.ino
        && st.st_uid == entry.uid
        && st.st_gid == entry.gid
        && st.st_size as u32 == entry.size
        // git smudges a racily clean entry by storing size 0: it then reads as changed.
        && (entry.size != 0 || entry.oid == EMPTY_BLOB);
    if !whole {
        StatMatch::Differs
    } else if st.st_ctime_nsec as u32 == entry.ctime.nsec
        && st.st_mtime_nsec as u32 == entry.mtime.nsec
    {
        StatMatch::Same
    } else {
        StatMatch::BelowTheSecond
    }
}

/// The blob id git would give the file or symlink at `path` (no filters: the store's
/// `info/attributes` turns them off), hashed as it is read, in bounded memory. `None` when it
/// cannot be read as what `st` says (its size changed since).
fn blob_id(path: &Path, st: &FileStat) -> Option<[u8; 20]> {
    let size = u64::try_from(st.st_size).ok()?;
    let mut context = ring::digest::Context::new(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY);
    context.update(format!("blob {size}\0").as_bytes());
    if st.st_mode & libc::S_IFMT == libc::S_IFLNK {
        let target = fs::read_link(path).ok()?.into_os_string().into_vec();
        if target.len() as u64 != size {
            return None;
        }
        context.update(&target);
    } else {
        let mut file = crate::bounded_read::open_regular(path).ok()?;
        let mut buffer = vec![0u8; 64 << 10];
        let mut read = 0u64;
        loop {
            let n = match file.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return None,
            };
            read += n as u64;
            if read > size {
                return None;
            }
            context.update(&buffer[..n]);
        }
        if read != size {
            return None;
        }
    }
    context.finish().as_ref().try_into().ok()
}

mod record;

#[cfg(test)]
mod tests;
