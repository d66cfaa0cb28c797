//! The notification in flight at the keeper, in memory autocode shares with it.
//!
//! The keeper is single-threaded, so at most one notification is between its `NOTIF_RECV` and
//! its answer at any time. Before handling one it writes the notification into this slot, and
//! clears the slot after answering; autocode reads the slot only once the keeper is gone (its
//! lifeline reached EOF), to answer what the keeper received but never answered. A message per
//! notification would do the same, but would wake autocode at every exec of every stage.
//!
//! The slot is an anonymous shared mapping created before the keeper is forked, so both
//! processes see the same page at the same address. Only the keeper writes while it lives; only
//! autocode reads, after it died: there is no concurrent access to order beyond the atomics'
//! own (the keeper's last stores are visible once its exit is observed).
//!
//! A stale slot (the keeper died after answering, before clearing) is harmless: re-handling
//! finds the id no longer valid and drops it.

use std::io;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use super::sys::SeccompNotif;

/// The slot's layout in the shared page (all words atomic; `state` is written last).
#[repr(C)]
struct Slot {
    /// 0 = empty, 1 = a notification of `launch` is being handled.
    state: AtomicU64,
    launch: AtomicU64,
    id: AtomicU64,
    pid: AtomicU64,
    nr: AtomicU64,
    arch: AtomicU64,
    args: [AtomicU64; 6],
}

const FULL: u64 = 1;
const EMPTY: u64 = 0;

/// The mapping, created once by [`create`] before the keeper's fork.
struct Shared(*const Slot);

// SAFETY: the pointer is a MAP_SHARED page that is never unmapped; every access goes through
// atomics, so sharing it between threads is sound.
unsafe impl Send for Shared {}
// SAFETY: as above.
unsafe impl Sync for Shared {}

static SLOT: OnceLock<Shared> = OnceLock::new();

/// Maps the slot (call before forking the keeper; idempotent).
pub fn create() -> io::Result<()> {
    if SLOT.get().is_some() {
        return Ok(());
    }
    let size = std::mem::size_of::<Slot>();
    // SAFETY: an anonymous shared mapping with no address hint; the result is checked before
    // use. Anonymous memory is zero-filled, which is a valid `Slot` (all atomics 0 = EMPTY).
    let address = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if address == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let _ = SLOT.set(Shared(address.cast::<Slot>()));
    Ok(())
}

fn slot() -> Option<&'static Slot> {
    // SAFETY: the page stays mapped for the life of the process (never unmapped) and is
    // correctly aligned (page-aligned mapping); a zeroed or keeper-written `Slot` is valid.
    SLOT.get().map(|shared| unsafe { &*shared.0 })
}

/// The keeper: `notif` of `launch` is about to be handled.
pub fn hold(launch: u64, notif: &SeccompNotif) {
    let Some(slot) = slot() else {
        return;
    };
    slot.state.store(EMPTY, Ordering::Release);
    slot.launch.store(launch, Ordering::Relaxed);
    slot.id.store(notif.id, Ordering::Relaxed);
    slot.pid.store(u64::from(notif.pid), Ordering::Relaxed);
    slot.nr
        .store(notif.data.nr as u32 as u64, Ordering::Relaxed);
    slot.arch
        .store(u64::from(notif.data.arch), Ordering::Relaxed);
    for (word, value) in slot.args.iter().zip(notif.data.args) {
        word.store(value, Ordering::Relaxed);
    }
    slot.state.store(FULL, Ordering::Release);
}

/// The keeper: the held notification was answered (or dropped).
pub fn release() {
    if let Some(slot) = slot() {
        slot.state.store(EMPTY, Ordering::Release);
    }
}

/// autocode, once the keeper is gone: the notification it left unanswered, with its launch.
pub fn take() -> Option<(u64, SeccompNotif)> {
    let slot = slot()?;
    if slot.state.swap(EMPTY, Ordering::Acquire) != FULL {
        return None;
    }
    let mut notif = SeccompNotif {
        id: slot.id.load(Ordering::Relaxed),
        pid: slot.pid.load(Ordering::Relaxed) as u32,
        ..SeccompNotif::default()
    };
    notif.data.nr = slot.nr.load(Ordering::Relaxed) as u32 as i32;
    notif.data.arch = slot.arch.load(Ordering::Relaxed) as u32;
    for (value, word) in notif.data.args.iter_mut().zip(&slot.args) {
        *value = word.load(Ordering::Relaxed);
    }
    Some((slot.launch.load(Ordering::Relaxed), notif))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_notification_is_taken_once_and_a_released_one_never() {
        create().unwrap();
        let mut notif = SeccompNotif {
            id: 77,
            pid: 4242,
            ..SeccompNotif::default()
        };
        notif.data.nr = 59;
        notif.data.arch = 0xC000_003E;
        notif.data.args = [1, 2, 3, 4, 5, u64::MAX];
        hold(9, &notif);
        let (launch, taken) = take().expect("held");
        assert_eq!(launch, 9);
        assert_eq!((taken.id, taken.pid), (77, 4242));
        assert_eq!((taken.data.nr, taken.data.arch), (59, 0xC000_003E));
        assert_eq!(taken.data.args, [1, 2, 3, 4, 5, u64::MAX]);
        assert!(take().is_none(), "taken once");
        hold(9, &notif);
        release();
        assert!(take().is_none(), "released");
    }
}
