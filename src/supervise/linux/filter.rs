//! The boundary's classic-BPF program: assembled from labels for the two kinds of launch
//! (plain: ownership calls, execs and `exit_group`, with `prctl(PR_SET_MM)` refused; with a
//! room: also connect, `sendto` with an address, and every `sendmsg`/`sendmmsg`, whose
//! destination is in memory; the pre-exec child therefore hands its listener over by number,
//! taken with `pidfd_getfd`, never with a `sendmsg`), and checked in the tests by
//! an interpreter that runs it the way the kernel does.
//!
//! Invariants: x86_64 (x32 folded onto the native numbers with `& ~X32_SYSCALL_BIT`) and i386
//! are covered and any other architecture is killed; everything not listed is allowed; every
//! jump goes forward (the assembler resolves labels; the interpreter tests catch a bad one).

use super::sys::{
    AUDIT_ARCH_I386, AUDIT_ARCH_X86_64, NR_CONNECT_I386, NR_CONNECT_X86_64, NR_EXECVE_I386,
    NR_EXECVE_X32, NR_EXECVE_X86_64, NR_EXECVEAT_I386, NR_EXECVEAT_X32, NR_EXECVEAT_X86_64,
    NR_SECCOMP_I386, NR_SECCOMP_X86_64, NR_SENDTO_I386, NR_SENDTO_X86_64, NR_SETPGID_I386,
    NR_SETPGID_X86_64, NR_SETSID_I386, NR_SETSID_X86_64, NR_SOCKETCALL_I386,
    SECCOMP_FILTER_FLAG_NEW_LISTENER, SECCOMP_RET_ALLOW, SECCOMP_RET_KILL_PROCESS,
    SECCOMP_RET_USER_NOTIF, SYS_CONNECT, SYS_SENDTO, X32_SYSCALL_BIT,
};
use super::sys::{
    NR_EXIT_GROUP_I386, NR_EXIT_GROUP_X86_64, NR_PRCTL_I386, NR_PRCTL_X86_64, PR_SET_MM,
    SECCOMP_RET_ERRNO,
};
use super::sys::{
    NR_SENDMMSG_I386, NR_SENDMMSG_X32, NR_SENDMMSG_X86_64, NR_SENDMSG_I386, NR_SENDMSG_X32,
    NR_SENDMSG_X86_64, SYS_SENDMMSG, SYS_SENDMSG,
};

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_JSET_K: u16 = 0x45;
const BPF_AND_K: u16 = 0x54;
const BPF_RET_K: u16 = 0x06;
const BPF_JA: u16 = 0x05;

/// Offsets into `struct seccomp_data` (little endian: the low half of an argument comes first).
const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;
const OFFSET_ARG0_LOW: u32 = 16;
const OFFSET_ARG1_LOW: u32 = 16 + 8;
const OFFSET_ARG4_LOW: u32 = 16 + 4 * 8;
const OFFSET_ARG4_HIGH: u32 = 16 + 4 * 8 + 4;

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

/// Which programs exist: without a room the filter notifies the ownership calls and every
/// exec; with a room it also notifies `connect` (and i386 `socketcall(SYS_CONNECT)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterKind {
    Plain,
    Room,
}

/// The boundary filter for `kind` (built once, then shared; the pre-exec child only reads it).
pub fn filter(kind: FilterKind) -> &'static [SockFilter] {
    static PLAIN: std::sync::OnceLock<Vec<SockFilter>> = std::sync::OnceLock::new();
    static ROOM: std::sync::OnceLock<Vec<SockFilter>> = std::sync::OnceLock::new();
    match kind {
        FilterKind::Plain => PLAIN.get_or_init(|| assemble(&program(false))),
        FilterKind::Room => ROOM.get_or_init(|| assemble(&program(true))),
    }
}

/// Jump targets of the filter program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Label {
    I386,
    NewListener,
    Socketcall,
    SendtoAddress,
    Kill,
    Allow,
    Notify,
    Prctl,
}

/// One instruction before its jumps are resolved (`None`: fall through).
#[derive(Debug, Clone, Copy)]
enum Asm {
    Stmt(u16, u32),
    Jump(u16, u32, Option<Label>, Option<Label>),
    Always(Label),
    Mark(Label),
}

/// The filter as a labelled program. x86_64 (x32 folded with `& ~X32_SYSCALL_BIT`): setsid,
/// setpgid, execve, execveat, the x32-only execve/execveat numbers, [connect], seccomp with
/// NEW_LISTENER → notify. i386: setsid, setpgid, execve, execveat, [connect,
/// socketcall(SYS_CONNECT)], seccomp with NEW_LISTENER → notify. Other architectures: kill.
fn program(gate_connect: bool) -> Vec<Asm> {
    use Asm::*;
    let notify = |nr| Jump(BPF_JEQ_K, nr, Some(Label::Notify), None);
    let mut asm = vec![
        Stmt(BPF_LD_W_ABS, OFFSET_ARCH),
        Jump(BPF_JEQ_K, AUDIT_ARCH_X86_64, None, Some(Label::I386)),
        Stmt(BPF_LD_W_ABS, OFFSET_NR),
        Stmt(BPF_AND_K, !X32_SYSCALL_BIT),
        notify(NR_SETSID_X86_64),
        notify(NR_SETPGID_X86_64),
        notify(NR_EXECVE_X86_64),
        notify(NR_EXECVEAT_X86_64),
        notify(NR_EXECVE_X32),
        notify(NR_EXECVEAT_X32),
        notify(NR_EXIT_GROUP_X86_64),
        Jump(BPF_JEQ_K, NR_PRCTL_X86_64, Some(Label::Prctl), None),
    ];
    if gate_connect {
        asm.extend([
            notify(NR_CONNECT_X86_64),
            notify(NR_SENDMSG_X86_64),
            notify(NR_SENDMMSG_X86_64),
            notify(NR_SENDMSG_X32),
            notify(NR_SENDMMSG_X32),
            Jump(
                BPF_JEQ_K,
                NR_SENDTO_X86_64,
                Some(Label::SendtoAddress),
                None,
            ),
        ]);
    }
    asm.extend([
        Jump(BPF_JEQ_K, NR_SECCOMP_X86_64, Some(Label::NewListener), None),
        Always(Label::Allow),
        Mark(Label::I386),
        Jump(BPF_JEQ_K, AUDIT_ARCH_I386, None, Some(Label::Kill)),
        Stmt(BPF_LD_W_ABS, OFFSET_NR),
        notify(NR_SETSID_I386),
        notify(NR_SETPGID_I386),
        notify(NR_EXECVE_I386),
        notify(NR_EXECVEAT_I386),
        notify(NR_EXIT_GROUP_I386),
        Jump(BPF_JEQ_K, NR_PRCTL_I386, Some(Label::Prctl), None),
    ]);
    if gate_connect {
        asm.extend([
            notify(NR_CONNECT_I386),
            notify(NR_SENDMSG_I386),
            notify(NR_SENDMMSG_I386),
            Jump(BPF_JEQ_K, NR_SENDTO_I386, Some(Label::SendtoAddress), None),
            Jump(BPF_JEQ_K, NR_SOCKETCALL_I386, Some(Label::Socketcall), None),
        ]);
    }
    asm.extend([
        Jump(BPF_JEQ_K, NR_SECCOMP_I386, Some(Label::NewListener), None),
        Always(Label::Allow),
    ]);
    if gate_connect {
        asm.extend([
            Mark(Label::Socketcall),
            Stmt(BPF_LD_W_ABS, OFFSET_ARG0_LOW),
            Jump(BPF_JEQ_K, SYS_CONNECT, Some(Label::Notify), None),
            Jump(BPF_JEQ_K, SYS_SENDMSG, Some(Label::Notify), None),
            Jump(BPF_JEQ_K, SYS_SENDMMSG, Some(Label::Notify), None),
            Jump(
                BPF_JEQ_K,
                SYS_SENDTO,
                Some(Label::Notify),
                Some(Label::Allow),
            ),
            // A sendto that names a destination (both halves of the pointer are looked at;
            // i386's upper half is zero).
            Mark(Label::SendtoAddress),
            Stmt(BPF_LD_W_ABS, OFFSET_ARG4_LOW),
            Jump(BPF_JEQ_K, 0, None, Some(Label::Notify)),
            Stmt(BPF_LD_W_ABS, OFFSET_ARG4_HIGH),
            Jump(BPF_JEQ_K, 0, Some(Label::Allow), Some(Label::Notify)),
        ]);
    }
    asm.extend([
        // prctl(PR_SET_MM, …) would let a process rewrite the auxv, argv area and exe link
        // the keeper attests an exec by: refused (EPERM); nothing but checkpoint/restore uses it.
        Mark(Label::Prctl),
        Stmt(BPF_LD_W_ABS, OFFSET_ARG0_LOW),
        // The kernel reads `option` as an int: the upper half is ignored, so it is here too.
        Jump(BPF_JEQ_K, PR_SET_MM, None, Some(Label::Allow)),
        Stmt(BPF_RET_K, SECCOMP_RET_ERRNO | libc::EPERM as u32),
        Mark(Label::NewListener),
        Stmt(BPF_LD_W_ABS, OFFSET_ARG1_LOW),
        Jump(
            BPF_JSET_K,
            SECCOMP_FILTER_FLAG_NEW_LISTENER as u32,
            Some(Label::Notify),
            Some(Label::Allow),
        ),
        Mark(Label::Kill),
        Stmt(BPF_RET_K, SECCOMP_RET_KILL_PROCESS),
        Mark(Label::Allow),
        Stmt(BPF_RET_K, SECCOMP_RET_ALLOW),
        Mark(Label::Notify),
        Stmt(BPF_RET_K, SECCOMP_RET_USER_NOTIF),
    ]);
    asm
}

/// Resolves labels to relative jumps (counted from the next instruction). Every target lies
/// ahead and within 255 instructions (the unit tests run the result through an interpreter).
fn assemble(asm: &[Asm]) -> Vec<SockFilter> {
    let mut positions = Vec::new();
    let mut pc = 0u32;
    for insn in asm {
        match insn {
            Asm::Mark(label) => positions.push((*label, pc)),
            _ => pc += 1,
        }
    }
    let at = |label: Label| {
        positions
            .iter()
            .find(|(known, _)| *known == label)
            .map_or(0, |(_, pc)| *pc)
    };
    let mut out = Vec::new();
    for insn in asm {
        let next = out.len() as u32 + 1;
        let offset = |label: Option<Label>| {
            label.map_or(0, |label| {
                u8::try_from(at(label).saturating_sub(next)).unwrap_or(0)
            })
        };
        match *insn {
            Asm::Stmt(code, k) => out.push(stmt(code, k)),
            Asm::Jump(code, k, taken, not_taken) => {
                out.push(jump(code, k, offset(taken), offset(not_taken)))
            }
            Asm::Always(label) => out.push(stmt(BPF_JA, at(label).saturating_sub(next))),
            Asm::Mark(_) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supervise::platform::sys::{NotifiedCall, SeccompData};

    #[test]
    fn layouts_and_offsets_match_libc() {
        assert_eq!(size_of::<SockFilter>(), size_of::<libc::sock_filter>());
        assert_eq!(
            std::mem::offset_of!(libc::seccomp_data, args) as u32 + 8,
            OFFSET_ARG1_LOW
        );
        assert_eq!(
            std::mem::offset_of!(libc::seccomp_data, args) as u32,
            OFFSET_ARG0_LOW
        );
        assert_eq!(
            std::mem::offset_of!(libc::seccomp_data, arch) as u32,
            OFFSET_ARCH
        );
        assert_eq!(
            std::mem::offset_of!(libc::seccomp_data, nr) as u32,
            OFFSET_NR
        );
    }

    /// Runs a filter on a synthetic `seccomp_data`, the way the kernel would.
    fn evaluate_with(program: &[SockFilter], data: &SeccompData) -> u32 {
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
            let Some(insn) = program.get(pc) else {
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
                BPF_JA => pc += insn.k as usize,
                BPF_RET_K => return insn.k,
                other => panic!("unexpected opcode {other:#x}"),
            }
        }
    }

    fn evaluate(data: &SeccompData) -> u32 {
        let plain = evaluate_with(filter(FilterKind::Plain), data);
        let room = evaluate_with(filter(FilterKind::Room), data);
        // sendmsg/sendmmsg through the other x86 ABI (ENOSYS in the kernel) are notified too.
        let folded = (data.nr as u32) & !X32_SYSCALL_BIT;
        let connect = matches!(
            NotifiedCall::of(data),
            NotifiedCall::Connect
                | NotifiedCall::Socketcall
                | NotifiedCall::Sendto { .. }
                | NotifiedCall::Sendmsg { .. }
        ) || (data.arch == AUDIT_ARCH_X86_64
            && [46, 307, 518, 538].contains(&folded));
        if !connect {
            assert_eq!(
                plain, room,
                "the room filter differs only in connect and sendto: {data:?}"
            );
        }
        room
    }

    fn call(arch: u32, nr: u32, arg1: u64) -> u32 {
        evaluate(&SeccompData {
            nr: nr as i32,
            arch,
            instruction_pointer: 0,
            args: [0, arg1, 0, 0, 0, 0],
        })
    }

    fn call_with(kind: FilterKind, arch: u32, nr: u32, arg0: u64) -> u32 {
        call_args(kind, arch, nr, [arg0, 0, 0, 0, 0, 0])
    }

    fn call_args(kind: FilterKind, arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        evaluate_with(
            filter(kind),
            &SeccompData {
                nr: nr as i32,
                arch,
                instruction_pointer: 0,
                args,
            },
        )
    }

    #[test]
    fn filter_notifies_execs_on_every_abi_and_connect_only_with_a_room() {
        let (notif, allow) = (SECCOMP_RET_USER_NOTIF, SECCOMP_RET_ALLOW);
        let x32 = X32_SYSCALL_BIT;
        for kind in [FilterKind::Plain, FilterKind::Room] {
            for (arch, nr) in [
                (AUDIT_ARCH_X86_64, 59),
                (AUDIT_ARCH_X86_64, 322),
                (AUDIT_ARCH_X86_64, 520 | x32),
                (AUDIT_ARCH_X86_64, 545 | x32),
                (AUDIT_ARCH_I386, 11),
                (AUDIT_ARCH_I386, 358),
            ] {
                assert_eq!(call_with(kind, arch, nr, 0), notif, "{kind:?} {nr}");
            }
            let gated = if kind == FilterKind::Room {
                notif
            } else {
                allow
            };
            assert_eq!(call_with(kind, AUDIT_ARCH_X86_64, 42, 0), gated);
            assert_eq!(call_with(kind, AUDIT_ARCH_X86_64, 42 | x32, 0), gated);
            assert_eq!(call_with(kind, AUDIT_ARCH_I386, 362, 0), gated);
            assert_eq!(call_with(kind, AUDIT_ARCH_I386, 102, 3), gated);
            assert_eq!(
                call_with(kind, AUDIT_ARCH_I386, 102, 1),
                allow,
                "socketcall(SYS_SOCKET) is not a connect"
            );
            assert_eq!(call_with(kind, AUDIT_ARCH_X86_64, 41, 0), allow);
            assert_eq!(call_with(kind, AUDIT_ARCH_X86_64, 44, 0), allow, "sendto");
            assert_eq!(
                call_with(kind, 0xc000_00b7, 59, 0),
                SECCOMP_RET_KILL_PROCESS
            );
        }
    }

    #[test]
    fn sendto_with_an_address_is_notified_only_with_a_room() {
        let (notif, allow) = (SECCOMP_RET_USER_NOTIF, SECCOMP_RET_ALLOW);
        let x32 = X32_SYSCALL_BIT;
        let with_address = [3, 0x1000, 1, 0, 0x7fff_0000_2000, 110];
        let high_only = [3, 0x1000, 1, 0, 0x7fff_0000_0000, 110];
        let without = [3, 0x1000, 1, 0, 0, 0];
        for (arch, nr) in [
            (AUDIT_ARCH_X86_64, 44),
            (AUDIT_ARCH_X86_64, 44 | x32),
            (AUDIT_ARCH_I386, 369),
        ] {
            assert_eq!(call_args(FilterKind::Room, arch, nr, with_address), notif);
            assert_eq!(
                call_args(FilterKind::Room, arch, nr, without),
                allow,
                "a plain send"
            );
            assert_eq!(call_args(FilterKind::Plain, arch, nr, with_address), allow);
        }
        assert_eq!(
            call_args(FilterKind::Room, AUDIT_ARCH_X86_64, 44, high_only),
            notif,
            "the upper half of the pointer counts"
        );
        for (arch, nr, name) in [
            (AUDIT_ARCH_X86_64, 46, "sendmsg"),
            (AUDIT_ARCH_X86_64, 307, "sendmmsg"),
            (AUDIT_ARCH_X86_64, 518 | x32, "sendmsg"),
            (AUDIT_ARCH_X86_64, 538 | x32, "sendmmsg"),
            (AUDIT_ARCH_I386, 370, "sendmsg"),
            (AUDIT_ARCH_I386, 345, "sendmmsg"),
        ] {
            // The destination is in memory: every one is notified in a room, none without.
            assert_eq!(
                call_args(FilterKind::Room, arch, nr, without),
                notif,
                "{nr}"
            );
            assert_eq!(
                call_args(FilterKind::Plain, arch, nr, without),
                allow,
                "{nr}"
            );
            let data = SeccompData {
                nr: nr as i32,
                arch,
                instruction_pointer: 0,
                args: without,
            };
            assert_eq!(NotifiedCall::of(&data).name(), name);
        }
        for call in [16, 20] {
            assert_eq!(
                call_args(
                    FilterKind::Room,
                    AUDIT_ARCH_I386,
                    102,
                    [call, 0x1000, 0, 0, 0, 0]
                ),
                notif,
                "socketcall({call})"
            );
        }
        assert_eq!(
            call_args(
                FilterKind::Room,
                AUDIT_ARCH_I386,
                102,
                [11, 0x1000, 0, 0, 0, 0]
            ),
            notif,
            "socketcall(SYS_SENDTO): its address is in memory, so always notified"
        );
        assert_eq!(
            call_args(
                FilterKind::Plain,
                AUDIT_ARCH_I386,
                102,
                [11, 0x1000, 0, 0, 0, 0]
            ),
            allow
        );
        assert_eq!(
            call_args(
                FilterKind::Room,
                AUDIT_ARCH_I386,
                102,
                [9, 0x1000, 0, 0, 0, 0]
            ),
            allow,
            "socketcall(SYS_SEND) names no destination"
        );
        // Each is classified as the send it is.
        let of = |arch, nr: u32, arg0| {
            NotifiedCall::of(&SeccompData {
                nr: nr as i32,
                arch,
                instruction_pointer: 0,
                args: [arg0, 0, 0, 0, 0, 0],
            })
            .name()
        };
        assert_eq!(of(AUDIT_ARCH_X86_64, 44, 0), "sendto");
        assert_eq!(of(AUDIT_ARCH_X86_64, 44 | x32, 0), "sendto");
        assert_eq!(of(AUDIT_ARCH_I386, 369, 0), "sendto");
        assert_eq!(of(AUDIT_ARCH_I386, 102, 11), "sendto");
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
        // exit_group is notified (the keeper attests the exec the process made); prctl is
        // allowed except PR_SET_MM, refused whatever the option word's upper half holds.
        let eperm = SECCOMP_RET_ERRNO | libc::EPERM as u32;
        for (arch, exit_group, prctl) in [
            (AUDIT_ARCH_X86_64, 231, 157),
            (
                AUDIT_ARCH_X86_64,
                231 | X32_SYSCALL_BIT,
                157 | X32_SYSCALL_BIT,
            ),
            (AUDIT_ARCH_I386, 252, 172),
        ] {
            for kind in [FilterKind::Plain, FilterKind::Room] {
                assert_eq!(call_with(kind, arch, exit_group, 3), notif);
                assert_eq!(call_with(kind, arch, prctl, 35), eperm);
                assert_eq!(call_with(kind, arch, prctl, 35 | 1 << 32), eperm);
                assert_eq!(call_with(kind, arch, prctl, 15), allow, "PR_SET_NAME");
                assert_eq!(call_with(kind, arch, prctl, 36), allow);
            }
        }
        assert_eq!(call(AUDIT_ARCH_X86_64, 60, 0), allow, "exit (one thread)");
        assert_eq!(call(0, 1, 0), SECCOMP_RET_KILL_PROCESS);
    }
}
