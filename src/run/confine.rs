//! Which room each stage and each replay runs in (the run engine's side of the agent's room;
//! the boundary enforces it, `crate::supervise`).
//!
//! A stage's room: writable are the provider's own state paths (`[confine] writable`, expanded
//! against the agents' environment), a private temporary directory (also `TMPDIR`, outside the
//! run directory, removed after the stage) and the stage's `outbox/` (where a CLI writes its
//! report file); the builder also gets the worktree, and its git metadata only through throwaway
//! layers (in place, the workspace with `.git` as such a layer and `.autocode/` as a read-only
//! hole); the tester runs in a throwaway copy
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

use super::isolation::Isolation;
use crate::provider::{Expanded, expand_writable};
use crate::role::Role;
use crate::supervise::{Overlay, PrivateViews, RealPath, Room};

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

/// What the host lacks for the room, as the boundary's probe says: Landlock, and for the
/// private layers of HOME and `/tmp` a private mount namespace with overlays and a place for the
/// layers.
fn kernel_room_missing() -> Vec<String> {
    let probe = crate::supervise::probe();
    let mut missing = probe.room_missing();
    if missing.is_empty() {
        for lacking in [probe.read_only_holes_missing(), probe.overlay_missing()]
            .into_iter()
            .flatten()
        {
            missing.push(format!("private layers of HOME and /tmp: {lacking}"));
        }
        if let Err(e) = super::layers::base() {
            missing.push(format!("a place for the private layers: {e}"));
        }
    }
    missing
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

/// autocode's configuration directory as `env` places it (`$XDG_CONFIG_HOME/autocode`, else
/// `~/.config/autocode`): the direct runtime's keys, registered providers, settings.
pub fn config_dir(env: &BTreeMap<String, String>) -> Option<PathBuf> {
    crate::direct::connections::dir_from_env(|k| env.get(k).cloned())
        .ok()
        .and_then(|direct| direct.parent().map(Path::to_owned))
}

/// What no room may read: autocode's run-state key and its configuration (the direct runtime's
/// keys among it), as the agents' environment and as autocode's own environment place them
/// (they differ only when the two environments do).
fn unreadable(env: &BTreeMap<String, String>) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = state_key_dir(env).into_iter().collect();
    let own_env: BTreeMap<String, String> = ["HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME"]
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| ((*k).to_owned(), v)))
        .collect();
    let more = [
        super::integrity::key_dir().ok(),
        config_dir(env),
        config_dir(&own_env),
    ];
    for dir in more.into_iter().flatten() {
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    dirs
}

/// Why a `[confine] writable` entry, once expanded, is not granted: it would open what no room
/// may write (the root, HOME or one of its ancestors, keys, autocode's own directories, the
/// user's repository metadata or runs), directly or through a symlink. `None`: it may be granted.
pub fn refused_grant(
    path: &Path,
    env: &BTreeMap<String, String>,
    workspace: Option<&Path>,
) -> Option<String> {
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
    let home = env
        .get("HOME")
        .filter(|h| h.starts_with('/'))
        .map(|h| std::fs::canonicalize(h).unwrap_or_else(|_| PathBuf::from(h)));
    let shown = if real == path {
        path.display().to_string()
    } else {
        format!("{} (through a symlink: {})", path.display(), real.display())
    };
    if real == Path::new("/") {
        return Some(format!("{shown} is the root of the file system"));
    }
    if let Some(home) = &home {
        if home.starts_with(&real) {
            return Some(format!(
                "{shown} is HOME or holds it ({}); name the tool's own directory",
                home.display()
            ));
        }
        for secret in [".ssh", ".gnupg", ".aws", ".netrc", ".git-credentials"] {
            if real.starts_with(home.join(secret)) {
                return Some(format!("{shown} holds keys ({secret})"));
            }
        }
    }
    let mut own: Vec<PathBuf> = unreadable(env);
    if let Some(home) = &home {
        own.push(home.join(".cache/autocode"));
    }
    for dir in own {
        let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
        if real.starts_with(&dir) || dir.starts_with(&real) {
            return Some(format!("{shown} is autocode's own ({})", dir.display()));
        }
    }
    if let Some(workspace) = workspace {
        let workspace = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_owned());
        for held in [".git", ".autocode"] {
            let held = workspace.join(held);
            if real.starts_with(&held) || held.starts_with(&real) {
                return Some(format!(
                    "{shown} would open the workspace's {}",
                    held.display()
                ));
            }
        }
    }
    None
}

/// One `[confine] writable` entry and what it became.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WritableEntry {
    pub template: String,
    #[serde(flatten)]
    pub expanded: Expanded,
    /// Why the expanded path is not granted ([`refused_grant`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

impl WritableEntry {
    /// The path granted, if any.
    pub fn granted(&self) -> Option<&Path> {
        match (&self.expanded, &self.refused) {
            (Expanded::Path { path, .. }, None) => Some(path),
            _ => None,
        }
    }
}

/// The provider's effective writable set in `env` (`providers show`, `doctor`, every stage),
/// each expanded path checked ([`refused_grant`]; `workspace`: the run's, when there is one).
pub fn provider_writable(
    templates: &[String],
    env: &BTreeMap<String, String>,
) -> Vec<WritableEntry> {
    provider_writable_in(templates, env, None)
}

/// [`provider_writable`] for a run in `workspace`.
pub fn provider_writable_in(
    templates: &[String],
    env: &BTreeMap<String, String>,
    workspace: Option<&Path>,
) -> Vec<WritableEntry> {
    templates
        .iter()
        .filter_map(|t| {
            // Templates were checked when the configuration loaded; a bad one grants nothing.
            expand_writable(t, env).ok().map(|expanded| {
                let refused = match &expanded {
                    Expanded::Path { path, .. } => refused_grant(path, env, workspace),
                    Expanded::Unset { .. } => None,
                };
                WritableEntry {
                    template: t.clone(),
                    expanded,
                    refused,
                }
            })
        })
        .collect()
}

/// The provider's write-through files in `env` (`[confine] write_through`): sign-in state a CLI
/// must persist for the user, copied from the role's layer to the user's HOME after a stage
/// (`super::layers`). Only paths beneath HOME that [`refused_grant`] accepts.
pub fn write_through(templates: &[String], env: &BTreeMap<String, String>) -> Vec<PathBuf> {
    let home = super::layers::home_of(env);
    templates
        .iter()
        .filter_map(|t| match expand_writable(t, env) {
            Ok(Expanded::Path { path, .. }) => Some(path),
            _ => None,
        })
        .filter(|path| {
            home.as_ref().is_some_and(|home| path.starts_with(home))
                && refused_grant(path, env, None).is_none()
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
    /// The private views of HOME and `/tmp` (their layers, what shows real, what is hidden).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub views: Option<PrivateViews>,
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
    /// The provider's `[confine] allow_connect`.
    pub allow_connect: &'a [crate::supervise::net::NetAllow],
    /// The agents' environment (the templates expand against it).
    pub env: &'a BTreeMap<String, String>,
    /// The user's workspace (shown read-only through the private views; its `.git` and
    /// `.autocode/` are never granted by a provider entry).
    pub workspace: &'a Path,
    /// The layers of the private views (HOME's for the role, `/tmp`'s for the stage); empty:
    /// no private views.
    pub layers: Vec<Overlay>,
}

/// The private views of a room (`crate::supervise::PrivateViews`): `layers` cover their
/// directories; every writable path beneath a covered directory that is not layered (the work
/// tree, the tester's copy, the outbox, TMPDIR) and the `shown` paths (read-only: the
/// workspace, the repository's git metadata) are bound back real; `unreadable` paths beneath a
/// covered directory are hidden.
fn private_views(
    layers: Vec<Overlay>,
    writable: &[PathBuf],
    shown: &[PathBuf],
    unreadable: &[PathBuf],
) -> PrivateViews {
    let canonical = |p: &PathBuf| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
    let mut real: Vec<RealPath> = writable
        .iter()
        .map(|path| RealPath {
            path: canonical(path),
            writable: true,
        })
        .collect();
    for path in shown {
        let path = canonical(path);
        if !real.iter().any(|r| r.path == path) {
            real.push(RealPath {
                path,
                writable: false,
            });
        }
    }
    let mut views = PrivateViews {
        layers,
        real: Vec::new(),
        hidden: Vec::new(),
    };
    views.real = real.into_iter().filter(|r| views.covers(&r.path)).collect();
    views.hidden = unreadable
        .iter()
        .map(canonical)
        .filter(|path| views.covers(path))
        .collect();
    views
}

/// What a room shows read-only through its private views: the workspace and, for a linked
/// worktree, the repository's git directory its `.git` file names (git in the work tree reads
/// it).
fn shown_real(workspace: &Path, work_tree: &Path) -> Vec<PathBuf> {
    let mut shown = vec![workspace.to_owned()];
    if let Some(gitdir) = GitLink::read(work_tree).gitdir()
        && let Some((common, _)) = gitdir.split_once("/.git/")
    {
        let git = Path::new(common).join(".git");
        if git.is_absolute() && !git.starts_with(workspace) {
            shown.push(git);
        }
    }
    shown
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
    let provider_writable =
        provider_writable_in(input.provider_templates, input.env, Some(input.workspace));
    // A provider's state beneath HOME lands in the role's layer, which lives as long as the
    // run; anywhere else (a state directory under /tmp among them) it stays a real grant, since
    // the /tmp layer is the stage's and would lose it.
    let covered: Vec<&Path> = input
        .layers
        .iter()
        .map(|l| l.dir.as_path())
        .filter(|dir| *dir != Path::new("/tmp"))
        .collect();
    let mut writable: Vec<PathBuf> = Vec::new();
    let mut read_only = Vec::new();
    match access {
        WorktreeAccess::Write => {
            let (grants, held_back) = builder_grants(input.work_tree, input.isolation);
            writable.extend(grants);
            // A `.git` under a throwaway layer of its own (`StageLayers::add_git_scratch`) is
            // already kept from the repository: the family's writes land in the layer.
            read_only = held_back
                .into_iter()
                .filter(|path| {
                    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
                    !input.layers.iter().any(|layer| layer.dir == path)
                })
                .collect();
        }
        WorktreeAccess::Copy => writable.push(input.cwd.to_owned()),
        WorktreeAccess::ReadOnly => {}
    }
    writable.push(input.tmpdir.to_owned());
    writable.push(input.outbox.to_owned());
    for path in provider_writable.iter().filter_map(WritableEntry::granted) {
        // Beneath a private view the layer takes the CLI's writes.
        let layered = covered.iter().any(|dir| {
            std::fs::canonicalize(path)
                .unwrap_or_else(|_| path.to_owned())
                .starts_with(dir)
        });
        if !layered && !writable.iter().any(|w| w == path) {
            writable.push(path.to_owned());
        }
    }
    let unreadable = unreadable(input.env);
    let views = (!input.layers.is_empty()).then(|| {
        private_views(
            input.layers.clone(),
            &writable,
            &shown_real(input.workspace, input.work_tree),
            &unreadable,
        )
    });
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
        views: views.clone().filter(|_| confined),
    };
    let room = confined.then_some(Room {
        writable,
        unreadable,
        read_only,
        overlay: input.overlay.cloned(),
        views,
        allow_connect: input.allow_connect.to_vec(),
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

/// A replay's room: its copy and its private temporary directory, nothing else; with `layers`
/// (fresh ones of its own), private views of HOME and `/tmp` where its writes land.
pub fn replay_room(
    copy: &Path,
    tmpdir: &Path,
    env: &BTreeMap<String, String>,
    layers: Vec<Overlay>,
) -> Room {
    let writable = vec![copy.to_owned(), tmpdir.to_owned()];
    let unreadable = unreadable(env);
    let views = (!layers.is_empty()).then(|| private_views(layers, &writable, &[], &unreadable));
    Room {
        writable,
        unreadable,
        read_only: Vec::new(),
        overlay: None,
        views,
        allow_connect: Vec::new(),
    }
}

/// A stage's private views: the role's layers of HOME and of the toolchain homes outside it
/// (kept for the run) and a fresh layer of `/tmp` (removed when dropped, after the stage).
#[derive(Debug)]
pub struct StageLayers {
    pub home: Option<Overlay>,
    toolchains: Vec<Overlay>,
    tmp: super::layers::ThrowawayLayer,
    /// Throwaway layers over project directories a CLI writes at start ([`Self::add_cli_scratch`]).
    scratch: Vec<super::layers::ThrowawayLayer>,
}

impl StageLayers {
    /// `keep_clear`: the places shown as they are (the workspace, the work tree, the run
    /// directory), which no toolchain layer may cover.
    pub fn new(
        run_dir: &Path,
        role: Role,
        env: &BTreeMap<String, String>,
        keep_clear: &[&Path],
    ) -> std::io::Result<Self> {
        let home = super::layers::home_of(env)
            .map(|home| super::layers::role_layer(run_dir, role, &home))
            .transpose()?;
        let toolchains = super::layers::toolchain_dirs(env, keep_clear)
            .iter()
            .map(|dir| super::layers::role_toolchain_layer(run_dir, role, dir))
            .collect::<std::io::Result<_>>()?;
        Ok(Self {
            home,
            toolchains,
            tmp: super::layers::ThrowawayLayer::new(Path::new("/tmp"))?,
            scratch: Vec::new(),
        })
    }

    /// A judge that may not write the work tree still sees its CLI write there at start
    /// (OpenCode installs its plugin package into a project's `.opencode/` and cannot start when
    /// it may not): for a read-only `role` whose route runs `cli`, a throwaway layer over each
    /// such directory of `cwd`. The stage reads the project's files there as they are; its
    /// writes go with the stage.
    pub fn add_cli_scratch(
        &mut self,
        role: Role,
        cli: Option<crate::transport::BuiltinTransport>,
        cwd: &Path,
    ) -> std::io::Result<()> {
        if WorktreeAccess::for_role(role) != WorktreeAccess::ReadOnly {
            return Ok(());
        }
        let written: &[&str] = match cli {
            Some(crate::transport::BuiltinTransport::Opencode) => {
                &crate::transport::opencode::PROJECT_DIRS_WRITTEN_AT_START
            }
            _ => &[],
        };
        for name in written {
            let dir = cwd.join(name);
            if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
                let dir = std::fs::canonicalize(&dir)?;
                self.scratch.push(super::layers::ThrowawayLayer::new(&dir)?);
            }
        }
        Ok(())
    }

    /// A builder's own git: `git add` writes the index and loose objects, which live outside
    /// the room (a run's worktree keeps them in the main repository's `.git/worktrees/<name>`
    /// and `.git/objects`; in place, `.git` is a read-only hole), so staging failed, and a build
    /// that lists the index (`git ls-files` in a Makefile) could not see a new file. For a
    /// builder, a throwaway layer over each of them ([`git_scratch_dirs`]): its git stages
    /// there, and what it writes goes with the stage. The repository is never written; autocode
    /// commits the work tree itself after the stage.
    pub fn add_git_scratch(
        &mut self,
        role: Role,
        work_tree: &Path,
        isolation: &Isolation,
    ) -> std::io::Result<()> {
        if WorktreeAccess::for_role(role) != WorktreeAccess::Write {
            return Ok(());
        }
        for dir in git_scratch_dirs(work_tree, isolation) {
            self.scratch.push(super::layers::ThrowawayLayer::new(&dir)?);
        }
        Ok(())
    }

    pub fn overlays(&self) -> Vec<Overlay> {
        self.home
            .iter()
            .chain(&self.toolchains)
            .cloned()
            .chain(std::iter::once(self.tmp.overlay().clone()))
            .chain(self.scratch.iter().map(|l| l.overlay().clone()))
            .collect()
    }
}

/// The layers of a private view for one launch that keeps nothing (a replay, `autocode
/// supervise`): HOME's (when the environment has one), each toolchain home's outside it and
/// `/tmp`'s, removed when dropped.
#[derive(Debug, Default)]
pub struct ThrowawayViews {
    layers: Vec<super::layers::ThrowawayLayer>,
}

impl ThrowawayViews {
    /// `keep_clear` as for [`StageLayers::new`].
    pub fn new(env: &BTreeMap<String, String>, keep_clear: &[&Path]) -> std::io::Result<Self> {
        let mut layers = Vec::new();
        if let Some(home) = super::layers::home_of(env) {
            layers.push(super::layers::ThrowawayLayer::new(&home)?);
        }
        for dir in super::layers::toolchain_dirs(env, keep_clear) {
            layers.push(super::layers::ThrowawayLayer::new(&dir)?);
        }
        layers.push(super::layers::ThrowawayLayer::new(Path::new("/tmp"))?);
        Ok(Self { layers })
    }

    pub fn overlays(&self) -> Vec<Overlay> {
        self.layers.iter().map(|l| l.overlay().clone()).collect()
    }
}

/// The git directories a builder's `git add` writes ([`StageLayers::add_git_scratch`]): in a
/// run's worktree the metadata its `.git` file names (`gitdir: …/.git/worktrees/<name>`, which
/// holds the index) and the common directory's `objects/` (its `commondir`); in place, the work
/// tree's `.git` directory. Canonical, existing directories only.
pub fn git_scratch_dirs(work_tree: &Path, isolation: &Isolation) -> Vec<PathBuf> {
    let dirs = match (isolation, GitLink::read(work_tree)) {
        (Isolation::InPlace, GitLink::Directory) => vec![work_tree.join(".git")],
        (Isolation::Worktree { .. }, link) => {
            let Some(gitdir) = link.gitdir().map(|dir| work_tree.join(dir)) else {
                return Vec::new();
            };
            let common = std::fs::read_to_string(gitdir.join("commondir"))
                .map(|text| gitdir.join(text.trim()))
                .unwrap_or_else(|_| gitdir.clone());
            vec![gitdir, common.join("objects")]
        }
        _ => Vec::new(),
    };
    dirs.iter()
        .filter_map(|dir| std::fs::canonicalize(dir).ok())
        .filter(|dir| dir.is_dir())
        .collect()
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

    /// The metadata directory a linked worktree's `.git` file names (`gitdir: PATH`), as written.
    pub fn gitdir(&self) -> Option<&str> {
        let GitLink::File(bytes) = self else {
            return None;
        };
        std::str::from_utf8(bytes)
            .ok()?
            .trim()
            .strip_prefix("gitdir:")
            .map(str::trim)
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
#[path = "confine_tests.rs"]
mod tests;
