//! The keeper process itself: its poll loop over the lifeline, every registered listener and
//! the ledger's pidfds; its journal to autocode; its cleanup when autocode is lost.
//!
//! Invariants: the notification being handled is held in the shared in-flight slot
//! (`inflight.rs`) from before it is handled until it is answered, and every session/group/denied
//! entry goes before its answer (strict, one message each). Ledger messages (`Exec`, `Exited`) of a launch whose ledger file the keeper writes are coalesced into one `Batch`
//! per [`super::batch::BATCH_DELAY`] (or sooner when full), because the file line, written before
//! CONTINUE, is the durable record; a pending batch is sent before any strict message of its
//! launch and before `Flushed`. Without a ledger file they go one by one before CONTINUE.

use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::batch::{Batched, Pending};
use super::family;
use super::inflight;
use super::keeper::{FromKeeper, MESSAGE_LIMIT, ToKeeper, pollin, settle_ready};
use super::ledger::{Book, ExecCall};
use super::policy::{self, Entry, Gate, Journal, Policy, Records};
use super::sys;

pub(super) fn keeper_main(socket: OwnedFd) -> ! {
    // SAFETY: plain syscalls in the single-threaded keeper; descriptors 0-2 are replaced by
    // /dev/null so the keeper never holds autocode's pipes open, and everything but the
    // lifeline is closed.
    unsafe {
        libc::setsid();
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
        }
        libc::dup2(socket.as_raw_fd(), 3);
        libc::fcntl(3, libc::F_SETFD, libc::FD_CLOEXEC);
        libc::close_range(4, u32::MAX, 0);
    }
    std::mem::forget(socket);
    // SAFETY: fd 3 is the lifeline just placed there; nothing else owns it.
    let socket = unsafe { OwnedFd::from_raw_fd(3) };
    Keeper {
        socket,
        launches: HashMap::new(),
    }
    .run();
    // SAFETY: leaving without running the parent's exit handlers (which belong to autocode).
    unsafe { libc::_exit(0) }
}

struct KeeperLaunch {
    label: String,
    root_pid: i32,
    policy: Policy,
    listener: OwnedFd,
    receipt_path: Option<PathBuf>,
    kernel: String,
    records: Records,
    hung_up: bool,
    started: std::time::SystemTime,
    gate: Option<Gate>,
    ledger: LaunchLedger,
}

/// A launch's ledger in the keeper: the book and what autocode has not yet been told.
struct LaunchLedger {
    book: Book,
    /// Ledger messages not yet sent (always empty when `!batching`).
    pending: Pending,
    /// The keeper writes this launch's ledger file, so ledger messages may be coalesced.
    batching: bool,
}

impl LaunchLedger {
    /// Queues a ledger message; without batching (or when the batch is full) it goes now.
    fn queue(&mut self, socket: BorrowedFd<'_>, launch: u64, item: Batched, fd: Option<OwnedFd>) {
        if self.pending.overflows_with(&item) {
            self.send_pending(socket, launch);
        }
        self.pending.push(item, fd);
        if !self.batching || self.pending.full() {
            self.send_pending(socket, launch);
        }
    }

    /// Sends what is pending as one message; a batching launch then settles the pidfds that
    /// ended meanwhile (they are not polled while a batch waits) and sends their exits after it.
    fn send_pending(&mut self, socket: BorrowedFd<'_>, launch: u64) {
        let (items, fds) = self.pending.take();
        send_batch(socket, launch, items, &fds);
        if !self.batching {
            return;
        }
        let open = self.book.pollable();
        let mut polled: Vec<libc::pollfd> = open.iter().map(|(fd, _)| pollin(*fd)).collect();
        if polled.is_empty() || sys::poll_many(&mut polled, 0).is_err() {
            return;
        }
        let mut exits: Vec<Batched> = settle_ready(&mut self.book, &open, &polled)
            .into_iter()
            .map(|(pid, seqs, exit)| Batched::Exited {
                pid,
                seqs,
                exit: Some(exit),
            })
            .collect();
        while !exits.is_empty() {
            let rest = exits.split_off(exits.len().min(EXITS_PER_MESSAGE));
            send_batch(socket, launch, exits, &[]);
            exits = rest;
        }
    }
}

/// Exits per message (each is well under 100 bytes unless a pid exec'd very often).
const EXITS_PER_MESSAGE: usize = 128;

fn send_batch(socket: BorrowedFd<'_>, launch: u64, items: Vec<Batched>, fds: &[OwnedFd]) {
    if items.is_empty() {
        return;
    }
    if let Ok(bytes) = serde_json::to_vec(&FromKeeper::Batch { launch, items }) {
        let raw: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
        let _ = sys::send_with_fds(socket.as_raw_fd(), &bytes, &raw);
    }
}

struct Keeper {
    socket: OwnedFd,
    launches: HashMap<u64, KeeperLaunch>,
}

/// The keeper's journal: its own memory, then the lifeline (the owner may already be dead; the
/// keeper's copy is what its cleanup uses then).
struct KeeperJournal<'a> {
    socket: BorrowedFd<'a>,
    id: u64,
    records: &'a mut Records,
    ledger: &'a mut LaunchLedger,
}

fn send(socket: BorrowedFd<'_>, message: &FromKeeper) {
    if let Ok(bytes) = serde_json::to_vec(message) {
        let _ = sys::send_with_fd(socket.as_raw_fd(), &bytes, None);
    }
}

impl Journal for KeeperJournal<'_> {
    fn records(&self) -> Records {
        self.records.clone()
    }
    fn write(&mut self, entry: &Entry) {
        self.records.apply(entry);
        // Strict order: everything the keeper did before this entry reaches autocode first.
        self.ledger.send_pending(self.socket, self.id);
        send(
            self.socket,
            &FromKeeper::Journal {
                launch: self.id,
                entry: entry.clone(),
            },
        );
    }
    fn follows(&self, tid: i32) -> bool {
        self.ledger.book.follows(tid)
    }
    fn confirm(&mut self, tgid: i32, followed: bool) {
        if let Some(entry) = self.ledger.book.confirm(tgid, followed) {
            self.ledger.queue(
                self.socket,
                self.id,
                Batched::Attested {
                    seq: entry.seq,
                    attestation: entry.attestation,
                    exe: entry.exe,
                },
                None,
            );
        }
    }
    fn exec(&mut self, tgid: i32, call: ExecCall, pidfd: Option<OwnedFd>) {
        // The pidfd goes along (the kernel duplicates it) so that autocode can follow the
        // process itself if the keeper is lost; the copy queued here outlives the keeper's own
        // (which a settle may close before the batch goes).
        let copy = pidfd.as_ref().and_then(|fd| fd.try_clone().ok());
        let (mut entry, same_as) = self.ledger.book.record_linked(tgid, call, pidfd);
        // The process's previous entry went before this one (items keep their order).
        if same_as.is_some() {
            entry.argv = Vec::new();
            entry.cwd = String::new();
        }
        self.ledger.queue(
            self.socket,
            self.id,
            Batched::Exec {
                entry,
                pidfd: None,
                same_as,
            },
            copy,
        );
    }
}

impl Keeper {
    fn run(mut self) {
        let mut buf = vec![0u8; MESSAGE_LIMIT];
        loop {
            let ids: Vec<u64> = self
                .launches
                .iter()
                .filter(|(_, launch)| !launch.hung_up)
                .map(|(id, _)| *id)
                .collect();
            let mut fds = vec![pollin(self.socket.as_raw_fd())];
            for id in &ids {
                if let Some(launch) = self.launches.get(id) {
                    fds.push(pollin(launch.listener.as_raw_fd()));
                }
            }
            // A launch with a batch waiting is not woken by its exits: they are settled when
            // the batch goes.
            let pidfds: Vec<(u64, Vec<(RawFd, i32)>)> = self
                .launches
                .iter()
                .filter(|(_, launch)| launch.ledger.pending.is_empty())
                .map(|(id, launch)| (*id, launch.ledger.book.pollable()))
                .collect();
            for (_, open) in &pidfds {
                fds.extend(open.iter().map(|(fd, _)| pollin(*fd)));
            }
            let timeout = self
                .launches
                .values()
                .filter_map(|launch| launch.ledger.pending.due)
                .min()
                .map_or(-1, |due| {
                    let left = due.saturating_duration_since(Instant::now());
                    // Rounded up so a due batch is not polled for with a zero timeout early.
                    left.as_millis().min(i32::MAX as u128) as i32 + i32::from(!left.is_zero())
                });
            if sys::poll_many(&mut fds, timeout).is_err() {
                break;
            }
            let mut at = 1 + ids.len();
            for (id, open) in &pidfds {
                let polled = fds.get(at..at + open.len()).unwrap_or_default();
                at += open.len();
                if let Some(launch) = self.launches.get_mut(id) {
                    for (pid, seqs, exit) in settle_ready(&mut launch.ledger.book, open, polled) {
                        launch.ledger.queue(
                            self.socket.as_fd(),
                            *id,
                            Batched::Exited {
                                pid,
                                seqs,
                                exit: Some(exit),
                            },
                            None,
                        );
                    }
                }
            }
            for (id, pollfd) in ids.iter().zip(fds.iter().skip(1)) {
                if pollfd.revents & libc::POLLIN != 0 {
                    self.serve(*id);
                } else if pollfd.revents != 0
                    && let Some(launch) = self.launches.get_mut(id)
                {
                    launch.hung_up = true;
                }
            }
            let now = Instant::now();
            let socket = self.socket.as_fd();
            for (id, launch) in &mut self.launches {
                if launch.ledger.pending.due.is_some_and(|due| due <= now) {
                    launch.ledger.send_pending(socket, *id);
                }
            }
            if fds[0].revents != 0 {
                match sys::recv_with_fd(self.socket.as_raw_fd(), &mut buf) {
                    Ok((len, fd)) if len > 0 => {
                        if let Some(bytes) = buf.get(..len) {
                            self.control(bytes, fd);
                        }
                    }
                    _ => break,
                }
            }
        }
        self.owner_lost();
    }

    fn control(&mut self, bytes: &[u8], fd: Option<OwnedFd>) {
        match serde_json::from_slice::<ToKeeper>(bytes) {
            Ok(ToKeeper::Register {
                launch,
                label,
                root_pid,
                policy,
                receipt_path,
                kernel,
                gate,
                ledger_path,
                origin_unix_ms,
            }) => {
                if let Some(listener) = fd {
                    let mut book = Book::new(ledger_path, origin_unix_ms);
                    book.write_to_file();
                    let batching = book.writes_file();
                    self.launches.insert(
                        launch,
                        KeeperLaunch {
                            label,
                            root_pid,
                            policy,
                            listener,
                            receipt_path,
                            kernel,
                            records: Records::default(),
                            hung_up: false,
                            started: std::time::SystemTime::now(),
                            gate,
                            ledger: LaunchLedger {
                                book,
                                pending: Pending::default(),
                                batching,
                            },
                        },
                    );
                }
            }
            Ok(ToKeeper::Release { launch }) => {
                self.launches.remove(&launch);
            }
            Ok(ToKeeper::Flush { launch: id }) => {
                let socket = self.socket.as_fd();
                if let Some(launch) = self.launches.get_mut(&id) {
                    launch.ledger.send_pending(socket, id);
                    launch.ledger.book.flush_file();
                    for (pid, seqs, exit) in launch.ledger.book.settle_all() {
                        send(
                            socket,
                            &FromKeeper::Exited {
                                launch: id,
                                pid,
                                seqs,
                                exit: Some(exit),
                            },
                        );
                    }
                }
                send(socket, &FromKeeper::Flushed { launch: id });
            }
            Err(_) => {}
        }
    }

    fn serve(&mut self, id: u64) {
        let Some(launch) = self.launches.get_mut(&id) else {
            return;
        };
        let notif = match sys::notif_recv(launch.listener.as_fd()) {
            Ok(Some(notif)) => notif,
            Ok(None) => return,
            Err(_) => {
                // A listener that cannot be read would spin this loop; stop polling it (its
                // family stays a cleanup target at autocode's stage end).
                launch.hung_up = true;
                return;
            }
        };
        let socket = self.socket.as_fd();
        inflight::hold(id, &notif);
        let mut journal = KeeperJournal {
            socket,
            id,
            records: &mut launch.records,
            ledger: &mut launch.ledger,
        };
        policy::handle(
            launch.listener.as_fd(),
            &notif,
            &launch.policy,
            launch.gate.as_ref(),
            &mut journal,
        );
        inflight::release();
    }

    /// autocode is gone: end every family and leave a receipt for each.
    fn owner_lost(self) {
        for mut launch in self.launches.into_values() {
            let started = Instant::now();
            let records = launch.records.clone();
            let policy = launch.policy;
            let root_pid = launch.root_pid;
            let cleanup = family::kill_until_gone(
                launch.listener.as_fd(),
                || records.targets(&policy, root_pid),
                Instant::now() + family::CLEANUP_LIMIT,
            );
            // Killed members report their signal once reaped (or as zombies); the ledger file
            // gets their ends.
            launch.ledger.book.settle_all();
            let Some(path) = &launch.receipt_path else {
                continue;
            };
            let receipt = super::build_receipt(super::ReceiptParts {
                mode: super::MODE_KEEPER,
                label: launch.label,
                kernel: launch.kernel,
                root_pid,
                policy,
                records,
                killed: cleanup.killed.into_iter().collect(),
                keeper_lost: false,
                owner_lost: true,
                verified: cleanup.verified,
                ended_by: crate::supervise::EndedBy::OwnerLost,
                run: launch.started.elapsed().unwrap_or(Duration::ZERO),
                cleanup: started.elapsed(),
            });
            let _ = crate::supervise::write_receipt(path, &receipt);
        }
    }
}
