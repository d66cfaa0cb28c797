//! Reading an exec's arguments out of the caller's memory (`process_vm_readv`): strings,
//! pointer arrays, argv and one environment variable, each within the ledger's bounds.
//!
//! Invariants: every read is bounded ([`ARG_LIMIT`] strings, [`BYTE_LIMIT`] bytes, marked when
//! cut); a read never crosses into a page it was not asked for (a string ending just before an
//! unmapped page reads whole), so the strings' first bytes can be read all at once.

use super::super::sys::{self, Width};
use super::{ARG_LIMIT, BYTE_LIMIT, PATH_LIMIT};

/// Reads a NUL-terminated string of at most `limit` bytes at `address`, page by page (a string
/// ending just before an unmapped page must not fail). `None`: unreadable; the flag says the
/// string was cut at `limit`.
pub(super) fn read_cstring(pid: i32, address: u64, limit: usize) -> Option<(Vec<u8>, bool)> {
    const PAGE: u64 = 4096;
    let mut out = Vec::new();
    let mut at = address;
    while out.len() < limit {
        let in_page = (PAGE - at % PAGE) as usize;
        let want = in_page.min(limit - out.len());
        let mut buf = vec![0u8; want];
        let got = sys::read_memory(pid, at, &mut buf).ok()?;
        if got == 0 {
            return None;
        }
        let chunk = buf.get(..got)?;
        if let Some(end) = chunk.iter().position(|&byte| byte == 0) {
            out.extend_from_slice(chunk.get(..end)?);
            return Some((out, false));
        }
        out.extend_from_slice(chunk);
        at = at.checked_add(got as u64)?;
    }
    Some((out, true))
}

pub(super) fn read_pointer(pid: i32, address: u64, width: Width) -> Option<u64> {
    let mut buf = [0u8; 8];
    let bytes = buf.get_mut(..width.bytes())?;
    if sys::read_memory(pid, address, bytes).ok()? != width.bytes() {
        return None;
    }
    Some(match width {
        Width::W64 => u64::from_le_bytes(buf),
        Width::W32 => u64::from(u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]])),
    })
}

/// Reads up to `max` pointers at `address` with one read, as far as the page goes (at least
/// one: a pointer straddling a page boundary is read on its own).
fn read_pointers(pid: i32, address: u64, width: Width, max: usize) -> Option<Vec<u64>> {
    const PAGE: u64 = 4096;
    let step = width.bytes();
    let in_page = (PAGE - address % PAGE) as usize / step;
    if in_page == 0 {
        return read_pointer(pid, address, width).map(|pointer| vec![pointer]);
    }
    let mut buf = vec![0u8; in_page.min(max).max(1) * step];
    let got = sys::read_memory(pid, address, &mut buf).ok()? / step;
    if got == 0 {
        return None;
    }
    Some(
        buf.chunks_exact(step)
            .take(got)
            .map(|bytes| match width {
                Width::W64 => u64::from_le_bytes(bytes.try_into().unwrap_or([0; 8])),
                Width::W32 => u64::from(u32::from_le_bytes(bytes.try_into().unwrap_or([0; 4]))),
            })
            .collect(),
    )
}

/// The pointers of a NULL-terminated array, read a page at a time: at most `max` of them, and
/// whether the array goes on past them.
fn read_pointer_array(pid: i32, array: u64, width: Width, max: usize) -> Option<(Vec<u64>, bool)> {
    let mut pointers = Vec::new();
    if array == 0 {
        return Some((pointers, false));
    }
    loop {
        let slot = array.checked_add((pointers.len() * width.bytes()) as u64)?;
        for pointer in read_pointers(pid, slot, width, max + 1 - pointers.len())? {
            if pointer == 0 {
                return Some((pointers, false));
            }
            if pointers.len() == max {
                return Some((pointers, true));
            }
            pointers.push(pointer);
        }
    }
}

/// How much of each string [`read_heads`] reads at first.
const HEAD: u64 = 256;

/// The first bytes of each string at `pointers` (up to [`HEAD`], never past its page), read
/// with one system call per 1,024 strings; `None` for one that could not be read that way.
fn read_heads(pid: i32, pointers: &[u64], head: u64) -> Vec<Option<Vec<u8>>> {
    const PAGE: u64 = 4096;
    let mut heads = Vec::with_capacity(pointers.len());
    for group in pointers.chunks(1024) {
        let ranges: Vec<(u64, usize)> = group
            .iter()
            .map(|&address| (address, (PAGE - address % PAGE).min(head) as usize))
            .collect();
        let mut buf = vec![0u8; ranges.iter().map(|(_, length)| length).sum()];
        let mut got = sys::read_memory_many(pid, &ranges, &mut buf).unwrap_or(0);
        let mut at = 0;
        for (_, length) in ranges {
            let whole = got >= length;
            heads.push(whole.then(|| buf.get(at..at + length).unwrap_or_default().to_vec()));
            got = got.saturating_sub(length);
            at += length;
        }
    }
    heads
}

/// The string at `address` whose first bytes are `head` (from [`read_heads`]), within
/// `limit` bytes; the flag says it was cut. `None`: unreadable.
fn complete_cstring(
    pid: i32,
    address: u64,
    head: Option<Vec<u8>>,
    limit: usize,
) -> Option<(Vec<u8>, bool)> {
    let Some(mut head) = head else {
        return read_cstring(pid, address, limit);
    };
    if let Some(end) = head.iter().position(|&byte| byte == 0)
        && end < limit
    {
        head.truncate(end);
        return Some((head, false));
    }
    if head.len() >= limit {
        head.truncate(limit);
        return Some((head, true));
    }
    let (rest, cut) = read_cstring(
        pid,
        address.checked_add(head.len() as u64)?,
        limit - head.len(),
    )?;
    head.extend_from_slice(&rest);
    Some((head, cut))
}

/// Reads argv (a NULL-terminated pointer array) within the bounds; the flag says it was cut.
/// The pointer array is read a page at a time, the strings' first bytes all at once, the rest
/// of a long string page by page.
pub fn read_argv(pid: i32, array: u64, width: Width) -> Option<(Vec<String>, bool)> {
    let (pointers, more) = read_pointer_array(pid, array, width, ARG_LIMIT)?;
    let heads = read_heads(pid, &pointers, HEAD);
    let mut argv = Vec::with_capacity(pointers.len());
    let mut bytes = 0usize;
    for (pointer, head) in pointers.into_iter().zip(heads) {
        if bytes >= BYTE_LIMIT {
            return Some((argv, true));
        }
        let (text, cut) = complete_cstring(pid, pointer, head, BYTE_LIMIT - bytes)?;
        bytes += text.len() + 1;
        argv.push(String::from_utf8_lossy(&text).into_owned());
        if cut {
            return Some((argv, true));
        }
    }
    Some((argv, more))
}

/// The value of `name` (e.g. `PATH`) in the environment array at `array` (at most
/// [`ARG_LIMIT`] variables looked at); `None` when absent or unreadable.
pub fn read_env_var(pid: i32, array: u64, width: Width, name: &str) -> Option<String> {
    let prefix = format!("{name}=");
    let (pointers, _) = read_pointer_array(pid, array, width, ARG_LIMIT)?;
    let heads = read_heads(pid, &pointers, prefix.len() as u64);
    for (pointer, head) in pointers.into_iter().zip(heads) {
        let starts = match &head {
            // A head cut short by its page is read whole below.
            Some(head) if head.len() == prefix.len() => head == prefix.as_bytes(),
            _ => true,
        };
        if !starts {
            continue;
        }
        let (text, _) = complete_cstring(pid, pointer, head, PATH_LIMIT * 8)?;
        if let Some(value) = text.strip_prefix(prefix.as_bytes()) {
            return Some(String::from_utf8_lossy(value).into_owned());
        }
    }
    None
}
