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

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_JSET_K: u16 = 0x45;
const BPF_AND_K: u16 = 0x54;
const BPF_RET_K: u16 = 0x06;

/// Offsets into `struct seccomp_data` (little endian: the low half of an argument comes first).
const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;
const OFFSET_ARG1_LOW: u32 = 16 + 8;

/// One BPF instruction (`struct sock_filter`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SockFilter {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

/// `struct sock_fprog`.
#[repr(C)]
pub struct SockFprog {
    pub len: u16,
    pub filter: *const SockFilter,
}

const fn stmt(code: u16, k: u32) -> SockFilter {
    SockFilter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

const fn jump(code: u16, k: u32, jt: u8, jf: u8) -> SockFilter {
    SockFilter { code, jt, jf, k }
}

/// The boundary filter: notify setsid, setpgid and seccomp(NEW_LISTENER); allow the rest;
/// kill unknown architectures. Jump offsets count from the next instruction.
pub const FILTER: [SockFilter; 17] = [
    /* 0 */ stmt(BPF_LD_W_ABS, OFFSET_ARCH),
    /* 1 */ jump(BPF_JEQ_K, AUDIT_ARCH_X86_64, 0, 5), // → 2 : 7
    /* 2 */ stmt(BPF_LD_W_ABS, OFFSET_NR),
    /* 3 */ stmt(BPF_AND_K, !X32_SYSCALL_BIT),
    /* 4 */ jump(BPF_JEQ_K, NR_SETSID_X86_64, 11, 0), // → 16
    /* 5 */ jump(BPF_JEQ_K, NR_SETPGID_X86_64, 10, 0), // → 16
    /* 6 */ jump(BPF_JEQ_K, NR_SECCOMP_X86_64, 5, 8), // → 12 : 15
    /* 7 */ jump(BPF_JEQ_K, AUDIT_ARCH_I386, 0, 6), // → 8 : 14
    /* 8 */ stmt(BPF_LD_W_ABS, OFFSET_NR),
    /* 9 */ jump(BPF_JEQ_K, NR_SETSID_I386, 6, 0), // → 16
    /* 10 */ jump(BPF_JEQ_K, NR_SETPGID_I386, 5, 0), // → 16
    /* 11 */ jump(BPF_JEQ_K, NR_SECCOMP_I386, 0, 3), // → 12 : 15
    /* 12 */ stmt(BPF_LD_W_ABS, OFFSET_ARG1_LOW),
    /* 13 */
    jump(BPF_JSET_K, SECCOMP_FILTER_FLAG_NEW_LISTENER as u32, 2, 1), // → 16 : 15
    /* 14 */ stmt(BPF_RET_K, SECCOMP_RET_KILL_PROCESS),
    /* 15 */ stmt(BPF_RET_K, SECCOMP_RET_ALLOW),
    /* 16 */ stmt(BPF_RET_K, SECCOMP_RET_USER_NOTIF),
];

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

/// Which notified call a notification is, independent of the ABI it came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotifiedCall {
    Setsid,
    Setpgid,
    Seccomp,
    Other,
}

impl NotifiedCall {
    pub fn of(data: &SeccompData) -> Self {
        // Reinterpreting the kernel's `int nr` as the unsigned pattern the filter compared.
        let nr = data.nr as u32;
        match data.arch {
            AUDIT_ARCH_X86_64 => match nr & !X32_SYSCALL_BIT {
                NR_SETSID_X86_64 => Self::Setsid,
                NR_SETPGID_X86_64 => Self::Setpgid,
                NR_SECCOMP_X86_64 => Self::Seccomp,
                _ => Self::Other,
            },
            AUDIT_ARCH_I386 => match nr {
                NR_SETSID_I386 => Self::Setsid,
                NR_SETPGID_I386 => Self::Setpgid,
                NR_SECCOMP_I386 => Self::Seccomp,
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

/// Room for one `SCM_RIGHTS` control message carrying one descriptor (aligned for cmsghdr).
#[repr(C, align(8))]
pub struct CmsgSpace(pub [u8; 32]);

/// Sends `bytes` with an optional descriptor. Async-signal-safe (stack only).
pub fn send_with_fd(socket: RawFd, bytes: &[u8], fd: Option<RawFd>) -> io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    let mut space = CmsgSpace([0; 32]);
    // SAFETY: msghdr is plain data; zeroed is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if let Some(fd) = fd {
        // SAFETY: CMSG_SPACE/CMSG_LEN are pure arithmetic.
        let (space_len, len) = unsafe {
            (
                libc::CMSG_SPACE(size_of::<RawFd>() as u32) as usize,
                libc::CMSG_LEN(size_of::<RawFd>() as u32) as usize,
            )
        };
        msg.msg_control = space.0.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = space_len;
        // SAFETY: the control buffer is 32 aligned bytes, larger than CMSG_SPACE(4) = 24, so
        // the first header and its data lie inside it.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = len;
            std::ptr::write_unaligned(libc::CMSG_DATA(cmsg) as *mut RawFd, fd);
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

/// Receives one message into `buf`; returns its length (0 = peer closed) and a descriptor if
/// one came along (close-on-exec).
pub fn recv_with_fd(socket: RawFd, buf: &mut [u8]) -> io::Result<(usize, Option<OwnedFd>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let mut space = CmsgSpace([0; 32]);
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
    let mut fd = None;
    // SAFETY: walking the control buffer the kernel filled, with the libc macros that bound it
    // by msg_controllen.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let raw = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const RawFd);
                fd = Some(OwnedFd::from_raw_fd(raw));
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok((received, fd))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    // libc's types are u64 only on 64-bit targets; the casts keep the test portable.
    #[allow(clippy::unnecessary_cast)]
    fn constants_match_libc() {
        assert_eq!(SECCOMP_SET_MODE_FILTER, libc::SECCOMP_SET_MODE_FILTER);
        assert_eq!(SECCOMP_GET_ACTION_AVAIL, libc::SECCOMP_GET_ACTION_AVAIL);
        assert_eq!(SECCOMP_GET_NOTIF_SIZES, libc::SECCOMP_GET_NOTIF_SIZES);
        assert_eq!(
            SECCOMP_FILTER_FLAG_NEW_LISTENER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER as u64
        );
        assert_eq!(
            SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV,
            libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV as u64
        );
        assert_eq!(SECCOMP_RET_KILL_PROCESS, libc::SECCOMP_RET_KILL_PROCESS);
        assert_eq!(SECCOMP_RET_ALLOW, libc::SECCOMP_RET_ALLOW);
        assert_eq!(SECCOMP_RET_USER_NOTIF, libc::SECCOMP_RET_USER_NOTIF);
        assert_eq!(
            SECCOMP_USER_NOTIF_FLAG_CONTINUE as u64,
            libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u64
        );
        assert_eq!(
            SECCOMP_IOCTL_NOTIF_RECV,
            libc::SECCOMP_IOCTL_NOTIF_RECV as u64
        );
        assert_eq!(
            SECCOMP_IOCTL_NOTIF_SEND,
            libc::SECCOMP_IOCTL_NOTIF_SEND as u64
        );
        assert_eq!(
            SECCOMP_IOCTL_NOTIF_ID_VALID,
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID as u64
        );
        assert_eq!(NR_SETSID_X86_64 as i64, libc::SYS_setsid);
        assert_eq!(NR_SETPGID_X86_64 as i64, libc::SYS_setpgid);
        assert_eq!(NR_SECCOMP_X86_64 as i64, libc::SYS_seccomp);
    }

    #[test]
    fn struct_layouts_match_libc() {
        assert_eq!(size_of::<SeccompNotif>(), size_of::<libc::seccomp_notif>());
        assert_eq!(size_of::<SeccompNotif>(), 80);
        assert_eq!(
            size_of::<SeccompNotifResp>(),
            size_of::<libc::seccomp_notif_resp>()
        );
        assert_eq!(size_of::<SeccompData>(), size_of::<libc::seccomp_data>());
        assert_eq!(size_of::<SockFilter>(), size_of::<libc::sock_filter>());
        assert_eq!(
            std::mem::offset_of!(libc::seccomp_data, args) as u32 + 8,
            OFFSET_ARG1_LOW
        );
        assert_eq!(
            std::mem::offset_of!(libc::seccomp_data, arch) as u32,
            OFFSET_ARCH
        );
    }

    /// Runs the filter on a synthetic `seccomp_data`, the way the kernel would.
    fn evaluate(data: &SeccompData) -> u32 {
        let words = {
            let mut words = vec![data.nr as u32, data.arch];
            words.push(data.instruction_pointer as u32);
            words.push((data.instruction_pointer >> 32) as u32);
            for arg in data.args {
                words.push(arg as u32);
                words.push((arg >> 32) as u32);
            }
            words
        };
        let mut accumulator = 0u32;
        let mut pc = 0usize;
        loop {
            let Some(insn) = FILTER.get(pc) else {
                panic!("filter ran off its end at {pc}");
            };
            pc += 1;
            match insn.code {
                BPF_LD_W_ABS => accumulator = words[(insn.k / 4) as usize],
                BPF_AND_K => accumulator &= insn.k,
                BPF_JEQ_K | BPF_JSET_K => {
                    let taken = if insn.code == BPF_JEQ_K {
                        accumulator == insn.k
                    } else {
                        accumulator & insn.k != 0
                    };
                    pc += usize::from(if taken { insn.jt } else { insn.jf });
                }
                BPF_RET_K => return insn.k,
                other => panic!("unexpected opcode {other:#x}"),
            }
        }
    }

    fn call(arch: u32, nr: u32, arg1: u64) -> u32 {
        evaluate(&SeccompData {
            nr: nr as i32,
            arch,
            instruction_pointer: 0,
            args: [0, arg1, 0, 0, 0, 0],
        })
    }

    #[test]
    fn filter_notifies_exactly_the_boundary_calls_on_every_abi() {
        let notif = SECCOMP_RET_USER_NOTIF;
        let allow = SECCOMP_RET_ALLOW;
        for (arch, setsid, setpgid, seccomp) in [
            (AUDIT_ARCH_X86_64, 112, 109, 317),
            (
                AUDIT_ARCH_X86_64,
                112 | X32_SYSCALL_BIT,
                109 | X32_SYSCALL_BIT,
                317 | X32_SYSCALL_BIT,
            ),
            (AUDIT_ARCH_I386, 66, 57, 354),
        ] {
            assert_eq!(call(arch, setsid, 0), notif);
            assert_eq!(call(arch, setpgid, 0), notif);
            assert_eq!(call(arch, seccomp, SECCOMP_FILTER_FLAG_NEW_LISTENER), notif);
            assert_eq!(
                call(arch, seccomp, 0),
                allow,
                "ordinary filters stay allowed"
            );
            assert_eq!(call(arch, seccomp, 1 | 4), allow);
            assert_eq!(call(arch, 39, 0), allow);
            assert_eq!(call(arch, 0, SECCOMP_FILTER_FLAG_NEW_LISTENER), allow);
        }
        assert_eq!(call(0xc000_00b7, 112, 0), SECCOMP_RET_KILL_PROCESS);
        assert_eq!(call(0, 1, 0), SECCOMP_RET_KILL_PROCESS);
    }

    #[test]
    fn notified_call_classifies_each_abi() {
        let data = |arch, nr: u32| SeccompData {
            nr: nr as i32,
            arch,
            ..SeccompData::default()
        };
        assert_eq!(
            NotifiedCall::of(&data(AUDIT_ARCH_X86_64, 112)),
            NotifiedCall::Setsid
        );
        assert_eq!(
            NotifiedCall::of(&data(AUDIT_ARCH_X86_64, 109 | X32_SYSCALL_BIT)),
            NotifiedCall::Setpgid
        );
        assert_eq!(
            NotifiedCall::of(&data(AUDIT_ARCH_I386, 354)),
            NotifiedCall::Seccomp
        );
        assert_eq!(
            NotifiedCall::of(&data(AUDIT_ARCH_I386, 112)),
            NotifiedCall::Other
        );
    }
}
