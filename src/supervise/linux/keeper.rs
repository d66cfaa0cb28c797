//! The keeper process and autocode's side of it (the owner registry).
//!
//! The keeper is forked by [`init_before_threads`] while autocode is still single-threaded, in
//! its own session, non-dumpable, connected by a SOCK_SEQPACKET lifeline. Each launch's
//! listener is duplicated to it (the keeper process itself is `keeper_proc.rs`). It answers
//! notifications; it holds the one in flight in a shared slot (`inflight.rs`) and streams every
//! session/group/denied entry before answering, so autocode always knows at least what the
//! keeper acted on; exec-ledger messages
//! of a launch with a ledger file come in coalesced batches (the file is the durable record,
//! and autocode recovers from it at keeper loss). Keeper lost (EOF) → autocode services the
//! listeners itself. Autocode lost (EOF) → the keeper kills every family and writes each
//! launch's receipt to its `receipt_path`.
//!
//! Invariants: a launch is registered (in the map) before its listener reaches the keeper;
//! exactly one party services a listener at a time; a notification in flight at keeper loss is
//! answered by autocode.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::batch::Batched;
use super::inflight;
use super::keeper_proc;
use super::ledger::{self, Book, ExecCall};
use super::policy::{self, Entry, Gate, Journal, Policy, Records};
use super::sys::{self, SeccompNotif};
use crate::supervise::{LedgerEntry, LedgerExit};

/// autocode → keeper.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum ToKeeper {
    /// Carries the listener as SCM_RIGHTS.
    Register {
        launch: u64,
        label: String,
        root_pid: i32,
        policy: Policy,
        receipt_path: Option<PathBuf>,
        kernel: String,
        #[serde(default)]
        gate: Option<Gate>,
        #[serde(default)]
        ledger_path: Option<PathBuf>,
        #[serde(default)]
        origin_unix_ms: u64,
    },
    Release {
        launch: u64,
    },
    /// Settle what can be settled and answer `Flushed`: every ledger message before it has
    /// then reached autocode.
    Flush {
        launch: u64,
    },
}

/// keeper → autocode.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum FromKeeper {
    Journal {
        launch: u64,
        entry: Entry,
    },
    /// The process behind these entries ended.
    Exited {
        launch: u64,
        pid: i32,
        seqs: Vec<u64>,
        exit: Option<LedgerExit>,
    },
    Flushed {
        launch: u64,
    },
    /// Coalesced ledger messages of one launch, in order; `Exec` items index the message's
    /// descriptors (SCM_RIGHTS). Sent only for a launch whose ledger file the keeper writes.
    Batch {
        launch: u64,
        items: Vec<Batched>,
    },
}

pub(super) const MESSAGE_LIMIT: usize = 64 * 1024;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking holder cannot leave these maps half-updated in a way that matters more than
    // losing the boundary would.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

// ------------------------------------------------------------------ autocode's side

/// One launch as autocode tracks it.
pub struct LaunchShared {
    pub id: u64,
    pub root_pid: i32,
    pub policy: Policy,
    pub listener: OwnedFd,
    pub records: Mutex<Records>,
    pub keeper_lost: AtomicBool,
    pub serviced_by_keeper: AtomicBool,
    servicer: Mutex<Option<InProcess>>,
    /// Pathname unix-socket connects are gated (a room was given).
    pub gate: Option<Gate>,
    pub book: Mutex<Book>,
    flushed: (Mutex<bool>, Condvar),
}

impl LaunchShared {
    pub fn records(&self) -> Records {
        lock(&self.records).clone()
    }

    /// The ledger once the family is gone: every ledger message of the keeper applied, every
    /// pidfd still open settled (killed processes report their signal), the file completed.
    pub fn ledger(&self) -> Vec<LedgerEntry> {
        if self.serviced_by_keeper.load(Ordering::SeqCst) {
            self.flush_keeper();
        }
        let mut book = lock(&self.book);
        book.write_to_file();
        book.settle_all();
        book.flush_file();
        book.entries()
    }

    fn flush_keeper(&self) {
        let owner = owner();
        {
            let keeper = lock(&owner.keeper);
            let Some(link) = keeper.as_ref().filter(|link| link.alive) else {
                return;
            };
            *lock(&self.flushed.0) = false;
            let Ok(bytes) = serde_json::to_vec(&ToKeeper::Flush { launch: self.id }) else {
                return;
            };
            if sys::send_with_fd(link.socket.as_raw_fd(), &bytes, None).is_err() {
                return;
            }
        }
        let (done, signal) = &self.flushed;
        let guard = lock(done);
        // A keeper lost meanwhile never answers: the wait is bounded, and take_over wakes it.
        let _ = signal.wait_timeout_while(guard, FLUSH_LIMIT, |done| !*done);
    }
}

/// How long autocode waits for the keeper's `Flushed`.
const FLUSH_LIMIT: Duration = Duration::from_secs(2);

struct InProcess {
    stop: OwnedFd,
    thread: std::thread::JoinHandle<()>,
}

struct KeeperLink {
    socket: OwnedFd,
    pid: i32,
    alive: bool,
}

struct Owner {
    keeper: Mutex<Option<KeeperLink>>,
    launches: Mutex<HashMap<u64, Arc<LaunchShared>>>,
    next_id: Mutex<u64>,
}

static OWNER: OnceLock<Owner> = OnceLock::new();
/// Set only by `init_before_threads` (so a library caller without it gets in-process mode).
static KEEPER_AT_START: OnceLock<Option<(OwnedFd, i32)>> = OnceLock::new();

fn owner() -> &'static Owner {
    OWNER.get_or_init(|| {
        sys::become_owner();
        let keeper = KEEPER_AT_START
            .get()
            .and_then(|started| started.as_ref())
            .and_then(|(socket, pid)| {
                let socket = socket.try_clone().ok()?;
                let reader = socket.try_clone().ok()?;
                let keeper_pid = *pid;
                std::thread::Builder::new()
                    .name("autocode-keeper-link".into())
                    .spawn(move || read_keeper(reader, keeper_pid))
                    .ok()?;
                Some(KeeperLink {
                    socket,
                    pid: keeper_pid,
                    alive: true,
                })
            });
        Owner {
            keeper: Mutex::new(keeper),
            launches: Mutex::new(HashMap::new()),
            next_id: Mutex::new(1),
        }
    })
}

/// The keeper's pid, while it is alive.
pub fn keeper_pid() -> Option<i32> {
    lock(&owner().keeper)
        .as_ref()
        .filter(|link| link.alive)
        .map(|link| link.pid)
}

/// Whether a keeper process was started for this autocode.
pub fn keeper_started() -> bool {
    KEEPER_AT_START
        .get()
        .is_some_and(|started| started.is_some())
}

/// What a launch asks of the ledger and the unix-socket gate.
#[derive(Debug, Clone, Default)]
pub struct LedgerSettings {
    /// The room's writable places (connects are gated when `Some`).
    pub room_writable: Option<Vec<PathBuf>>,
    /// Local internet destinations the family may reach without serving them itself.
    pub room_allow: Vec<crate::supervise::net::NetAllow>,
    /// The JSON-lines ledger file (created or truncated here).
    pub ledger_path: Option<PathBuf>,
}

/// Registers a launch's listener: with the keeper when alive, else serviced in-process.
pub fn register(
    listener: OwnedFd,
    root_pid: i32,
    policy: Policy,
    label: &str,
    receipt_path: Option<PathBuf>,
    kernel: &str,
    settings: LedgerSettings,
) -> io::Result<Arc<LaunchShared>> {
    let gate = settings.room_writable.as_deref().map(|places| Gate {
        writable: ledger::canonical_places(places),
        allow: settings.room_allow.clone(),
        own_addresses: super::listeners::own_addresses(),
        supervisor: std::process::id() as i32,
    });
    let ledger_path = settings
        .ledger_path
        .map(|path| std::path::absolute(&path).unwrap_or(path));
    if let Some(path) = &ledger_path {
        std::fs::File::create(path)?;
    }
    let origin_unix_ms = ledger::unix_ms();
    let owner = owner();
    let id = {
        let mut next = lock(&owner.next_id);
        *next += 1;
        *next
    };
    let launch = Arc::new(LaunchShared {
        id,
        root_pid,
        policy,
        listener,
        records: Mutex::new(Records::default()),
        keeper_lost: AtomicBool::new(false),
        serviced_by_keeper: AtomicBool::new(false),
        servicer: Mutex::new(None),
        gate: gate.clone(),
        book: Mutex::new(Book::new(ledger_path.clone(), origin_unix_ms)),
        flushed: (Mutex::new(false), Condvar::new()),
    });
    lock(&owner.launches).insert(id, launch.clone());
    let mut keeper = lock(&owner.keeper);
    let handed_over = match keeper.as_mut() {
        Some(link) if link.alive => {
            let message = ToKeeper::Register {
                launch: id,
                label: label.to_owned(),
                root_pid,
                policy,
                receipt_path,
                kernel: kernel.to_owned(),
                gate,
                ledger_path,
                origin_unix_ms,
            };
            let bytes = serde_json::to_vec(&message).map_err(io::Error::other)?;
            let sent = sys::send_with_fd(
                link.socket.as_raw_fd(),
                &bytes,
                Some(launch.listener.as_raw_fd()),
            );
            if sent.is_err() {
                link.alive = false;
            }
            sent.is_ok()
        }
        _ => false,
    };
    if handed_over {
        launch.serviced_by_keeper.store(true, Ordering::SeqCst);
    } else {
        launch.keeper_lost.store(keeper_started(), Ordering::SeqCst);
        lock(&launch.book).write_to_file();
        if let Err(error) = start_in_process(&launch, None) {
            lock(&owner.launches).remove(&id);
            return Err(error);
        }
    }
    drop(keeper);
    Ok(launch)
}

/// Ends a launch's servicing (after its cleanup) and forgets it.
pub fn release(launch: &LaunchShared) {
    let owner = owner();
    lock(&owner.launches).remove(&launch.id);
    if let Some(link) = lock(&owner.keeper).as_ref().filter(|link| link.alive)
        && let Ok(bytes) = serde_json::to_vec(&ToKeeper::Release { launch: launch.id })
    {
        let _ = sys::send_with_fd(link.socket.as_raw_fd(), &bytes, None);
    }
    if let Some(servicer) = lock(&launch.servicer).take() {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes we own to an eventfd we own.
        unsafe {
            libc::write(
                servicer.stop.as_raw_fd(),
                &one as *const u64 as *const libc::c_void,
                8,
            );
        }
        let _ = servicer.thread.join();
    }
}

/// Journal of an in-process servicer: straight into the shared records.
struct SharedJournal<'a>(&'a LaunchShared);

impl Journal for SharedJournal<'_> {
    fn records(&self) -> Records {
        self.0.records()
    }
    fn write(&mut self, entry: &Entry) {
        lock(&self.0.records).apply(entry);
    }
    fn exec(&mut self, tgid: i32, call: ExecCall, pidfd: Option<OwnedFd>) {
        lock(&self.0.book).record(tgid, call, pidfd);
    }
    fn follows(&self, tid: i32) -> bool {
        lock(&self.0.book).follows(tid)
    }
    fn confirm(&mut self, tgid: i32, followed: bool) {
        lock(&self.0.book).confirm(tgid, followed);
    }
}

fn start_in_process(launch: &Arc<LaunchShared>, pending: Option<SeccompNotif>) -> io::Result<()> {
    // SAFETY: eventfd(2) with integer flags; the result is checked before it is owned.
    let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor nobody else owns.
    let stop = unsafe { OwnedFd::from_raw_fd(raw) };
    let stop_raw = stop.as_raw_fd();
    let shared = launch.clone();
    let thread = std::thread::Builder::new()
        .name(format!("autocode-listener-{}", launch.id))
        .spawn(move || {
            let listener = shared.listener.as_fd();
            if let Some(notif) = pending {
                policy::handle(
                    listener,
                    &notif,
                    &shared.policy,
                    shared.gate.as_ref(),
                    &mut SharedJournal(&shared),
                );
            }
            serve_in_process(&shared, stop_raw);
        })?;
    *lock(&launch.servicer) = Some(InProcess { stop, thread });
    Ok(())
}

pub(super) fn pollin(fd: RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

/// Settles the ledger entries whose pidfds polled readable; returns what was settled.
pub(super) fn settle_ready(
    book: &mut Book,
    pidfds: &[(RawFd, i32)],
    polled: &[libc::pollfd],
) -> Vec<(i32, Vec<u64>, LedgerExit)> {
    pidfds
        .iter()
        .zip(polled)
        .filter(|(_, polled)| polled.revents != 0)
        .filter_map(|((_, pid), _)| book.settle(*pid).map(|(seqs, exit)| (*pid, seqs, exit)))
        .collect()
}

fn serve_in_process(launch: &LaunchShared, stop: RawFd) {
    let listener = launch.listener.as_fd();
    loop {
        let pidfds = lock(&launch.book).pollable();
        let mut fds = vec![pollin(listener.as_raw_fd()), pollin(stop)];
        fds.extend(pidfds.iter().map(|(fd, _)| pollin(*fd)));
        if sys::poll_many(&mut fds, -1).is_err() || fds[1].revents != 0 {
            return;
        }
        settle_ready(&mut lock(&launch.book), &pidfds, &fds[2..]);
        let revents = fds[0].revents;
        if revents & libc::POLLIN != 0 {
            match sys::notif_recv(listener) {
                Ok(Some(notif)) => policy::handle(
                    listener,
                    &notif,
                    &launch.policy,
                    launch.gate.as_ref(),
                    &mut SharedJournal(launch),
                ),
                Ok(None) => {}
                // Unreadable listener: stop rather than spin; stage-end cleanup still applies.
                Err(_) => return,
            }
        } else if revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
            // No task uses the filter any more: nothing can ever be notified again (the
            // ledger's open entries are settled by `LaunchShared::ledger`).
            return;
        }
    }
}

fn read_keeper(socket: OwnedFd, keeper_pid: i32) {
    let mut buf = vec![0u8; MESSAGE_LIMIT];
    loop {
        let Ok((len, fds)) = sys::recv_with_fds(socket.as_raw_fd(), &mut buf) else {
            break;
        };
        if len == 0 {
            break;
        }
        let Some(message) = buf
            .get(..len)
            .and_then(|bytes| serde_json::from_slice::<FromKeeper>(bytes).ok())
        else {
            continue;
        };
        let mut fds: Vec<Option<OwnedFd>> = fds.into_iter().map(Some).collect();
        let launches = lock(&owner().launches);
        match message {
            FromKeeper::Journal { launch, entry } => {
                if let Some(launch) = launches.get(&launch) {
                    lock(&launch.records).apply(&entry);
                }
            }
            FromKeeper::Exited {
                launch,
                pid,
                seqs,
                exit,
            } => {
                if let Some(launch) = launches.get(&launch) {
                    lock(&launch.book).forget(pid, &seqs, exit);
                }
            }
            FromKeeper::Batch { launch, items } => {
                if let Some(launch) = launches.get(&launch) {
                    apply_batch(launch, items, &mut fds);
                }
            }
            FromKeeper::Flushed { launch } => {
                if let Some(launch) = launches.get(&launch) {
                    *lock(&launch.flushed.0) = true;
                    launch.flushed.1.notify_all();
                }
            }
        }
    }
    take_over(keeper_pid);
}

/// Applies one batch in order (its descriptors are taken by index).
fn apply_batch(launch: &LaunchShared, items: Vec<Batched>, fds: &mut [Option<OwnedFd>]) {
    let mut book = lock(&launch.book);
    for item in items {
        match item {
            Batched::Exec {
                mut entry,
                pidfd,
                same_as,
            } => {
                let fd = pidfd
                    .and_then(|index| fds.get_mut(index))
                    .and_then(Option::take);
                if let Some(earlier) = same_as.and_then(|seq| book.entry(seq)) {
                    entry.argv.clone_from(&earlier.argv);
                    entry.cwd.clone_from(&earlier.cwd);
                    entry.argv_truncated = earlier.argv_truncated;
                }
                book.adopt(entry, fd);
            }
            Batched::Attested {
                seq,
                attestation,
                exe,
            } => {
                book.attest(seq, attestation, exe);
            }
            Batched::Exited { pid, seqs, exit } => book.forget(pid, &seqs, exit),
        }
    }
}

/// The keeper is gone: service every listener here, answering what it left in flight.
fn take_over(keeper_pid: i32) {
    let owner = owner();
    let mut keeper = lock(&owner.keeper);
    if let Some(link) = keeper.as_mut() {
        link.alive = false;
    }
    let launches: Vec<_> = lock(&owner.launches).values().cloned().collect();
    // The keeper is gone (its lifeline reached EOF), so the slot is no longer written.
    let mut left_in_flight = inflight::take();
    for launch in launches {
        launch.keeper_lost.store(true, Ordering::SeqCst);
        // From now on autocode writes the ledger file; a waiting flush gives up at once. Entries
        // (and ends) the keeper wrote there but had not yet sent in a batch are taken from it
        // (their pidfds died with the keeper: an end not in the file stays unknown).
        {
            let mut book = lock(&launch.book);
            book.recover_from_file();
            book.write_to_file();
        }
        *lock(&launch.flushed.0) = true;
        launch.flushed.1.notify_all();
        if launch.serviced_by_keeper.swap(false, Ordering::SeqCst) {
            let pending = left_in_flight
                .take_if(|(owner_launch, _)| *owner_launch == launch.id)
                .map(|(_, notif)| notif);
            // A listener nobody services would hang its family's setsid; there is no better
            // fallback than the stage-end cleanup if even a thread cannot start.
            let _ = start_in_process(&launch, pending);
        }
    }
    drop(keeper);
    let mut status = 0;
    // SAFETY: waitpid(2) on our own child, writing one int we own.
    unsafe { libc::waitpid(keeper_pid, &mut status, 0) };
}

/// The longest autocode waits at its end for the keeper to leave (it leaves at once on its
/// lifeline's end; one that does not is left to whoever adopts it).
const KEEPER_LEAVE: Duration = Duration::from_secs(2);

/// At autocode's normal end: ends the keeper's lifeline and reaps the keeper, so it never
/// outlives autocode as a zombie of whoever adopts it (a subreaper parent such as `scenario run
/// --jobs` or `mcp`, which cannot tell it from a child of its own). With launches still running
/// the keeper is left alone (it ends their families itself when autocode is gone).
pub fn release_keeper() {
    let Some(Some((socket, pid))) = KEEPER_AT_START.get() else {
        return;
    };
    if OWNER
        .get()
        .is_some_and(|owner| !lock(&owner.launches).is_empty())
    {
        return;
    }
    let Ok(pidfd) = sys::pidfd_open(*pid) else {
        return;
    };
    // SAFETY: shutdown(2) on a socket this process owns for its whole life; every clone of the
    // lifeline (the link thread's) sees its end, and so does the keeper.
    unsafe { libc::shutdown(socket.as_raw_fd(), libc::SHUT_RDWR) };
    let wait_ms = i32::try_from(KEEPER_LEAVE.as_millis()).unwrap_or(i32::MAX);
    if sys::poll_one(pidfd.as_fd(), libc::POLLIN, wait_ms).is_ok_and(|ready| ready != 0) {
        // The link thread may reap it first (its lifeline ended too): then this finds nothing.
        sys::reap_nohang(*pid);
    }
}

// ------------------------------------------------------------------ the keeper process

/// Forks the keeper. Must run while the process has exactly one thread (first thing in
/// `main`); with more threads it does nothing and launches are serviced in-process.
pub fn init_before_threads() -> io::Result<bool> {
    if KEEPER_AT_START.get().is_some() {
        return Ok(keeper_started());
    }
    let threads = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix("Threads:"))
                .and_then(|value| value.trim().parse::<u32>().ok())
        });
    if threads != Some(1) {
        let _ = KEEPER_AT_START.set(None);
        return Ok(false);
    }
    inflight::create()?;
    let (ours, theirs) = sys::seqpacket_pair()?;
    // SAFETY: the process is single-threaded (checked above), so the child may run arbitrary
    // code: no lock can be held by a thread that does not exist in the child.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        drop(ours);
        keeper_proc::keeper_main(theirs);
    }
    drop(theirs);
    let _ = KEEPER_AT_START.set(Some((ours, pid)));
    sys::become_owner();
    Ok(true)
}
