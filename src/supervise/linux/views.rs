//! The family's private views of HOME and `/tmp` (`Room::views`): copy-on-write layers that let
//! every toolchain and CLI write where it writes (a crate fetched into `~/.cargo`, an npm cache,
//! a CLI's session files, `/tmp` for tools that ignore `TMPDIR`) without any of it reaching the
//! user's files or another role.
//!
//! In the forked child, inside the private mount namespace `super::holes` makes and before its
//! holes: the layers are mounted shallowest first (an overlay over HOME whose lower layer is the
//! real HOME and whose upper layer is the role's own; one over `/tmp` whose upper layer is the
//! stage's or the replay's own), then every real path is bound back from the real file system (read-only unless
//! writable: Landlock grants writes beneath the overlay's root, so only a read-only mount keeps
//! a path read-only there), then the layers inside a bound-back path (a scratch layer over a
//! project directory a CLI writes at start), then the hidden paths are covered with an empty
//! read-only file system (a directory) or `/dev/null` (a file).
//!
//! Every source is named by a descriptor (`/proc/self/fd/N`: the real path is covered by the
//! time of the mount) that the child opens in its namespace before the first view, and every target is opened with `RESOLVE_NO_SYMLINKS` and
//! mounted on through its descriptor, so a symlink a role left in its layer cannot move a mount.
//! Directories a target needs inside a view are made there (in the layer, or in the stage's
//! temporary directory). The parent removes what a layer holds along the way to a real path that
//! is not a directory ([`clear_the_way`]), so a role cannot shadow one.

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};

use super::holes::{check, cstring as path_cstring};
use crate::supervise::PrivateViews;

/// Everything the child needs for the views, prepared before the fork.
#[derive(Debug)]
pub struct ViewsPlan {
    /// The covers and the real paths, in mount order.
    mounts: Vec<Mount>,
    /// The Landlock ruleset and the rights to grant beneath each layer once it is mounted.
    rule: Option<(RawFd, u64)>,
    mechanisms: Vec<&'static str>,
}

#[derive(Debug)]
struct Mount {
    /// The directories to make, shallowest first, before the target is opened.
    make: Vec<CString>,
    target: CString,
    kind: MountKind,
}

#[derive(Debug)]
enum MountKind {
    Overlay {
        options: CString,
    },
    Bind {
        source: CString,
        read_only: bool,
    },
    /// An empty read-only file system over a directory.
    EmptyDirectory,
    /// `/dev/null` over a file.
    NullFile,
}

fn cstring(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path holds a NUL byte"))
}

/// Real paths a mount names by descriptor (`/proc/self/fd/N`), because a view will cover them
/// by the time of the mount. The descriptors must be opened in the child, inside its mount
/// namespace (overlayfs and bind mounts refuse a path from another namespace), so the parent
/// reserves a free descriptor number for each and [`Sources::open`] moves each there.
#[derive(Debug, Default)]
pub struct Sources {
    entries: Vec<(CString, RawFd)>,
    next: RawFd,
}

/// Where reserved descriptor numbers start (far above what a launch has open).
const FIRST_RESERVED_FD: RawFd = 600;

impl Sources {
    /// Reserves a descriptor for `path` and returns the name a mount gives it.
    pub fn name(&mut self, path: &Path) -> io::Result<String> {
        if self.next < FIRST_RESERVED_FD {
            self.next = FIRST_RESERVED_FD;
        }
        // SAFETY: F_GETFD only inspects the descriptor table.
        while unsafe { libc::fcntl(self.next, libc::F_GETFD) } >= 0 {
            self.next += 1;
        }
        let fd = self.next;
        self.next += 1;
        self.entries.push((path_cstring(path)?, fd));
        Ok(format!("/proc/self/fd/{fd}"))
    }

    /// Opens every source at its reserved number (close-on-exec). Child only, before any view
    /// covers a source's path; async-signal-safe.
    pub fn open(&self) -> io::Result<()> {
        for (path, reserved) in &self.entries {
            // SAFETY: raw system calls on a valid C string and integers.
            unsafe {
                let fd = libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(io::Error::last_os_error());
                }
                if fd != *reserved {
                    let moved = libc::dup3(fd, *reserved, libc::O_CLOEXEC);
                    libc::close(fd);
                    if moved < 0 {
                        return Err(io::Error::last_os_error());
                    }
                }
            }
        }
        Ok(())
    }
}

/// The directories between `covered` (exclusive) and `target` (inclusive), shallowest first.
fn to_make(covered: &Path, target: &Path) -> io::Result<Vec<CString>> {
    let mut dirs: Vec<&Path> = target
        .ancestors()
        .take_while(|dir| *dir != covered && dir.starts_with(covered))
        .collect();
    dirs.reverse();
    dirs.into_iter().map(path_cstring).collect()
}

/// The deepest covered directory `path` lies in, if any.
fn covering<'a>(covered: &[&'a Path], path: &Path) -> Option<&'a Path> {
    covered
        .iter()
        .filter(|dir| path.starts_with(dir))
        .max_by_key(|dir| dir.components().count())
        .copied()
}

impl ViewsPlan {
    /// The plan for `views`. `user_xattrs`: the overlay keeps its metadata in `user.overlay.*`
    /// (in a user namespace).
    pub fn new(
        views: &PrivateViews,
        user_xattrs: bool,
        sources: &mut Sources,
    ) -> io::Result<ViewsPlan> {
        let mut mechanisms = Vec::new();
        let covered = views.covered();
        // Covers, shallowest first (a HOME beneath /tmp is mounted in the private /tmp).
        let mut covers: Vec<(&Path, MountKind)> = Vec::new();
        for layer in &views.layers {
            if let Some((key, path)) = layer.unnameable_layer() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("a private view's {key} {} cannot be named", path.display()),
                ));
            }
            let mut options = String::new();
            for (key, path) in layer.layers() {
                options.push_str(&format!("{key}={},", sources.name(path)?));
            }
            options.push_str("volatile");
            if user_xattrs {
                options.push_str(",userxattr");
            }
            covers.push((
                &layer.dir,
                MountKind::Overlay {
                    options: cstring(options.as_bytes())?,
                },
            ));
        }
        if !views.layers.is_empty() {
            mechanisms.push(if user_xattrs {
                "private-views (user namespace)"
            } else {
                "private-views"
            });
        }
        covers.sort_by_key(|(dir, _)| dir.components().count());
        // A layer inside a path shown real (a project's own directory in the work tree) is
        // mounted after that path is bound back, on the directory as it exists there.
        let bound: Vec<&Path> = views
            .real
            .iter()
            .filter(|real| covering(&covered, &real.path).is_some() && real.path.exists())
            .map(|real| real.path.as_path())
            .collect();
        let (covers, inner): (Vec<_>, Vec<_>) = covers.into_iter().partition(|(dir, _)| {
            !bound
                .iter()
                .any(|real| *dir != *real && dir.starts_with(real))
        });
        let mut mounts = Vec::new();
        for (index, (dir, kind)) in covers.into_iter().enumerate() {
            // A cover inside an earlier one needs its directory made in that one's view.
            let outer = covered
                .iter()
                .filter(|other| **other != dir && dir.starts_with(other))
                .max_by_key(|other| other.components().count());
            let make = match outer {
                Some(outer) if index > 0 => to_make(outer, dir)?,
                _ => Vec::new(),
            };
            mounts.push(Mount {
                make,
                target: path_cstring(dir)?,
                kind,
            });
        }
        let mut real: Vec<&crate::supervise::RealPath> = views
            .real
            .iter()
            .filter(|real| covering(&covered, &real.path).is_some())
            .collect();
        real.sort_by_key(|real| real.path.components().count());
        for real in real {
            let Some(cover) = covering(&covered, &real.path) else {
                continue;
            };
            if !real.path.exists() {
                continue;
            }
            let source = cstring(sources.name(&real.path)?.as_bytes())?;
            let make = if real.path.is_dir() {
                to_make(cover, &real.path)?
            } else {
                to_make(cover, real.path.parent().unwrap_or(cover))?
            };
            mounts.push(Mount {
                make,
                target: path_cstring(&real.path)?,
                kind: MountKind::Bind {
                    source,
                    read_only: !real.writable,
                },
            });
        }
        for (dir, kind) in inner {
            mounts.push(Mount {
                make: Vec::new(),
                target: path_cstring(dir)?,
                kind,
            });
        }
        for hidden in &views.hidden {
            if covering(&covered, hidden).is_none() {
                continue;
            }
            let kind = match std::fs::symlink_metadata(hidden) {
                Ok(meta) if meta.is_dir() => MountKind::EmptyDirectory,
                Ok(_) => MountKind::NullFile,
                // What does not exist now is hidden by Landlock's carve-out if it appears.
                Err(_) => continue,
            };
            mounts.push(Mount {
                make: Vec::new(),
                target: path_cstring(hidden)?,
                kind,
            });
        }
        Ok(ViewsPlan {
            mounts,
            rule: None,
            mechanisms,
        })
    }

    /// Grants `access` beneath each layer once mounted, in `ruleset` (a rule on the real
    /// directory does not reach into the overlay).
    pub fn grant_layers(&mut self, ruleset: RawFd, access: u64) {
        self.rule = Some((ruleset, access));
    }

    pub fn mechanisms(&self) -> &[&'static str] {
        &self.mechanisms
    }

    /// Mounts the views in this (forked, single-threaded) process, already in its private mount
    /// namespace. Async-signal-safe: raw system calls on data prepared before the fork.
    pub fn enter(&self) -> io::Result<()> {
        for mount in &self.mounts {
            for dir in &mount.make {
                // SAFETY: a valid C string owned by `self`.
                let rc = unsafe { libc::mkdir(dir.as_ptr(), 0o755) };
                if rc < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST) {
                    return Err(io::Error::last_os_error());
                }
            }
            let hidden = matches!(mount.kind, MountKind::EmptyDirectory | MountKind::NullFile);
            let target = match open_beneath_no_symlinks(&mount.target) {
                Ok(fd) => fd,
                // A hidden path a bound-back real path already covers, or that vanished.
                Err(e) if hidden && e.raw_os_error() == Some(libc::ENOENT) => continue,
                Err(e) => return Err(e),
            };
            let mut name = FdName::new();
            let result = mount_on(name.of(target), &mount.target, &mount.kind);
            // SAFETY: closing the descriptor opened above.
            unsafe { libc::close(target) };
            result?;
            if let (MountKind::Overlay { .. }, Some((ruleset, access))) = (&mount.kind, self.rule) {
                super::landlock::grant_in_child(ruleset, &mount.target, access)?;
            }
        }
        Ok(())
    }
}

/// `/proc/self/fd/N` for a descriptor, formatted without allocating.
struct FdName {
    buffer: [u8; 32],
}

impl FdName {
    fn new() -> Self {
        Self { buffer: [0; 32] }
    }

    fn of(&mut self, fd: RawFd) -> *const libc::c_char {
        const PREFIX: &[u8] = b"/proc/self/fd/";
        self.buffer[..PREFIX.len()].copy_from_slice(PREFIX);
        let mut digits = [0u8; 12];
        let mut count = 0;
        let mut value = fd.max(0) as u32;
        loop {
            digits[count] = b'0' + (value % 10) as u8;
            count += 1;
            value /= 10;
            if value == 0 {
                break;
            }
        }
        for (slot, digit) in self.buffer[PREFIX.len()..]
            .iter_mut()
            .zip(digits[..count].iter().rev())
        {
            *slot = *digit;
        }
        self.buffer[PREFIX.len() + count] = 0;
        self.buffer.as_ptr().cast()
    }
}

#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

const RESOLVE_NO_SYMLINKS: u64 = 0x04;

/// An `O_PATH` descriptor of `path`, refusing a symlink anywhere along it.
fn open_beneath_no_symlinks(path: &CString) -> io::Result<RawFd> {
    let how = OpenHow {
        flags: (libc::O_PATH | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: RESOLVE_NO_SYMLINKS,
    };
    // SAFETY: a raw system call on a valid C string and a struct we own, of the size we pass.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            path.as_ptr(),
            &how as *const OpenHow,
            size_of::<OpenHow>(),
        )
    };
    if fd < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(fd as RawFd)
    }
}

/// Mounts `kind` on the target named by `target` (`/proc/self/fd/N`, opened before the mount;
/// `path` names the same place, and once mounted, the new mount).
fn mount_on(target: *const libc::c_char, path: &CString, kind: &MountKind) -> io::Result<()> {
    // SAFETY: raw system calls on valid C strings (owned by the plan, or the caller's buffer,
    // alive for the call) and null pointers.
    unsafe {
        match kind {
            MountKind::Overlay { options } => check(libc::mount(
                c"overlay".as_ptr(),
                target,
                c"overlay".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                options.as_ptr().cast(),
            )),
            MountKind::Bind { source, read_only } => {
                check(libc::mount(
                    source.as_ptr(),
                    target,
                    std::ptr::null(),
                    libc::MS_BIND | libc::MS_REC,
                    std::ptr::null(),
                ))?;
                if *read_only {
                    // The descriptor names what lies beneath the new mount: the path names it.
                    super::holes::remount_read_only(path)?;
                }
                Ok(())
            }
            MountKind::EmptyDirectory => check(libc::mount(
                c"tmpfs".as_ptr(),
                target,
                c"tmpfs".as_ptr(),
                libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                c"size=4k,mode=0555".as_ptr().cast(),
            )),
            MountKind::NullFile => check(libc::mount(
                c"/dev/null".as_ptr(),
                target,
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            )),
        }
    }
}

/// Before a launch, in the parent: removes what `upper` (a layer over `home`) holds on the way to each
/// of `real` (paths beneath `home`) that is not a plain directory — a symlink, a file, a
/// whiteout — so the real path can be bound back where it is. What else the layer holds stays.
pub fn clear_the_way(home: &Path, upper: &Path, real: &[PathBuf]) -> io::Result<()> {
    for path in real {
        let Ok(relative) = path.strip_prefix(home) else {
            continue;
        };
        let mut at = upper.to_owned();
        for component in relative.components() {
            at.push(component);
            match std::fs::symlink_metadata(&at) {
                Ok(meta) if meta.is_dir() => {}
                Ok(_) => {
                    std::fs::remove_file(&at)?;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supervise::{Overlay, RealPath};

    fn layer(dir: &Path, scratch: &Path, name: &str) -> Overlay {
        Overlay {
            dir: dir.to_owned(),
            lower: dir.to_owned(),
            upper: scratch.join(name).join("upper"),
            work: scratch.join(name).join("work"),
        }
    }

    #[test]
    fn a_layer_inside_a_path_shown_real_is_mounted_after_it() {
        let scratch = tempfile::tempdir().unwrap();
        let home = scratch.path().join("home");
        let workspace = home.join("src/project");
        let opencode = workspace.join(".opencode");
        std::fs::create_dir_all(&opencode).unwrap();
        let views = PrivateViews {
            // Listed deepest first: the plan orders them.
            layers: vec![
                layer(&opencode, scratch.path(), "scratch"),
                layer(&home, scratch.path(), "home"),
            ],
            real: vec![RealPath {
                path: workspace.clone(),
                writable: false,
            }],
            hidden: Vec::new(),
        };
        let plan = ViewsPlan::new(&views, false, &mut Sources::default()).unwrap();
        let order: Vec<(String, &str)> = plan
            .mounts
            .iter()
            .map(|m| {
                let kind = match m.kind {
                    MountKind::Overlay { .. } => "overlay",
                    MountKind::Bind { .. } => "bind",
                    _ => "other",
                };
                (m.target.to_string_lossy().into_owned(), kind)
            })
            .collect();
        let text = |p: &Path| p.to_string_lossy().into_owned();
        assert_eq!(
            order,
            vec![
                (text(&home), "overlay"),
                (text(&workspace), "bind"),
                (text(&opencode), "overlay"),
            ]
        );
        assert!(
            plan.mounts[2].make.is_empty(),
            "mounted on the real directory"
        );
    }
}
