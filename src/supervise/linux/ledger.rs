//! The exec ledger and the unix-socket gate as the keeper sees them: reading an exec's or a
//! connect's arguments out of the caller's memory, the plausibility and room checks, and the
//! book of entries (their file, their pidfds, their exits).
//!
//! Invariants: every read of the caller's memory is bounded (argv: [`ARG_LIMIT`] strings and
//! [`BYTE_LIMIT`] bytes, marked when cut; `memory.rs`); an entry is written to the ledger file
//! before the exec is let through (the caller of [`Book::record`] answers afterwards), except
//! an exec of a name that does not exist, which the keeper answers ENOENT itself and never lets
//! through (its line may wait for the next one written); exits come from the
//! kernel (`PIDFD_GET_INFO`, or `/proc/<pid>/stat` for a zombie not yet reaped, re-checked
//! against the pidfd), never from a guess. The ledger file's format (an entry's first line,
//! then its attestation and its exit as short lines) is `crate::supervise::ledger_file`'s.

use std::collections::BTreeMap;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::supervise::ledger_file::LedgerWriter;
use crate::supervise::{Attestation, LedgerEntry, LedgerExit};

use super::attest::{self, Snapshot};
use super::sys::{self, Width};

mod memory;
pub use memory::{read_argv, read_env_var};
use memory::{read_cstring, read_pointer};

/// At most this many argv strings are read.
pub const ARG_LIMIT: usize = 1024;
/// At most this many bytes of argv are read (all strings together).
pub const BYTE_LIMIT: usize = 256 * 1024;
/// `PATH_MAX`: the longest filename the kernel accepts.
const PATH_LIMIT: usize = 4096;
const AT_FDCWD: i32 = -100;
const AT_EMPTY_PATH: u64 = 0x1000;

/// An exec as read from the caller before it was let through.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecCall {
    pub filename: String,
    pub argv: Vec<String>,
    pub argv_truncated: bool,
    pub cwd: String,
    pub plausible: bool,
    /// The file named does not exist ([`super::absent::name_absent`]): the exec is answered
    /// ENOENT by the keeper itself, never let through, so it is known to have failed without a
    /// snapshot.
    pub absent: bool,
    /// What the keeper saw of the caller before letting the exec through.
    pub snapshot: Snapshot,
}

/// Where the kernel will look for `filename`, seen through /proc (the caller's root, cwd or
/// directory descriptor).
pub fn exec_target(tid: i32, filename: &[u8], dirfd: Option<i32>, empty_path: bool) -> PathBuf {
    let relative = Path::new(std::ffi::OsStr::from_bytes(filename));
    match dirfd {
        Some(fd) if empty_path && filename.is_empty() => {
            PathBuf::from(format!("/proc/{tid}/fd/{fd}"))
        }
        _ if relative.is_absolute() => {
            let inside = relative.strip_prefix("/").unwrap_or(relative);
            Path::new(&format!("/proc/{tid}/root")).join(inside)
        }
        Some(fd) if fd != AT_FDCWD => Path::new(&format!("/proc/{tid}/fd/{fd}")).join(relative),
        _ => Path::new(&format!("/proc/{tid}/cwd")).join(relative),
    }
}

/// Whether `meta` (symlinks followed) is an executable regular file, as exec requires.
pub fn executable(meta: &std::fs::Metadata) -> bool {
    meta.is_file() && meta.permissions().mode() & 0o111 != 0
}

/// Reads an exec's filename, argv and cwd from thread `tid`. `args` are the call's arguments;
/// `at` selects the execveat layout. `None` when the memory cannot be read at all.
pub fn read_exec(tid: i32, args: &[u64; 6], at: bool, width: Width) -> Option<ExecCall> {
    let (path_arg, argv_arg, envp_arg) = if at {
        (args[1], args[2], args[3])
    } else {
        (args[0], args[1], args[2])
    };
    let (filename, _) = read_cstring(tid, path_arg, PATH_LIMIT)?;
    // The kernel reads these as int / flags words: truncation is the ABI.
    let dirfd = at.then_some(args[0] as i32);
    let empty_path = at && args[4] & AT_EMPTY_PATH != 0;
    let target = exec_target(tid, &filename, dirfd, empty_path);
    let found = std::fs::metadata(&target);
    // A failed `PATH` probe (most of the misses are): nothing to attest later, nothing to
    // resolve. Asked only when the plain look-up found nothing.
    let absent = !empty_path
        && found
            .as_ref()
            .is_err_and(|error| error.kind() == std::io::ErrorKind::NotFound)
        && super::absent::name_absent(tid, &filename);
    let (argv, argv_truncated) = read_argv(tid, argv_arg, width)?;
    let cwd = std::fs::read_link(format!("/proc/{tid}/cwd"))
        .map(|path| path.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut call = ExecCall {
        filename: String::from_utf8_lossy(&filename).into_owned(),
        argv,
        argv_truncated,
        cwd,
        plausible: false,
        absent,
        snapshot: Snapshot::default(),
    };
    if absent {
        return Some(call);
    }
    let found = found.ok();
    call.plausible = found.as_ref().is_some_and(executable);
    // The exec's own file was just looked up: argv[0] naming it is not looked up again.
    let known = found
        .as_ref()
        .map(|meta| (target.as_path(), (meta.dev(), meta.ino())));
    // `PATH` is read only when argv[0] is looked up along it.
    let path_env = call
        .argv
        .first()
        .filter(|argv0| !argv0.contains('/'))
        .and_then(|_| read_env_var(tid, envp_arg, width, "PATH"));
    call.snapshot = attest::snapshot(tid, &call.argv, path_env.as_deref(), known);
    Some(call)
}

/// What a connect's address is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SocketTarget {
    /// Neither `AF_UNIX` nor a whole `AF_INET`/`AF_INET6` address (or too short to say): not
    /// gated.
    Other,
    /// An internet address (`AF_INET`, `AF_INET6`).
    Inet(std::net::SocketAddr),
    /// An abstract name (`sun_path[0] == 0`) or an unnamed address: Landlock's business.
    Abstract,
    /// A filesystem path, as given (relative to the caller's cwd when not absolute).
    Path(Vec<u8>),
}

/// Classifies the first `addrlen` bytes of a sockaddr.
pub fn parse_sockaddr(bytes: &[u8]) -> SocketTarget {
    let Some(family) = bytes.get(..2) else {
        return SocketTarget::Other;
    };
    let family = i32::from(u16::from_ne_bytes([family[0], family[1]]));
    if family == libc::AF_INET || family == libc::AF_INET6 {
        return parse_inet(bytes, family).map_or(SocketTarget::Other, SocketTarget::Inet);
    }
    if family != libc::AF_UNIX {
        return SocketTarget::Other;
    }
    let path = bytes.get(2..).unwrap_or_default();
    match path.first() {
        None | Some(0) => SocketTarget::Abstract,
        Some(_) => {
            let end = path
                .iter()
                .position(|&byte| byte == 0)
                .unwrap_or(path.len());
            SocketTarget::Path(path.get(..end).unwrap_or_default().to_vec())
        }
    }
}

/// A `sockaddr_in` (16 bytes: family, port, address) or `sockaddr_in6` (at least 24 bytes:
/// family, port, flow info, address; the kernel accepts the scope id missing). Shorter: `None`
/// (the kernel answers EINVAL).
fn parse_inet(bytes: &[u8], family: i32) -> Option<std::net::SocketAddr> {
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
    let port = u16::from_be_bytes(bytes.get(2..4)?.try_into().ok()?);
    if family == libc::AF_INET {
        let octets: [u8; 4] = bytes.get(4..8)?.try_into().ok()?;
        bytes.get(..16)?;
        return Some(SocketAddr::from((Ipv4Addr::from(octets), port)));
    }
    let octets: [u8; 16] = bytes.get(8..24)?.try_into().ok()?;
    Some(SocketAddr::from((Ipv6Addr::from(octets), port)))
}

/// `sizeof(struct sockaddr_un)`.
const SOCKADDR_UN_LEN: u64 = 110;

/// Reads the sockaddr of a connect (or of i386 `socketcall(SYS_CONNECT, args)`). `None`:
/// unreadable.
pub fn read_connect_target(tid: i32, args: &[u64; 6], socketcall: bool) -> Option<SocketTarget> {
    let (address, length) = if socketcall {
        // The args array holds three 32-bit words: fd, addr, addrlen.
        let address = read_pointer(tid, args[1].checked_add(4)?, Width::W32)?;
        let length = read_pointer(tid, args[1].checked_add(8)?, Width::W32)?;
        (address, length)
    } else {
        (args[1], args[2] & 0xffff_ffff)
    };
    read_sockaddr(tid, address, length)
}

/// Reads and classifies the sockaddr of `length` bytes (at most a `sockaddr_un`) at `address`.
fn read_sockaddr(tid: i32, address: u64, length: u64) -> Option<SocketTarget> {
    let length = length.min(SOCKADDR_UN_LEN) as usize;
    let mut buf = vec![0u8; length];
    let got = sys::read_memory(tid, address, &mut buf).ok()?;
    Some(parse_sockaddr(buf.get(..got)?))
}

/// The destination a `sendto` names (`Some(None)`: no address; `None`: unreadable memory).
pub fn read_sendto_target(
    tid: i32,
    args: &[u64; 6],
    socketcall: bool,
) -> Option<Option<SocketTarget>> {
    let (address, length) = if socketcall {
        // The args array holds six 32-bit words: fd, buf, len, flags, addr, addrlen.
        let address = read_pointer(tid, args[1].checked_add(16)?, Width::W32)?;
        let length = read_pointer(tid, args[1].checked_add(20)?, Width::W32)?;
        (address, length)
    } else {
        (args[4], args[5] & 0xffff_ffff)
    };
    if address == 0 {
        return Some(None);
    }
    read_sockaddr(tid, address, length).map(Some)
}

/// The destinations a `sendmsg` (`many`: `sendmmsg`, up to the kernel's 1,024 messages) names:
/// the `msg_name` of each header (`width`-wide pointers; a null name or a zero length names
/// nothing). An empty list: no destination named. `None`: unreadable memory.
pub fn read_sendmsg_targets(
    tid: i32,
    args: &[u64; 6],
    many: bool,
    width: Width,
    socketcall: bool,
) -> Option<Vec<SocketTarget>> {
    let (headers, count) = if socketcall {
        // The args array holds 32-bit words: fd, msg (or vec), [vlen], flags.
        let headers = read_pointer(tid, args[1].checked_add(4)?, Width::W32)?;
        let count = if many {
            read_pointer(tid, args[1].checked_add(8)?, Width::W32)?
        } else {
            1
        };
        (headers, count)
    } else {
        (args[1], if many { args[2] & 0xffff_ffff } else { 1 })
    };
    // `struct msghdr` is 56 bytes (28 with 32-bit pointers); `struct mmsghdr` adds a 32-bit
    // length, padded to 64 (32).
    let stride: u64 = match (width, many) {
        (Width::W64, false) => 56,
        (Width::W64, true) => 64,
        (Width::W32, false) => 28,
        (Width::W32, true) => 32,
    };
    let mut targets = Vec::new();
    for index in 0..count.min(1024) {
        let header = headers.checked_add(index.checked_mul(stride)?)?;
        let name = read_pointer(tid, header, width)?;
        let length = read_pointer(tid, header.checked_add(width.bytes() as u64)?, Width::W32)?;
        if name != 0 && length != 0 {
            targets.push(read_sockaddr(tid, name, length)?);
        }
    }
    Some(targets)
}

/// The canonical path of a socket the caller names, resolved through its cwd and root
/// (symlinks included); `None` when nothing exists there (the connect can only fail).
pub fn resolve_socket(tid: i32, path: &[u8]) -> Option<PathBuf> {
    std::fs::canonicalize(exec_target(tid, path, None, false)).ok()
}

/// Whether `socket` (canonical) lies beneath one of the room's writable places (canonical).
pub fn inside_room(socket: &Path, writable: &[PathBuf]) -> bool {
    writable.iter().any(|place| socket.starts_with(place))
}

/// The room's writable places, canonicalized once at registration (missing ones dropped).
pub fn canonical_places(places: &[PathBuf]) -> Vec<PathBuf> {
    places
        .iter()
        .filter_map(|place| std::fs::canonicalize(place).ok())
        .collect()
}

// ------------------------------------------------------------------ the book

/// How a wait status reads.
pub fn exit_of_status(status: i32) -> LedgerExit {
    if libc::WIFSIGNALED(status) {
        LedgerExit::Signal(libc::WTERMSIG(status))
    } else {
        LedgerExit::Code(libc::WEXITSTATUS(status))
    }
}

/// Field 52 of `/proc/<pid>/stat` (the wait status), for a zombie (`Z`) only.
fn zombie_status(pid: i32) -> Option<i32> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = text.get(text.rfind(')')? + 1..)?;
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    // `rest` starts at field 3 (state).
    if fields.first() != Some(&"Z") {
        return None;
    }
    fields.get(52 - 3)?.parse().ok()
}

/// The exit of the process behind a readable pidfd, if the kernel can tell yet.
pub fn read_exit(pidfd: &OwnedFd, pid: i32) -> Option<LedgerExit> {
    if let Some(status) = sys::pidfd_exit_status(pidfd.as_fd()) {
        return Some(exit_of_status(status));
    }
    // Not reaped yet: the zombie still holds its pid, so /proc/<pid> is this process as long
    // as the pidfd still reports no exit after the read.
    let status = zombie_status(pid)?;
    match sys::pidfd_exit_status(pidfd.as_fd()) {
        Some(status) => Some(exit_of_status(status)),
        None => Some(exit_of_status(status)),
    }
}

/// One live process with ledger entries, followed by its pidfd.
struct Open {
    pidfd: OwnedFd,
    seqs: Vec<u64>,
    /// Readable but its end not yet known (a pid outside our view): no longer polled (it
    /// would spin the loop), retried by [`Book::settle_all`].
    quiet: bool,
}

/// The entries of one launch, their open pidfds, and (for the party servicing the listener)
/// the ledger file.
pub struct Book {
    /// Sorted by `seq` (entries are recorded in order; adopted and recovered ones are put in
    /// place), so every lookup is a binary search: a long stage's ledger costs O(log n) per
    /// exec and per exit, never a scan.
    entries: Vec<LedgerEntry>,
    open: BTreeMap<i32, Open>,
    /// The newest exec of each process still waiting for its attestation, with what the
    /// keeper saw before letting it through.
    waiting: BTreeMap<i32, (u64, Snapshot)>,
    /// The newest entry this book recorded for each process.
    last: BTreeMap<i32, u64>,
    file: Option<LedgerWriter>,
    path: Option<PathBuf>,
    origin_unix_ms: u64,
}

pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64)
}

impl Book {
    /// A book for a launch started at `origin_unix_ms`; `path` is the ledger file (appended to
    /// once [`Book::write_to_file`] is on).
    pub fn new(path: Option<PathBuf>, origin_unix_ms: u64) -> Self {
        Self {
            entries: Vec::new(),
            open: BTreeMap::new(),
            waiting: BTreeMap::new(),
            last: BTreeMap::new(),
            file: None,
            path,
            origin_unix_ms,
        }
    }

    /// Makes this party the writer of the ledger file (append mode).
    pub fn write_to_file(&mut self) {
        if self.file.is_some() {
            return;
        }
        if let Some(path) = &self.path {
            self.file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .ok()
                .map(LedgerWriter::new);
        }
    }

    /// Whether this party writes the ledger file (it could be opened).
    pub fn writes_file(&self) -> bool {
        self.file.is_some()
    }

    /// Takes from the ledger file what the other party wrote there but never told us: unknown
    /// entries (without a pidfd) and ends of entries we still hold open. Called before this
    /// party becomes the writer, after the other is gone.
    pub fn recover_from_file(&mut self) {
        let Some(path) = &self.path else {
            return;
        };
        let Ok(written) = crate::supervise::read_ledger(path) else {
            return;
        };
        for entry in written {
            match self.index_of(entry.seq) {
                Ok(index) => {
                    let known = &mut self.entries[index];
                    if known.attestation == Attestation::Unconfirmed
                        && entry.attestation != Attestation::Unconfirmed
                    {
                        known.attestation = entry.attestation;
                        known.exe = entry.exe.clone();
                        self.waiting.remove(&entry.pid);
                    }
                    if self.entries[index].exit.is_none() && entry.exit.is_some() {
                        self.entries[index].exit = entry.exit;
                        let (pid, seq) = (entry.pid, entry.seq);
                        if let Some(open) = self.open.get_mut(&pid) {
                            open.seqs.retain(|&open_seq| open_seq != seq);
                            if open.seqs.is_empty() {
                                self.open.remove(&pid);
                            }
                        }
                    }
                }
                Err(index) => self.entries.insert(index, entry),
            }
        }
    }

    /// Where the entry `seq` is (`Ok`), or where it belongs (`Err`).
    fn index_of(&self, seq: u64) -> Result<usize, usize> {
        self.entries.binary_search_by_key(&seq, |entry| entry.seq)
    }

    /// Writes the first line of a new entry (an earlier entry of the same process with the
    /// same argv and cwd is named instead of repeated).
    fn append(&mut self, entry: &LedgerEntry, absent: bool) {
        let Some(file) = self.file.as_mut() else {
            return;
        };
        let previous = file
            .last_of(entry.pid)
            .and_then(|seq| {
                self.entries
                    .binary_search_by_key(&seq, |entry| entry.seq)
                    .ok()
            })
            .and_then(|index| self.entries.get(index));
        if absent {
            file.absent(entry, previous);
        } else {
            file.entry(entry, previous);
        }
    }

    /// Writes what the file's writer holds back (absent execs), so that a reader of the file
    /// sees every entry this book has.
    pub fn flush_file(&mut self) {
        if let Some(file) = self.file.as_mut() {
            file.flush();
        }
    }

    pub fn next_seq(&self) -> u64 {
        self.entries.last().map_or(0, |entry| entry.seq + 1)
    }

    /// Records an exec by `tgid` (file line first); `pidfd` follows the process to its end.
    /// The entry waits for its attestation ([`Book::confirm`]) unless its argv was unreadable.
    /// An exec answered ENOENT by the keeper ([`ExecCall::absent`]) is settled at once as
    /// `exec_failed`, and its line may wait for the next one written (it never ran).
    pub fn record(&mut self, tgid: i32, call: ExecCall, pidfd: Option<OwnedFd>) -> LedgerEntry {
        self.record_linked(tgid, call, pidfd).0
    }

    /// As [`Book::record`], with the process's previous entry when this one repeats its pid,
    /// argv and cwd (a `PATH` probe of the same `execvp`).
    pub fn record_linked(
        &mut self,
        tgid: i32,
        call: ExecCall,
        pidfd: Option<OwnedFd>,
    ) -> (LedgerEntry, Option<u64>) {
        let unreadable = call.argv.is_empty() && call.filename.is_empty();
        let absent = call.absent && !unreadable;
        let entry = LedgerEntry {
            seq: self.next_seq(),
            pid: tgid,
            filename: call.filename,
            argv: call.argv,
            argv_truncated: call.argv_truncated,
            argv_cut: Vec::new(),
            cwd: call.cwd,
            at_ms: unix_ms().saturating_sub(self.origin_unix_ms),
            exec_plausible: call.plausible,
            exit: None,
            attestation: if unreadable {
                Attestation::Unreadable
            } else if absent {
                Attestation::ExecFailed
            } else {
                Attestation::Unconfirmed
            },
            exe: None,
        };
        self.append(&entry, absent);
        let previous = self.last.insert(tgid, entry.seq).filter(|&seq| {
            self.entry(seq)
                .is_some_and(|earlier| earlier.same_call(&entry))
        });
        self.adopt(entry.clone(), pidfd);
        if absent {
            // The process is unchanged: an exec of it still waiting keeps waiting.
        } else if unreadable {
            self.waiting.remove(&tgid);
        } else {
            self.waiting.insert(tgid, (entry.seq, call.snapshot));
        }
        (entry, previous)
    }

    /// The entry `seq`, if this book has it.
    pub fn entry(&self, seq: u64) -> Option<&LedgerEntry> {
        self.entries.get(self.index_of(seq).ok()?)
    }

    /// Whether the ledger follows a live process whose pid is `tid`: its pidfd reports no end.
    /// Such a pid is a thread-group leader visible in our pid namespace (its pidfd was opened
    /// for it) and not recycled (a pid is not given again while the process it named has not
    /// ended), so a notification from `tid` comes from that leader: what a new `pidfd_open`
    /// would have shown, for one `poll`.
    pub fn follows(&self, tid: i32) -> bool {
        self.still_there(tid)
    }

    /// Whether the process this book follows as `pid` is still the one that made its entries
    /// (its pidfd reports no end). Without a pidfd nothing guards against a recycled pid.
    fn still_there(&self, pid: i32) -> bool {
        self.open.get(&pid).is_some_and(|open| {
            sys::poll_one(open.pidfd.as_fd(), libc::POLLIN, 0)
                .is_ok_and(|revents| revents & libc::POLLIN == 0)
        })
    }

    /// `tgid` made a notified call (it is blocked in it): attests its newest waiting exec from
    /// what its image is now. Returns the entry when its attestation was settled. `followed`:
    /// [`Book::follows`] has just said so for this notification (not asked again).
    pub fn confirm(&mut self, tgid: i32, followed: bool) -> Option<LedgerEntry> {
        let (seq, snapshot) = self.waiting.remove(&tgid)?;
        if !followed && !self.still_there(tgid) {
            return None;
        }
        let index = self.index_of(seq).ok()?;
        let entry = self.entries.get(index)?;
        let (attestation, exe) = attest::judge(
            tgid,
            &snapshot,
            &entry.argv,
            &entry.filename,
            entry.argv_truncated,
        )?;
        // Read while the pid was still this process (a recycled pid would have ended it).
        if !self.still_there(tgid) {
            return None;
        }
        self.attest(seq, attestation, exe)
    }

    /// Sets an entry's attestation (from this party or the other) and writes the line.
    pub fn attest(
        &mut self,
        seq: u64,
        attestation: Attestation,
        exe: Option<String>,
    ) -> Option<LedgerEntry> {
        let index = self.index_of(seq).ok()?;
        let entry = self.entries.get_mut(index)?;
        entry.attestation = attestation;
        entry.exe = exe;
        let entry = entry.clone();
        if self
            .waiting
            .get(&entry.pid)
            .is_some_and(|(waiting, _)| *waiting == seq)
        {
            self.waiting.remove(&entry.pid);
        }
        if let Some(file) = self.file.as_mut() {
            file.attestation(seq, attestation, entry.exe.as_deref());
        }
        Some(entry)
    }

    /// Takes an entry recorded by the other party (with its pidfd, if it came along).
    pub fn adopt(&mut self, entry: LedgerEntry, pidfd: Option<OwnedFd>) {
        let (pid, seq) = (entry.pid, entry.seq);
        match self.index_of(seq) {
            // The same notification answered again after a keeper loss.
            Ok(index) => self.entries[index] = entry,
            Err(index) => self.entries.insert(index, entry),
        }
        // A pidfd already open for this pid that reports an end belongs to an earlier process
        // with a recycled pid: settle it first.
        if let Some(open) = self.open.get(&pid)
            && sys::poll_one(open.pidfd.as_fd(), libc::POLLIN, 0)
                .is_ok_and(|revents| revents & libc::POLLIN != 0)
        {
            self.settle(pid);
        }
        match (self.open.get_mut(&pid), pidfd) {
            (Some(open), _) => open.seqs.push(seq),
            (None, Some(pidfd)) => {
                self.open.insert(
                    pid,
                    Open {
                        pidfd,
                        seqs: vec![seq],
                        quiet: false,
                    },
                );
            }
            (None, None) => {}
        }
    }

    /// The pidfds to poll, with their pids.
    pub fn pollable(&self) -> Vec<(RawFd, i32)> {
        self.open
            .iter()
            .filter(|(_, open)| !open.quiet)
            .map(|(pid, open)| (open.pidfd.as_raw_fd(), *pid))
            .collect()
    }

    /// The pidfd of `pid` is readable: record its exit on every entry of it, if the kernel can
    /// tell yet. Returns the seqs and the exit when settled.
    pub fn settle(&mut self, pid: i32) -> Option<(Vec<u64>, LedgerExit)> {
        let open = self.open.get_mut(&pid)?;
        let Some(exit) = read_exit(&open.pidfd, pid) else {
            open.quiet = true;
            return None;
        };
        let open = self.open.remove(&pid)?;
        // Ended without another notified call: its newest exec stays unconfirmed.
        self.waiting.remove(&pid);
        self.finish(&open.seqs, Some(exit));
        Some((open.seqs, exit))
    }

    /// Applies an exit (from this party or the other) to entries.
    pub fn finish(&mut self, seqs: &[u64], exit: Option<LedgerExit>) {
        let Some(exit) = exit else {
            return;
        };
        let mut finished = Vec::new();
        for &seq in seqs {
            if let Ok(index) = self.index_of(seq)
                && let Some(entry) = self.entries.get_mut(index)
                && entry.exit.is_none()
            {
                entry.exit = Some(exit);
                finished.push(seq);
            }
        }
        if let Some(file) = self.file.as_mut() {
            file.exit(&finished, exit);
        }
    }

    /// The other party settled these entries: drop our pidfd for them.
    pub fn forget(&mut self, pid: i32, seqs: &[u64], exit: Option<LedgerExit>) {
        self.finish(seqs, exit);
        if let Some(open) = self.open.get(&pid)
            && open.seqs.iter().all(|seq| seqs.contains(seq))
        {
            self.open.remove(&pid);
        }
    }

    /// After the family is gone: every pidfd still open is settled if the kernel can tell
    /// (killed ones report their signal), else its entries keep `exit: None`.
    pub fn settle_all(&mut self) -> Vec<(i32, Vec<u64>, LedgerExit)> {
        let pids: Vec<i32> = self.open.keys().copied().collect();
        pids.into_iter()
            .filter_map(|pid| self.settle(pid).map(|(seqs, exit)| (pid, seqs, exit)))
            .collect()
    }

    pub fn entries(&self) -> Vec<LedgerEntry> {
        self.entries.clone()
    }
}

#[cfg(test)]
mod tests;
