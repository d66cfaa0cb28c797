//! Tests of `supervise::linux::sys`.

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
    assert_eq!(
        SECCOMP_IOCTL_NOTIF_SET_FLAGS,
        libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS as u64
    );
    assert_eq!(NR_SETSID_X86_64 as i64, libc::SYS_setsid);
    assert_eq!(NR_SETPGID_X86_64 as i64, libc::SYS_setpgid);
    assert_eq!(NR_SECCOMP_X86_64 as i64, libc::SYS_seccomp);
    assert_eq!(NR_EXECVE_X86_64 as i64, libc::SYS_execve);
    assert_eq!(NR_EXECVEAT_X86_64 as i64, libc::SYS_execveat);
    assert_eq!(NR_CONNECT_X86_64 as i64, libc::SYS_connect);
    assert_eq!(NR_SENDTO_X86_64 as i64, libc::SYS_sendto);
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
}

#[test]
fn x32_numbers_fold_onto_their_own_exec_entries() {
    let x32 = X32_SYSCALL_BIT;
    let of = |nr: u32| {
        NotifiedCall::of(&SeccompData {
            nr: nr as i32,
            arch: AUDIT_ARCH_X86_64,
            ..SeccompData::default()
        })
    };
    // The fold maps x32's 520/545 onto 520/545 (not 59/322): both are in the filter.
    assert_eq!((520 | x32) & !x32, NR_EXECVE_X32);
    assert_eq!(
        of(520 | x32),
        NotifiedCall::Exec {
            at: false,
            width: Width::W32
        }
    );
    assert_eq!(
        of(545 | x32),
        NotifiedCall::Exec {
            at: true,
            width: Width::W32
        }
    );
    assert_eq!(
        of(59),
        NotifiedCall::Exec {
            at: false,
            width: Width::W64
        }
    );
    // ENOSYS paths: never an exec.
    assert_eq!(of(59 | x32), NotifiedCall::Other);
    assert_eq!(of(520), NotifiedCall::Other);
    assert_eq!(of(42 | x32), NotifiedCall::Connect);
}

#[test]
fn pidfd_info_matches_the_kernel_layout() {
    assert_eq!(size_of::<PidfdInfo>(), 64);
    assert_eq!(std::mem::offset_of!(PidfdInfo, exit_code), 60);
    assert_eq!(std::mem::offset_of!(PidfdInfo, pid), 16);
    assert_eq!(size_of::<PidfdInfo>(), size_of::<libc::pidfd_info>());
    #[allow(clippy::unnecessary_cast)]
    {
        assert_eq!(PIDFD_GET_INFO, libc::PIDFD_GET_INFO as u64);
        assert_eq!(PIDFD_INFO_EXIT, libc::PIDFD_INFO_EXIT as u64);
    }
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
