//! Who else wrote the work tree during a builder stage (issue 26): the builder may write the
//! work tree, so a snapshot diff cannot tell its writes from a person's. Its family works in a
//! private mount namespace (`crate::supervise::Room`: views, holes, overlay), where every mount
//! is a copy of autocode's; a write there goes through the copy. A write through autocode's own
//! mount of the work tree is therefore not the family's: a fanotify mark on that mount
//! (`FAN_MARK_MOUNT`) sees exactly those, each with the writer's pid. autocode's own process
//! (the direct runtime's `write_file`) is left out by pid.
//!
//! Covered: file contents written (`FAN_MODIFY`, `FAN_CLOSE_WRITE`) by any process in
//! autocode's mount namespace. Not covered: removals, renames and mode changes (a mount mark
//! cannot see directory-entry events), writes from another mount namespace (a container), and
//! `.git/` and `.autocode/` (autocode's and git's own bookkeeping, never the agent's work).
//! Where the mark cannot be placed (an ordinary user: mount marks need `CAP_SYS_ADMIN`; an
//! unconfined run, whose family shares autocode's mounts) the watch says why and nothing is
//! claimed either way (`Attribution::Unavailable`).

use std::collections::BTreeMap;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Component, Path};
use std::thread::JoinHandle;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::fanotify::{EventFFlags, Fanotify, InitFlags, MarkFlags, MaskFlags};
use serde::Serialize;

use crate::supervise::Room;

/// What the watch of one builder stage found (the stage's `attribution.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "attribution", rename_all = "snake_case")]
pub(crate) enum Attribution {
    /// Every content write through autocode's mount of the work tree was seen; `foreign`
    /// are those by a process outside the stage's family (empty: none), `ignored` those of
    /// them git ignores (never committed as anyone's work, so not held against the stage).
    Watched {
        foreign: Vec<ForeignWrite>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        ignored: Vec<ForeignWrite>,
    },
    /// Edits by other processes could not be told apart from the builder's, and why.
    Unavailable { why: String },
}

/// A file of the work tree written by a process outside the stage's family.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ForeignWrite {
    /// Relative to the work tree.
    pub path: String,
    /// The writer's pid and, when it was still there to ask, its name.
    pub pid: i32,
    pub process: Option<String>,
}

/// How many files a pause reason names.
const NAMED: usize = 20;

/// The stage file it is recorded in.
pub(crate) const RECORD: &str = "attribution.json";

/// A running watch: stopped (and drained) by [`Watch::finish`]; dropped unfinished, its thread
/// ends too (the stop pipe hangs up).
pub(crate) struct Watch {
    stop: OwnedFd,
    thread: JoinHandle<Result<BTreeMap<String, ForeignWrite>, String>>,
}

/// The watch for a builder stage in `work_tree` whose family runs in `room` (`None`:
/// unconfined), or why there can be none.
pub(crate) fn start(work_tree: &Path, room: Option<&Room>) -> Result<Watch, String> {
    match room {
        None => Err(
            "the builder's processes shared autocode's mounts (no room: the run is unconfined)"
                .into(),
        ),
        // `crate::supervise` makes a private mount namespace for any of these.
        Some(r) if r.views.is_none() && r.overlay.is_none() && r.read_only.is_empty() => Err(
            "the builder's processes shared autocode's mounts (its room had no private mount namespace)"
                .into(),
        ),
        Some(_) => start_on(work_tree),
    }
}

fn start_on(work_tree: &Path) -> Result<Watch, String> {
    let tree = std::fs::canonicalize(work_tree)
        .map_err(|e| format!("cannot resolve the work tree {}: {e}", work_tree.display()))?;
    let fan = Fanotify::init(
        InitFlags::FAN_CLASS_NOTIF
            | InitFlags::FAN_CLOEXEC
            | InitFlags::FAN_NONBLOCK
            | InitFlags::FAN_UNLIMITED_QUEUE,
        // Non-blocking: the event's descriptor of a FIFO whose writer is gone must not hang
        // the watch.
        EventFFlags::O_RDONLY
            | EventFFlags::O_LARGEFILE
            | EventFFlags::O_CLOEXEC
            | EventFFlags::O_NONBLOCK,
    )
    .map_err(unavailable)?;
    fan.mark(
        MarkFlags::FAN_MARK_ADD | MarkFlags::FAN_MARK_MOUNT,
        MaskFlags::FAN_MODIFY | MaskFlags::FAN_CLOSE_WRITE,
        nix::fcntl::AT_FDCWD,
        Some(&tree),
    )
    .map_err(unavailable)?;
    // Close-on-exec: no process autocode starts may hold (or read) the stop.
    let (stop_read, stop) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| format!("cannot make a pipe: {e}"))?;
    let thread = std::thread::Builder::new()
        .name("foreign-writes".into())
        .spawn(move || watch(&fan, &stop_read, &tree))
        .map_err(|e| format!("cannot start the watch: {e}"))?;
    Ok(Watch { stop, thread })
}

/// Whether a builder's edits can be told apart from other processes' in `dir`'s mount (what
/// `doctor` reports): a watch is started there and stopped at once, or why it cannot be.
pub(crate) fn probe(dir: &Path) -> Result<(), String> {
    start_on(dir).map(|watch| {
        let _ = watch.finish();
    })
}

fn unavailable(e: Errno) -> String {
    match e {
        Errno::EPERM => "watching the work tree's mount needs CAP_SYS_ADMIN (a fanotify mount mark), which this autocode does not have".into(),
        Errno::ENOSYS | Errno::EINVAL => format!("this kernel offers no fanotify mount marks ({e})"),
        e => format!("cannot watch the work tree's mount: {e}"),
    }
}

impl Watch {
    /// Stops the watch once the family is gone: every write before this call is in the queue
    /// (fanotify queues in the writing syscall), and all of it is read.
    pub(crate) fn finish(self) -> Attribution {
        let _ = nix::unistd::write(&self.stop, b"x");
        let result = self
            .thread
            .join()
            .unwrap_or_else(|_| Err("the watch thread failed".into()));
        match result {
            Ok(found) => Attribution::Watched {
                foreign: found.into_values().collect(),
                ignored: Vec::new(),
            },
            Err(why) => Attribution::Unavailable { why },
        }
    }
}

/// Reads events until `stop` is readable, then drains what is queued.
fn watch(
    fan: &Fanotify,
    stop: &OwnedFd,
    tree: &Path,
) -> Result<BTreeMap<String, ForeignWrite>, String> {
    let own = std::process::id() as i32;
    let mut found = BTreeMap::new();
    loop {
        let (events_ready, stopping) = {
            let mut fds = [
                PollFd::new(fan.as_fd(), PollFlags::POLLIN),
                PollFd::new(stop.as_fd(), PollFlags::POLLIN),
            ];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) | Err(Errno::EINTR) => {}
                Err(e) => return Err(format!("the watch failed: {e}")),
            }
            let ready = |fd: &PollFd| fd.revents().is_some_and(|r| !r.is_empty());
            (ready(&fds[0]), ready(&fds[1]))
        };
        if events_ready || stopping {
            drain(fan, own, tree, &mut found)?;
        }
        if stopping {
            return Ok(found);
        }
    }
}

fn drain(
    fan: &Fanotify,
    own: i32,
    tree: &Path,
    found: &mut BTreeMap<String, ForeignWrite>,
) -> Result<(), String> {
    loop {
        let events = match fan.read_events() {
            Ok(events) => events,
            Err(Errno::EAGAIN) => return Ok(()),
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(format!("the watch failed: {e}")),
        };
        if events.is_empty() {
            return Ok(());
        }
        for event in events {
            if event.mask().contains(MaskFlags::FAN_Q_OVERFLOW) {
                return Err("the kernel's event queue overflowed".into());
            }
            let pid = event.pid();
            if pid == own {
                continue;
            }
            let Some(fd) = event.fd() else { continue };
            let Ok(path) = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())) else {
                continue;
            };
            if let Some(rel) = in_tree(tree, &path)
                && !found.contains_key(&rel)
            {
                let process = std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .ok()
                    .map(|c| c.trim_end().to_owned());
                found.insert(
                    rel.clone(),
                    ForeignWrite {
                        path: rel,
                        pid,
                        process,
                    },
                );
            }
        }
    }
}

/// `path` relative to `tree`, unless it is outside it or in `.git/` or `.autocode/`.
fn in_tree(tree: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(tree).ok()?;
    match rel.components().next() {
        Some(Component::Normal(first)) if first != ".git" && first != ".autocode" => {}
        _ => return None,
    }
    let text = rel.to_string_lossy();
    Some(text.strip_suffix(" (deleted)").unwrap_or(&text).to_owned())
}

/// What the builder stage's pause or record says about `attribution`: `Some` pause reason
/// when another process wrote the work tree.
pub(crate) fn foreign_reason(attribution: &Attribution, in_place: bool) -> Option<String> {
    let Attribution::Watched { foreign, .. } = attribution else {
        return None;
    };
    if foreign.is_empty() {
        return None;
    }
    let mut names: Vec<String> = foreign
        .iter()
        .take(NAMED)
        .map(|w| match &w.process {
            Some(p) => format!("{} (by {p}, pid {})", w.path, w.pid),
            None => format!("{} (by pid {})", w.path, w.pid),
        })
        .collect();
    if foreign.len() > NAMED {
        names.push(format!(
            "and {} more ({RECORD} of the stage lists them)",
            foreign.len() - NAMED
        ));
    }
    let place = if in_place {
        "your workspace (the run works in place)"
    } else {
        "the run's work tree"
    };
    Some(format!(
        "another process (you, an editor, a tool) wrote {place} during the builder stage, outside the builder's room: {}; the stage's result was not taken as the agent's work (check those files, keep or revert them, before the builder runs again on the tree as it is)",
        names.join(", ")
    ))
}

/// The line `autocode status` prints for a builder attempt recorded in `stage_dir`, when edits
/// by other processes could not be told apart from the builder's.
pub fn status_line(stage_dir: &Path) -> Option<String> {
    let bytes = crate::bounded_read::read(&stage_dir.join(RECORD), 64 * 1024).ok()?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    (value["attribution"] == "unavailable").then(|| {
        format!(
            "edits by other processes during this builder stage could not be told apart from the builder's: {}",
            value["why"].as_str().unwrap_or("unknown")
        )
    })
}

impl Attribution {
    /// What a started (or refused) watch comes to once the family is gone.
    pub(crate) fn of(watch: Result<Watch, String>) -> Attribution {
        match watch {
            Ok(watch) => watch.finish(),
            Err(why) => Attribution::Unavailable { why },
        }
    }
}

/// Records `attribution` in the builder's stage directory `dir`, the foreign writes git
/// ignores set apart (`env`: git's); `Some` pause reason when another process wrote a file the
/// stage's commit would take.
pub(crate) async fn judge(
    state: &crate::run::state::RunState,
    mut attribution: Attribution,
    dir: &Path,
    env: &BTreeMap<String, String>,
) -> Option<String> {
    if let Attribution::Watched { foreign, ignored } = &mut attribution
        && !foreign.is_empty()
    {
        let paths: Vec<String> = foreign.iter().map(|w| w.path.clone()).collect();
        // Outside git (or when git cannot say) every write counts.
        if let Ok(by_git) = crate::gittree::ignored_paths(&state.work_tree, &paths, env).await {
            let (out, kept) = std::mem::take(foreign)
                .into_iter()
                .partition(|w| by_git.contains(&w.path));
            *foreign = kept;
            *ignored = out;
        }
    }
    let attribution = &attribution;
    let _ = crate::run::integrity::write_stage_record(&dir.join(RECORD), attribution);
    if let Attribution::Unavailable { why } = attribution {
        tracing::warn!(
            "edits by other processes during the builder stage cannot be told apart from the builder's: {why}"
        );
    }
    let in_place = matches!(state.isolation, crate::run::isolation::Isolation::InPlace);
    foreign_reason(attribution, in_place)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_outside_the_tree_and_bookkeeping_are_not_the_persons_edits() {
        let tree = Path::new("/w/tree");
        assert_eq!(
            in_tree(tree, Path::new("/w/tree/src/a.rs")).as_deref(),
            Some("src/a.rs")
        );
        assert_eq!(
            in_tree(tree, Path::new("/w/tree/x (deleted)")).as_deref(),
            Some("x")
        );
        assert_eq!(in_tree(tree, Path::new("/w/treehouse/a")), None);
        assert_eq!(in_tree(tree, Path::new("/w/tree/.git/index")), None);
        assert_eq!(in_tree(tree, Path::new("/w/tree/.autocode/runs/x")), None);
        assert_eq!(in_tree(tree, Path::new("/w/tree")), None);
    }

    /// A write from another process through this mount namespace is foreign; one from this
    /// process, or from a process in a private mount namespace (as the builder's family), is
    /// not. As an ordinary user the mark cannot be placed, and the watch says so.
    #[test]
    fn writes_are_told_apart_by_the_mount_they_came_through() {
        let dir = tempfile::tempdir_in("/var/tmp").expect("dir");
        let tree = dir.path();
        let watch = match start_on(tree) {
            Ok(watch) => watch,
            Err(why) => {
                assert!(!nix::unistd::geteuid().is_root(), "{why}");
                assert!(why.contains("CAP_SYS_ADMIN"), "{why}");
                return;
            }
        };
        std::fs::write(tree.join("by-autocode.txt"), "own\n").expect("own write");
        // Plain children of this process, as a person's editor would be: no boundary, no
        // private mount namespace.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let sh = |args: &[&str]| {
            let argv: Vec<std::ffi::OsString> = args[1..].iter().map(Into::into).collect();
            let out = runtime
                .block_on(crate::supervise::run_in_current_family(
                    &args[0].into(),
                    &argv,
                    tree,
                    1 << 16,
                ))
                .expect("spawn");
            assert_eq!(out.exit, crate::supervise::Exit::Code(0), "{args:?}");
        };
        sh(&["sh", "-c", "echo person > by-a-person.txt"]);
        sh(&["sh", "-c", "mkdir -p .git && echo x > .git/index"]);
        // A FIFO in the tree (no content to commit; the kernel reports no write on it) does
        // not hang the watch, whoever holds it.
        sh(&[
            "sh",
            "-c",
            "mkfifo fifo && (cat fifo >/dev/null &) && echo x > fifo",
        ]);
        sh(&[
            "unshare",
            "-m",
            "sh",
            "-c",
            "echo agent > by-the-family.txt",
        ]);
        let Attribution::Watched { foreign, .. } = watch.finish() else {
            panic!("watched");
        };
        let paths: Vec<&str> = foreign.iter().map(|w| w.path.as_str()).collect();
        assert_eq!(paths, ["by-a-person.txt"], "{foreign:?}");
        assert_ne!(foreign[0].pid, std::process::id() as i32);
    }

    #[test]
    fn an_unconfined_stage_is_never_claimed_either_way() {
        let dir = tempfile::tempdir().expect("dir");
        let why = start(dir.path(), None).err().expect("unavailable");
        assert!(why.contains("unconfined"), "{why}");
    }
}
