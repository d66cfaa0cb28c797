//! What the child does between fork and exec.
//!
//! Invariants: runs in the forked child of a multi-threaded parent, so it only makes raw system
//! calls on data prepared before the fork (no allocation, no locks). Order: session (or group)
//! → PDEATHSIG + parent race check → no_new_privs → read-only holes (a private mount
//! namespace, `super::holes`, only when the room has some) → capability drop → the room (Landlock
//! `restrict_self` on the ruleset the parent built, when there is one) → filter with
//! NEW_LISTENER → the listener's number sent to the parent, which takes it with `pidfd_getfd`
//! and acknowledges (a `sendmsg` with SCM_RIGHTS would be notified) → closed → exec. The agent
//! never holds its own listener.

use std::io;
use std::os::fd::RawFd;

use super::{holes::HolePlan, landlock, sys};

/// Capabilities that would let the family defeat the boundary (steal or replace the listener,
/// trace the keeper, load code into the kernel). Dropped from every set, irreversibly.
pub const DROPPED_CAPABILITIES: [u32; 8] = [
    21, // CAP_SYS_ADMIN
    19, // CAP_SYS_PTRACE
    16, // CAP_SYS_MODULE
    17, // CAP_SYS_RAWIO
    39, // CAP_BPF
    38, // CAP_PERFMON
    33, // CAP_MAC_ADMIN
    32, // CAP_MAC_OVERRIDE
];

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Everything the child needs, computed before the fork.
#[derive(Debug, Clone, Copy)]
pub struct ChildPlan {
    /// `setsid()` (true) or `setpgid(0, 0)` for a role that keeps the terminal.
    pub new_session: bool,
    /// Make the new group the terminal's foreground group (interactive, stdin is a tty).
    pub take_terminal: bool,
    /// Our pid: if `getppid()` differs after PDEATHSIG is armed, we were orphaned already.
    pub parent: i32,
    /// The child's end of the listener socket.
    pub socket: RawFd,
    pub filter_flags: u64,
    /// The Landlock ruleset of the room (built by the parent, close-on-exec), or -1 when the
    /// family runs unconfined.
    pub landlock_ruleset: RawFd,
    /// The BPF program (`sys::filter`), built before the fork.
    pub filter: &'static [sys::SockFilter],
}

fn check(rc: libc::c_long) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

impl ChildPlan {
    /// The body of `pre_exec`. Async-signal-safe: raw syscalls on stack data (and on `holes`,
    /// prepared before the fork) only.
    pub fn enter(&self, holes: Option<&HolePlan>) -> io::Result<()> {
        // SAFETY: each call below is a raw system call on integers or on stack memory that
        // outlives the call; none allocates or takes a lock.
        unsafe {
            if self.new_session {
                check(libc::setsid() as libc::c_long)?;
            } else {
                check(libc::setpgid(0, 0) as libc::c_long)?;
                if self.take_terminal && libc::isatty(0) == 1 {
                    // A background group asking for the terminal gets SIGTTOU unless ignored.
                    let previous = libc::signal(libc::SIGTTOU, libc::SIG_IGN);
                    libc::tcsetpgrp(0, libc::getpid());
                    libc::signal(libc::SIGTTOU, previous);
                }
            }
            check(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) as libc::c_long)?;
            if libc::getppid() != self.parent {
                libc::_exit(127);
            }
            check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) as libc::c_long)?;
            // Mounts need CAP_SYS_ADMIN (here or in a fresh user namespace): before the drop.
            if let Some(holes) = holes {
                holes.enter()?;
            }
            for cap in DROPPED_CAPABILITIES {
                // EINVAL (unknown cap) or EPERM (no CAP_SETPCAP: not root, so the cap is not
                // ours to lose) leave nothing to drop.
                libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0);
                libc::prctl(
                    libc::PR_CAP_AMBIENT,
                    libc::PR_CAP_AMBIENT_LOWER as libc::c_ulong,
                    cap as libc::c_ulong,
                    0,
                    0,
                );
            }
            let mut header = CapHeader {
                version: LINUX_CAPABILITY_VERSION_3,
                pid: 0,
            };
            let mut data = [CapData::default(); 2];
            check(libc::syscall(
                libc::SYS_capget,
                &mut header as *mut CapHeader,
                data.as_mut_ptr(),
            ))?;
            for cap in DROPPED_CAPABILITIES {
                let (word, bit) = ((cap / 32) as usize, 1u32 << (cap % 32));
                if let Some(slot) = data.get_mut(word) {
                    slot.effective &= !bit;
                    slot.permitted &= !bit;
                    slot.inheritable &= !bit;
                }
            }
            check(libc::syscall(
                libc::SYS_capset,
                &mut header as *mut CapHeader,
                data.as_ptr(),
            ))?;
            if self.landlock_ruleset >= 0 {
                landlock::restrict_self(self.landlock_ruleset)?;
                libc::close(self.landlock_ruleset);
            }
            let program = sys::SockFprog {
                len: self.filter.len() as u16,
                filter: self.filter.as_ptr(),
            };
            let listener = sys::seccomp(
                sys::SECCOMP_SET_MODE_FILTER,
                sys::SECCOMP_FILTER_FLAG_NEW_LISTENER | self.filter_flags,
                &program as *const sys::SockFprog as *const libc::c_void,
            )? as RawFd;
            // A room's filter notifies every sendmsg, which nobody could answer yet: the parent
            // takes the listener itself (`pidfd_getfd`, by number) and acknowledges. It may do
            // so once this process is dumpable again (the owner made itself non-dumpable
            // before the fork); exec resets dumpability anyway.
            libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0);
            let mut message = [b'L', 0, 0, 0, 0];
            message[1..].copy_from_slice(&listener.to_ne_bytes());
            let written = libc::write(
                self.socket,
                message.as_ptr() as *const libc::c_void,
                message.len(),
            );
            let mut ack = 0u8;
            let taken = written == message.len() as isize
                && libc::read(self.socket, &mut ack as *mut u8 as *mut libc::c_void, 1) == 1;
            let result = if taken {
                Ok(())
            } else {
                Err(io::Error::other("the parent did not take the listener"))
            };
            libc::close(listener);
            libc::close(self.socket);
            result
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropped_capabilities_are_the_named_ones() {
        use caps::Capability::*;
        let expected = [
            CAP_SYS_ADMIN,
            CAP_SYS_PTRACE,
            CAP_SYS_MODULE,
            CAP_SYS_RAWIO,
            CAP_BPF,
            CAP_PERFMON,
            CAP_MAC_ADMIN,
            CAP_MAC_OVERRIDE,
        ];
        let indices: Vec<u32> = expected.iter().map(|cap| u32::from(cap.index())).collect();
        assert_eq!(indices, DROPPED_CAPABILITIES.to_vec());
    }
}
