//! The family as /proc shows it, and the cleanup loop that ends it.
//!
//! Invariants: a process is a cleanup target only when its session or process group is one of
//! the family's (root + every recorded one, re-read each round) AND it carries
//! `NoNewPrivs: 1` and `Seccomp_filters >= 1` (the guard against a recycled session or group
//! id); `verified` comes only from the kernel's POLLHUP on the listener, never from /proc.

use std::collections::BTreeSet;
use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

use super::sys;

/// The fields of `/proc/<pid>/stat` the boundary needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub pid: i32,
    pub state: char,
    pub ppid: i32,
    pub pgrp: i32,
    pub session: i32,
}

/// Parses `/proc/<pid>/stat`; `comm` may contain spaces and parentheses, so fields are
/// counted from the last `)`.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let pid = text.split_once(' ')?.0.parse().ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    let session = fields.next()?.parse().ok()?;
    Some(Stat {
        pid,
        state,
        ppid,
        pgrp,
        session,
    })
}

pub fn read_stat(pid: i32) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// The `/proc/<pid>/status` fields the boundary needs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Status {
    pub tgid: Option<i32>,
    pub no_new_privs: bool,
    pub seccomp_filters: u32,
    /// `NSpid:` entries; more than one means a nested pid namespace.
    pub ns_pid_depth: usize,
}

pub fn parse_status(text: &str) -> Status {
    let mut status = Status::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key {
            "Tgid" => status.tgid = value.parse().ok(),
            "NoNewPrivs" => status.no_new_privs = value == "1",
            "Seccomp_filters" => status.seccomp_filters = value.parse().unwrap_or(0),
            "NSpid" => status.ns_pid_depth = value.split_ascii_whitespace().count(),
            _ => {}
        }
    }
    status
}

pub fn read_status(pid: i32) -> Option<Status> {
    Some(parse_status(
        &std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?,
    ))
}

/// Every live process in /proc (thread-group leaders).
pub fn scan() -> Vec<Stat> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(read_stat)
        .collect()
}

/// This process's children (every thread's `/proc/self/task/<tid>/children`): what a reap
/// of orphans that reached us as subreaper needs, without reading every process's `stat` (a
/// whole-`/proc` scan costs milliseconds on a busy machine: a `stat` read waits on a busy
/// process's memory map). `None` when a list cannot be read (then scan instead).
pub fn own_children() -> Option<Vec<i32>> {
    let mut children = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let list = std::fs::read_to_string(task.ok()?.path().join("children")).ok()?;
        for pid in list.split_ascii_whitespace() {
            children.push(pid.parse::<i32>().ok()?);
        }
    }
    Some(children)
}

/// The sessions and groups that make up a family right now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Targets {
    pub sessions: BTreeSet<i32>,
    pub groups: BTreeSet<i32>,
}

impl Targets {
    pub fn contains(&self, stat: &Stat) -> bool {
        self.sessions.contains(&stat.session) || self.groups.contains(&stat.pgrp)
    }
}

/// Live (non-zombie) family members: in a target session/group, and filtered by a boundary.
pub fn members(targets: &Targets) -> Vec<i32> {
    let own = std::process::id() as i32;
    scan()
        .into_iter()
        .filter(|stat| stat.pid != own && stat.state != 'Z' && targets.contains(stat))
        .filter(|stat| {
            read_status(stat.pid)
                .is_some_and(|status| status.no_new_privs && status.seccomp_filters >= 1)
        })
        .map(|stat| stat.pid)
        .collect()
}

/// Whether the kernel says no task uses the filter any more.
pub fn listener_hung_up(listener: BorrowedFd<'_>, timeout_ms: i32) -> bool {
    sys::poll_one(listener, 0, timeout_ms).is_ok_and(|revents| revents & libc::POLLHUP != 0)
}

/// The result of one cleanup.
#[derive(Debug, Clone, Default)]
pub struct Cleanup {
    pub killed: BTreeSet<i32>,
    pub verified: bool,
}

/// Sends SIGTERM once to every current member (the polite phase of a timeout).
pub fn terminate(targets: &Targets) -> Vec<i32> {
    let members = members(targets);
    for &pid in &members {
        sys::kill(pid, libc::SIGTERM);
    }
    members
}

/// SIGKILL until nothing is visible, then wait for the kernel's POLLHUP; `targets` is re-read
/// every round because a notification answered meanwhile may add a session.
pub fn kill_until_gone(
    listener: BorrowedFd<'_>,
    mut targets: impl FnMut() -> Targets,
    deadline: Instant,
) -> Cleanup {
    let mut cleanup = Cleanup::default();
    loop {
        if listener_hung_up(listener, 0) {
            cleanup.verified = true;
            return cleanup;
        }
        let current = targets();
        let members = members(&current);
        for &pid in &members {
            if sys::kill(pid, libc::SIGKILL) {
                cleanup.killed.insert(pid);
            }
        }
        let wait_ms = if members.is_empty() { 50 } else { 5 };
        if listener_hung_up(listener, wait_ms) {
            cleanup.verified = true;
            return cleanup;
        }
        if Instant::now() >= deadline {
            return cleanup;
        }
    }
}

/// How long a cleanup may take before it is reported unverified.
pub const CLEANUP_LIMIT: Duration = Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_parses_a_comm_with_spaces_and_parens() {
        let stat = parse_stat("4242 (a (b) c) S 1 4242 4240 0 -1 4194560 0 0").unwrap();
        assert_eq!(
            stat,
            Stat {
                pid: 4242,
                state: 'S',
                ppid: 1,
                pgrp: 4242,
                session: 4240
            }
        );
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) Z"), None);
    }

    #[test]
    fn status_reads_the_guard_fields() {
        let status = parse_status(
            "Name:\tsleep\nTgid:\t77\nNSpid:\t77\t1\nNoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t2\n",
        );
        assert_eq!(status.tgid, Some(77));
        assert!(status.no_new_privs);
        assert_eq!(status.seccomp_filters, 2);
        assert_eq!(status.ns_pid_depth, 2);
        assert_eq!(parse_status("nonsense"), Status::default());
    }

    #[test]
    fn this_test_process_is_visible_and_not_a_member() {
        let own = std::process::id() as i32;
        let stat = read_stat(own).unwrap();
        let mut targets = Targets::default();
        targets.sessions.insert(stat.session);
        // We carry no boundary filter, so the guard keeps us out even in our own session.
        assert!(!members(&targets).contains(&own));
    }
}
