//! Is an autocode process driving a run now? The run's lock (`<run>/lock`, an exclusive
//! `flock` held by the process that drives it, `store::RunLock`) is looked up in `/proc/locks`
//! by the lock file's device and inode: the holder's pid, and its start time from
//! `/proc/<pid>/stat`. Nothing is locked to find out, so looking never gets in the way of a
//! `resume` that is taking the lock at that moment.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use chrono::{DateTime, Utc};
use serde::Serialize;

/// Who holds a run's lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Holder {
    pub pid: i32,
    /// When the holder started (from its `/proc` start time and the boot time).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<Utc>>,
    /// Its command name (`/proc/<pid>/comm`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
}

/// The process holding the lock file at `lock`, if any.
pub fn holder(lock: &Path) -> Option<Holder> {
    holder_among(&Locks::now(), lock)
}

/// `/proc/locks` read once, to look up many runs.
pub struct Locks(String);

impl Locks {
    pub fn now() -> Locks {
        Locks(std::fs::read_to_string("/proc/locks").unwrap_or_default())
    }
}

/// The process holding the lock file at `lock` in the `locks` read.
pub fn holder_among(locks: &Locks, lock: &Path) -> Option<Holder> {
    let meta = std::fs::metadata(lock).ok()?;
    let pid = holder_in(&locks.0, meta.dev(), meta.ino())?;
    Some(Holder {
        pid,
        started_at: started_at(pid),
        command: std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .ok()
            .map(|c| c.trim().to_owned()),
    })
}

/// The pid of a `FLOCK … WRITE` entry of `/proc/locks` on (`dev`, `ino`).
fn holder_in(locks: &str, dev: u64, ino: u64) -> Option<i32> {
    let (major, minor) = (
        nix::sys::stat::major(dev) as u64,
        nix::sys::stat::minor(dev) as u64,
    );
    locks.lines().find_map(|line| {
        // `1: FLOCK  ADVISORY  WRITE 1234 00:2d:5678 0 EOF`; a blocked waiter is `1: -> FLOCK …`.
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [_, kind, _, mode, pid, id, ..] = fields.as_slice() else {
            return None;
        };
        if *kind != "FLOCK" || *mode != "WRITE" {
            return None;
        }
        let mut parts = id.split(':');
        let ma = u64::from_str_radix(parts.next()?, 16).ok()?;
        let mi = u64::from_str_radix(parts.next()?, 16).ok()?;
        let inode: u64 = parts.next()?.parse().ok()?;
        (ma == major && mi == minor && inode == ino)
            .then(|| pid.parse().ok())
            .flatten()
    })
}

/// A process's start time: field 22 of `/proc/<pid>/stat` (clock ticks after boot) plus the
/// boot time (`btime` of `/proc/stat`).
fn started_at(pid: i32) -> Option<DateTime<Utc>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = stat.get(stat.rfind(')')? + 2..)?;
    // Fields from the 3rd on; starttime is the 22nd field, the 20th here.
    let ticks: u64 = after_name.split_whitespace().nth(19)?.parse().ok()?;
    let boot: i64 = std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())?;
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .filter(|h| *h > 0)? as u64;
    let millis = i64::try_from(ticks.saturating_mul(1000) / hz).ok()?;
    DateTime::from_timestamp_millis(boot.saturating_mul(1000).saturating_add(millis))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_write_flock_on_the_inode_is_found() {
        let dev = nix::sys::stat::makedev(0, 0x2d);
        let locks = "1: POSIX  ADVISORY  WRITE 77 00:2d:5678 0 EOF\n\
                     2: FLOCK  ADVISORY  WRITE 1234 00:2d:5678 0 EOF\n\
                     2: -> FLOCK  ADVISORY  WRITE 999 00:2d:5678 0 EOF\n";
        assert_eq!(holder_in(locks, dev, 5678), Some(1234));
        assert_eq!(holder_in(locks, dev, 5679), None);
    }

    #[test]
    fn a_held_lock_names_this_process() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("lock");
        assert_eq!(holder(&path), None, "no file, no holder");
        let lock = crate::store::RunLock::acquire(&path).expect("lock");
        let found = holder(&path).expect("a holder");
        assert_eq!(found.pid, std::process::id() as i32);
        let started = found.started_at.expect("a start time");
        assert!(started <= Utc::now());
        drop(lock);
        assert_eq!(holder(&path), None, "released");
    }
}
