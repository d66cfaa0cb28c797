//! The run-time probe of the kernel features the boundary needs.
//!
//! Invariant: a launch is refused before anything is spawned unless `Probe::missing()` is empty;
//! the probe has no side effect (the NEW_LISTENER probes pass a NULL program: EFAULT proves the
//! flag is known without installing anything).

use serde::Serialize;

use super::{landlock, sys};

/// What this host offers, as `autocode doctor` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Probe {
    pub kernel: String,
    pub kernel_version: (u32, u32),
    /// `SECCOMP_RET_USER_NOTIF` is an available action.
    pub user_notification: bool,
    /// `SECCOMP_FILTER_FLAG_NEW_LISTENER` is known.
    pub listener_flag: bool,
    /// `SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV` is known (5.19); used when present.
    pub wait_killable_recv: bool,
    /// (seccomp_notif, seccomp_notif_resp, seccomp_data) as the kernel reports them.
    pub notification_sizes: Option<(u16, u16, u16)>,
    pub notification_sizes_match: bool,
    /// `SECCOMP_USER_NOTIF_FLAG_CONTINUE` (5.5).
    pub continue_flag: bool,
    /// The listener reports POLLHUP when no task uses the filter (5.9).
    pub pollhup_unused_filter: bool,
    /// Filters are released at task exit, not at reap (6.11); below it we reap as subreaper.
    pub zombie_release_at_exit: bool,
    /// `/proc` shows our own pid namespace.
    pub proc_matches_pid_namespace: bool,
    /// We already run under another listener (ours or someone else's): a nested boundary.
    pub inside_another_boundary: bool,
    /// The Landlock ABI (`None`: absent or disabled at boot). A room needs ABI >= 6.
    pub landlock_abi: Option<u32>,
}

fn parse_version(release: &str) -> (u32, u32) {
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .filter(|part| !part.is_empty())
        .map(|part| part.parse().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|text| text.trim().to_owned())
        .unwrap_or_default()
}

/// Probes this host. Cheap (a handful of syscalls); call it per launch.
pub fn probe() -> Probe {
    let kernel = kernel_release();
    let kernel_version = parse_version(&kernel);
    let at_least = |major: u32, minor: u32| kernel_version >= (major, minor);
    let action = sys::SECCOMP_RET_USER_NOTIF;
    let user_notification = sys::seccomp(
        sys::SECCOMP_GET_ACTION_AVAIL,
        0,
        &action as *const u32 as *const libc::c_void,
    )
    .is_ok();
    let flag_probe = |flags: u64| {
        sys::seccomp(sys::SECCOMP_SET_MODE_FILTER, flags, std::ptr::null())
            .err()
            .and_then(|error| error.raw_os_error())
    };
    let listener_errno = flag_probe(sys::SECCOMP_FILTER_FLAG_NEW_LISTENER);
    let listener_flag = listener_errno == Some(libc::EFAULT);
    let inside_another_boundary = matches!(listener_errno, Some(libc::EPERM | libc::ENOSYS));
    let wait_killable_recv = flag_probe(
        sys::SECCOMP_FILTER_FLAG_NEW_LISTENER | sys::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV,
    ) == Some(libc::EFAULT);
    let mut sizes = sys::SeccompNotifSizes::default();
    let notification_sizes = sys::seccomp(
        sys::SECCOMP_GET_NOTIF_SIZES,
        0,
        &mut sizes as *mut sys::SeccompNotifSizes as *const libc::c_void,
    )
    .ok()
    .map(|_| {
        (
            sizes.seccomp_notif,
            sizes.seccomp_notif_resp,
            sizes.seccomp_data,
        )
    });
    let ours = (
        size_of::<sys::SeccompNotif>() as u16,
        size_of::<sys::SeccompNotifResp>() as u16,
        size_of::<sys::SeccompData>() as u16,
    );
    let proc_matches_pid_namespace = std::fs::read_link("/proc/self")
        .ok()
        .and_then(|link| link.to_str()?.parse::<u32>().ok())
        == Some(std::process::id());
    Probe {
        kernel,
        kernel_version,
        user_notification,
        listener_flag,
        wait_killable_recv,
        notification_sizes,
        notification_sizes_match: notification_sizes == Some(ours),
        continue_flag: at_least(5, 5),
        pollhup_unused_filter: at_least(5, 9),
        zombie_release_at_exit: at_least(6, 11),
        proc_matches_pid_namespace,
        inside_another_boundary,
        landlock_abi: landlock::abi_version(),
    }
}

impl Probe {
    /// One line for people (`autocode doctor`).
    pub fn summary(&self) -> String {
        format!(
            "seccomp user notification boundary, kernel {}{}",
            self.kernel,
            if self.zombie_release_at_exit {
                ""
            } else {
                " (zombies hold the filter until reaped: autocode reaps as subreaper)"
            }
        )
    }

    /// One line about the agent's room (`autocode doctor`).
    pub fn room_summary(&self) -> String {
        match self.landlock_abi {
            Some(abi) if abi >= landlock::ABI_REQUIRED => format!(
                "Landlock ABI {abi}: writes, signals and abstract unix sockets confined to the room; HOME and /tmp private copy-on-write layers"
            ),
            _ => format!(
                "unavailable (missing {}): launches with a room are refused",
                self.room_missing().join("; ")
            ),
        }
    }

    /// What a launch with a room needs beyond [`Probe::missing`] and this kernel lacks (empty:
    /// rooms are enforced).
    pub fn room_missing(&self) -> Vec<String> {
        match self.landlock_abi {
            None => vec![
                "Landlock (Linux >= 5.13, enabled at boot: CONFIG_SECURITY_LANDLOCK, lsm=landlock)"
                    .to_owned(),
            ],
            Some(abi) if abi < landlock::ABI_REQUIRED => vec![format!(
                "Landlock ABI >= {} for signal and abstract-socket scoping (Linux >= 6.12; this kernel has ABI {abi})",
                landlock::ABI_REQUIRED
            )],
            Some(_) => Vec::new(),
        }
    }

    /// What a room with read-only holes (an `--in-place` builder's) needs beyond
    /// [`Probe::room_missing`] and this host lacks (tried once, in a forked child).
    pub fn read_only_holes_missing(&self) -> Option<String> {
        super::holes::missing()
    }

    /// What a room with an overlay (the verification tree without a checkout) needs beyond
    /// [`Probe::room_missing`] and this host lacks (tried once, in a forked child).
    pub fn overlay_missing(&self) -> Option<String> {
        super::holes::overlay_missing()
    }

    /// As [`Probe::overlay_missing`], with the upper layer on `parent`'s file system (tried
    /// each call).
    pub fn overlay_missing_in(&self, parent: &std::path::Path) -> Option<String> {
        super::holes::overlay_missing_in(parent)
    }

    /// The features whose absence refuses a launch, by name (empty: launches may proceed).
    pub fn missing(&self) -> Vec<&'static str> {
        let mut missing = Vec::new();
        if self.inside_another_boundary {
            missing.push(
                "running outside another process-ownership boundary (a nested listener is refused)",
            );
        }
        if !self.user_notification {
            missing.push("seccomp user notification (SECCOMP_RET_USER_NOTIF, Linux >= 5.0)");
        }
        if !self.listener_flag && !self.inside_another_boundary {
            missing.push("seccomp listener flag (SECCOMP_FILTER_FLAG_NEW_LISTENER)");
        }
        if !self.notification_sizes_match {
            missing.push("seccomp notification structure sizes (80, 24, 64)");
        }
        if !self.continue_flag {
            missing.push("syscall continuation (SECCOMP_USER_NOTIF_FLAG_CONTINUE, Linux >= 5.5)");
        }
        if !self.pollhup_unused_filter {
            missing.push("listener POLLHUP on an unused filter (Linux >= 5.9)");
        }
        if !self.proc_matches_pid_namespace {
            missing.push("a /proc mount of autocode's own pid namespace");
        }
        missing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_from_release_strings() {
        assert_eq!(parse_version("6.18.44-fc-v669"), (6, 18));
        assert_eq!(parse_version("5.4.0-150-generic"), (5, 4));
        assert_eq!(parse_version(""), (0, 0));
    }

    #[test]
    fn this_host_has_every_feature() {
        let probe = probe();
        assert_eq!(probe.missing(), Vec::<&str>::new(), "{probe:?}");
        assert_eq!(probe.notification_sizes, Some((80, 24, 64)));
        assert_eq!(probe.room_missing(), Vec::<String>::new(), "{probe:?}");
    }

    #[test]
    fn a_kernel_without_scoping_cannot_hold_a_room() {
        let mut probe = probe();
        probe.landlock_abi = Some(5);
        let missing = probe.room_missing().join("; ");
        assert!(
            missing.contains("ABI >= 6") && missing.contains("ABI 5"),
            "{missing}"
        );
        probe.landlock_abi = None;
        assert!(probe.room_summary().contains("unavailable"));
    }

    #[test]
    fn an_old_kernel_names_what_is_missing() {
        let mut probe = probe();
        probe.kernel_version = (5, 4);
        probe.continue_flag = false;
        probe.pollhup_unused_filter = false;
        let missing = probe.missing().join("; ");
        assert!(missing.contains("CONTINUE"), "{missing}");
        assert!(missing.contains("POLLHUP"), "{missing}");
    }
}
