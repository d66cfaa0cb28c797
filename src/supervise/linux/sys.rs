//! Raw Linux pieces of the boundary: seccomp constants, the hand-written BPF filter, the
//! user-notification ioctls, and small syscall wrappers.
//!
//! Invariants: every constant libc also defines is unit-tested against libc; the filter covers
//! the native x86_64 ABI, x32 (folded onto the native table) and i386, and kills any other
//! architecture; everything else is allowed. The wrappers here never allocate, so the
//! pre-exec child may use the ones marked async-signal-safe.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

// ---- seccomp ABI constants (include/uapi/linux/seccomp.h, audit.h, filter.h) ----

pub const SECCOMP_SET_MODE_FILTER: u32 = 1;
pub const SECCOMP_GET_ACTION_AVAIL: u32 = 2;
pub const SECCOMP_GET_NOTIF_SIZES: u32 = 3;
pub const SECCOMP_FILTER_FLAG_NEW_LISTENER: u64 = 1 << 3;
pub const SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV: u64 = 1 << 5;
pub const SECCOMP_RET_KILL_PROCESS: u32 = 0x8000_0000;
pub const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
pub const SECCOMP_RET_USER_NOTIF: u32 = 0x7fc0_0000;
pub const SECCOMP_USER_NOTIF_FLAG_CONTINUE: u32 = 1;
/// `_IOWR('!', 0, struct seccomp_notif)`.
pub const SECCOMP_IOCTL_NOTIF_RECV: u64 = 0xc050_2100;
/// `_IOWR('!', 1, struct seccomp_notif_resp)`.
pub const SECCOMP_IOCTL_NOTIF_SEND: u64 = 0xc018_2101;
/// `_IOW('!', 2, __u64)` (the number fixed in 5.9).
pub const SECCOMP_IOCTL_NOTIF_ID_VALID: u64 = 0x4008_2102;
/// `_IOW('!', 4, __u64)` (6.6): the listener's flags, passed by value.
pub const SECCOMP_IOCTL_NOTIF_SET_FLAGS: u64 = 0x4008_2104;
/// The one listener flag (6.6): a notification wakes the listener, and an answer the caller,
/// on the CPU of the task that wakes it (`WF_CURRENT_CPU`), for a supervisor that answers one
/// notification at a time while the caller waits.
pub const SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: u64 = 1;

pub const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
pub const AUDIT_ARCH_I386: u32 = 0x4000_0003;
/// x32 system calls are native x86_64 calls with this bit set in `nr`.
pub const X32_SYSCALL_BIT: u32 = 0x4000_0000;

pub const NR_SETSID_X86_64: u32 = 112;
pub const NR_SETPGID_X86_64: u32 = 109;
pub const NR_SECCOMP_X86_64: u32 = 317;
pub const NR_SETSID_I386: u32 = 66;
pub const NR_SETPGID_I386: u32 = 57;
pub const NR_SECCOMP_I386: u32 = 354;
pub const NR_EXECVE_X86_64: u32 = 59;
pub const NR_EXECVEAT_X86_64: u32 = 322;
pub const NR_CONNECT_X86_64: u32 = 42;
/// x32's own execve/execveat (512+ range; called as `nr | X32_SYSCALL_BIT`, so the fold maps
/// them to these numbers, which native x86_64 does not use).
pub const NR_EXECVE_X32: u32 = 520;
pub const NR_EXECVEAT_X32: u32 = 545;
pub const NR_EXECVE_I386: u32 = 11;
pub const NR_EXECVEAT_I386: u32 = 358;
pub const NR_CONNECT_I386: u32 = 362;
pub const NR_SOCKETCALL_I386: u32 = 102;
/// `socketcall(SYS_CONNECT, args)`.
pub const SYS_CONNECT: u32 = 3;
/// `sendto(fd, buf, len, flags, addr, addrlen)`: gated in a room when it names an address (a
/// datagram to a pathname socket outside the room). x32 uses the common number.
pub const NR_SENDTO_X86_64: u32 = 44;
pub const NR_SENDTO_I386: u32 = 369;
pub const NR_EXIT_GROUP_X86_64: u32 = 231;
pub const NR_EXIT_GROUP_I386: u32 = 252;
pub const NR_PRCTL_X86_64: u32 = 157;
pub const NR_PRCTL_I386: u32 = 172;
/// `prctl(PR_SET_MM, …)`: rewrites what /proc shows of a process image (auxv, argv area, exe).
pub const PR_SET_MM: u32 = 35;
/// `SECCOMP_RET_ERRNO` (the errno goes in the low 16 bits).
pub const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
pub const SYS_SENDTO: u32 = 11;
/// `sendmsg(fd, msg, flags)` and `sendmmsg(fd, vec, vlen, flags)`: gated in a room always (the
/// destination, `msg_name`, is in memory, out of BPF's sight). x32 has its own numbers (its
/// `msghdr` has 32-bit pointers).
pub const NR_SENDMSG_X86_64: u32 = 46;
pub const NR_SENDMMSG_X86_64: u32 = 307;
pub const NR_SENDMSG_X32: u32 = 518;
pub const NR_SENDMMSG_X32: u32 = 538;
pub const NR_SENDMSG_I386: u32 = 370;
pub const NR_SENDMMSG_I386: u32 = 345;
pub const SYS_SENDMSG: u32 = 16;
pub const SYS_SENDMMSG: u32 = 20;

pub use super::filter::{FilterKind, SockFilter, SockFprog, filter};

/// `struct seccomp_data`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct SeccompData {
    pub nr: i32,
    pub arch: u32,
    pub instruction_pointer: u64,
    pub args: [u64; 6],
}

/// `struct seccomp_notif` (80 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct SeccompNotif {
    pub id: u64,
    pub pid: u32,
    pub flags: u32,
    pub data: SeccompData,
}

/// `struct seccomp_notif_resp` (24 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct SeccompNotifResp {
    pub id: u64,
    pub val: i64,
    pub error: i32,
    pub flags: u32,
}

/// `struct seccomp_notif_sizes`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SeccompNotifSizes {
    pub seccomp_notif: u16,
    pub seccomp_notif_resp: u16,
    pub seccomp_data: u16,
}

/// Pointer width of the calling ABI (i386 and x32 pass 32-bit pointers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Width {
    W64,
    W32,
}

impl Width {
    pub fn bytes(self) -> usize {
        match self {
            Self::W64 => 8,
            Self::W32 => 4,
        }
    }
}

/// Which notified call a notification is, independent of the ABI it came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotifiedCall {
    Setsid,
    Setpgid,
    Seccomp,
    /// `execve(path, argv, envp)` or, with `at`, `execveat(dirfd, path, argv, envp, flags)`.
    Exec {
        at: bool,
        width: Width,
    },
    /// `exit_group(status)`: the process is still whole, so the keeper can attest its exec.
    ExitGroup,
    /// `connect(fd, addr, addrlen)`.
    Connect,
    /// i386 `socketcall(SYS_CONNECT, args)`: the three arguments are 32-bit words at `args`.
    Socketcall,
    /// `sendto` with an address; `socketcall`: i386 `socketcall(SYS_SENDTO, args)`, the six
    /// arguments 32-bit words at `args[1]`.
    Sendto {
        socketcall: bool,
    },
    /// `sendmsg` (`many`: `sendmmsg`), its `msghdr` pointers `width` wide; `socketcall`: i386
    /// `socketcall(SYS_SENDMSG / SYS_SENDMMSG, args)`.
    Sendmsg {
        many: bool,
        width: Width,
        socketcall: bool,
    },
    Other,
}

impl NotifiedCall {
    pub fn of(data: &SeccompData) -> Self {
        // Reinterpreting the kernel's `int nr` as the unsigned pattern the filter compared.
        let nr = data.nr as u32;
        let x32 = nr & X32_SYSCALL_BIT != 0;
        match data.arch {
            AUDIT_ARCH_X86_64 => match (nr & !X32_SYSCALL_BIT, x32) {
                (NR_SETSID_X86_64, _) => Self::Setsid,
                (NR_SETPGID_X86_64, _) => Self::Setpgid,
                (NR_SECCOMP_X86_64, _) => Self::Seccomp,
                (NR_CONNECT_X86_64, _) => Self::Connect,
                (NR_EXIT_GROUP_X86_64, _) => Self::ExitGroup,
                (NR_SENDTO_X86_64, _) => Self::Sendto { socketcall: false },
                (NR_SENDMSG_X86_64 | NR_SENDMMSG_X86_64, false) => Self::Sendmsg {
                    many: nr == NR_SENDMMSG_X86_64,
                    width: Width::W64,
                    socketcall: false,
                },
                (NR_SENDMSG_X32 | NR_SENDMMSG_X32, true) => Self::Sendmsg {
                    many: nr & !X32_SYSCALL_BIT == NR_SENDMMSG_X32,
                    width: Width::W32,
                    socketcall: false,
                },
                (NR_EXECVE_X86_64, false) => Self::Exec {
                    at: false,
                    width: Width::W64,
                },
                (NR_EXECVEAT_X86_64, false) => Self::Exec {
                    at: true,
                    width: Width::W64,
                },
                (NR_EXECVE_X32, true) => Self::Exec {
                    at: false,
                    width: Width::W32,
                },
                (NR_EXECVEAT_X32, true) => Self::Exec {
                    at: true,
                    width: Width::W32,
                },
                // The native numbers through x32, or the x32 numbers natively: the kernel
                // answers ENOSYS, so these never exec.
                _ => Self::Other,
            },
            AUDIT_ARCH_I386 => match nr {
                NR_SETSID_I386 => Self::Setsid,
                NR_SETPGID_I386 => Self::Setpgid,
                NR_SECCOMP_I386 => Self::Seccomp,
                NR_EXECVE_I386 => Self::Exec {
                    at: false,
                    width: Width::W32,
                },
                NR_EXECVEAT_I386 => Self::Exec {
                    at: true,
                    width: Width::W32,
                },
                NR_CONNECT_I386 => Self::Connect,
                NR_EXIT_GROUP_I386 => Self::ExitGroup,
                NR_SENDTO_I386 => Self::Sendto { socketcall: false },
                NR_SENDMSG_I386 | NR_SENDMMSG_I386 => Self::Sendmsg {
                    many: nr == NR_SENDMMSG_I386,
                    width: Width::W32,
                    socketcall: false,
                },
                NR_SOCKETCALL_I386 => match data.args[0] as u32 {
                    SYS_CONNECT => Self::Socketcall,
                    SYS_SENDTO => Self::Sendto { socketcall: true },
                    call @ (SYS_SENDMSG | SYS_SENDMMSG) => Self::Sendmsg {
                        many: call == SYS_SENDMMSG,
                        width: Width::W32,
                        socketcall: true,
                    },
                    _ => Self::Other,
                },
                _ => Self::Other,
            },
            _ => Self::Other,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Setsid => "setsid",
            Self::Setpgid => "setpgid",
            Self::Seccomp => "seccomp",
            Self::Exec { at: false, .. } => "execve",
            Self::Exec { at: true, .. } => "execveat",
            Self::ExitGroup => "exit_group",
            Self::Connect | Self::Socketcall => "connect",
            Self::Sendto { .. } => "sendto",
            Self::Sendmsg { many: false, .. } => "sendmsg",
            Self::Sendmsg { many: true, .. } => "sendmmsg",
            Self::Other => "other",
        }
    }
}

/// `seccomp(2)`: async-signal-safe.
pub fn seccomp(op: u32, flags: u64, args: *const libc::c_void) -> io::Result<i64> {
    // SAFETY: a raw system call; the kernel validates `args` (a bad pointer is EFAULT).
    let rc = unsafe { libc::syscall(libc::SYS_seccomp, op as libc::c_ulong, flags, args) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// Receives one notification. `Ok(None)`: nothing to receive (the caller died, ENOENT).
pub fn notif_recv(listener: BorrowedFd<'_>) -> io::Result<Option<SeccompNotif>> {
    loop {
        let mut notif = SeccompNotif::default();
        // SAFETY: the kernel writes exactly sizeof(struct seccomp_notif) (checked equal to ours
        // by the probe before any launch) into a zeroed, properly aligned struct we own.
        let rc = unsafe {
            libc::ioctl(
                listener.as_raw_fd(),
                SECCOMP_IOCTL_NOTIF_RECV as _,
                &mut notif as *mut SeccompNotif,
            )
        };
        if rc == 0 {
            return Ok(Some(notif));
        }
        let error = io::Error::last_os_error();
        match error.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::ENOENT) => return Ok(None),
            _ => return Err(error),
        }
    }
}

/// Answers a notification. `Ok(false)`: the caller is gone (ENOENT).
pub fn notif_send(listener: BorrowedFd<'_>, response: &SeccompNotifResp) -> io::Result<bool> {
    // SAFETY: the kernel reads sizeof(struct seccomp_notif_resp) from a struct we own.
    let rc = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            SECCOMP_IOCTL_NOTIF_SEND as _,
            response as *const SeccompNotifResp,
        )
    };
    if rc == 0 {
        return Ok(true);
    }
    let error = io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::ENOENT) => Ok(false),
        _ => Err(error),
    }
}

/// Asks the kernel to hand a notification and its answer over on the waking task's CPU
/// ([`SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP`]): the caller is blocked while the keeper handles its
/// call and the keeper waits while the caller runs, so each round trip becomes a switch on one
/// CPU instead of a wake-up of another. The flag belongs to the filter, so every descriptor of
/// the listener shares it. Before Linux 6.6 the call fails (`EINVAL`, `ENOTTY`) and nothing
/// changes but the speed.
pub fn notif_sync_wake_up(listener: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: an ioctl whose argument is a value, on a descriptor we hold.
    let rc = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            SECCOMP_IOCTL_NOTIF_SET_FLAGS as _,
            SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Whether the notification is still pending (its caller alive and waiting).
pub fn notif_id_valid(listener: BorrowedFd<'_>, id: u64) -> bool {
    // SAFETY: the kernel reads one u64 we own.
    let rc = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            SECCOMP_IOCTL_NOTIF_ID_VALID as _,
            &id as *const u64,
        )
    };
    rc == 0
}

/// Polls one descriptor; returns its revents (0 on timeout).
pub fn poll_one(fd: BorrowedFd<'_>, events: i16, timeout_ms: i32) -> io::Result<i16> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events,
        revents: 0,
    };
    loop {
        // SAFETY: one valid pollfd we own.
        let rc = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        if rc >= 0 {
            return Ok(if rc == 0 { 0 } else { pfd.revents });
        }
        let error = io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EINTR) {
            return Err(error);
        }
    }
}

/// Polls many descriptors (EINTR retried). Returns the number ready.
pub fn poll_many(fds: &mut [libc::pollfd], timeout_ms: i32) -> io::Result<usize> {
    loop {
        // SAFETY: a valid slice of pollfd we own, with its exact length.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
        if rc >= 0 {
            return Ok(rc as usize);
        }
        let error = io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EINTR) {
            return Err(error);
        }
    }
}

/// A connected `SOCK_SEQPACKET` pair, close-on-exec.
pub fn seqpacket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: socketpair writes two descriptors into our array.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The most descriptors one lifeline message carries (the keeper's batches fill up to it).
pub const FDS_PER_MESSAGE: usize = 64;

/// Room for one `SCM_RIGHTS` message with up to [`FDS_PER_MESSAGE`] descriptors (aligned).
#[repr(C, align(8))]
struct ManySpace([u8; 64 + 4 * FDS_PER_MESSAGE]);

/// Sends `bytes` with up to [`FDS_PER_MESSAGE`] descriptors (the kernel duplicates them).
/// Async-signal-safe (stack only): the forked child sends its listener with it.
pub fn send_with_fds(socket: RawFd, bytes: &[u8], fds: &[RawFd]) -> io::Result<()> {
    if fds.len() > FDS_PER_MESSAGE {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    let mut space = ManySpace([0; 64 + 4 * FDS_PER_MESSAGE]);
    // SAFETY: msghdr is plain data; zeroed is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        let payload = size_of_val(fds) as u32;
        // SAFETY: CMSG_SPACE/CMSG_LEN are pure arithmetic.
        let (space_len, len) = unsafe {
            (
                libc::CMSG_SPACE(payload) as usize,
                libc::CMSG_LEN(payload) as usize,
            )
        };
        msg.msg_control = space.0.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = space_len;
        // SAFETY: the control buffer holds CMSG_SPACE(4 * FDS_PER_MESSAGE) (16 + 256 bytes) and is
        // aligned, so the header and every descriptor written lie inside it.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = len;
            let data = libc::CMSG_DATA(cmsg) as *mut RawFd;
            for (index, fd) in fds.iter().enumerate() {
                std::ptr::write_unaligned(data.add(index), *fd);
            }
        }
    }
    loop {
        // SAFETY: msg points at live stack buffers for the duration of the call.
        let rc = unsafe { libc::sendmsg(socket, &msg, libc::MSG_NOSIGNAL) };
        if rc >= 0 {
            return Ok(());
        }
        let error = io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EINTR) {
            return Err(error);
        }
    }
}

/// Receives one message into `buf`; returns its length (0 = peer closed) and every descriptor
/// that came along, in order (close-on-exec).
pub fn recv_with_fds(socket: RawFd, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let mut space = ManySpace([0; 64 + 4 * FDS_PER_MESSAGE]);
    // SAFETY: msghdr is plain data; zeroed is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = space.0.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = space.0.len();
    let received = loop {
        // SAFETY: msg points at live buffers we own.
        let rc = unsafe { libc::recvmsg(socket, &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if rc >= 0 {
            break rc as usize;
        }
        let error = io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EINTR) {
            return Err(error);
        }
    };
    let mut fds = Vec::new();
    // SAFETY: walking the control buffer the kernel filled, with the libc macros that bound it
    // by msg_controllen; the descriptor count is derived from cmsg_len, and each descriptor the
    // kernel installed is owned by nobody else.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let header = libc::CMSG_LEN(0) as usize;
                let count = ((*cmsg).cmsg_len as usize).saturating_sub(header) / size_of::<RawFd>();
                let data = libc::CMSG_DATA(cmsg) as *const RawFd;
                for index in 0..count {
                    let raw = std::ptr::read_unaligned(data.add(index));
                    fds.push(OwnedFd::from_raw_fd(raw));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok((received, fds))
}

/// Sends `bytes` with an optional descriptor ([`send_with_fds`] with zero or one).
pub fn send_with_fd(socket: RawFd, bytes: &[u8], fd: Option<RawFd>) -> io::Result<()> {
    send_with_fds(socket, bytes, fd.as_slice())
}

/// Receives one message into `buf`; returns its length (0 = peer closed) and the first
/// descriptor that came along (any others are closed).
pub fn recv_with_fd(socket: RawFd, buf: &mut [u8]) -> io::Result<(usize, Option<OwnedFd>)> {
    let (received, fds) = recv_with_fds(socket, buf)?;
    Ok((received, fds.into_iter().next()))
}

/// Asks the kernel to attach the sender's credentials to every message received on `socket`.
pub fn set_passcred(socket: BorrowedFd<'_>) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: setsockopt reads one int we own.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PASSCRED,
            &on as *const libc::c_int as *const libc::c_void,
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Room for an `SCM_RIGHTS` message with one descriptor and an `SCM_CREDENTIALS` message.
#[repr(C, align(8))]
struct CredSpace([u8; 64]);

/// Receives one message with its descriptor and the sender's pid (the socket must have
/// `SO_PASSCRED`): returns (length, descriptor, pid).
pub fn recv_with_fd_and_pid(
    socket: RawFd,
    buf: &mut [u8],
) -> io::Result<(usize, Option<OwnedFd>, Option<i32>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let mut space = CredSpace([0; 64]);
    // SAFETY: msghdr is plain data; zeroed is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = space.0.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = space.0.len();
    let received = loop {
        // SAFETY: msg points at live buffers we own.
        let rc = unsafe { libc::recvmsg(socket, &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if rc >= 0 {
            break rc as usize;
        }
        let error = io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EINTR) {
            return Err(error);
        }
    };
    let (mut fd, mut pid) = (None, None);
    // SAFETY: walking the control buffer the kernel filled, bounded by msg_controllen through
    // the libc macros; each payload is read unaligned at its declared type.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let raw = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const RawFd);
                fd = Some(OwnedFd::from_raw_fd(raw));
            }
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_CREDENTIALS
            {
                let cred = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const libc::ucred);
                pid = Some(cred.pid);
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok((received, fd, pid))
}

/// `pidfd_getfd(pidfd, fd, 0)`: a duplicate of another process's descriptor (close-on-exec),
/// allowed to a process that may ptrace it.
pub fn pidfd_getfd(pidfd: BorrowedFd<'_>, fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: a raw system call with plain integer arguments.
    let rc = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new descriptor we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(rc as RawFd) })
}

/// `pidfd_open(pid, 0)`.
pub fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: a raw system call with plain integer arguments.
    let rc = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new descriptor we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(rc as RawFd) })
}

/// Marks this process non-dumpable and a child subreaper (orphans of the family come to us).
pub fn become_owner() {
    // SAFETY: prctl with integer arguments only.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}

/// Sends `signal` to `pid`; errors (already gone) are ignored by design.
pub fn kill(pid: i32, signal: i32) -> bool {
    // SAFETY: kill(2) with integer arguments.
    unsafe { libc::kill(pid, signal) == 0 }
}

/// Reaps `pid` if it is a zombie child of ours; never blocks.
pub fn reap_nohang(pid: i32) -> bool {
    let mut status = 0;
    // SAFETY: waitpid(2) writes one int we own.
    let rc = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    rc == pid
}

/// `PIDFD_INFO_EXIT` (linux/pidfd.h, 6.15).
pub const PIDFD_INFO_EXIT: u64 = 1 << 3;
/// `_IOWR(PIDFS_IOCTL_MAGIC = 0xFF, 11, struct pidfd_info)` for the 64-byte first version of
/// the struct (the ioctl is extensible: the kernel copies `min(ours, its)` bytes).
pub const PIDFD_GET_INFO: u64 = 0xc040_ff0b;

/// `struct pidfd_info`, version 0 (64 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct PidfdInfo {
    pub mask: u64,
    pub cgroupid: u64,
    pub pid: u32,
    pub tgid: u32,
    pub ppid: u32,
    pub ruid: u32,
    pub rgid: u32,
    pub euid: u32,
    pub egid: u32,
    pub suid: u32,
    pub sgid: u32,
    pub fsuid: u32,
    pub fsgid: u32,
    pub exit_code: i32,
}

/// The wait status of the process behind `pidfd`, once the kernel has recorded its exit
/// (`None` while it runs, and for a zombie not yet reaped).
pub fn pidfd_exit_status(pidfd: BorrowedFd<'_>) -> Option<i32> {
    let mut info = PidfdInfo {
        mask: PIDFD_INFO_EXIT,
        ..PidfdInfo::default()
    };
    // SAFETY: the kernel reads `mask` from and writes at most 64 bytes (the size encoded in the
    // request) into a struct of exactly that size that we own.
    let rc = unsafe {
        libc::ioctl(
            pidfd.as_raw_fd(),
            PIDFD_GET_INFO as _,
            &mut info as *mut PidfdInfo,
        )
    };
    (rc == 0 && info.mask & PIDFD_INFO_EXIT != 0).then_some(info.exit_code)
}

/// Reads `buf.len()` bytes at `address` of process `pid` (`process_vm_readv`); returns how many
/// were read (short at an unmapped page).
pub fn read_memory(pid: i32, address: u64, buf: &mut [u8]) -> io::Result<usize> {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: address as usize as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`, which we own; the remote
    // range is only read, in the other process, and checked by the kernel.
    let rc = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

/// Reads the remote ranges `(address, length)` of process `pid` one after another into `buf`
/// (at least their total length) with one `process_vm_readv` (at most `IOV_MAX` ranges);
/// returns how many bytes were read. The kernel copies page by page and stops at the first
/// page it cannot read, so when each range lies within one page, every range before the
/// returned count is whole and none after it was read.
pub fn read_memory_many(pid: i32, ranges: &[(u64, usize)], buf: &mut [u8]) -> io::Result<usize> {
    let total: usize = ranges.iter().map(|(_, length)| length).sum();
    if total > buf.len() || ranges.len() > 1024 {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: total,
    };
    let remote: Vec<libc::iovec> = ranges
        .iter()
        .map(|(address, length)| libc::iovec {
            iov_base: *address as usize as *mut libc::c_void,
            iov_len: *length,
        })
        .collect();
    // SAFETY: the kernel writes at most `total` bytes (checked to fit) into `buf`, which we
    // own; the remote ranges are only read, in the other process, and checked by the kernel.
    let rc = unsafe {
        libc::process_vm_readv(
            pid,
            &local,
            1,
            remote.as_ptr(),
            remote.len() as libc::c_ulong,
            0,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

#[cfg(test)]
#[path = "sys_tests.rs"]
mod tests;
