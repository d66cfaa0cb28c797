//! Whether an exec's name is missing in the caller's view, so that the keeper may answer the
//! exec ENOENT itself (a failed `PATH` probe) instead of letting it through.
//!
//! Invariants: only an answer the kernel could have given: the name is absolute, its directory
//! resolves inside the caller's root without magic links to a directory outside procfs, and its
//! last component does not exist there at all (not even as a dangling symlink), at a moment while
//! the caller is blocked in the call. Anything that cannot be told is "not absent".

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Whether the absolute `filename` names nothing in thread `tid`'s view, so that an exec of it
/// can only fail with ENOENT: its directory resolves inside the caller's root
/// (`/proc/<tid>/root`, `RESOLVE_IN_ROOT`, no magic links) to a directory outside procfs (where
/// `self` would name the reader, not the caller), and its last component does not exist there
/// at all, not even as a dangling symlink. `false` whenever anything cannot be told.
pub fn name_absent(tid: i32, filename: &[u8]) -> bool {
    let Some(cut) = filename.iter().rposition(|&byte| byte == b'/') else {
        return false;
    };
    let (dir, base) = (&filename[..cut.max(1)], &filename[cut + 1..]);
    if filename.first() != Some(&b'/') || matches!(base, b"" | b"." | b"..") {
        return false;
    }
    let (Ok(dir), Ok(base), Ok(root)) = (
        std::ffi::CString::new(dir),
        std::ffi::CString::new(base),
        std::ffi::CString::new(format!("/proc/{tid}/root")),
    ) else {
        return false;
    };
    /// `struct open_how` (libc's is non-exhaustive).
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    let how = OpenHow {
        flags: (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: raw system calls on C strings and structs we own (of the sizes we pass); every
    // descriptor opened here is owned at once and closed on return.
    unsafe {
        let raw = libc::open(
            root.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if raw < 0 {
            return false;
        }
        let root = OwnedFd::from_raw_fd(raw);
        let raw = libc::syscall(
            libc::SYS_openat2,
            root.as_raw_fd(),
            dir.as_ptr(),
            &how as *const OpenHow,
            size_of::<OpenHow>(),
        );
        if raw < 0 {
            return false;
        }
        let dir = OwnedFd::from_raw_fd(raw as RawFd);
        let mut fs: libc::statfs = std::mem::zeroed();
        if libc::fstatfs(dir.as_raw_fd(), &mut fs) != 0
            || fs.f_type == libc::PROC_SUPER_MAGIC as libc::__fsword_t
        {
            return false;
        }
        let mut stat: libc::stat = std::mem::zeroed();
        libc::fstatat(
            dir.as_raw_fd(),
            base.as_ptr(),
            &mut stat,
            libc::AT_SYMLINK_NOFOLLOW,
        ) != 0
            && io::Error::last_os_error().raw_os_error() == Some(libc::ENOENT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_name_missing_from_an_existing_directory_is_absent() {
        let dir = tempfile::tempdir().unwrap();
        let me = std::process::id() as i32;
        let path = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
        std::fs::write(dir.path().join("there"), "").unwrap();
        std::os::unix::fs::symlink("/nonexistent/target", dir.path().join("dangling")).unwrap();
        std::os::unix::fs::symlink(dir.path(), dir.path().join("linked")).unwrap();
        assert!(name_absent(me, path("missing").as_bytes()));
        assert!(
            name_absent(me, path("linked/missing").as_bytes()),
            "an absolute symlink to a directory is followed inside the caller's root"
        );
        assert!(!name_absent(me, path("there").as_bytes()));
        assert!(
            !name_absent(me, path("dangling").as_bytes()),
            "a dangling symlink is the kernel's to judge"
        );
        assert!(
            !name_absent(me, path("no-dir/missing").as_bytes()),
            "a missing directory is not told apart from other failures"
        );
        assert!(
            !name_absent(me, path("there/missing").as_bytes()),
            "ENOTDIR"
        );
        assert!(!name_absent(me, b"/proc/self/no-such-entry"), "procfs");
        assert!(!name_absent(me, b"relative/missing"));
        assert!(!name_absent(me, b"/"));
        assert!(!name_absent(me, path("..").as_bytes()));
    }
}
