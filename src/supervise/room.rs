//! The agent's room and the exec ledger, as data: what a confined family may write and reach,
//! what the boundary says it enforced, and the kernel-attested record of every exec.
//!
//! These types are the seam between the run engine (which decides, per stage, what the room
//! holds) and the platform boundary (which enforces it: Landlock for files, signals and
//! abstract sockets, seccomp notification for pathname unix-socket connects and for execs).
//! Nothing here enforces anything; see `docs/supervision.md`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// What one launch's family may touch. Everything not listed as writable is read-only;
/// everything listed as unreadable cannot be read either. Signals and abstract unix sockets
/// never reach outside the family; pathname unix sockets only connect beneath `writable`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Room {
    /// Hierarchies (directories or single files) the family may create, change and remove
    /// beneath: the worktree (for the builder), the stage's private temporary directory, the
    /// provider's own state paths. Paths that do not exist are skipped (and listed in the
    /// receipt as skipped).
    pub writable: Vec<PathBuf>,
    /// Hierarchies the family may not read at all (autocode's run-state key, stored secrets).
    pub unreadable: Vec<PathBuf>,
    /// Paths beneath a writable hierarchy that stay read-only (an `--in-place` builder's `.git`
    /// and `.autocode/`): Landlock cannot deny beneath a grant, so these are read-only mounts
    /// in a private mount namespace. Writable paths inside one stay writable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_only: Vec<PathBuf>,
    /// A directory the family sees as an overlay (the verification tree): `lower` read-only
    /// beneath, what the family writes lands in `upper`. A mount in the family's private mount
    /// namespace; autocode, outside it, sees neither the overlay nor the family's writes there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlay: Option<Overlay>,
    /// The family's private views of HOME and `/tmp` (copy-on-write layers): what it writes
    /// there lands in a layer autocode owns, never in the user's files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub views: Option<PrivateViews>,
    /// Loopback, private and link-local destinations the family may connect to although no
    /// process of its own serves them (the user's `[confine] allow_connect`: a test database).
    /// The stage's endpoints and proxies named in its environment and the nameservers are
    /// added by the boundary.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_connect: Vec<crate::supervise::net::NetAllow>,
}

/// Private views of the places every toolchain and CLI writes (HOME's caches and configs,
/// `/tmp`), mounted in the family's private mount namespace before anything else:
/// - `layers`: an overlay over each covered directory (HOME, `/tmp`) whose lower layer is the
///   real directory and whose upper layer is autocode's (the role's own for HOME, the stage's
///   or the replay's own for `/tmp`): the family reads the directory as it is, and what it
///   writes there (a fetched crate, an npm cache, a planted hook) lands in the layer;
/// - `real`: paths shown through the views as they really are (the workspace, the tester's
///   copy, the outbox, the stage's `TMPDIR`), bound back from the real file system: read-only
///   unless `writable` (Landlock grants writes beneath a layer's root, so a read-only path must
///   be a read-only mount);
/// - `hidden`: paths inside the views that show as empty (autocode's own secrets and
///   configuration): an empty read-only file system or `/dev/null` mounted over them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrivateViews {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layers: Vec<Overlay>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub real: Vec<RealPath>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hidden: Vec<PathBuf>,
}

/// A path shown through the private views as it really is (`PrivateViews::real`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RealPath {
    pub path: PathBuf,
    pub writable: bool,
}

impl PrivateViews {
    /// The directories the views cover (HOME, `/tmp`).
    pub fn covered(&self) -> Vec<&std::path::Path> {
        self.layers
            .iter()
            .map(|layer| layer.dir.as_path())
            .collect()
    }

    /// Whether `path` lies in a covered directory (it is then seen through the views).
    pub fn covers(&self, path: &std::path::Path) -> bool {
        self.covered().iter().any(|dir| path.starts_with(dir))
    }
}

/// An overlay mounted for one family (`Room::overlay`). `upper` and `work` are on one file
/// system, outside `lower`; `dir` exists (its own content is hidden while the family runs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Overlay {
    /// Where the family sees the merged tree (it must be writable in the room).
    pub dir: PathBuf,
    /// The read-only lower layer (never written through the overlay).
    pub lower: PathBuf,
    /// What the family writes, and the whiteouts that hide lower entries.
    pub upper: PathBuf,
    /// The overlay's own scratch directory.
    pub work: PathBuf,
}

impl Overlay {
    /// The layers by their mount option's name: `lowerdir`, `upperdir`, `workdir`.
    pub fn layers(&self) -> [(&'static str, &std::path::Path); 3] {
        [
            ("lowerdir", &self.lower),
            ("upperdir", &self.upper),
            ("workdir", &self.work),
        ]
    }

    /// The first layer the mount options cannot carry (not UTF-8, or holding `,`, `:` or `\`,
    /// which the options use as separators), by its option's name.
    pub fn unnameable_layer(&self) -> Option<(&'static str, &std::path::Path)> {
        self.layers().into_iter().find(|(_, path)| {
            path.to_str()
                .is_none_or(|text| text.contains([',', ':', '\\']))
        })
    }
}

impl Room {
    /// A room whose only writable places are `writable`.
    pub fn writable<I, P>(writable: I) -> Self
    where
        I: IntoIterator<Item = P>,
        P: Into<PathBuf>,
    {
        Self {
            writable: writable.into_iter().map(Into::into).collect(),
            unreadable: Vec::new(),
            read_only: Vec::new(),
            overlay: None,
            views: None,
            allow_connect: Vec::new(),
        }
    }
}

/// What the boundary enforced for a launch, as its receipt states it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoomReceipt {
    /// e.g. `landlock-abi-7`; names each mechanism that was in force.
    pub mechanisms: Vec<String>,
    pub writable: Vec<PathBuf>,
    pub unreadable: Vec<PathBuf>,
    /// Read-only holes cut beneath the writable set (mounts in a private mount namespace).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_only: Vec<PathBuf>,
    /// The overlay the family saw (`Room::overlay`), mounted in its private mount namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlay: Option<Overlay>,
    /// The private views of HOME and `/tmp` the family saw (`Room::views`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub views: Option<PrivateViews>,
    /// Requested writable or unreadable paths that did not exist at launch (not granted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<PathBuf>,
    /// Signals to processes outside the family are refused by the kernel.
    pub signals_scoped: bool,
    /// Abstract unix sockets outside the family are unreachable.
    pub abstract_sockets_scoped: bool,
    /// Pathname unix-socket connects outside `writable` are refused, and so are connects and
    /// sends to local internet addresses no process of the family serves (unless allowed).
    pub unix_connect_gated: bool,
    /// The local destinations allowed without a server of the family's own: the room's
    /// `allow_connect`, the environment's endpoints and proxies, the nameservers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub local_connect_allowed: Vec<crate::supervise::net::NetAllow>,
}

/// How a ledgered process ended, as the kernel reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum LedgerExit {
    Code(i32),
    Signal(i32),
}

/// One exec a family member made, recorded by the keeper from the kernel's notification
/// (before the exec was let through), and how that process ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerEntry {
    /// Sequence number within the launch (0, 1, …), in the order the keeper saw the execs.
    pub seq: u64,
    /// Thread-group id of the process that called exec.
    pub pid: i32,
    /// The path passed to exec, as given (not resolved).
    pub filename: String,
    pub argv: Vec<String>,
    /// argv was cut at the keeper's bounds (1,024 strings or 256 KiB).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub argv_truncated: bool,
    /// The argv strings the ledger file kept only the ends of (over its cap): their slot in
    /// `argv` holds those ends, and the digests here name the whole string.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub argv_cut: Vec<CutArg>,
    /// The caller's working directory at the exec.
    pub cwd: String,
    /// Milliseconds since the launch started.
    pub at_ms: u64,
    /// `false` when the keeper could tell the exec could not succeed (no such executable).
    #[serde(default = "yes")]
    pub exec_plausible: bool,
    /// `None` while running, or when the process was still alive when the family was killed
    /// and its end could not be read.
    pub exit: Option<LedgerExit>,
    /// Whether the entry is evidence of what ran (only `attested` ones are).
    #[serde(default)]
    pub attestation: Attestation,
    /// The executable the kernel ran (the process's `/proc/<pid>/exe` after the exec: the
    /// interpreter for a script), once the exec is known to have succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exe: Option<String>,
}

/// An argv string the ledger file kept only the ends of, named by digests of the whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CutArg {
    /// Its index in `argv`.
    pub index: usize,
    /// sha256 (hex) of the whole string.
    pub sha256: String,
    /// sha256 (hex) of the whole string with each run of whitespace one space, trimmed (a
    /// shell payload as a cited command is compared: `report::ledger`).
    pub words_sha256: String,
}

/// What the keeper could establish about one exec after it was let through (see
/// `docs/supervision.md`, "The exec ledger"). Only [`Attestation::Attested`] is evidence.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Attestation {
    /// Not (yet) known: the process made no notified call after the exec, or the keeper that
    /// held the exec's snapshot was lost.
    #[default]
    Unconfirmed,
    /// The exec succeeded; argv\[0\] names the file the kernel ran (or a script whose
    /// interpreter it ran); the new image's argv is the argv the keeper read.
    Attested,
    /// The exec failed (ENOENT, ENOEXEC, EACCES, …): the process went on in its old image.
    ExecFailed,
    /// The caller had other threads when it called exec: its argv could change after the
    /// keeper's read.
    Raced,
    /// The new image's argv is not the argv the keeper read (written by another process
    /// sharing the caller's memory, or rewritten by the new program itself).
    ArgvChanged,
    /// argv\[0\] does not name the executable the kernel ran.
    ProgramDiffers,
    /// The caller's memory or its argv\[0\] could not be read or resolved.
    Unreadable,
}

impl LedgerEntry {
    /// Keeps what an earlier line of the same entry knew and this one does not (an exit, an
    /// attestation: each is learned once and never unlearned).
    pub fn merge_earlier(&mut self, earlier: &LedgerEntry) {
        self.exit = self.exit.or(earlier.exit);
        if self.attestation == Attestation::Unconfirmed {
            self.attestation = earlier.attestation;
            self.exe = self.exe.take().or_else(|| earlier.exe.clone());
        }
    }
}

impl LedgerEntry {
    /// Whether `later` is an exec of the same process with the same argv and cwd (the failed
    /// `PATH` probes of one `execvp` and the exec that found the program).
    pub(crate) fn same_call(&self, later: &LedgerEntry) -> bool {
        self.pid == later.pid
            && self.argv_truncated == later.argv_truncated
            && self.argv_cut == later.argv_cut
            && self.cwd == later.cwd
            && self.argv == later.argv
    }
}

fn yes() -> bool {
    true
}
