//! Which room each stage and each replay runs in (the run engine's side of the agent's room;
//! the boundary enforces it, `crate::supervise`).
//!
//! A stage's room: writable are the provider's own state paths (`[confine] writable`, expanded
//! against the agents' environment), a private temporary directory (also `TMPDIR`, outside the
//! run directory, removed after the stage) and the stage's `outbox/` (where a CLI writes its
//! report file); the builder also gets the worktree, never its git metadata (in place, the
//! workspace with `.git` and `.autocode/` as read-only holes); the tester runs in a throwaway copy
//! of the worktree, which is writable; every other role gets no worktree access. Everything else
//! — HOME, the user's `.git`, `.autocode/` with the run directory — is read-only, and autocode's
//! state-key directory is unreadable. A replay's room holds only its copy and a private
//! temporary directory. In git the tester's copy and every replay use the run's one
//! verification tree (`super::vtree`) under `~/.cache/autocode/verify/`, outside the workspace,
//! brought to the tree under test each time: HOME is read-only in every room, so no stage can
//! write it, and a room grants it only while its stage or replay runs.
//! Design and limits: `docs/run-lifecycle.md`, "The room".

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::state::Isolation;
use crate::provider::{Expanded, expand_writable};
use crate::role::Role;
use crate::supervise::{Overlay, Room};

/// The test hook that makes the room look unavailable (`docs/run-lifecycle.md`): its value is
/// reported as what is missing. It can only refuse runs, never loosen a room.
pub const PROBE_MISSING_ENV: &str = "AUTOCODE_TEST_ROOM_MISSING";

/// What the host lacks to enforce a room (empty: rooms are enforced).
pub fn room_missing(env: &BTreeMap<String, String>) -> Vec<String> {
    let mut missing = kernel_room_missing();
    if let Some(text) = env.get(PROBE_MISSING_ENV).filter(|t| !t.is_empty()) {
        missing.push(format!("{text} ({PROBE_MISSING_ENV} is set)"));
    }
    missing
}

/// What the kernel lacks for the room, as the boundary's probe says.
fn kernel_room_missing() -> Vec<String> {
    crate::supervise::probe().room_missing()
}

/// Where autocode keeps its run-state key as `env` places it (`super::integrity`'s rule:
/// `$XDG_STATE_HOME/autocode`, else `~/.local/state/autocode`), unreadable from every room.
pub fn state_key_dir(env: &BTreeMap<String, String>) -> Option<PathBuf> {
    super::integrity::key_dir_from(|k| {
        env.get(k)
            .filter(|v| !v.is_empty())
            .map(std::ffi::OsString::from)
    })
    .ok()
}

/// The key directories a room hides: as the agents' environment and as autocode's own
/// environment place it (they differ only when the two environments do).
fn unreadable(env: &BTreeMap<String, String>) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = state_key_dir(env).into_iter().collect();
    if let Ok(own) = super::integrity::key_dir()
        && !dirs.contains(&own)
    {
        dirs.push(own);
    }
    dirs
}

/// One `[confine] writable` entry and what it became.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WritableEntry {
    pub template: String,
    #[serde(flatten)]
    pub expanded: Expanded,
}

/// The provider's effective writable set in `env` (`providers show`, `doctor`, every stage).
pub fn provider_writable(
    templates: &[String],
    env: &BTreeMap<String, String>,
) -> Vec<WritableEntry> {
    templates
        .iter()
        .filter_map(|t| {
            // Templates were checked when the configuration loaded; a bad one grants nothing.
            expand_writable(t, env).ok().map(|expanded| WritableEntry {
                template: t.clone(),
                expanded,
            })
        })
        .collect()
}

/// How a stage's role reaches the work tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorktreeAccess {
    /// The builder: the work tree is writable, its git metadata is not.
    Write,
    /// The tester: its cwd is a throwaway copy; the work tree itself is read-only.
    Copy,
    /// Every other role: read-only.
    ReadOnly,
}

impl WorktreeAccess {
    pub fn for_role(role: Role) -> Self {
        match role {
            Role::Builder => WorktreeAccess::Write,
            Role::Tester => WorktreeAccess::Copy,
            _ => WorktreeAccess::ReadOnly,
        }
    }
}

/// What a stage's `room.json` records (and `launch.json` repeats): the room as requested, or
/// that the run is unconfined.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RoomRecord {
    pub confined: bool,
    pub worktree_access: WorktreeAccess,
    /// The directory the CLI ran in (the tester's copy, else the work tree).
    pub cwd: PathBuf,
    pub tmpdir: PathBuf,
    pub writable: Vec<PathBuf>,
    pub unreadable: Vec<PathBuf>,
    /// The provider's `[confine] writable` entries and what each became.
    pub provider_writable: Vec<WritableEntry>,
    /// Paths beneath the work tree that stay read-only (an in-place builder's `.git` and
    /// `.autocode/`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub read_only: Vec<PathBuf>,
    /// The tester's copy as an overlay of the work tree (`crate::supervise::Overlay`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overlay: Option<Overlay>,
}

/// The places a stage's room is built from.
pub struct StageRoomInput<'a> {
    pub role: Role,
    pub work_tree: &'a Path,
    pub isolation: &'a Isolation,
    /// The CLI's cwd: the tester's copy, else the work tree.
    pub cwd: &'a Path,
    pub tmpdir: &'a Path,
    pub outbox: &'a Path,
    /// The overlay the tester's family mounts over its copy (`cwd`), if it has one.
    pub overlay: Option<&'a Overlay>,
    pub provider_templates: &'a [String],
    /// The agents' environment (the templates expand against it).
    pub env: &'a BTreeMap<String, String>,
}

/// The work-tree grant of a builder: the work tree itself, and what stays read-only beneath it.
/// In a run's worktree autocode's state and the git metadata live outside it (its `.git` is a
/// file naming metadata in the main repository, checked after the stage; a `.autocode/` inside
/// it is repository content): nothing to hold back. An `--in-place` run's builder gets the whole
/// workspace, whose `.git` (the user's repository) and `.autocode/` (the runs) stay read-only:
/// Landlock cannot carve a hole beneath a writable directory, so these are read-only mounts in
/// the family's private mount namespace (`crate::supervise::Room::read_only`), and the stage's
/// `outbox/` inside `.autocode/` stays writable.
fn builder_grants(work_tree: &Path, isolation: &Isolation) -> (Vec<PathBuf>, Vec<PathBuf>) {
    match isolation {
        Isolation::InPlace => {
            let read_only: Vec<PathBuf> = [".git", ".autocode"]
                .iter()
                .map(|name| work_tree.join(name))
                .filter(|path| path.symlink_metadata().is_ok())
                .collect();
            // `autocode capture` receipts (report-file tools' evidence) stay writable inside
            // the read-only `.autocode/`: the directory is made now, since only an existing
            // path can be granted and bound back.
            let evidence = work_tree.join(EVIDENCE_DIR);
            let mut grants = vec![work_tree.to_owned()];
            if !read_only.is_empty() && std::fs::create_dir_all(&evidence).is_ok() {
                grants.push(evidence);
            }
            (grants, read_only)
        }
        Isolation::Worktree { .. } => (vec![work_tree.to_owned()], Vec::new()),
    }
}

/// Where `autocode capture` writes its receipts, relative to the work tree.
pub const EVIDENCE_DIR: &str = ".autocode/evidence";

/// Builds a stage's room and its record. `confined: false` records an unconfined stage.
pub fn stage_room(input: &StageRoomInput<'_>, confined: bool) -> (Option<Room>, RoomRecord) {
    let access = WorktreeAccess::for_role(input.role);
    let provider_writable = provider_writable(input.provider_templates, input.env);
    let mut writable: Vec<PathBuf> = Vec::new();
    let mut read_only = Vec::new();
    match access {
        WorktreeAccess::Write => {
            let (grants, held_back) = builder_grants(input.work_tree, input.isolation);
            writable.extend(grants);
            read_only = held_back;
        }
        WorktreeAccess::Copy => writable.push(input.cwd.to_owned()),
        WorktreeAccess::ReadOnly => {}
    }
    writable.push(input.tmpdir.to_owned());
    writable.push(input.outbox.to_owned());
    for entry in &provider_writable {
        if let Expanded::Path { path, .. } = &entry.expanded
            && !writable.contains(path)
        {
            writable.push(path.clone());
        }
    }
    let unreadable = unreadable(input.env);
    let record = RoomRecord {
        confined,
        worktree_access: access,
        cwd: input.cwd.to_owned(),
        tmpdir: input.tmpdir.to_owned(),
        writable: if confined {
            writable.clone()
        } else {
            Vec::new()
        },
        unreadable: if confined {
            unreadable.clone()
        } else {
            Vec::new()
        },
        provider_writable,
        read_only: if confined {
            read_only.clone()
        } else {
            Vec::new()
        },
        overlay: input.overlay.filter(|_| confined).cloned(),
    };
    let room = confined.then_some(Room {
        writable,
        unreadable,
        read_only,
        overlay: input.overlay.cloned(),
    });
    (room, record)
}

/// Creates the provider directories whose entries ask for it (`…/`): a hierarchy that does not
/// exist cannot be granted. Errors are left to the launch (the receipt lists what was skipped).
pub fn create_provider_dirs(entries: &[WritableEntry]) {
    for entry in entries {
        if let Expanded::Path {
            path,
            create_dir: true,
        } = &entry.expanded
        {
            let _ = std::fs::create_dir_all(path);
        }
    }
}

/// A replay's room: its copy and its private temporary directory, nothing else.
pub fn replay_room(copy: &Path, tmpdir: &Path, env: &BTreeMap<String, String>) -> Room {
    Room {
        writable: vec![copy.to_owned(), tmpdir.to_owned()],
        unreadable: unreadable(env),
        read_only: Vec::new(),
        overlay: None,
    }
}

/// What a work tree's `.git` entry was before a stage (a worktree's link to its metadata).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GitLink {
    Absent,
    File(Vec<u8>),
    Directory,
    Other,
}

impl GitLink {
    /// When a stage changed the work tree's `.git` entry from `self`: moves what it left there
    /// into `quarantine` (so no later git command, autocode's or the user's, reads a planted
    /// repository or link) and writes back the link the work tree had, and returns the reason
    /// the stage pauses with. `None`: the entry is unchanged.
    pub fn restore_after(&self, work_tree: &Path, role: Role, quarantine: &Path) -> Option<String> {
        let now = GitLink::read(work_tree);
        if &now == self {
            return None;
        }
        let entry = work_tree.join(".git");
        let mut what = format!(
            "the {role} changed the work tree's .git entry (its link to the git metadata), which no role may change"
        );
        let moved = quarantine.join("dot-git");
        let outcome = (|| -> std::io::Result<()> {
            if now != GitLink::Absent && !matches!(self, GitLink::Directory) {
                std::fs::create_dir_all(quarantine)?;
                std::fs::rename(&entry, &moved)?;
            }
            if let GitLink::File(bytes) = self {
                std::fs::write(&entry, bytes)?;
            }
            Ok(())
        })();
        match (outcome, self) {
            (Err(e), _) => what.push_str(&format!(
                "; autocode could not put it back ({e}): check {} before running git there",
                entry.display()
            )),
            (Ok(()), GitLink::Directory | GitLink::Other) => what.push_str(&format!(
                "; check {} before running git there",
                entry.display()
            )),
            (Ok(()), _) if now != GitLink::Absent => what.push_str(&format!(
                "; what it left was moved to {} and the link put back",
                moved.display()
            )),
            (Ok(()), _) => what.push_str("; the link was put back"),
        }
        Some(what)
    }

    pub fn read(work_tree: &Path) -> Self {
        let path = work_tree.join(".git");
        match std::fs::symlink_metadata(&path) {
            Err(_) => GitLink::Absent,
            Ok(m) if m.is_file() => {
                crate::bounded_read::read(&path, crate::bounded_read::CONFIG_CAP)
                    .map_or(GitLink::Other, GitLink::File)
            }
            Ok(m) if m.is_dir() => GitLink::Directory,
            Ok(_) => GitLink::Other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn the_state_key_directory_follows_xdg() {
        assert_eq!(
            state_key_dir(&env(&[("HOME", "/h"), ("XDG_STATE_HOME", "/s")])),
            Some(PathBuf::from("/s/autocode"))
        );
        assert_eq!(
            state_key_dir(&env(&[("HOME", "/h"), ("XDG_STATE_HOME", "rel")])),
            Some(PathBuf::from("/h/.local/state/autocode"))
        );
        assert_eq!(state_key_dir(&env(&[])), None);
    }

    fn input<'a>(
        role: Role,
        ws: &'a Path,
        isolation: &'a Isolation,
        cwd: &'a Path,
        templates: &'a [String],
        env: &'a BTreeMap<String, String>,
    ) -> StageRoomInput<'a> {
        StageRoomInput {
            role,
            work_tree: ws,
            isolation,
            cwd,
            tmpdir: Path::new("/tmp/stage"),
            outbox: Path::new("/run/outbox"),
            overlay: None,
            provider_templates: templates,
            env,
        }
    }

    #[test]
    fn each_role_gets_its_room() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("wt");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join(".git"), "gitdir: /repo/.git/worktrees/x\n").unwrap();
        let e = env(&[("HOME", "/h")]);
        let templates = vec!["~/.tool/".to_owned(), "$UNSET".to_owned()];
        let wt = Isolation::Worktree {
            path: ws.clone(),
            branch: "b".into(),
        };
        let (room, record) = stage_room(&input(Role::Builder, &ws, &wt, &ws, &templates, &e), true);
        let room = room.unwrap();
        assert_eq!(
            room.writable,
            vec![
                ws.clone(),
                PathBuf::from("/tmp/stage"),
                PathBuf::from("/run/outbox"),
                PathBuf::from("/h/.tool")
            ]
        );
        assert_eq!(
            room.unreadable[0],
            PathBuf::from("/h/.local/state/autocode")
        );
        assert_eq!(record.provider_writable.len(), 2);
        let (room, _) = stage_room(&input(Role::Planner, &ws, &wt, &ws, &templates, &e), true);
        assert!(
            !room.unwrap().writable.contains(&ws),
            "read-only roles get no worktree"
        );
        let copy = dir.path().join("copy");
        let (room, record) =
            stage_room(&input(Role::Tester, &ws, &wt, &copy, &templates, &e), true);
        let room = room.unwrap();
        assert!(room.writable.contains(&copy) && !room.writable.contains(&ws));
        assert_eq!(record.worktree_access, WorktreeAccess::Copy);
        let (room, record) =
            stage_room(&input(Role::Builder, &ws, &wt, &ws, &templates, &e), false);
        assert!(room.is_none() && !record.confined && record.writable.is_empty());
    }

    #[test]
    fn an_in_place_builder_gets_the_workspace_but_not_its_git_or_runs() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        for d in [".git", ".autocode", "src"] {
            std::fs::create_dir_all(ws.join(d)).unwrap();
        }
        let e = env(&[]);
        let (room, record) = stage_room(
            &input(Role::Builder, ws, &Isolation::InPlace, ws, &[], &e),
            true,
        );
        let room = room.unwrap();
        assert!(room.writable.contains(&ws.to_owned()));
        assert!(
            room.writable.contains(&ws.join(EVIDENCE_DIR)),
            "capture receipts"
        );
        assert!(ws.join(EVIDENCE_DIR).is_dir());
        assert_eq!(room.read_only, vec![ws.join(".git"), ws.join(".autocode")]);
        assert_eq!(record.read_only, room.read_only);
        let wt = Isolation::Worktree {
            path: ws.to_owned(),
            branch: "b".into(),
        };
        let (room, _) = stage_room(&input(Role::Builder, ws, &wt, ws, &[], &e), true);
        assert!(room.unwrap().read_only.is_empty());
    }

    #[test]
    fn a_planted_git_entry_is_quarantined_and_the_link_put_back() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let quarantine = dir.path().join("stage/quarantine");
        // A workspace without git: a repository the builder creates is moved away.
        let before = GitLink::read(&ws);
        assert_eq!(before.restore_after(&ws, Role::Builder, &quarantine), None);
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        std::fs::write(ws.join(".git/hooks/post-checkout"), "evil").unwrap();
        let why = before
            .restore_after(&ws, Role::Builder, &quarantine)
            .unwrap();
        assert!(why.contains("moved to"), "{why}");
        assert!(!ws.join(".git").exists());
        assert!(quarantine.join("dot-git/hooks/post-checkout").exists());
        // A worktree's link rewritten to a planted repository: the link comes back.
        std::fs::write(ws.join(".git"), "gitdir: /repo/.git/worktrees/x\n").unwrap();
        let before = GitLink::read(&ws);
        std::fs::write(ws.join(".git"), "gitdir: planted\n").unwrap();
        let quarantine = dir.path().join("stage2/quarantine");
        assert!(
            before
                .restore_after(&ws, Role::Builder, &quarantine)
                .is_some()
        );
        assert_eq!(GitLink::read(&ws), before);
        assert_eq!(
            std::fs::read_to_string(quarantine.join("dot-git")).unwrap(),
            "gitdir: planted\n"
        );
    }

    #[test]
    fn git_links_are_compared() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(GitLink::read(dir.path()), GitLink::Absent);
        std::fs::write(dir.path().join(".git"), "gitdir: a").unwrap();
        let before = GitLink::read(dir.path());
        std::fs::write(dir.path().join(".git"), "gitdir: b").unwrap();
        assert_ne!(before, GitLink::read(dir.path()));
    }
}
