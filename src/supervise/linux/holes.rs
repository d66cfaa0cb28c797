//! Read-only holes in a writable room: paths beneath a writable hierarchy that stay read-only
//! (an `--in-place` builder's `.git` and `.autocode/`), enforced by a private mount namespace.
//!
//! Landlock grants by hierarchy and cannot deny beneath a grant, so a hole is a mount: in the
//! child, between fork and exec, the family enters a private mount namespace (as root: a mount
//! namespace only; otherwise a user namespace mapping the user to itself, then a mount
//! namespace), makes every mount private (nothing propagates back), binds each writable path
//! that lies inside a hole onto itself (so it stays writable: the stage's `outbox/` in
//! `.autocode/`), then binds each hole onto itself recursively and remounts that bind
//! read-only. The capability drop that follows (`super::child`) takes `CAP_SYS_ADMIN`, so the
//! family cannot unmount or remount; a user namespace it makes later copies the mounts locked
//! (read-only flags and the mounts over the holes cannot be undone there), and renaming or
//! removing a mount point fails with `EBUSY`. Files in a hole keep their identity: reads see
//! the same inodes, and autocode, outside the namespace, writes there as before.
//!
//! The same namespace carries a room's overlay (`Room::overlay`, the verification tree): an
//! overlayfs mounted over its directory after the holes, with the run's work tree as the
//! read-only lower layer and a fresh upper layer autocode prepared (whiteouts for what the tree
//! under test lacks, files where it differs). The child then enters its working directory
//! again, so a cwd inside the overlay is the merged tree, not the directory beneath it. In a
//! user namespace the overlay is mounted with `userxattr` (its metadata in `user.overlay.*`,
//! which the lower layer's owner could set too: [`has_overlay_xattr`] finds them first); as
//! root it uses `trusted.overlay.*`, which no agent can set.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::views::{Sources, ViewsPlan};
use crate::supervise::{Overlay, PrivateViews};

/// Everything the child needs to cut the holes, prepared before the fork.
#[derive(Debug)]
pub struct HolePlan {
    /// `Some`: not privileged for mounts here, so a user namespace is made first, with these
    /// maps (`"<uid> <uid> 1\n"`, `"<gid> <gid> 1\n"`).
    user_maps: Option<(CString, CString)>,
    /// Writable paths inside a hole, bound onto themselves before the holes are cut.
    rebinds: Vec<CString>,
    holes: Vec<CString>,
    /// The overlay: its directory, its mount options, and the cwd to enter again after it.
    overlay: Option<OverlayMount>,
    /// The private views of HOME and `/tmp`, mounted first (`super::views`).
    views: Option<ViewsPlan>,
    /// Real paths the mounts name by descriptor, opened in the child before the views.
    sources: Sources,
    /// The cwd to enter again once everything is mounted.
    cwd: CString,
}

#[derive(Debug)]
struct OverlayMount {
    dir: CString,
    options: CString,
    cwd: CString,
    /// The Landlock ruleset and the rights to grant on the mounted overlay (`None`: no rule).
    rule: Option<(std::os::fd::RawFd, u64)>,
}

impl OverlayMount {
    /// `user_xattrs`: the overlay keeps its metadata in `user.overlay.*` (`userxattr`, needed in
    /// a user namespace); as root it keeps it in `trusted.overlay.*`, which no agent can set.
    /// `sources`: name the layers by descriptors opened now (`/proc/self/fd/N`, kept in
    /// `sources`), for a mount made after the private views covered their paths.
    fn new(
        overlay: &Overlay,
        cwd: &Path,
        user_xattrs: bool,
        sources: Option<&mut Sources>,
    ) -> io::Result<OverlayMount> {
        if let Some((key, path)) = overlay.unnameable_layer() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "the overlay's {key} {} is not UTF-8 or holds `,`, `:` or `\\`",
                    path.display()
                ),
            ));
        }
        let mut options = String::new();
        match sources {
            Some(sources) => {
                for (key, path) in overlay.layers() {
                    options.push_str(&format!("{key}={},", sources.name(path)?));
                }
            }
            None => {
                for (key, path) in overlay.layers() {
                    options.push_str(&format!("{key}={},", path.display()));
                }
            }
        }
        // `volatile`: no sync of the upper layer's file system at unmount (the layer is thrown
        // away; a sync would wait for every dirty page of that file system, a fresh checkout's
        // included).
        options.push_str("volatile");
        if user_xattrs {
            options.push_str(",userxattr");
        }
        Ok(OverlayMount {
            dir: cstring(&overlay.dir)?,
            options: CString::new(options).map_err(io::Error::other)?,
            cwd: cstring(cwd)?,
            rule: None,
        })
    }
}

/// The holes of a room that need a mount: those beneath one of `writable` (the others are
/// read-only already). Paths are canonical; holes that do not exist are returned apart.
pub fn needed(writable: &[PathBuf], read_only: &[PathBuf]) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let writable: Vec<PathBuf> = writable
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    let mut holes = Vec::new();
    let mut skipped = Vec::new();
    for hole in read_only {
        match std::fs::canonicalize(hole) {
            Ok(hole) => {
                if writable.iter().any(|w| hole.starts_with(w) && &hole != w) {
                    holes.push(hole);
                }
            }
            Err(_) => skipped.push(hole.clone()),
        }
    }
    holes.sort();
    holes.dedup();
    (holes, skipped)
}

pub(super) fn cstring(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path holds a NUL byte"))
}

/// Whether this process may mount in a new mount namespace without a user namespace
/// (`CAP_SYS_ADMIN` in its effective set).
fn privileged_for_mounts() -> bool {
    caps::has_cap(
        None,
        caps::CapSet::Effective,
        caps::Capability::CAP_SYS_ADMIN,
    )
    .unwrap_or(false)
}

/// Clears what a previous mount of the same layers left in the overlay's work directory: a
/// `volatile` overlay marks it (`work/incompat/volatile`) and refuses to be mounted on it again;
/// the kernel makes `work/work` afresh at each mount. Its directories are mode 000: each is
/// made accessible, then removed (`crate::store::remove_tree`).
pub fn clear_overlay_work(work: &Path) -> io::Result<()> {
    crate::store::remove_tree(&work.join("work"))
}

impl HolePlan {
    /// The plan for `holes` (canonical, from [`needed`]) and `overlay`; `writable` paths inside
    /// a hole are bound back writable; `cwd` is entered again after the overlay is mounted.
    /// `None` when there is neither a hole nor an overlay.
    pub fn new(
        writable: &[PathBuf],
        holes: &[PathBuf],
        overlay: Option<&Overlay>,
        views: Option<&PrivateViews>,
        cwd: &Path,
    ) -> io::Result<Option<HolePlan>> {
        if holes.is_empty() && overlay.is_none() && views.is_none() {
            return Ok(None);
        }
        let privileged = privileged_for_mounts();
        let mut sources = Sources::default();
        let overlay = overlay
            .map(|o| {
                OverlayMount::new(o, cwd, !privileged, views.is_some().then_some(&mut sources))
            })
            .transpose()?;
        let views = views
            .map(|views| ViewsPlan::new(views, !privileged, &mut sources))
            .transpose()?;
        let rebinds = writable
            .iter()
            .filter_map(|w| std::fs::canonicalize(w).ok())
            .filter(|w| holes.iter().any(|h| w.starts_with(h)))
            .map(|w| cstring(&w))
            .collect::<io::Result<Vec<_>>>()?;
        let user_maps = if privileged {
            None
        } else {
            let uid = nix::unistd::geteuid().as_raw();
            let gid = nix::unistd::getegid().as_raw();
            Some((
                CString::new(format!("{uid} {uid} 1\n")).map_err(io::Error::other)?,
                CString::new(format!("{gid} {gid} 1\n")).map_err(io::Error::other)?,
            ))
        };
        Ok(Some(HolePlan {
            user_maps,
            rebinds,
            holes: holes
                .iter()
                .map(|h| cstring(h))
                .collect::<io::Result<_>>()?,
            overlay,
            views,
            sources,
            cwd: cstring(cwd)?,
        }))
    }

    /// Grants `access` beneath each private view's layer once mounted (`super::views`).
    pub fn grant_layers(&mut self, ruleset: std::os::fd::RawFd, access: u64) {
        if let Some(views) = &mut self.views {
            views.grant_layers(ruleset, access);
        }
    }

    /// Grants `access` on the overlay once mounted, in `ruleset` (the room's, restricted to
    /// after the mounts): a rule on the directory beneath does not reach into the overlay.
    pub fn grant_overlay(&mut self, ruleset: std::os::fd::RawFd, access: u64) {
        if let Some(overlay) = &mut self.overlay {
            overlay.rule = Some((ruleset, access));
        }
    }

    /// The mechanisms' names in a receipt.
    pub fn mechanisms(&self) -> Vec<&'static str> {
        let userns = self.user_maps.is_some();
        let mut names: Vec<&'static str> = self
            .views
            .as_ref()
            .map(|views| views.mechanisms().to_vec())
            .unwrap_or_default();
        if !self.holes.is_empty() {
            names.push(if userns {
                "mount-namespace-read-only-holes (user namespace)"
            } else {
                "mount-namespace-read-only-holes"
            });
        }
        if self.overlay.is_some() {
            names.push(if userns {
                "mount-namespace-overlay (user namespace)"
            } else {
                "mount-namespace-overlay"
            });
        }
        names
    }

    /// Cuts the holes in this (forked, single-threaded) process. Async-signal-safe: raw system
    /// calls on data prepared before the fork.
    pub fn enter(&self) -> io::Result<()> {
        // SAFETY: raw system calls on integers, on C strings owned by `self` (alive for the
        // call) and on stack memory; nothing allocates or takes a lock.
        unsafe {
            match &self.user_maps {
                Some((uid_map, gid_map)) => {
                    // A process that changed its uid (su, setpriv) is not dumpable, and then its
                    // `/proc/self` files belong to root: the maps could not be written. Exec
                    // sets dumpability afresh either way.
                    check(libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0))?;
                    check(libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS))?;
                    write_file(c"/proc/self/setgroups", b"deny")?;
                    write_file(c"/proc/self/uid_map", uid_map.as_bytes())?;
                    write_file(c"/proc/self/gid_map", gid_map.as_bytes())?;
                }
                None => check(libc::unshare(libc::CLONE_NEWNS))?,
            }
            check(libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ))?;
            self.sources.open()?;
            if let Some(views) = &self.views {
                views.enter()?;
            }
            for path in &self.rebinds {
                bind(path)?;
            }
            for hole in &self.holes {
                bind(hole)?;
                remount_read_only(hole)?;
            }
            if let Some(overlay) = &self.overlay {
                check(libc::mount(
                    c"overlay".as_ptr(),
                    overlay.dir.as_ptr(),
                    c"overlay".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV,
                    overlay.options.as_ptr().cast(),
                ))?;
                // The cwd was entered before the mount (std does it before `pre_exec`): enter
                // it again, so a cwd in the overlay is the merged tree.
                check(libc::chdir(overlay.cwd.as_ptr()))?;
                if let Some((ruleset, access)) = overlay.rule {
                    super::landlock::grant_in_child(ruleset, &overlay.dir, access)?;
                }
            }
            if self.views.is_some() {
                // The cwd may lie in a view mounted after std entered it.
                check(libc::chdir(self.cwd.as_ptr()))?;
            }
        }
        Ok(())
    }
}

pub(super) fn check(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Binds `path` onto itself, recursively (what is mounted beneath comes along).
///
/// # Safety
/// Forked child only; `path` is a valid C string.
unsafe fn bind(path: &CString) -> io::Result<()> {
    // SAFETY: the caller's contract; the pointers are valid C strings or null.
    check(unsafe {
        libc::mount(
            path.as_ptr(),
            path.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND | libc::MS_REC,
            std::ptr::null(),
        )
    })
}

/// Remounts the bind mount at `path` read-only, keeping the flags it inherited that a remount
/// must keep (a user namespace may not drop nosuid, nodev, noexec or the atime mode of a mount
/// it did not make).
///
/// # Safety
/// Forked child only; `path` names a bind mount's root.
pub(super) unsafe fn remount_read_only(path: &std::ffi::CStr) -> io::Result<()> {
    // SAFETY: the caller's contract; the pointers are valid C strings, stack memory or null.
    unsafe {
        let mut fs: libc::statvfs = std::mem::zeroed();
        check(libc::statvfs(path.as_ptr(), &mut fs))?;
        let kept = [
            (libc::ST_NOSUID, libc::MS_NOSUID),
            (libc::ST_NODEV, libc::MS_NODEV),
            (libc::ST_NOEXEC, libc::MS_NOEXEC),
            (libc::ST_NOATIME, libc::MS_NOATIME),
            (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
            (libc::ST_RELATIME, libc::MS_RELATIME),
        ]
        .iter()
        .filter(|(st, _)| fs.f_flag & *st != 0)
        .fold(0, |flags, (_, ms)| flags | ms);
        check(libc::mount(
            std::ptr::null(),
            path.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | kept,
            std::ptr::null(),
        ))
    }
}

/// Writes `bytes` to `path` in one `write` (the `/proc` map files take one write).
///
/// # Safety
/// Forked child only.
unsafe fn write_file(path: &std::ffi::CStr, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: `path` is a valid C string and `bytes` outlives the calls.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        let error = io::Error::last_os_error();
        libc::close(fd);
        if written != bytes.len() as isize {
            return Err(error);
        }
    }
    Ok(())
}

/// `None` when read-only holes can be cut here, else what is missing (tried once per process:
/// a forked child cuts a hole in a temporary directory and checks a write there fails while a
/// write in a path bound back succeeds).
pub fn missing() -> Option<String> {
    static MISSING: OnceLock<Option<String>> = OnceLock::new();
    MISSING.get_or_init(try_in_a_child).clone()
}

fn try_in_a_child() -> Option<String> {
    let what = "a private mount namespace for read-only holes (`--in-place` runs keep `.git` and `.autocode/` read-only with it)";
    let result = (|| -> io::Result<i32> {
        let dir = tempfile::Builder::new()
            .prefix("autocode-holes-probe-")
            .tempdir()?;
        let root = std::fs::canonicalize(dir.path())?;
        let hole = root.join("hole");
        let inside = hole.join("open");
        std::fs::create_dir_all(&inside)?;
        let plan = HolePlan::new(
            std::slice::from_ref(&inside),
            std::slice::from_ref(&hole),
            None,
            None,
            &root,
        )?
        .ok_or_else(|| io::Error::other("no hole planned"))?;
        let refused = cstring(&hole.join("refused"))?;
        let allowed = cstring(&inside.join("allowed"))?;
        entered_in_a_child(&plan, || {
            // SAFETY: raw system calls on C strings prepared before the fork.
            unsafe {
                let mode = libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC;
                let hole_write = libc::open(refused.as_ptr(), mode, 0o600);
                let erofs = hole_write < 0 && *libc::__errno_location() == libc::EROFS;
                let open_write = libc::open(allowed.as_ptr(), mode, 0o600);
                match (erofs, open_write >= 0) {
                    (true, true) => 0,
                    (false, _) => 2,
                    (true, false) => 3,
                }
            }
        })
    })();
    probe_verdict(
        what,
        result,
        &[
            (2, "a write inside the hole was not refused"),
            (3, "a writable path inside the hole was not writable"),
        ],
    )
}

/// Forks; the child enters `plan`'s mounts, then runs `check`, whose result is its exit code
/// (10 + errno when entering failed). The child's exit code, or -1 when it did not exit.
/// `check` runs in the forked child of a multi-threaded process: raw system calls only, on
/// data prepared before the fork.
fn entered_in_a_child(plan: &HolePlan, check: impl Fn() -> i32) -> io::Result<i32> {
    // SAFETY: the child makes raw system calls only (HolePlan::enter, then `check`, whose
    // contract says the same, then _exit) on data prepared before the fork, and never returns.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        let code = match plan.enter() {
            Err(e) => 10 + e.raw_os_error().unwrap_or(0).min(100),
            Ok(()) => check(),
        };
        // SAFETY: ends the forked child without running anything of the parent's.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    if unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    })
}

/// What a probe's exit code says: `None` for 0, else `what` and why (an errno from entering
/// the mounts, a reason of `reasons` by code, or the probe's own failure).
fn probe_verdict(what: &str, result: io::Result<i32>, reasons: &[(i32, &str)]) -> Option<String> {
    match result {
        Ok(0) => None,
        Ok(code @ 10..) => Some(format!(
            "{what}: {}",
            io::Error::from_raw_os_error(code - 10)
        )),
        Ok(code) => Some(match reasons.iter().find(|(c, _)| *c == code) {
            Some((_, why)) => format!("{what}: {why}"),
            None => format!("{what}: the probe ended with {code}"),
        }),
        Err(e) => Some(format!("{what}: the probe could not run: {e}")),
    }
}

/// Creates an overlay whiteout at `path` (a character device 0:0, which needs no privilege):
/// the entry of the same name in the lower layer is hidden.
pub fn whiteout(path: &Path) -> io::Result<()> {
    nix::sys::stat::mknod(
        path,
        nix::sys::stat::SFlag::S_IFCHR,
        nix::sys::stat::Mode::empty(),
        0,
    )
    .map_err(io::Error::from)
}

/// Whether `path` (not followed) carries an extended attribute overlayfs reads in a layer
/// (`user.overlay.*`, as an overlay mounted with `userxattr` does: a file there can be a
/// whiteout and a directory opaque). An agent can set these on its own files, so a lower layer
/// that carries one is refused. `true` too when the list cannot be read.
pub fn has_overlay_xattr(path: &Path) -> bool {
    let Ok(path) = cstring(path) else {
        return true;
    };
    let mut names = [0u8; 4096];
    // SAFETY: `path` is a valid C string and `names` a buffer of the length given.
    let len = unsafe { libc::llistxattr(path.as_ptr(), names.as_mut_ptr().cast(), names.len()) };
    if len < 0 {
        let errno = io::Error::last_os_error().raw_os_error();
        // No xattrs on this file system: none to read.
        return errno != Some(libc::ENOTSUP);
    }
    names[..len as usize]
        .split(|b| *b == 0)
        .any(|name| name.starts_with(b"user.overlay.") || name.starts_with(b"trusted.overlay."))
}

/// Whether the directory `path` of an overlay's upper layer is opaque (`user.overlay.opaque` or
/// `trusted.overlay.opaque` is `y`): what the lower layer holds beneath it is hidden.
pub fn overlay_opaque(path: &Path) -> bool {
    let Ok(path) = cstring(path) else {
        return false;
    };
    [c"user.overlay.opaque", c"trusted.overlay.opaque"]
        .iter()
        .any(|name| {
            let mut value = [0u8; 8];
            // SAFETY: `path` and `name` are valid C strings and `value` a buffer of the length
            // given.
            let len = unsafe {
                libc::lgetxattr(
                    path.as_ptr(),
                    name.as_ptr(),
                    value.as_mut_ptr().cast(),
                    value.len(),
                )
            };
            len > 0 && value[0] == b'y'
        })
}

/// `None` when a room's overlay can be mounted here, else what is missing (tried once per
/// process: a forked child mounts an overlay of temporary directories, with a whiteout, and
/// checks what it sees and that its write lands in the upper layer only).
pub fn overlay_missing() -> Option<String> {
    static MISSING: OnceLock<Option<String>> = OnceLock::new();
    MISSING
        .get_or_init(|| overlay_missing_in(&std::env::temp_dir()))
        .clone()
}

/// As [`overlay_missing`], with the probe's layers in a temporary directory inside `parent`
/// (not cached): whether an overlay whose upper layer lives on `parent`'s file system can be
/// mounted (one that cannot hold an upper layer, as some network file systems, cannot).
pub fn overlay_missing_in(parent: &Path) -> Option<String> {
    let what = "an overlay in a private mount namespace (the verification tree without a checkout)";
    let result = (|| -> io::Result<i32> {
        std::fs::create_dir_all(parent)?;
        let dir = tempfile::Builder::new()
            .prefix("autocode-overlay-probe-")
            .tempdir_in(parent)?;
        let root = std::fs::canonicalize(dir.path())?;
        let overlay = Overlay {
            dir: root.join("merged"),
            lower: root.join("lower"),
            upper: root.join("upper"),
            work: root.join("work"),
        };
        for d in [&overlay.dir, &overlay.lower, &overlay.upper, &overlay.work] {
            std::fs::create_dir_all(d)?;
        }
        std::fs::write(overlay.lower.join("kept"), "k")?;
        std::fs::write(overlay.lower.join("hidden"), "h")?;
        whiteout(&overlay.upper.join("hidden"))?;
        let plan = HolePlan::new(&[], &[], Some(&overlay), None, &overlay.dir)?
            .ok_or_else(|| io::Error::other("no overlay planned"))?;
        let kept = cstring(&overlay.dir.join("kept"))?;
        let hidden = cstring(&overlay.dir.join("hidden"))?;
        let written = cstring(&overlay.dir.join("written"))?;
        let code = entered_in_a_child(&plan, || {
            // SAFETY: raw system calls on C strings prepared before the fork.
            unsafe {
                let sees_kept = libc::access(kept.as_ptr(), libc::R_OK) == 0;
                let sees_hidden = libc::access(hidden.as_ptr(), libc::F_OK) == 0;
                let mode = libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC;
                let wrote = libc::open(written.as_ptr(), mode, 0o600) >= 0;
                match (sees_kept, sees_hidden, wrote) {
                    (true, false, true) => 0,
                    (false, _, _) => 2,
                    (true, true, _) => 3,
                    (true, false, false) => 4,
                }
            }
        });
        let write_misplaced = code.is_ok()
            && (overlay.lower.join("written").exists() || !overlay.upper.join("written").exists());
        // The kernel leaves the work directory unreadable to an ordinary owner: the temporary
        // directory could not remove it.
        clear_overlay_work(&overlay.work)?;
        match code? {
            0 if write_misplaced => Ok(5),
            code => Ok(code),
        }
    })();
    probe_verdict(
        what,
        result,
        &[
            (2, "the lower layer was not seen"),
            (3, "a whiteout did not hide its entry"),
            (4, "the merged tree was not writable"),
            (5, "a write did not land in the upper layer"),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_holes_beneath_a_writable_path_need_a_mount() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        for sub in ["ws/.git", "ws/src", "other"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        let (holes, skipped) = needed(
            &[root.join("ws")],
            &[
                root.join("ws/.git"),
                root.join("other"),
                root.join("ws"),
                root.join("ws/.autocode"),
            ],
        );
        assert_eq!(holes, vec![root.join("ws/.git")]);
        assert_eq!(skipped, vec![root.join("ws/.autocode")]);
    }

    #[test]
    fn this_host_can_cut_holes() {
        assert_eq!(missing(), None);
    }

    #[test]
    fn this_host_can_mount_a_rooms_overlay() {
        assert_eq!(overlay_missing(), None);
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(overlay_missing_in(&dir.path().join("verify/run")), None);
        // Where no upper layer can be made, the overlay is missing (the tree is checked out).
        let nowhere = overlay_missing_in(Path::new("/proc/self/autocode-verify"));
        assert!(
            nowhere
                .as_deref()
                .is_some_and(|m| m.contains("could not run")),
            "{nowhere:?}"
        );
    }

    #[test]
    fn an_overlay_path_the_mount_options_cannot_carry_is_refused() {
        let overlay = Overlay {
            dir: "/tmp/m".into(),
            lower: "/tmp/a,upperdir=/etc".into(),
            upper: "/tmp/u".into(),
            work: "/tmp/w".into(),
        };
        let error = HolePlan::new(&[], &[], Some(&overlay), None, Path::new("/tmp/m")).unwrap_err();
        assert!(error.to_string().contains("lowerdir"), "{error}");
    }
}
