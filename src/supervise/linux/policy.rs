//! How one notification is answered, shared by the keeper process and by autocode's in-process
//! servicer (used when there is no keeper, or after the keeper is lost).
//!
//! Invariants: a new session or group is journaled BEFORE the call is continued, so cleanup
//! knows every session before it exists; the notification's TID is mapped to its TGID through
//! /proc and the notification id re-checked AFTER that read (pid-reuse guard); a second
//! listener, a caller invisible in our pid namespace, and (in group mode) a move into a foreign
//! group are answered EPERM.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use crate::supervise::DeniedCall;

use super::family;
use super::ledger::{self, ExecCall, SocketTarget};
use super::listeners;
use super::sys::{self, NotifiedCall, SeccompNotif, SeccompNotifResp};
use crate::supervise::net::{self, NetAllow};

/// How the root was placed: its own session, or its own group in autocode's session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    pub new_session: bool,
    pub root_pgid: i32,
}

/// What the boundary learned about a family while it ran.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Records {
    pub sessions: BTreeSet<i32>,
    pub groups: BTreeSet<i32>,
    pub denied: Vec<DeniedCall>,
}

/// One journal entry, made durable before the answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Entry {
    Session { id: i32 },
    Group { id: i32 },
    Denied { call: DeniedCall },
}

impl Records {
    pub fn apply(&mut self, entry: &Entry) {
        match entry {
            Entry::Session { id } => {
                self.sessions.insert(*id);
            }
            Entry::Group { id } => {
                self.groups.insert(*id);
            }
            Entry::Denied { call } => self.denied.push(call.clone()),
        }
    }

    /// The cleanup targets: the root's session (session mode) and group, plus every record.
    pub fn targets(&self, policy: &Policy, root_pid: i32) -> family::Targets {
        let mut targets = family::Targets {
            sessions: self.sessions.clone(),
            groups: self.groups.clone(),
        };
        if policy.new_session {
            targets.sessions.insert(root_pid);
        }
        targets.groups.insert(policy.root_pgid);
        targets
    }
}

/// Where entries go before a call is answered.
pub trait Journal {
    fn records(&self) -> Records;
    fn write(&mut self, entry: &Entry);
    /// Records an exec in the ledger (file first) before it is let through; `pidfd` follows
    /// the process to its end.
    fn exec(&mut self, tgid: i32, call: ExecCall, pidfd: Option<OwnedFd>);
    /// `tgid` made a notified call: attest its newest exec that waits for it (`followed`: as
    /// [`Journal::follows`] has just answered for it).
    fn confirm(&mut self, tgid: i32, followed: bool);
    /// Whether the ledger follows the live process whose pid is `tid` (`Book::follows`).
    fn follows(&self, tid: i32) -> bool;
}

/// What a room's family may reach by address: pathname unix sockets only beneath `writable`
/// (canonical paths); loopback, private, link-local and this host's own internet addresses only
/// when `allow` covers them or a process of the family (or autocode itself) serves them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gate {
    pub writable: Vec<PathBuf>,
    /// The user's `allow_connect`, the stage's endpoints and proxies, the nameservers.
    #[serde(default)]
    pub allow: Vec<NetAllow>,
    /// This host's own addresses (a connect to one reaches local listeners as loopback does).
    #[serde(default)]
    pub own_addresses: Vec<IpAddr>,
    /// autocode's pid: its own listeners (the scripted model server, local services it runs
    /// for the stage) are reachable like the family's.
    #[serde(default)]
    pub supervisor: i32,
}

/// The decision for one call, given who made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Continue(Vec<Entry>),
    Deny(&'static str),
    /// Refused with a specific errno and a reason naming what was refused.
    Refuse {
        errno: i32,
        reason: String,
    },
    /// An exec of a file that does not exist, answered ENOENT as the kernel would (its ledger
    /// entry says so; nothing is denied).
    Absent,
}

/// Who called, as /proc showed it.
#[derive(Debug, Clone, Copy)]
pub struct Caller {
    pub tgid: i32,
    pub nested_pid_namespace: bool,
}

/// Pure policy: what to do with `call(args)` made by `caller`.
pub fn decide(
    call: NotifiedCall,
    args: &[u64; 6],
    caller: Caller,
    policy: &Policy,
    records: &Records,
    session_of: impl Fn(i32) -> Option<i32>,
) -> Verdict {
    match call {
        // setsid acts on the thread group: the new session id is the TGID.
        NotifiedCall::Setsid => Verdict::Continue(vec![Entry::Session { id: caller.tgid }]),
        NotifiedCall::Setpgid => {
            // The kernel reads both as pid_t (int): truncation is the ABI.
            let (pid, pgid) = (args[0] as i32, args[1] as i32);
            if caller.nested_pid_namespace && (pid != 0 || pgid != 0) {
                return Verdict::Deny("setpgid with pid-namespace-local numbers");
            }
            let target = if pid == 0 { caller.tgid } else { pid };
            let group = if pgid == 0 { target } else { pgid };
            if policy.new_session || group == target {
                // Session mode: the kernel only allows groups of the caller's session, which is
                // already a target; recording the group is belt and braces.
                return Verdict::Continue(vec![Entry::Group { id: group }]);
            }
            let family_group = group == policy.root_pgid
                || records.groups.contains(&group)
                || session_of(group).is_some_and(|sid| records.sessions.contains(&sid));
            if family_group {
                Verdict::Continue(Vec::new())
            } else {
                Verdict::Deny("setpgid into a group outside the family")
            }
        }
        NotifiedCall::Seccomp => Verdict::Deny("a second notification listener"),
        // Notified only so the keeper sees the process whole once more (exec attestation).
        NotifiedCall::ExitGroup => Verdict::Continue(Vec::new()),
        // Handled by `handle` (they read the caller's memory); a plain answer here.
        NotifiedCall::Exec { .. }
        | NotifiedCall::Connect
        | NotifiedCall::Socketcall
        | NotifiedCall::Sendto { .. }
        | NotifiedCall::Sendmsg { .. } => Verdict::Continue(Vec::new()),
        NotifiedCall::Other => Verdict::Deny("unexpected notified system call"),
    }
}

fn respond(listener: BorrowedFd<'_>, id: u64, verdict: &Verdict) {
    let response = match verdict {
        Verdict::Continue(_) => SeccompNotifResp {
            id,
            flags: sys::SECCOMP_USER_NOTIF_FLAG_CONTINUE,
            ..SeccompNotifResp::default()
        },
        Verdict::Deny(_) => SeccompNotifResp {
            id,
            error: -libc::EPERM,
            ..SeccompNotifResp::default()
        },
        Verdict::Refuse { errno, .. } => SeccompNotifResp {
            id,
            error: -errno,
            ..SeccompNotifResp::default()
        },
        Verdict::Absent => SeccompNotifResp {
            id,
            error: -libc::ENOENT,
            ..SeccompNotifResp::default()
        },
    };
    // ENOENT: the caller died meanwhile; any other error leaves it pending and killable, which
    // cleanup handles.
    let _ = sys::notif_send(listener, &response);
}

/// The connect decision for a socket the caller named (`None`: the sockaddr was unreadable).
/// `served(addr)`: whether a process of the family (or autocode) holds a socket that would
/// receive a connection to `addr`; asked only for a local destination nothing else allows.
pub fn decide_connect(
    target: Option<SocketTarget>,
    gate: &Gate,
    resolve: impl Fn(&[u8]) -> Option<PathBuf>,
    served: impl Fn(SocketAddr) -> bool,
) -> Verdict {
    match target {
        None => Verdict::Refuse {
            errno: libc::EACCES,
            reason: "socket address unreadable".to_owned(),
        },
        Some(SocketTarget::Other | SocketTarget::Abstract) => Verdict::Continue(Vec::new()),
        Some(SocketTarget::Inet(addr)) => {
            let ip = net::canonical(addr.ip());
            let class = match net::classify(ip) {
                Some(class) => class.as_str(),
                None if gate
                    .own_addresses
                    .iter()
                    .any(|own| net::canonical(*own) == ip) =>
                {
                    "this host's own"
                }
                None => return Verdict::Continue(Vec::new()),
            };
            if gate.allow.iter().any(|allowed| allowed.covers(addr)) || served(addr) {
                return Verdict::Continue(Vec::new());
            }
            Verdict::Refuse {
                errno: libc::ECONNREFUSED,
                reason: format!(
                    "{addr} is a {class} address no process of this stage serves; \
                     to allow it, add {:?} to the provider's [confine] allow_connect",
                    NetAllow::exact(addr).to_string()
                ),
            }
        }
        Some(SocketTarget::Path(path)) => match resolve(&path) {
            Some(real) if ledger::inside_room(&real, &gate.writable) => {
                Verdict::Continue(Vec::new())
            }
            Some(real) => Verdict::Refuse {
                errno: libc::EACCES,
                reason: format!("unix socket {} is outside the room", real.display()),
            },
            // Nothing there: the kernel answers ENOENT (a socket created after this check
            // is the time-of-check/time-of-use limit documented in docs/supervision.md).
            None => Verdict::Continue(Vec::new()),
        },
    }
}

/// Whether a process of the family described by `policy` and `records`, or autocode itself
/// (`supervisor`: its scripted model server, its own services), holds a socket that would
/// receive `caller_fd`'s connection to `addr`. Reads /proc; bounded by the family's size.
fn served_by_family(
    tid: i32,
    caller_fd: Option<i32>,
    addr: SocketAddr,
    policy: &Policy,
    records: &Records,
    supervisor: i32,
) -> bool {
    let transport = caller_fd.and_then(|fd| listeners::transport_of(tid, fd));
    let inodes = listeners::receiving_inodes(tid, addr, transport);
    if inodes.is_empty() {
        return false;
    }
    let mut holders = family::members(&records.targets(policy, policy.root_pgid));
    holders.push(supervisor);
    listeners::held_by(&holders, &inodes)
}

/// Answers one received notification: identify, journal, then answer.
pub fn handle(
    listener: BorrowedFd<'_>,
    notif: &SeccompNotif,
    policy: &Policy,
    gate: Option<&Gate>,
    journal: &mut dyn Journal,
) {
    let call = NotifiedCall::of(&notif.data);
    let tid = notif.pid as i32;
    // An exec or `exit_group` by a thread-group leader (nearly every one) is identified by its
    // pidfd, which the ledger needs anyway for an exec: `pidfd_open` succeeds only for a leader
    // visible in our pid namespace, so the TID is the TGID. Anything else reads
    // /proc/<tid>/status. (Neither decision depends on the caller's pid namespace; setpgid's
    // does, and reads it.)
    // A process the ledger already follows (an `exit_group` after its exec, a `PATH` probe
    // after the first) is known the same way by the pidfd the ledger holds: no new one.
    let mut leader_pidfd = None;
    let mut followed = false;
    if notif.pid != 0 && matches!(call, NotifiedCall::Exec { .. } | NotifiedCall::ExitGroup) {
        followed = journal.follows(tid);
        if !followed {
            leader_pidfd = sys::pidfd_open(tid).ok();
        }
    }
    let caller = if notif.pid == 0 {
        None
    } else if followed || leader_pidfd.is_some() {
        Some(Caller {
            tgid: tid,
            nested_pid_namespace: false,
        })
    } else {
        family::read_status(tid).and_then(|status| {
            Some(Caller {
                tgid: status.tgid?,
                nested_pid_namespace: status.ns_pid_depth > 1,
            })
        })
    };
    // Reads of the caller's memory and /proc happen before the ID_VALID re-check below, so a
    // recycled TID cannot smuggle in another process's arguments.
    let mut exec = None;
    let mut connect = None;
    if let Some(caller) = caller {
        // Whatever the call, the caller is blocked in it: its last exec can be attested now
        // (before a new exec replaces the image it is judged by).
        journal.confirm(caller.tgid, followed);
        match call {
            NotifiedCall::Exec { at, width } => {
                let read =
                    ledger::read_exec(tid, &notif.data.args, at, width).unwrap_or_else(|| {
                        // Unreadable memory: the exec is recorded, but as nothing evidence can cite.
                        ExecCall::default()
                    });
                // A followed process keeps the pidfd the ledger holds.
                let pidfd = if followed {
                    None
                } else {
                    leader_pidfd
                        .take()
                        .or_else(|| sys::pidfd_open(caller.tgid).ok())
                };
                exec = Some((read, pidfd));
            }
            NotifiedCall::Connect | NotifiedCall::Socketcall => {
                if let Some(gate) = gate {
                    let target = ledger::read_connect_target(
                        tid,
                        &notif.data.args,
                        call == NotifiedCall::Socketcall,
                    );
                    let records = journal.records();
                    let fd = (call == NotifiedCall::Connect).then_some(notif.data.args[0] as i32);
                    connect = Some(decide_connect(
                        target,
                        gate,
                        |path| ledger::resolve_socket(tid, path),
                        |addr| served_by_family(tid, fd, addr, policy, &records, gate.supervisor),
                    ));
                }
            }
            NotifiedCall::Sendmsg {
                many,
                width,
                socketcall,
            } => {
                if let Some(gate) = gate {
                    let records = journal.records();
                    let fd = (!socketcall).then_some(notif.data.args[0] as i32);
                    let targets = ledger::read_sendmsg_targets(
                        tid,
                        &notif.data.args,
                        many,
                        width,
                        socketcall,
                    );
                    // Every named destination must pass; the first refusal answers the call.
                    connect = Some(match targets {
                        None => decide_connect(None, gate, |_| None, |_| false),
                        Some(targets) => targets
                            .into_iter()
                            .map(|target| {
                                decide_connect(
                                    Some(target),
                                    gate,
                                    |path| ledger::resolve_socket(tid, path),
                                    |addr| {
                                        served_by_family(
                                            tid,
                                            fd,
                                            addr,
                                            policy,
                                            &records,
                                            gate.supervisor,
                                        )
                                    },
                                )
                            })
                            .find(|verdict| !matches!(verdict, Verdict::Continue(_)))
                            .unwrap_or(Verdict::Continue(Vec::new())),
                    });
                }
            }
            NotifiedCall::Sendto { socketcall } => {
                if let Some(gate) = gate {
                    let target = ledger::read_sendto_target(tid, &notif.data.args, socketcall);
                    let records = journal.records();
                    let fd = (!socketcall).then_some(notif.data.args[0] as i32);
                    // A send without an address (a connected socket) names nothing to gate.
                    connect = Some(match target {
                        Some(None) => Verdict::Continue(Vec::new()),
                        Some(Some(target)) => decide_connect(
                            Some(target),
                            gate,
                            |path| ledger::resolve_socket(tid, path),
                            |addr| {
                                served_by_family(tid, fd, addr, policy, &records, gate.supervisor)
                            },
                        ),
                        None => decide_connect(None, gate, |_| None, |_| false),
                    });
                }
            }
            _ => {}
        }
    }
    // Checked after the /proc read: if the caller died and its TID was reused, the id is gone.
    if !sys::notif_id_valid(listener, notif.id) {
        return;
    }
    let verdict = match caller {
        None => Verdict::Deny("caller invisible in autocode's pid namespace"),
        Some(_) if connect.is_some() => connect.unwrap_or(Verdict::Continue(Vec::new())),
        Some(_) if exec.as_ref().is_some_and(|(read, _)| read.absent) => Verdict::Absent,
        Some(caller) => decide(
            call,
            &notif.data.args,
            caller,
            policy,
            &journal.records(),
            |pgid| family::read_stat(pgid).map(|stat| stat.session),
        ),
    };
    let denied = |reason: String| Entry::Denied {
        call: DeniedCall {
            syscall: call.name().to_owned(),
            pid: caller.map_or(tid, |caller| caller.tgid),
            reason,
        },
    };
    match &verdict {
        Verdict::Continue(entries) => {
            entries.iter().for_each(|entry| journal.write(entry));
            if let (Some((read, pidfd)), Some(caller)) = (exec, caller) {
                journal.exec(caller.tgid, read, pidfd);
            }
        }
        Verdict::Absent => {
            if let (Some((read, pidfd)), Some(caller)) = (exec, caller) {
                journal.exec(caller.tgid, read, pidfd);
            }
        }
        Verdict::Deny(reason) => journal.write(&denied((*reason).to_owned())),
        Verdict::Refuse { reason, .. } => journal.write(&denied(reason.clone())),
    }
    respond(listener, notif.id, &verdict);
}

#[cfg(test)]
mod tests {
    use super::*;

    const SESSION: Policy = Policy {
        new_session: true,
        root_pgid: 100,
    };
    const GROUP: Policy = Policy {
        new_session: false,
        root_pgid: 100,
    };

    fn caller(tgid: i32) -> Caller {
        Caller {
            tgid,
            nested_pid_namespace: false,
        }
    }

    fn no_sessions(_: i32) -> Option<i32> {
        None
    }

    #[test]
    fn setsid_records_the_thread_group() {
        let verdict = decide(
            NotifiedCall::Setsid,
            &[0; 6],
            caller(321),
            &SESSION,
            &Records::default(),
            no_sessions,
        );
        assert_eq!(verdict, Verdict::Continue(vec![Entry::Session { id: 321 }]));
    }

    #[test]
    fn setpgid_new_group_is_recorded_in_both_modes() {
        for policy in [SESSION, GROUP] {
            let verdict = decide(
                NotifiedCall::Setpgid,
                &[0, 0, 0, 0, 0, 0],
                caller(555),
                &policy,
                &Records::default(),
                no_sessions,
            );
            assert_eq!(verdict, Verdict::Continue(vec![Entry::Group { id: 555 }]));
        }
    }

    #[test]
    fn group_mode_refuses_a_foreign_group_and_allows_family_groups() {
        let mut records = Records::default();
        records.groups.insert(700);
        records.sessions.insert(800);
        let join = |pgid: u64, records: &Records| {
            decide(
                NotifiedCall::Setpgid,
                &[0, pgid, 0, 0, 0, 0],
                caller(555),
                &GROUP,
                records,
                |group| (group == 801).then_some(800),
            )
        };
        assert!(matches!(join(1, &records), Verdict::Deny(_)));
        assert_eq!(join(100, &records), Verdict::Continue(Vec::new()));
        assert_eq!(join(700, &records), Verdict::Continue(Vec::new()));
        assert_eq!(join(801, &records), Verdict::Continue(Vec::new()));
    }

    #[test]
    fn nested_namespace_numbers_and_second_listeners_are_refused() {
        let nested = Caller {
            tgid: 9,
            nested_pid_namespace: true,
        };
        let records = Records::default();
        assert!(matches!(
            decide(
                NotifiedCall::Setpgid,
                &[5, 5, 0, 0, 0, 0],
                nested,
                &SESSION,
                &records,
                no_sessions
            ),
            Verdict::Deny(_)
        ));
        assert!(matches!(
            decide(
                NotifiedCall::Seccomp,
                &[1, 8, 0, 0, 0, 0],
                caller(9),
                &SESSION,
                &records,
                no_sessions
            ),
            Verdict::Deny(_)
        ));
    }

    fn nobody_serves(_: SocketAddr) -> bool {
        false
    }

    #[test]
    fn connects_are_gated_to_pathname_sockets_inside_the_room() {
        let gate = Gate {
            writable: vec![PathBuf::from("/work/tree")],
            ..Gate::default()
        };
        let resolve = |path: &[u8]| {
            let path = String::from_utf8_lossy(path).into_owned();
            (path != "missing").then(|| PathBuf::from(path.replace("link", "/tmp/tmux-0/default")))
        };
        let path = |text: &str| Some(SocketTarget::Path(text.as_bytes().to_vec()));
        assert_eq!(
            decide_connect(path("/work/tree/s"), &gate, resolve, nobody_serves),
            Verdict::Continue(Vec::new())
        );
        assert_eq!(
            decide_connect(path("link"), &gate, resolve, nobody_serves),
            Verdict::Refuse {
                errno: libc::EACCES,
                reason: "unix socket /tmp/tmux-0/default is outside the room".into()
            }
        );
        assert_eq!(
            decide_connect(path("missing"), &gate, resolve, nobody_serves),
            Verdict::Continue(Vec::new()),
            "nothing to reach: the kernel answers ENOENT"
        );
        assert!(matches!(
            decide_connect(None, &gate, resolve, nobody_serves),
            Verdict::Refuse { .. }
        ));
        for open in [SocketTarget::Abstract, SocketTarget::Other] {
            assert_eq!(
                decide_connect(Some(open), &gate, resolve, nobody_serves),
                Verdict::Continue(Vec::new())
            );
        }
    }

    #[test]
    fn local_internet_destinations_need_a_family_server_or_an_allowance() {
        let gate = Gate {
            writable: Vec::new(),
            allow: vec![
                "127.0.0.1:5432".parse().unwrap(),
                "10.255.255.53:53".parse().unwrap(),
                "[fd00::/8]:6379".parse().unwrap(),
            ],
            own_addresses: vec!["203.0.113.7".parse().unwrap()],
            supervisor: 1,
        };
        let served_port = 4000;
        let decide = |text: &str| {
            decide_connect(
                Some(SocketTarget::Inet(text.parse().unwrap())),
                &gate,
                |_| None,
                |addr: SocketAddr| addr.port() == served_port,
            )
        };
        let refused = |verdict: Verdict| matches!(verdict, Verdict::Refuse { errno, .. } if errno == libc::ECONNREFUSED);
        // Public addresses continue at once, whatever serves them.
        for public in [
            "8.8.8.8:443",
            "[2606:4700::1111]:443",
            "[::ffff:1.1.1.1]:80",
        ] {
            assert_eq!(decide(public), Verdict::Continue(Vec::new()), "{public}");
        }
        // Every local class, in both families and through v4-mapped IPv6, is refused unless
        // served or allowed.
        for local in [
            "127.0.0.1:8080",
            "127.1.2.3:8080",
            "[::1]:8080",
            "[::ffff:127.0.0.1]:8080",
            "0.0.0.0:8080",
            "[::]:8080",
            "10.0.0.5:8080",
            "172.20.0.1:8080",
            "192.168.1.10:8080",
            "[fd12::1]:8080",
            "169.254.169.254:80",
            "[fe80::1]:8080",
            "203.0.113.7:8080",
            "127.0.0.1:5433",
            "10.255.255.53:5353",
        ] {
            assert!(refused(decide(local)), "{local}");
        }
        for allowed in [
            "127.0.0.1:4000",
            "[::1]:4000",
            "203.0.113.7:4000",
            "127.0.0.1:5432",
            "[::ffff:127.0.0.1]:5432",
            "10.255.255.53:53",
            "[fd00::9]:6379",
        ] {
            assert_eq!(decide(allowed), Verdict::Continue(Vec::new()), "{allowed}");
        }
        let Verdict::Refuse { reason, .. } = decide("127.0.0.1:9000") else {
            panic!("refused");
        };
        assert!(
            reason.contains("127.0.0.1:9000") && reason.contains("allow_connect"),
            "{reason}"
        );
    }

    #[test]
    fn targets_include_root_and_records() {
        let mut records = Records::default();
        records.apply(&Entry::Session { id: 42 });
        records.apply(&Entry::Group { id: 43 });
        let targets = records.targets(&SESSION, 10);
        assert_eq!(targets.sessions, BTreeSet::from([10, 42]));
        assert_eq!(targets.groups, BTreeSet::from([43, 100]));
        let targets = records.targets(&GROUP, 10);
        assert_eq!(
            targets.sessions,
            BTreeSet::from([42]),
            "group mode never targets our session"
        );
    }
}
