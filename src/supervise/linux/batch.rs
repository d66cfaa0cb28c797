//! The keeper's coalesced ledger messages: what an exec-ledger batch holds, when it must go,
//! and how many items it holds (its pidfds travel with `sys::send_with_fds`).
//!
//! Invariants: a batch is sent only for a launch whose ledger file the keeper writes (each
//! entry is in the file, one `write(2)`, before its exec is continued); items keep their order
//! (an exec before its exit); a batch is sent before any session/group/denied journal entry of
//! its launch and before `Flushed`, so strict ordering holds for everything cleanup depends on.

use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::supervise::{LedgerEntry, LedgerExit};

/// One ledger message inside a batch.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Batched {
    /// A ledger entry already in the file and continued; `pidfd` indexes the message's
    /// descriptors. With `same_as`, the entry's pid, argv and cwd are those of that earlier
    /// entry (sent before it), and its own argv and cwd are left empty: a process's failed
    /// `PATH` probes do not each carry a shell payload of tens of kilobytes.
    Exec {
        entry: LedgerEntry,
        pidfd: Option<usize>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        same_as: Option<u64>,
    },
    /// The attestation of an entry, settled at its process's next notified call.
    Attested {
        seq: u64,
        attestation: crate::supervise::Attestation,
        exe: Option<String>,
    },
    /// The process behind these entries ended.
    Exited {
        pid: i32,
        seqs: Vec<u64>,
        exit: Option<LedgerExit>,
    },
}

/// How long the first item of a batch may wait.
pub const BATCH_DELAY: Duration = Duration::from_millis(20);
/// Items (and descriptors) per message.
pub const BATCH_ITEMS: usize = super::sys::FDS_PER_MESSAGE;
/// Estimated serialized bytes per message before it is sent early (the lifeline's receive
/// buffer is `MESSAGE_LIMIT`).
pub const BATCH_BYTES: usize = 24 * 1024;

/// What one launch has not yet told autocode.
#[derive(Debug, Default)]
pub struct Pending {
    pub items: Vec<Batched>,
    pub fds: Vec<OwnedFd>,
    bytes: usize,
    /// When the first item arrived plus [`BATCH_DELAY`].
    pub due: Option<Instant>,
}

impl Pending {
    /// Whether `item` would take a non-empty batch past [`BATCH_BYTES`] (send first, so one
    /// large entry never drags the others past the lifeline's message limit).
    pub fn overflows_with(&self, item: &Batched) -> bool {
        !self.is_empty() && self.bytes + estimate(item) > BATCH_BYTES
    }

    pub fn push(&mut self, item: Batched, fd: Option<OwnedFd>) {
        self.bytes += estimate(&item);
        let item = match (item, fd) {
            (Batched::Exec { entry, same_as, .. }, Some(fd)) => {
                self.fds.push(fd);
                Batched::Exec {
                    entry,
                    pidfd: Some(self.fds.len() - 1),
                    same_as,
                }
            }
            (item, _) => item,
        };
        self.items.push(item);
        self.due.get_or_insert_with(|| Instant::now() + BATCH_DELAY);
    }

    /// Whether it must go now regardless of the delay.
    pub fn full(&self) -> bool {
        self.items.len() >= BATCH_ITEMS
            || self.fds.len() >= BATCH_ITEMS
            || self.bytes >= BATCH_BYTES
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Empties the batch, returning its items and descriptors.
    pub fn take(&mut self) -> (Vec<Batched>, Vec<OwnedFd>) {
        self.bytes = 0;
        self.due = None;
        (
            std::mem::take(&mut self.items),
            std::mem::take(&mut self.fds),
        )
    }
}

/// A generous estimate of an item's serialized size.
fn estimate(item: &Batched) -> usize {
    match item {
        Batched::Exec { entry, .. } => {
            256 + entry.filename.len()
                + entry.cwd.len()
                + entry
                    .argv
                    .iter()
                    .map(|arg| 2 * arg.len() + 8)
                    .sum::<usize>()
        }
        Batched::Attested { exe, .. } => 128 + exe.as_ref().map_or(0, |exe| 2 * exe.len()),
        Batched::Exited { seqs, .. } => 64 + 24 * seqs.len(),
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;

    use super::super::sys::{recv_with_fds, send_with_fds};
    use super::*;

    #[test]
    fn many_descriptors_travel_in_order_with_one_message() {
        let (a, b) = super::super::sys::seqpacket_pair().unwrap();
        let files: Vec<OwnedFd> = (0..5)
            .map(|index| {
                let file = tempfile::tempfile().unwrap();
                std::io::Write::write_all(&mut &file, &[index as u8]).unwrap();
                OwnedFd::from(file)
            })
            .collect();
        send_with_fds(
            a.as_raw_fd(),
            b"batch",
            &files.iter().map(AsRawFd::as_raw_fd).collect::<Vec<_>>(),
        )
        .unwrap();
        let mut buf = [0u8; 64];
        let (len, got) = recv_with_fds(b.as_raw_fd(), &mut buf).unwrap();
        assert_eq!(&buf[..len], b"batch");
        assert_eq!(got.len(), 5);
        for (index, fd) in got.into_iter().enumerate() {
            let mut byte = [0u8; 1];
            let file = std::fs::File::from(fd);
            std::os::unix::fs::FileExt::read_at(&file, &mut byte, 0).unwrap();
            assert_eq!(byte[0], index as u8);
        }
        send_with_fds(a.as_raw_fd(), b"none", &[]).unwrap();
        let (len, got) = recv_with_fds(b.as_raw_fd(), &mut buf).unwrap();
        assert_eq!((&buf[..len], got.len()), (&b"none"[..], 0));
    }

    #[test]
    fn a_batch_goes_early_when_full_and_keeps_descriptor_indices() {
        let mut pending = Pending::default();
        assert!(pending.is_empty() && pending.due.is_none());
        for seq in 0..BATCH_ITEMS as u64 {
            pending.push(
                Batched::Exited {
                    pid: seq as i32,
                    seqs: vec![seq],
                    exit: None,
                },
                None,
            );
        }
        assert!(pending.full());
        assert!(pending.due.is_some());
        let (items, fds) = pending.take();
        assert_eq!((items.len(), fds.len()), (BATCH_ITEMS, 0));
        assert!(pending.is_empty() && pending.due.is_none() && !pending.full());
        let fd = OwnedFd::from(tempfile::tempfile().unwrap());
        let entry: LedgerEntry = serde_json::from_value(serde_json::json!({
            "seq": 3, "pid": 9, "filename": "/bin/true", "argv": ["true"],
            "argv_truncated": false, "cwd": "/", "at_ms": 1, "exec_plausible": true, "exit": null
        }))
        .unwrap();
        pending.push(
            Batched::Exec {
                entry,
                pidfd: None,
                same_as: None,
            },
            Some(fd),
        );
        assert!(matches!(
            pending.items[0],
            Batched::Exec { pidfd: Some(0), .. }
        ));
        let big = |count: usize| Batched::Exited {
            pid: 1,
            seqs: vec![0; count],
            exit: None,
        };
        assert!(!pending.overflows_with(&big(10)));
        assert!(pending.overflows_with(&big(BATCH_BYTES / 24)));
        assert!(
            !Pending::default().overflows_with(&big(BATCH_BYTES / 24)),
            "a large item alone is never held back"
        );
        assert_eq!(pending.fds.len(), 1);
    }
}
