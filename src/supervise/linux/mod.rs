//! The Linux boundary: seccomp user notification on setsid/setpgid/seccomp(NEW_LISTENER),
//! a keeper process, and cleanup verified by the kernel's POLLHUP.
//!
//! Invariants: every fork happens on one long-lived spawner thread (PDEATHSIG fires when the
//! forking *thread* exits, so never a tokio worker or blocking-pool thread); a launch is
//! refused before any spawn when the probe finds a feature missing; orphans that reach us as
//! subreaper are reaped, but never a root another launch still waits for.

mod absent;
mod attest;
mod batch;
mod child;
mod family;
mod filter;
mod holes;
mod inflight;
mod keeper;
mod keeper_proc;
mod landlock;
mod ledger;
mod listeners;
mod policy;
mod probe;
mod sys;
mod views;

use std::collections::BTreeSet;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::{Duration, Instant};

pub use holes::{has_overlay_xattr, overlay_opaque, whiteout};
pub use probe::Probe;

use super::{EndedBy, LaunchError, LaunchSpec, Receipt, RoomReceipt, StdinSource, StdioMode};

pub const MODE_KEEPER: &str = "seccomp_keeper";
pub const MODE_IN_PROCESS: &str = "seccomp_in_process";
pub const SESSION_BOUNDARY: &str = "seccomp_user_notification";

/// See [`super::init_before_threads`].
pub fn init_before_threads() -> io::Result<bool> {
    keeper::init_before_threads()
}

/// See [`super::release_keeper`].
pub fn release_keeper() {
    keeper::release_keeper()
}

pub fn probe() -> Probe {
    probe::probe()
}

/// Refuses the launch, naming what is missing, unless the host has every feature.
pub fn admit() -> Result<Probe, LaunchError> {
    let probe = probe::probe();
    let missing = probe.missing();
    if missing.is_empty() {
        Ok(probe)
    } else {
        Err(LaunchError::Refused {
            missing: missing.join("; "),
        })
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// The one thread that forks. It never exits, so PDEATHSIG only fires when autocode dies.
fn spawner() -> &'static Mutex<mpsc::Sender<Job>> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (sender, receiver) = mpsc::channel::<Job>();
        let spawned = std::thread::Builder::new()
            .name("autocode-spawner".into())
            .spawn(move || {
                for job in receiver {
                    job();
                }
            });
        if let Err(error) = spawned {
            // Without the spawner no launch can happen; every request then fails (the jobs'
            // reply channels are dropped), which surfaces as a spawn error.
            tracing::error!("cannot start the spawner thread: {error}");
        }
        Mutex::new(sender)
    })
}

/// Roots whose exit status a launch still waits for: the orphan reaper must leave them alone.
fn active_roots() -> &'static Mutex<BTreeSet<i32>> {
    static ROOTS: OnceLock<Mutex<BTreeSet<i32>>> = OnceLock::new();
    ROOTS.get_or_init(|| Mutex::new(BTreeSet::new()))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A started root and its family.
pub struct Started {
    pub child: std::process::Child,
    pub family: Family,
}

/// The family of one launch, as the boundary tracks it.
pub struct Family {
    shared: Arc<keeper::LaunchShared>,
    label: String,
    kernel: String,
    took_terminal: bool,
    /// What the room enforced (`None`: unconfined).
    room: Option<RoomReceipt>,
}

fn io_error(spec: &LaunchSpec, source: io::Error) -> LaunchError {
    LaunchError::Spawn {
        program: spec.program.clone(),
        source,
    }
}

/// Starts the root of a launch under the boundary.
pub async fn start(
    spec: &LaunchSpec,
    receipt_path: Option<PathBuf>,
    ledger_path: Option<PathBuf>,
    probe: &Probe,
) -> Result<Started, LaunchError> {
    let interactive =
        matches!(spec.stdin, StdinSource::Inherit) || spec.stdio == StdioMode::Terminal;
    let take_terminal = matches!(spec.stdin, StdinSource::Inherit)
        // SAFETY: isatty on fd 0 only inspects it.
        && unsafe { libc::isatty(0) } == 1;
    // The room is refused or built before anything is forked.
    let room = match &spec.room {
        Some(room) => {
            let missing = probe.room_missing();
            if !missing.is_empty() {
                return Err(LaunchError::Refused {
                    missing: missing.join("; "),
                });
            }
            let abi = probe.landlock_abi.unwrap_or(landlock::ABI_REQUIRED);
            Some(landlock::prepare(room, abi).map_err(|error| io_error(spec, error.into_io()))?)
        }
        None => None,
    };
    let (ruleset, mut room, overlay_access, handled_access) = match room {
        Some(prepared) => (
            Some(prepared.ruleset),
            Some(prepared.receipt),
            prepared.overlay_access,
            Some(prepared.handled_access),
        ),
        None => (None, None, None, None),
    };
    // Read-only holes beneath the writable set, and the room's overlay: refused, like the
    // room, when the host cannot make them.
    let holes = match (&spec.room, room.as_mut()) {
        (Some(requested), Some(receipt))
            if !requested.read_only.is_empty()
                || requested.overlay.is_some()
                || requested.views.is_some() =>
        {
            let (needed, absent) = holes::needed(&requested.writable, &requested.read_only);
            receipt.skipped.extend(absent);
            if let Some(overlay) = &requested.overlay {
                holes::clear_overlay_work(&overlay.work).map_err(|error| io_error(spec, error))?;
            }
            if let Some(views) = &requested.views {
                let real: Vec<PathBuf> = views.real.iter().map(|r| r.path.clone()).collect();
                for layer in &views.layers {
                    holes::clear_overlay_work(&layer.work)
                        .map_err(|error| io_error(spec, error))?;
                    views::clear_the_way(&layer.dir, &layer.upper, &real)
                        .map_err(|error| io_error(spec, error))?;
                }
            }
            let mut plan = holes::HolePlan::new(
                &requested.writable,
                &needed,
                requested.overlay.as_ref(),
                requested.views.as_ref(),
                &spec.cwd,
            )
            .map_err(|error| io_error(spec, error))?;
            if let (Some(plan), Some(ruleset), Some(access)) =
                (plan.as_mut(), ruleset.as_ref(), overlay_access)
            {
                plan.grant_overlay(ruleset.as_raw_fd(), access);
            }
            if let (Some(plan), Some(ruleset), Some(access)) =
                (plan.as_mut(), ruleset.as_ref(), handled_access)
            {
                plan.grant_layers(ruleset.as_raw_fd(), access);
            }
            if !needed.is_empty()
                && let Some(missing) = holes::missing()
            {
                return Err(LaunchError::Refused { missing });
            }
            if (requested.overlay.is_some() || requested.views.is_some())
                && let Some(missing) = holes::overlay_missing()
            {
                return Err(LaunchError::Refused { missing });
            }
            if requested.views.is_some()
                && let Some(missing) = holes::missing()
            {
                return Err(LaunchError::Refused { missing });
            }
            if let Some(plan) = &plan {
                receipt
                    .mechanisms
                    .extend(plan.mechanisms().into_iter().map(str::to_owned));
            }
            receipt.read_only = needed;
            receipt.overlay = requested.overlay.clone();
            receipt.views = requested.views.clone();
            plan
        }
        _ => None,
    };
    let (ours, theirs) = sys::seqpacket_pair().map_err(|error| io_error(spec, error))?;
    let plan = child::ChildPlan {
        new_session: !interactive,
        take_terminal,
        parent: std::process::id() as i32,
        socket: theirs.as_raw_fd(),
        filter_flags: if probe.wait_killable_recv {
            sys::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
        } else {
            0
        },
        landlock_ruleset: ruleset.as_ref().map_or(-1, AsRawFd::as_raw_fd),
        filter: sys::filter(if spec.room.is_some() {
            sys::FilterKind::Room
        } else {
            sys::FilterKind::Plain
        }),
    };
    let mut command = std::process::Command::new(&spec.program);
    command
        .args(&spec.args)
        .env_clear()
        .envs(&spec.env)
        .current_dir(&spec.cwd);
    command.stdin(match spec.stdin {
        StdinSource::Null => Stdio::null(),
        StdinSource::Bytes(_) | StdinSource::Pipe => Stdio::piped(),
        StdinSource::Inherit => Stdio::inherit(),
    });
    match spec.stdio {
        StdioMode::Captured { .. } => command.stdout(Stdio::piped()).stderr(Stdio::piped()),
        StdioMode::Terminal => command.stdout(Stdio::inherit()).stderr(Stdio::inherit()),
    };
    // SAFETY: `ChildPlan::enter` makes raw system calls only, on values computed above.
    unsafe {
        command.pre_exec(move || plan.enter(holes.as_ref()));
    }
    // The root's own exec is notified (the exec ledger), and `spawn` returns only once that
    // exec went through: the listener is received and registered on a hand-off thread while
    // the spawner waits. The sender's pid comes with the message (SO_PASSCRED).
    sys::set_passcred(ours.as_fd()).map_err(|error| io_error(spec, error))?;
    let (handed, handoff) = tokio::sync::oneshot::channel();
    let registration = Registration {
        new_session: !interactive,
        label: spec.label.clone(),
        receipt_path,
        kernel: probe.kernel.clone(),
        settings: keeper::LedgerSettings {
            // Sockets in the private views are the family's own.
            room_writable: spec.room.as_ref().map(|room| {
                let mut places = room.writable.clone();
                if let Some(views) = &room.views {
                    places.extend(views.covered().into_iter().map(Path::to_owned));
                }
                places
            }),
            room_allow: spec
                .room
                .as_ref()
                .map(|room| reachable(room, &spec.env))
                .unwrap_or_default(),
            ledger_path,
        },
    };
    std::thread::Builder::new()
        .name("autocode-listener-handoff".into())
        .spawn(move || {
            let _ = handed.send(receive_and_register(&ours, registration));
        })
        .map_err(|error| io_error(spec, error))?;
    let (reply, answer) = tokio::sync::oneshot::channel();
    let job: Job = Box::new(move || {
        let roots = active_roots();
        let mut roots = lock(roots);
        let spawned = command.spawn();
        if let Ok(child) = &spawned {
            roots.insert(child.id() as i32);
        }
        drop(roots);
        // The child restricted itself (or failed) before spawn returned: ours can go.
        drop(ruleset);
        let _ = reply.send(spawned);
    });
    lock(spawner())
        .send(job)
        .map_err(|_| io_error(spec, io::Error::other("the spawner thread is gone")))?;
    let spawned = answer
        .await
        .map_err(|_| io_error(spec, io::Error::other("the spawner thread is gone")));
    // Our copy of the child's end closes: the hand-off sees a hang-up if nothing was sent.
    drop(theirs);
    let registered = handoff
        .await
        .unwrap_or_else(|_| Err(io::Error::other("the listener hand-off thread is gone")));
    let (child, shared) = match (spawned, registered) {
        (Ok(Ok(child)), Ok(shared)) if shared.root_pid == child.id() as i32 => (child, shared),
        (spawned, registered) => {
            if let Ok(shared) = &registered {
                keeper::release(shared);
            }
            let error = match (spawned, registered) {
                (Ok(Ok(mut child)), registered) => {
                    let root_pid = child.id() as i32;
                    let _ = child.kill();
                    let _ = child.wait();
                    lock(active_roots()).remove(&root_pid);
                    registered.err().unwrap_or_else(|| {
                        io::Error::other("the listener came from another process")
                    })
                }
                (Ok(Err(error)), _) => error,
                (Err(error), _) => return Err(error),
            };
            return Err(io_error(spec, error));
        }
    };
    Ok(Started {
        child,
        family: Family {
            shared,
            label: spec.label.clone(),
            kernel: probe.kernel.clone(),
            took_terminal: take_terminal,
            room,
        },
    })
}

/// What the hand-off thread needs to register a launch.
/// The local destinations a room's family may reach without serving them: the user's
/// `allow_connect`, every URL in the family's environment that names an address (the stage's
/// model endpoint, `HTTP(S)_PROXY`, `ALL_PROXY`), and the nameservers of `/etc/resolv.conf`.
fn reachable(
    room: &crate::supervise::Room,
    env: &std::collections::BTreeMap<std::ffi::OsString, std::ffi::OsString>,
) -> Vec<crate::supervise::net::NetAllow> {
    use crate::supervise::net::{self, NetAllow};
    let mut allow = room.allow_connect.clone();
    let urls = env
        .values()
        .filter_map(|value| value.to_str())
        .flat_map(net::url_destinations);
    let resolv = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
    allow.extend(urls.chain(net::nameservers(&resolv)).map(NetAllow::exact));
    allow.sort_by_key(ToString::to_string);
    allow.dedup();
    allow
}

struct Registration {
    new_session: bool,
    label: String,
    receipt_path: Option<PathBuf>,
    kernel: String,
    settings: keeper::LedgerSettings,
}

/// Receives the child's listener (with the child's pid) and registers the launch.
fn receive_and_register(
    socket: &OwnedFd,
    registration: Registration,
) -> io::Result<Arc<keeper::LaunchShared>> {
    // The child sends it just before exec; a child that failed earlier closes its end, and our
    // copy closes when spawn returns: a hang-up, never an endless wait.
    if sys::poll_one(socket.as_fd(), libc::POLLIN, 30_000)? & libc::POLLIN == 0 {
        return Err(io::Error::other("the child did not send its listener"));
    }
    let mut buf = [0u8; 8];
    // The child names its listener's number; we take the descriptor from it (`pidfd_getfd`:
    // we are its parent and it is dumpable) and acknowledge, after which it closes its own.
    let (listener, root_pid) = match sys::recv_with_fd_and_pid(socket.as_raw_fd(), &mut buf)? {
        (5, None, Some(pid)) if buf[0] == b'L' => {
            let number = i32::from_ne_bytes([buf[1], buf[2], buf[3], buf[4]]);
            let pidfd = sys::pidfd_open(pid)?;
            let listener = sys::pidfd_getfd(pidfd.as_fd(), number).map_err(|error| {
                io::Error::other(format!("cannot take the child's listener: {error}"))
            })?;
            (listener, pid)
        }
        _ => return Err(io::Error::other("the child's message named no listener")),
    };
    // Round trips on one CPU where the kernel can (6.6); without it the boundary is the same.
    if let Err(error) = sys::notif_sync_wake_up(listener.as_fd()) {
        tracing::debug!("the listener keeps its ordinary wake-ups: {error}");
    }
    let ack = [1u8];
    // SAFETY: write(2) of one byte from a live buffer on a descriptor we own.
    if unsafe { libc::write(socket.as_raw_fd(), ack.as_ptr().cast(), 1) } != 1 {
        return Err(io::Error::last_os_error());
    }
    let policy = policy::Policy {
        new_session: registration.new_session,
        root_pgid: root_pid,
    };
    keeper::register(
        listener,
        root_pid,
        policy,
        &registration.label,
        registration.receipt_path,
        &registration.kernel,
        registration.settings,
    )
}

/// What the family cleanup found.
pub struct CleanupReport {
    pub killed: Vec<i32>,
    pub verified: bool,
}

impl Family {
    fn targets(&self) -> family::Targets {
        self.shared
            .records()
            .targets(&self.shared.policy, self.shared.root_pid)
    }

    /// The exec ledger, complete once the family is gone (call after [`Family::release`]).
    pub fn ledger(&self) -> Vec<super::LedgerEntry> {
        self.shared.ledger()
    }

    /// SIGTERM to every member (timeout, idle timeout, cancellation).
    pub fn terminate(&self) -> Vec<i32> {
        family::terminate(&self.targets())
    }

    /// Waits up to `grace` for the kernel to report the family gone.
    pub fn wait_gone(&self, grace: Duration) -> bool {
        let millis = grace.as_millis().min(i32::MAX as u128) as i32;
        family::listener_hung_up(self.shared.listener.as_fd(), millis)
    }

    /// SIGKILL until nothing is visible, verified by POLLHUP; then reap what came to us.
    pub fn cleanup(&self) -> CleanupReport {
        let cleanup = family::kill_until_gone(
            self.shared.listener.as_fd(),
            || self.targets(),
            Instant::now() + family::CLEANUP_LIMIT,
        );
        CleanupReport {
            killed: cleanup.killed.into_iter().collect(),
            verified: cleanup.verified,
        }
    }

    /// The root was reaped: forget it, reap orphans, stop servicing, give back the terminal.
    pub fn release(&self, killed: &[i32]) {
        lock(active_roots()).remove(&self.shared.root_pid);
        let targets = self.targets();
        let root = self.shared.root_pid;
        let killed: Vec<i32> = killed.iter().copied().filter(|&pid| pid != root).collect();
        reap_killed(&killed, &targets);
        reap_orphans(&targets);
        keeper::release(&self.shared);
        if self.took_terminal {
            // SAFETY: signal/tcsetpgrp/getpgrp with integer arguments; SIGTTOU is ignored for
            // the moment we, a background group now, take the terminal back.
            unsafe {
                let previous = libc::signal(libc::SIGTTOU, libc::SIG_IGN);
                libc::tcsetpgrp(0, libc::getpgrp());
                libc::signal(libc::SIGTTOU, previous);
            }
        }
    }

    pub fn receipt(
        &self,
        report: &CleanupReport,
        ended_by: EndedBy,
        run: Duration,
        cleanup: Duration,
    ) -> Receipt {
        let records = self.shared.records();
        let mode = if self.shared.serviced_by_keeper.load(Ordering::SeqCst)
            || self.shared.keeper_lost.load(Ordering::SeqCst)
        {
            MODE_KEEPER
        } else {
            MODE_IN_PROCESS
        };
        let mut receipt = build_receipt(ReceiptParts {
            mode,
            label: self.label.clone(),
            kernel: self.kernel.clone(),
            root_pid: self.shared.root_pid,
            policy: self.shared.policy,
            records,
            killed: report.killed.clone(),
            keeper_lost: self.shared.keeper_lost.load(Ordering::SeqCst),
            owner_lost: false,
            verified: report.verified,
            ended_by,
            run,
            cleanup,
        });
        receipt.room = self.room.clone();
        if let Some(room) = receipt.room.as_mut() {
            room.unix_connect_gated = self.shared.gate.is_some();
            room.local_connect_allowed = self
                .shared
                .gate
                .as_ref()
                .map(|gate| gate.allow.clone())
                .unwrap_or_default();
        }
        receipt
    }
}

/// Reaps the processes cleanup killed that are (or are about to be) our children: after
/// POLLHUP they are dead, but their exit (and reparenting to us as subreaper) may still be in
/// flight, so each is followed briefly.
fn reap_killed(killed: &[i32], targets: &family::Targets) {
    let own = std::process::id() as i32;
    let deadline = Instant::now() + Duration::from_millis(500);
    let mut pending: Vec<i32> = killed.to_vec();
    while !pending.is_empty() && Instant::now() < deadline {
        pending.retain(|&pid| match family::read_stat(pid) {
            None => false,
            // A recycled pid: not ours to wait for.
            Some(stat) if !targets.contains(&stat) => false,
            Some(stat) if stat.ppid == own => {
                let mut status = 0;
                // SAFETY: waitpid(2) on our own SIGKILLed child, writing one int we own.
                unsafe { libc::waitpid(pid, &mut status, 0) };
                false
            }
            // Its parent (a dying family member, or init) still holds it.
            Some(_) => true,
        });
        if !pending.is_empty() {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Reaps zombies of this family that reached us as subreaper (never a root another launch
/// still awaits, nor the keeper, nor a child some other code in this process waits for: only
/// zombies still showing one of the family's sessions or groups).
fn reap_orphans(targets: &family::Targets) {
    let own = std::process::id() as i32;
    let keeper = keeper::keeper_pid();
    let roots = lock(active_roots());
    let candidates = match family::own_children() {
        Some(children) => children.into_iter().filter_map(family::read_stat).collect(),
        None => family::scan(),
    };
    for stat in candidates {
        if stat.ppid == own
            && stat.state == 'Z'
            && !roots.contains(&stat.pid)
            && Some(stat.pid) != keeper
            && targets.contains(&stat)
        {
            sys::reap_nohang(stat.pid);
        }
    }
}

pub(crate) struct ReceiptParts {
    pub mode: &'static str,
    pub label: String,
    pub kernel: String,
    pub root_pid: i32,
    pub policy: policy::Policy,
    pub records: policy::Records,
    pub killed: Vec<i32>,
    pub keeper_lost: bool,
    pub owner_lost: bool,
    pub verified: bool,
    pub ended_by: EndedBy,
    pub run: Duration,
    pub cleanup: Duration,
}

pub(crate) fn build_receipt(parts: ReceiptParts) -> Receipt {
    Receipt {
        mode: parts.mode.to_owned(),
        label: parts.label,
        kernel: parts.kernel,
        session_boundary: Some(SESSION_BOUNDARY.to_owned()),
        root_pid: parts.root_pid.max(0) as u32,
        root_sid: parts.policy.new_session.then_some(parts.root_pid),
        root_pgid: parts.policy.root_pgid,
        sessions: parts.records.sessions.into_iter().collect(),
        groups: parts.records.groups.into_iter().collect(),
        denied: parts.records.denied,
        killed: parts.killed,
        keeper_lost: parts.keeper_lost,
        owner_lost: parts.owner_lost,
        verified: parts.verified,
        ended_by: parts.ended_by,
        run_ms: parts.run.as_secs_f64() * 1e3,
        cleanup_ms: parts.cleanup.as_secs_f64() * 1e3,
        room: None,
    }
}

/// Waits for the root to exit (pidfd readiness, no thread) and reaps it.
pub async fn wait_exit(child: &mut std::process::Child) -> io::Result<std::process::ExitStatus> {
    let pidfd = sys::pidfd_open(child.id() as i32)?;
    // SAFETY: the AsyncFd owns the OwnedFd, which stays open and unchanged until it is dropped.
    let ready = unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE)
    }
    .map_err(io::Error::from)?;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        let mut guard = ready.readable().await?;
        guard.clear_ready();
    }
}
