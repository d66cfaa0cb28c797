//! The agent's room, enforced by Landlock: which files the family may write (and, when the room
//! names unreadable paths, read), and that its signals and abstract unix-socket connects never
//! reach outside it.
//!
//! Invariants: the ruleset is built here, in the parent, before the fork (opening paths, reading
//! directories and allocating are not allowed in the forked child of a multi-threaded parent);
//! the child only calls [`restrict_self`] on the ruleset descriptor, after no_new_privs and before
//! the seccomp filter. The kernel's ruleset descriptor is close-on-exec, so it never reaches the
//! agent. Raw system calls through `libc::syscall` with our own `repr(C)` structs (libc defines
//! only the syscall numbers); the `landlock` crate is not used: its best-effort compatibility
//! mode silently drops what the kernel lacks, where the room must be refused instead, and the
//! child side has to be a raw call on a kept descriptor anyway.
//!
//! What is handled: every filesystem write right the ABI knows (not `IOCTL_DEV`: handling it
//! would break terminal ioctls on anything but the granted devices), `READ_FILE` only when the
//! room names unreadable paths, and both scopes (signals, abstract unix sockets; ABI >= 6).
//! See `docs/supervision.md`, "The room".

use std::collections::BTreeSet;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::supervise::{Room, RoomReceipt};

// ---- Landlock ABI (include/uapi/linux/landlock.h) ----

pub const CREATE_RULESET_VERSION: u32 = 1 << 0;
pub const RULE_PATH_BENEATH: u32 = 1;

pub const ACCESS_FS_EXECUTE: u64 = 1 << 0;
pub const ACCESS_FS_WRITE_FILE: u64 = 1 << 1;
pub const ACCESS_FS_READ_FILE: u64 = 1 << 2;
pub const ACCESS_FS_REMOVE_DIR: u64 = 1 << 4;
pub const ACCESS_FS_REMOVE_FILE: u64 = 1 << 5;
pub const ACCESS_FS_MAKE_CHAR: u64 = 1 << 6;
pub const ACCESS_FS_MAKE_DIR: u64 = 1 << 7;
pub const ACCESS_FS_MAKE_REG: u64 = 1 << 8;
pub const ACCESS_FS_MAKE_SOCK: u64 = 1 << 9;
pub const ACCESS_FS_MAKE_FIFO: u64 = 1 << 10;
pub const ACCESS_FS_MAKE_BLOCK: u64 = 1 << 11;
pub const ACCESS_FS_MAKE_SYM: u64 = 1 << 12;
/// ABI 2.
pub const ACCESS_FS_REFER: u64 = 1 << 13;
/// ABI 3.
pub const ACCESS_FS_TRUNCATE: u64 = 1 << 14;
/// ABI 5. Deliberately never handled (see the module comment).
pub const ACCESS_FS_IOCTL_DEV: u64 = 1 << 15;

/// ABI 6.
pub const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
/// ABI 6.
pub const SCOPE_SIGNAL: u64 = 1 << 1;

/// The lowest ABI a room can be built on: scoping of signals and abstract sockets (Linux 6.12).
pub const ABI_REQUIRED: u32 = 6;

/// The rights a rule on a non-directory may carry (the kernel refuses others with EINVAL).
const FILE_RIGHTS: u64 = ACCESS_FS_EXECUTE
    | ACCESS_FS_WRITE_FILE
    | ACCESS_FS_READ_FILE
    | ACCESS_FS_TRUNCATE
    | ACCESS_FS_IOCTL_DEV;

/// What a terminal or a device sink needs: open for writing (and `O_TRUNC`, harmless on a
/// device).
const DEVICE_RIGHTS: u64 = ACCESS_FS_WRITE_FILE | ACCESS_FS_TRUNCATE;

/// `struct landlock_ruleset_attr` (ABI 6 layout; the kernel accepts any known prefix).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct RulesetAttr {
    pub handled_access_fs: u64,
    pub handled_access_net: u64,
    pub scoped: u64,
}

/// `struct landlock_path_beneath_attr` (packed: 12 bytes).
#[repr(C, packed)]
#[derive(Debug, Clone, Copy)]
pub struct PathBeneathAttr {
    pub allowed_access: u64,
    pub parent_fd: i32,
}

/// The device paths every room may write, and the rights each gets. Honest programs write
/// them: discarded output, terminals (the family may own or be given one), and POSIX shared
/// memory (`/dev/shm`: Python multiprocessing semaphores, Chromium, node workers).
pub const DEVICES: [(&str, u64); 7] = [
    ("/dev/null", DEVICE_RIGHTS),
    ("/dev/zero", DEVICE_RIGHTS),
    ("/dev/full", DEVICE_RIGHTS),
    ("/dev/tty", DEVICE_RIGHTS),
    ("/dev/ptmx", DEVICE_RIGHTS),
    ("/dev/pts", DEVICE_RIGHTS),
    ("/dev/shm", u64::MAX),
];

#[derive(Debug, thiserror::Error)]
pub enum RoomError {
    #[error("the room lists {0} as both writable and unreadable")]
    Conflict(PathBuf),
    #[error("room path {path}: {source}")]
    Path {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{call}: {source}")]
    Landlock {
        call: &'static str,
        #[source]
        source: io::Error,
    },
}

impl RoomError {
    pub fn into_io(self) -> io::Error {
        let kind = match &self {
            Self::Conflict(_) => io::ErrorKind::InvalidInput,
            Self::Path { source, .. } | Self::Landlock { source, .. } => source.kind(),
        };
        io::Error::new(kind, self)
    }
}

/// The Landlock ABI this kernel offers; `None` when Landlock is absent or disabled at boot.
pub fn abi_version() -> Option<u32> {
    // SAFETY: landlock_create_ruleset(NULL, 0, VERSION) only returns the ABI number.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(rc).ok().filter(|&abi| abi >= 1)
}

/// Every filesystem write right `abi` knows (`IOCTL_DEV` excluded on purpose).
pub fn write_rights(abi: u32) -> u64 {
    let mut rights = ACCESS_FS_WRITE_FILE
        | ACCESS_FS_REMOVE_DIR
        | ACCESS_FS_REMOVE_FILE
        | ACCESS_FS_MAKE_CHAR
        | ACCESS_FS_MAKE_DIR
        | ACCESS_FS_MAKE_REG
        | ACCESS_FS_MAKE_SOCK
        | ACCESS_FS_MAKE_FIFO
        | ACCESS_FS_MAKE_BLOCK
        | ACCESS_FS_MAKE_SYM;
    if abi >= 2 {
        rights |= ACCESS_FS_REFER;
    }
    if abi >= 3 {
        rights |= ACCESS_FS_TRUNCATE;
    }
    rights
}

/// One rule: the rights granted beneath (or on) one opened path.
#[derive(Debug)]
pub struct Grant {
    pub path: PathBuf,
    pub access: u64,
    pub fd: OwnedFd,
}

/// What will be enforced, computed from the filesystem at launch (nothing applied yet).
#[derive(Debug)]
pub struct Plan {
    pub handled_access_fs: u64,
    pub scoped: u64,
    pub grants: Vec<Grant>,
    pub receipt: RoomReceipt,
    /// The rights granted on the room's overlay directory (`Room::overlay`), if it is writable.
    pub overlay_access: Option<u64>,
}

/// The ruleset, ready for the child, and what the receipt says about it.
#[derive(Debug)]
pub struct Prepared {
    pub ruleset: OwnedFd,
    pub receipt: RoomReceipt,
    /// The rights to grant again on the overlay once it is mounted (a rule on the directory
    /// beneath a mount does not reach into it: Landlock skips a covered mount point when it
    /// walks up from a file in the overlay).
    pub overlay_access: Option<u64>,
    /// Every right the ruleset handles (granted beneath a private view's overlay of HOME).
    pub handled_access: u64,
}

/// An `O_PATH` descriptor of `path` (symlinks followed unless `no_follow`), with its type.
fn open_path(path: &Path, no_follow: bool) -> io::Result<(OwnedFd, std::fs::FileType)> {
    let flags = libc::O_PATH | if no_follow { libc::O_NOFOLLOW } else { 0 };
    let file = File::options().read(true).custom_flags(flags).open(path)?;
    let kind = file.metadata()?.file_type();
    Ok((file.into(), kind))
}

/// The canonical form of `path`, or `None` when it does not exist.
fn existing(path: &Path) -> Result<Option<PathBuf>, RoomError> {
    match std::fs::canonicalize(path) {
        Ok(path) => Ok(Some(path)),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(RoomError::Path {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Rights `access` as a rule on something of type `kind` may carry them.
fn fit(access: u64, kind: std::fs::FileType) -> u64 {
    if kind.is_dir() {
        access
    } else {
        access & FILE_RIGHTS
    }
}

/// Computes the rules for `room` on a kernel of ABI `abi`: write rights beneath each writable
/// path and on the device list; when unreadable paths exist, `READ_FILE` is handled and granted
/// on every sibling along the way from `/` down to each of them (the carve-out).
pub fn plan(room: &Room, abi: u32) -> Result<Plan, RoomError> {
    let mut skipped = Vec::new();
    let mut writable = Vec::new();
    for path in &room.writable {
        match existing(path)? {
            Some(path) if !writable.contains(&path) => writable.push(path),
            Some(_) => {}
            None => skipped.push(path.clone()),
        }
    }
    let mut requested_unreadable = Vec::new();
    for path in &room.unreadable {
        match existing(path)? {
            Some(path) => requested_unreadable.push(path),
            None => skipped.push(path.clone()),
        }
    }
    // One beneath another adds nothing (and would re-grant its parent's siblings).
    let unreadable: Vec<PathBuf> = requested_unreadable
        .iter()
        .filter(|path| {
            !requested_unreadable
                .iter()
                .any(|other| other != *path && path.starts_with(other))
        })
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if let Some(both) = unreadable.iter().find(|path| writable.contains(path)) {
        return Err(RoomError::Conflict(both.clone()));
    }
    // Strict ancestors of an unreadable path: no rule may grant READ_FILE beneath them.
    let carved: BTreeSet<PathBuf> = unreadable
        .iter()
        .flat_map(|path| path.ancestors().skip(1).map(Path::to_path_buf))
        .collect();
    let reads = !unreadable.is_empty();
    let write = write_rights(abi);
    let mut grants = Vec::new();
    for path in &writable {
        let (fd, kind) = open_path(path, false).map_err(|source| RoomError::Path {
            path: path.clone(),
            source,
        })?;
        let mut access = write;
        if reads && !carved.contains(path) {
            access |= ACCESS_FS_READ_FILE;
        }
        grants.push(Grant {
            path: path.clone(),
            access: fit(access, kind),
            fd,
        });
    }
    for (device, access) in DEVICES {
        // A device the host lacks needs no rule.
        let Ok(Some(path)) = existing(Path::new(device)) else {
            continue;
        };
        let Ok((fd, kind)) = open_path(&path, false) else {
            continue;
        };
        grants.push(Grant {
            access: fit(access & write, kind),
            path,
            fd,
        });
    }
    for dir in &carved {
        let Ok(entries) = std::fs::read_dir(dir) else {
            // Unlistable: its entries stay unreadable (fail closed).
            tracing::debug!("room: cannot list {} for the carve-out", dir.display());
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if carved.contains(&path) || unreadable.contains(&path) {
                continue;
            }
            // Symlinks resolve to a path that has its own rules; siblings that vanish or cannot
            // be opened stay unreadable.
            let Ok((fd, kind)) = open_path(&path, true) else {
                continue;
            };
            if kind.is_symlink() {
                continue;
            }
            grants.push(Grant {
                path,
                access: fit(ACCESS_FS_READ_FILE, kind),
                fd,
            });
        }
    }
    let handled_access_fs = write | if reads { ACCESS_FS_READ_FILE } else { 0 };
    let overlay_dir = room
        .overlay
        .as_ref()
        .and_then(|o| std::fs::canonicalize(&o.dir).ok());
    let overlay_access = overlay_dir.and_then(|dir| {
        grants
            .iter()
            .find(|g| g.path == dir)
            .map(|g| g.access & handled_access_fs)
    });
    Ok(Plan {
        handled_access_fs,
        overlay_access,
        scoped: SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET,
        grants,
        receipt: RoomReceipt {
            mechanisms: vec![format!("landlock-abi-{abi}")],
            writable,
            unreadable,
            read_only: Vec::new(),
            overlay: None,
            views: None,
            skipped,
            signals_scoped: true,
            abstract_sockets_scoped: true,
            unix_connect_gated: false,
            local_connect_allowed: Vec::new(),
        },
    })
}

fn landlock_error(call: &'static str) -> RoomError {
    RoomError::Landlock {
        call,
        source: io::Error::last_os_error(),
    }
}

/// Creates the ruleset and adds every rule of `plan` (in the parent).
pub fn apply(plan: Plan) -> Result<Prepared, RoomError> {
    let attr = RulesetAttr {
        handled_access_fs: plan.handled_access_fs,
        handled_access_net: 0,
        scoped: plan.scoped,
    };
    // SAFETY: the kernel reads `size_of::<RulesetAttr>()` bytes from a struct we own.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &attr as *const RulesetAttr,
            size_of::<RulesetAttr>(),
            0u32,
        )
    };
    if rc < 0 {
        return Err(landlock_error("landlock_create_ruleset"));
    }
    // SAFETY: the kernel returned a new (close-on-exec) descriptor that nobody else owns.
    let ruleset = unsafe { OwnedFd::from_raw_fd(rc as RawFd) };
    for grant in &plan.grants {
        let access = grant.access & plan.handled_access_fs;
        if access == 0 {
            continue;
        }
        add_rule(ruleset.as_fd(), grant.fd.as_fd(), access).map_err(|source| RoomError::Path {
            path: grant.path.clone(),
            source,
        })?;
    }
    Ok(Prepared {
        ruleset,
        receipt: plan.receipt,
        overlay_access: plan.overlay_access,
        handled_access: plan.handled_access_fs,
    })
}

/// In the forked child, after the overlay is mounted: grants `access` beneath `dir` as it is
/// now (the overlay's root) in `ruleset`, before [`restrict_self`]. Async-signal-safe.
pub fn grant_in_child(ruleset: RawFd, dir: &std::ffi::CStr, access: u64) -> io::Result<()> {
    // SAFETY: raw system calls on a valid C string and on integers; the descriptors opened
    // here are borrowed for the call and closed.
    unsafe {
        let fd = libc::open(
            dir.as_ptr(),
            libc::O_PATH | libc::O_CLOEXEC | libc::O_DIRECTORY,
        );
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let result = add_rule(
            BorrowedFd::borrow_raw(ruleset),
            BorrowedFd::borrow_raw(fd),
            access,
        );
        libc::close(fd);
        result
    }
}

/// `landlock_add_rule(ruleset, PATH_BENEATH, {access, fd}, 0)`.
fn add_rule(ruleset: BorrowedFd<'_>, path: BorrowedFd<'_>, access: u64) -> io::Result<()> {
    let attr = PathBeneathAttr {
        allowed_access: access,
        parent_fd: path.as_raw_fd(),
    };
    // SAFETY: the kernel reads the packed 12-byte attribute from a struct we own.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0u32,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// [`plan`] then [`apply`]: the ruleset for `room`, ready for [`restrict_self`] in the child.
pub fn prepare(room: &Room, abi: u32) -> Result<Prepared, RoomError> {
    apply(plan(room, abi)?)
}

/// `landlock_restrict_self(ruleset, 0)`: async-signal-safe (the child calls it after
/// no_new_privs). The caller's domain is then the ruleset, forever, for it and its descendants.
pub fn restrict_self(ruleset: RawFd) -> io::Result<()> {
    // SAFETY: a raw system call with integer arguments.
    let rc = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ACCESS_FS_READ_DIR: u64 = 1 << 3;

    #[test]
    fn layouts_match_the_kernel_headers() {
        assert_eq!(size_of::<RulesetAttr>(), 24);
        assert_eq!(size_of::<PathBeneathAttr>(), 12);
        assert_eq!(libc::SYS_landlock_create_ruleset, 444);
        assert_eq!(libc::SYS_landlock_add_rule, 445);
        assert_eq!(libc::SYS_landlock_restrict_self, 446);
    }

    #[test]
    fn write_rights_grow_with_the_abi() {
        assert_eq!(write_rights(1) & (ACCESS_FS_REFER | ACCESS_FS_TRUNCATE), 0);
        assert_ne!(write_rights(2) & ACCESS_FS_REFER, 0);
        assert_ne!(write_rights(7) & ACCESS_FS_TRUNCATE, 0);
        for right in [ACCESS_FS_READ_FILE, ACCESS_FS_READ_DIR, ACCESS_FS_EXECUTE] {
            assert_eq!(write_rights(7) & right, 0);
        }
        assert_eq!(write_rights(7) & ACCESS_FS_IOCTL_DEV, 0);
        assert_eq!(write_rights(7).count_ones(), 12);
    }

    #[test]
    fn this_kernel_offers_the_room() {
        let abi = abi_version().expect("landlock on this host");
        assert!(abi >= ABI_REQUIRED, "ABI {abi}");
    }

    fn access_of(plan: &Plan, path: &Path) -> Option<u64> {
        plan.grants
            .iter()
            .find(|grant| grant.path == path)
            .map(|grant| grant.access)
    }

    #[test]
    fn a_plan_without_unreadable_paths_handles_writes_only() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("notes.txt");
        std::fs::write(&file, "x").unwrap();
        let gone = dir.path().join("gone");
        let room = Room::writable([dir.path().to_owned(), file.clone(), gone.clone()]);
        let plan = plan(&room, 7).unwrap();
        assert_eq!(plan.handled_access_fs, write_rights(7));
        assert_eq!(plan.receipt.skipped, vec![gone]);
        let root = std::fs::canonicalize(dir.path()).unwrap();
        assert_eq!(access_of(&plan, &root), Some(write_rights(7)));
        // A file gets file-level rights only.
        assert_eq!(
            access_of(&plan, &root.join("notes.txt")),
            Some(ACCESS_FS_WRITE_FILE | ACCESS_FS_TRUNCATE)
        );
        assert_eq!(
            access_of(&plan, Path::new("/dev/null")),
            Some(DEVICE_RIGHTS)
        );
        assert_eq!(plan.receipt.mechanisms, vec!["landlock-abi-7".to_owned()]);
    }

    #[test]
    fn the_carve_out_grants_every_sibling_but_the_unreadable_path() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let secrets = root.join("state");
        std::fs::create_dir(&secrets).unwrap();
        std::fs::write(secrets.join("key"), "k").unwrap();
        std::fs::write(secrets.join("public"), "p").unwrap();
        std::fs::write(root.join("readme"), "r").unwrap();
        std::os::unix::fs::symlink(secrets.join("key"), root.join("link")).unwrap();
        let room = Room {
            writable: vec![root.clone()],
            unreadable: vec![secrets.join("key"), secrets.join("key")],
            read_only: Vec::new(),
            overlay: None,
            views: None,
            allow_connect: Vec::new(),
        };
        let plan = plan(&room, 7).unwrap();
        assert_ne!(plan.handled_access_fs & ACCESS_FS_READ_FILE, 0);
        assert_eq!(plan.receipt.unreadable, vec![secrets.join("key")]);
        // The writable root is carved: writes beneath it, reads only through its siblings.
        assert_eq!(access_of(&plan, &root), Some(write_rights(7)));
        assert_eq!(
            access_of(&plan, &secrets.join("public")),
            Some(ACCESS_FS_READ_FILE)
        );
        assert_eq!(
            access_of(&plan, &root.join("readme")),
            Some(ACCESS_FS_READ_FILE)
        );
        assert_eq!(access_of(&plan, &secrets.join("key")), None);
        assert_eq!(access_of(&plan, &secrets), None);
        assert_eq!(
            access_of(&plan, &root.join("link")),
            None,
            "symlinks need no rule"
        );
        assert_eq!(
            access_of(&plan, Path::new("/usr")),
            Some(ACCESS_FS_READ_FILE)
        );
        assert_eq!(access_of(&plan, Path::new("/")), None);
    }

    #[test]
    fn a_path_both_writable_and_unreadable_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let room = Room {
            writable: vec![dir.path().to_owned()],
            unreadable: vec![dir.path().to_owned()],
            read_only: Vec::new(),
            overlay: None,
            views: None,
            allow_connect: Vec::new(),
        };
        assert!(matches!(plan(&room, 7), Err(RoomError::Conflict(_))));
    }

    #[test]
    fn a_nested_unreadable_path_is_folded_into_its_ancestor() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let inner = root.join("a/b");
        std::fs::create_dir_all(&inner).unwrap();
        std::fs::write(root.join("a/sibling"), "s").unwrap();
        let room = Room {
            writable: vec![],
            unreadable: vec![inner.clone(), root.join("a")],
            read_only: Vec::new(),
            overlay: None,
            views: None,
            allow_connect: Vec::new(),
        };
        let plan = plan(&room, 7).unwrap();
        assert_eq!(plan.receipt.unreadable, vec![root.join("a")]);
        assert_eq!(access_of(&plan, &root.join("a/sibling")), None);
    }
}
