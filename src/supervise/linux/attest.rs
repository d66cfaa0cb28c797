//! Attesting an exec after the fact: what the keeper snapshots while an exec waits for its
//! answer (the caller's thread count, its auxiliary vector, the files its argv\[0\] names), and
//! how the same process's next notified call (another exec, or `exit_group`) decides whether
//! the exec succeeded, what the kernel ran, and whether the argv it read is the argv that ran.
//!
//! Invariants: a failed exec can never read as a success (the kernel replaces the auxiliary
//! vector only on a successful exec, and the filter refuses `prctl(PR_SET_MM)`, the one call
//! that rewrites it); files are compared by identity (device, inode), never by name, so
//! symlinked interpreters and multi-call binaries resolve to what they are; every read is of
//! the caller's own view (`/proc/<pid>/root`, `/proc/<pid>/cwd`).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::supervise::Attestation;

use super::ledger::{exec_target, executable};

/// How deep the kernel follows `#!` interpreters (`BINPRM_MAX_RECURSION`).
const SHEBANG_DEPTH: usize = 4;
/// At most this much of `/proc/<pid>/cmdline` is read.
const CMDLINE_LIMIT: usize = 512 * 1024;
/// The search path when the exec's environment has no `PATH` (glibc's `execvp` default).
const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// A file's identity.
pub type FileId = (u64, u64);

/// What the keeper knew of the caller when its exec was notified.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// The caller's thread count (`Threads:` of its status).
    pub threads: Option<u32>,
    /// The caller's auxiliary vector before the exec.
    pub auxv: Option<Vec<u8>>,
    /// The file argv\[0\] names (through `PATH` when it has no slash) and the `#!`
    /// interpreters it leads to, by identity.
    pub names: Vec<FileId>,
}

fn identity(path: &std::path::Path) -> Option<FileId> {
    std::fs::metadata(path)
        .ok()
        .map(|meta| (meta.dev(), meta.ino()))
}

/// The thread count of the process `tid` belongs to: the link count of its `task` directory
/// is two plus its threads (one `statx`, where reading `status` takes four calls).
pub fn thread_count(tid: i32) -> Option<u32> {
    let links = std::fs::metadata(format!("/proc/{tid}/task")).ok()?.nlink();
    u32::try_from(links.checked_sub(2)?).ok()
}

/// Reads at most `limit` bytes of a /proc file with plain reads (`std::fs::read` also asks
/// for the size, which /proc does not know). A read that returns less than it was given room
/// for ends it: the two files read here are filled as far as they go by one read (`auxv` is
/// one `simple_read_from_buffer`; `cmdline` loops over the argument pages until the count or
/// the area ends, and a `setproctitle` title is one page read up to its NUL), so the read
/// that would return 0 is not made.
pub fn read_proc(path: &str, limit: usize) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).ok()?;
    let mut bytes = vec![0u8; limit.min(4096)];
    let mut len = 0;
    loop {
        if len == bytes.len() {
            if len >= limit {
                break;
            }
            bytes.resize(limit.min(len * 2), 0);
        }
        let room = bytes.len() - len;
        let got = file.read(bytes.get_mut(len..)?).ok()?;
        len += got;
        if got < room {
            break;
        }
    }
    bytes.truncate(len);
    Some(bytes)
}

fn auxv(pid: i32) -> Option<Vec<u8>> {
    read_proc(&format!("/proc/{pid}/auxv"), 64 * 1024).filter(|bytes| !bytes.is_empty())
}

/// The file `name` (an argv\[0\]) stands for in the caller's view: a path when it has a
/// slash, else the first executable file of that name along `path_env`, as `execvp` finds it
/// (with its identity, which that look-up has read).
fn resolve_name(tid: i32, name: &str, path_env: Option<&str>) -> Option<(PathBuf, Option<FileId>)> {
    if name.is_empty() {
        return None;
    }
    if name.contains('/') {
        // `/proc/self` names the caller, not the keeper that resolves it.
        for own in ["/proc/self/", "/proc/thread-self/"] {
            if let Some(rest) = name.strip_prefix(own) {
                return Some((PathBuf::from(format!("/proc/{tid}/{rest}")), None));
            }
        }
        return Some((exec_target(tid, name.as_bytes(), None, false), None));
    }
    path_env.unwrap_or(DEFAULT_PATH).split(':').find_map(|dir| {
        let dir = if dir.is_empty() { "." } else { dir };
        let candidate = exec_target(tid, format!("{dir}/{name}").as_bytes(), None, false);
        let meta = std::fs::metadata(&candidate).ok()?;
        executable(&meta).then(|| (candidate, Some((meta.dev(), meta.ino()))))
    })
}

/// The interpreter a `#!` line names (the kernel takes it as a path, relative to the cwd).
fn shebang(path: &std::path::Path) -> Option<String> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let file = std::fs::File::open(path).ok()?;
    let got = file.take(head.len() as u64).read(&mut head).ok()?;
    let line = head.get(..got)?.strip_prefix(b"#!")?;
    let line = line.split(|&byte| byte == b'\n').next()?;
    let text = std::str::from_utf8(line).ok()?;
    text.split_ascii_whitespace().next().map(str::to_owned)
}

/// The identities argv\[0\] names: its file and the chain of interpreters behind it. `known`:
/// a path whose identity the caller has just read (the exec's own file), not read again.
pub fn named_files(
    tid: i32,
    argv0: &str,
    path_env: Option<&str>,
    known: Option<(&Path, FileId)>,
) -> Vec<FileId> {
    let mut names = Vec::new();
    let mut next = resolve_name(tid, argv0, path_env);
    while let Some((path, read)) = next.take() {
        let id = read
            .or_else(|| known.and_then(|(place, id)| (place == path).then_some(id)))
            .or_else(|| identity(&path));
        let Some(id) = id else {
            break;
        };
        names.push(id);
        if names.len() > SHEBANG_DEPTH {
            break;
        }
        next =
            shebang(&path).map(|interp| (exec_target(tid, interp.as_bytes(), None, false), None));
    }
    names
}

/// Takes the snapshot of a caller whose exec is waiting for its answer; `known` as in
/// [`named_files`].
pub fn snapshot(
    tid: i32,
    argv: &[String],
    path_env: Option<&str>,
    known: Option<(&Path, FileId)>,
) -> Snapshot {
    Snapshot {
        threads: thread_count(tid),
        auxv: auxv(tid),
        names: argv
            .first()
            .map(|argv0| named_files(tid, argv0, path_env, known))
            .unwrap_or_default(),
    }
}

/// Whether the new image's argv (`ran`) is the argv the keeper read: the same, or the form the
/// kernel gives a script's interpreter (`interp [arg] filename argv[1..]`). A cut `read` is
/// compared as a prefix.
pub fn same_argv(ran: &[String], read: &[String], filename: &str, truncated: bool) -> bool {
    let same = |ran: &[String], read: &[String]| {
        if truncated {
            ran.starts_with(read)
        } else {
            ran == read
        }
    };
    if same(ran, read) {
        return true;
    }
    let Some(rest) = read.get(1..) else {
        return false;
    };
    let mut script = vec![filename.to_owned()];
    script.extend_from_slice(rest);
    (1..=2).any(|prefix| ran.get(prefix..).is_some_and(|tail| same(tail, &script)))
}

fn cmdline(pid: i32) -> Option<Vec<String>> {
    let bytes = read_proc(&format!("/proc/{pid}/cmdline"), CMDLINE_LIMIT)?;
    let text = bytes.strip_suffix(&[0]).unwrap_or(&bytes);
    Some(
        text.split(|&byte| byte == 0)
            .map(|arg| String::from_utf8_lossy(arg).into_owned())
            .collect(),
    )
}

/// What an exec came to, judged from the process `pid` as it is now (it made a notified call
/// after the exec, so it is whole and blocked). `None`: it cannot be told (the process's image
/// is unreadable). The executable is returned once the exec is known to have succeeded.
pub fn judge(
    pid: i32,
    before: &Snapshot,
    argv: &[String],
    filename: &str,
    truncated: bool,
) -> Option<(Attestation, Option<String>)> {
    let before_auxv = before.auxv.as_ref()?;
    let now = auxv(pid)?;
    if &now == before_auxv {
        return Some((Attestation::ExecFailed, None));
    }
    let exe_link = PathBuf::from(format!("/proc/{pid}/exe"));
    let exe = std::fs::read_link(&exe_link)
        .ok()
        .map(|path| path.to_string_lossy().into_owned());
    let attestation = if before.threads != Some(1) {
        Attestation::Raced
    } else if argv.is_empty() || before.names.is_empty() {
        Attestation::Unreadable
    } else if !identity(&exe_link).is_some_and(|id| before.names.contains(&id)) {
        Attestation::ProgramDiffers
    } else if !cmdline(pid).is_some_and(|ran| same_argv(&ran, argv, filename, truncated)) {
        Attestation::ArgvChanged
    } else {
        Attestation::Attested
    };
    Some((attestation, exe))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(words: &[&str]) -> Vec<String> {
        words.iter().map(|word| (*word).to_owned()).collect()
    }

    #[test]
    fn the_new_image_argv_is_the_read_argv_or_its_script_form() {
        let read = strings(&["./run.py", "-v"]);
        assert!(same_argv(&read, &read, "./run.py", false));
        assert!(same_argv(
            &strings(&["/usr/bin/env", "python3", "./run.py", "-v"]),
            &read,
            "./run.py",
            false
        ));
        assert!(same_argv(
            &strings(&["/bin/sh", "./run.py", "-v"]),
            &read,
            "./run.py",
            false
        ));
        assert!(!same_argv(
            &strings(&["sh", "-c", "exit 0"]),
            &strings(&["sh", "-c", "exit 3"]),
            "/bin/sh",
            false
        ));
        assert!(!same_argv(
            &strings(&["/bin/sh", "./run.py", "-x"]),
            &read,
            "./run.py",
            false
        ));
        assert!(same_argv(
            &strings(&["a", "b", "c"]),
            &strings(&["a", "b"]),
            "a",
            true
        ));
    }

    #[test]
    fn names_resolve_through_path_symlinks_and_interpreters() {
        let dir = tempfile::tempdir().unwrap();
        let pid = std::process::id() as i32;
        let real = dir.path().join("tool-3.11");
        std::fs::copy("/bin/true", &real).unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("tool")).unwrap();
        let script = dir.path().join("script");
        std::fs::write(
            &script,
            format!("#!{}\n", dir.path().join("tool").display()),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let path = dir.path().to_string_lossy().into_owned();
        let real_id = identity(&real).unwrap();
        assert_eq!(named_files(pid, "tool", Some(&path), None), vec![real_id]);
        assert_eq!(
            named_files(pid, "script", Some(&path), None),
            vec![identity(&script).unwrap(), real_id]
        );
        assert_eq!(
            named_files(pid, &real.to_string_lossy(), None, None),
            vec![real_id]
        );
        assert!(named_files(pid, "no-such-tool", Some(&path), None).is_empty());
        assert_eq!(
            named_files(pid, "/proc/self/exe", None, None),
            vec![identity(&PathBuf::from("/proc/self/exe")).unwrap()],
            "the caller's own executable"
        );
        assert!(!named_files(pid, "true", Some(&path), None).contains(&real_id));
        // The exec's own file, already looked up, is taken as it was read (here a stand-in
        // identity, so the test sees that it was not read again); other paths are read.
        let stand_in = (u64::MAX, 7);
        let seen = exec_target(pid, real.as_os_str().as_encoded_bytes(), None, false);
        let other = exec_target(pid, script.as_os_str().as_encoded_bytes(), None, false);
        assert_eq!(
            named_files(pid, &real.to_string_lossy(), None, Some((&seen, stand_in))),
            vec![stand_in]
        );
        assert_eq!(
            named_files(pid, &real.to_string_lossy(), None, Some((&other, stand_in))),
            vec![real_id]
        );
    }

    #[test]
    fn proc_reads_take_the_whole_file_up_to_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("data");
        let bytes: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&file, &bytes).unwrap();
        let path = file.to_string_lossy();
        assert_eq!(read_proc(&path, 64 * 1024).unwrap(), bytes);
        assert_eq!(read_proc(&path, 4096).unwrap(), bytes[..4096]);
        assert_eq!(read_proc(&path, 5000).unwrap(), bytes[..5000]);
        // This process's own /proc files, read as the keeper reads a caller's.
        let me = std::process::id();
        let auxv = read_proc(&format!("/proc/{me}/auxv"), 64 * 1024).unwrap();
        assert!(!auxv.is_empty() && auxv.len().is_multiple_of(16));
        let cmdline = read_proc(&format!("/proc/{me}/cmdline"), CMDLINE_LIMIT).unwrap();
        assert_eq!(
            cmdline,
            std::fs::read(format!("/proc/{me}/cmdline")).unwrap()
        );
    }
}
