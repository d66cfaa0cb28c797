//! Durable files: atomic JSON checkpoints, append-only logs and the exclusive run lock (and
//! [`remove_tree`], the removal of a tree whatever its directories' modes).
//!
//! Every checkpoint write is temp file → fsync → rename → fsync of the directory, so a crash (or
//! `kill -9`) leaves either the old file or the new one, never a torn one. A *deferred* write
//! ([`Durability::Deferred`]) is the same temp file → rename (just as atomic for any reader and
//! for `kill -9`) without the fsyncs: its path is remembered and [`sync_deferred`] makes every
//! such file below a directory durable at once (one fsync per file, one per directory), which
//! the run's checkpoint does before it commits the state that refers to them. Versioned documents
//! carry `format_version`, checked on read. A run is held by an exclusive `flock` on its
//! `lock` file for as long as one autocode process works on it; a second one is refused.
//!
//! Below a workspace's `.autocode/` (which a cloned repository may ship), nothing is followed:
//! every directory from `.autocode` down is created or checked without following a symbolic
//! link, every file is opened `O_NOFOLLOW`, and a planted link is refused with its path
//! ([`StoreError::Link`], [`open_owned`], [`create_owned_dir`]). The part of a path above
//! `.autocode` is the user's (the workspace they named) and is followed as given.
//!
//! Tagged documents ([`write_tagged_json`], [`read_tagged_json`]) carry an HMAC-SHA256 over
//! their exact bytes inside the same file, so one atomic write carries data and tag together:
//!
//! ```text
//! <the document's (compact) JSON up to, not including, its closing `}` and the blank before it>
//! ,\n  "integrity": "hmac-sha256:<64 hex>"\n}\n
//! ```
//!
//! The MAC covers `autocode-integrity-v1\n<context>\n<body>` where body is the first part
//! above, byte for byte, and context names the file's place (so a tagged file copied to another
//! place does not verify). Reading needs no re-serialization. Keys live elsewhere
//! (`crate::run::integrity`).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use hmac::{Hmac, Mac};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::Sha256;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path} is not valid: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{path} has format version {found}; this autocode reads version {expected}")]
    Version {
        path: PathBuf,
        found: u64,
        expected: u64,
    },
    #[error("{path} is held by another autocode process")]
    Busy { path: PathBuf },
    #[error("{path} carries no integrity tag")]
    Untagged { path: PathBuf },
    #[error(
        "{path} does not match its integrity tag: it was changed by something other than autocode, or made with another key"
    )]
    TagMismatch { path: PathBuf },
    #[error("cannot tag {path}: the run-state key is unavailable: {reason}")]
    NoKey { path: PathBuf, reason: String },
    #[error(
        "{path} is a symbolic link (or not a directory where one belongs); autocode does not follow links under .autocode/, which a cloned repository may have planted: remove it and retry"
    )]
    Link { path: PathBuf },
}

/// Where autocode's own part of `path` starts: the index of its last `.autocode` component
/// (`None`: the path is not below a workspace's `.autocode/`).
fn owned_from(path: &Path) -> Option<usize> {
    path.components()
        .enumerate()
        .filter(|(_, c)| c.as_os_str() == ".autocode")
        .map(|(i, _)| i)
        .last()
}

/// Creates `dir` (and its parents) like `create_dir_all`, except that from `.autocode` down every
/// component must be a real directory: a symbolic link (or a file) there is
/// [`StoreError::Link`] and nothing is created through it.
pub fn create_owned_dir(dir: &Path) -> Result<(), StoreError> {
    let Some(start) = owned_from(dir) else {
        return fs::create_dir_all(dir).map_err(write_err(dir));
    };
    let mut at = PathBuf::new();
    for (i, part) in dir.components().enumerate() {
        at.push(part);
        if i < start {
            continue;
        }
        if i == start
            && let Some(parent) = at.parent()
            && !parent.as_os_str().is_empty()
        {
            fs::create_dir_all(parent).map_err(write_err(parent))?;
        }
        match fs::symlink_metadata(&at) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => return Err(StoreError::Link { path: at }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => match fs::create_dir(&at) {
                Ok(()) => {}
                // Made at the same moment by another process: checked again below.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    if !fs::symlink_metadata(&at).is_ok_and(|m| m.is_dir()) {
                        return Err(StoreError::Link { path: at });
                    }
                }
                Err(e) => return Err(write_err(&at)(e)),
            },
            Err(e) => return Err(write_err(&at)(e)),
        }
    }
    Ok(())
}

/// Checks that no component of `path` from `.autocode` down is a symbolic link (those that
/// exist; the file itself included), without creating anything.
pub fn check_owned_path(path: &Path) -> Result<(), StoreError> {
    let Some(start) = owned_from(path) else {
        return Ok(());
    };
    let mut at = PathBuf::new();
    for (i, part) in path.components().enumerate() {
        at.push(part);
        if i < start {
            continue;
        }
        match fs::symlink_metadata(&at) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(StoreError::Link { path: at });
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    Ok(())
}

/// Opens `path` with `options` without following a symbolic link: its directories are made with
/// [`create_owned_dir`] when `options` creates, checked with [`check_owned_path`] otherwise, and
/// the file itself is opened `O_NOFOLLOW` (a link there is [`StoreError::Link`]). For every file
/// autocode opens below `.autocode/`.
pub fn open_owned(
    path: &Path,
    options: &mut OpenOptions,
    creates: bool,
) -> Result<File, StoreError> {
    use std::os::unix::fs::OpenOptionsExt;
    match path.parent() {
        Some(dir) if creates && !dir.as_os_str().is_empty() => create_owned_dir(dir)?,
        _ => check_owned_path(path)?,
    }
    options
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                StoreError::Link {
                    path: path.to_owned(),
                }
            } else if creates {
                write_err(path)(e)
            } else {
                StoreError::Read {
                    path: path.to_owned(),
                    source: e,
                }
            }
        })
}

/// The scheme named in every tag.
pub const TAG_SCHEME: &str = "hmac-sha256";
const TAG_DOMAIN: &[u8] = b"autocode-integrity-v1\n";
const TAG_OPEN: &[u8] = b",\n  \"integrity\": \"hmac-sha256:";
const TAG_CLOSE: &[u8] = b"\"\n}\n";
const TAG_HEX: usize = 64;

/// A 256-bit key for integrity tags. Its bytes never appear in `Debug` output.
#[derive(Clone, PartialEq, Eq)]
pub struct TagKey([u8; 32]);

impl TagKey {
    pub const LEN: usize = 32;

    pub fn from_bytes(bytes: [u8; 32]) -> TagKey {
        TagKey(bytes)
    }

    fn mac(&self, context: &str, body: &[u8]) -> Hmac<Sha256> {
        let mut mac =
            <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("HMAC takes keys of any length");
        mac.update(TAG_DOMAIN);
        mac.update(context.as_bytes());
        mac.update(b"\n");
        mac.update(body);
        mac
    }
}

impl TagKey {
    /// The keyed digest (HMAC-SHA256, hex) of `body` under `context`: a fingerprint of a
    /// value that must not be guessable from what is written (a credential's), for comparison only.
    pub fn keyed_digest(&self, context: &str, body: &[u8]) -> String {
        self.mac(context, body)
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

impl std::fmt::Debug for TagKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TagKey(..)")
    }
}

/// Why tagged bytes do not open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TagProblem {
    /// No tag at all (a file made before tags existed, or stripped).
    Untagged,
    /// A tag that does not match the bytes under this key and context.
    Mismatch,
}

/// `document` (a JSON object, as serialized) with its tag embedded; see the module comment.
/// `None` when `document` is not a non-empty JSON object's text.
pub fn seal(key: &TagKey, context: &str, document: &[u8]) -> Option<Vec<u8>> {
    let trimmed = document.trim_ascii_end();
    let body = trimmed.strip_suffix(b"}")?.trim_ascii_end();
    if !body.starts_with(b"{") || body == b"{" {
        return None;
    }
    let tag = key.mac(context, body).finalize().into_bytes();
    let mut out = Vec::with_capacity(body.len() + TAG_OPEN.len() + TAG_HEX + TAG_CLOSE.len());
    out.extend_from_slice(body);
    out.extend_from_slice(TAG_OPEN);
    for byte in tag {
        out.extend_from_slice(format!("{byte:02x}").as_bytes());
    }
    out.extend_from_slice(TAG_CLOSE);
    Some(out)
}

/// The document inside `sealed` (as JSON text without the tag) when its tag verifies.
pub fn unseal(key: &TagKey, context: &str, sealed: &[u8]) -> Result<Vec<u8>, TagProblem> {
    let Some((body, hex)) = split_sealed(sealed) else {
        // Not laid out as autocode writes it: a document that still names a tag was changed
        // (rewritten by something else); one without any is untagged.
        let names_a_tag = serde_json::from_slice::<serde_json::Value>(sealed)
            .ok()
            .is_some_and(|v| v.get("integrity").is_some());
        return Err(if names_a_tag {
            TagProblem::Mismatch
        } else {
            TagProblem::Untagged
        });
    };
    let tag = decode_hex(hex).ok_or(TagProblem::Mismatch)?;
    key.mac(context, body)
        .verify_slice(&tag)
        .map_err(|_| TagProblem::Mismatch)?;
    let mut document = body.to_vec();
    document.extend_from_slice(b"\n}");
    Ok(document)
}

/// The body and the hex tag of bytes laid out as [`seal`] writes them.
fn split_sealed(sealed: &[u8]) -> Option<(&[u8], &[u8])> {
    let rest = sealed.strip_suffix(TAG_CLOSE)?;
    let split = rest.len().checked_sub(TAG_HEX)?;
    let (rest, hex) = rest.split_at(split);
    Some((rest.strip_suffix(TAG_OPEN)?, hex))
}

fn decode_hex(hex: &[u8]) -> Option<Vec<u8>> {
    fn nibble(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        }
    }
    hex.chunks_exact(2)
        .map(|pair| Some(nibble(pair[0])? << 4 | nibble(pair[1])?))
        .collect()
}

fn write_err(path: &Path) -> impl FnOnce(io::Error) -> StoreError + '_ {
    move |source| StoreError::Write {
        path: path.to_owned(),
        source,
    }
}

/// When a write becomes durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Before the call returns (file and directory fsynced).
    Now,
    /// At the next [`sync_deferred`] of a directory above it (atomic, not yet durable).
    Deferred,
    /// Never synced (atomic only): a file derived from others and written again, whenever its
    /// content differs, before anything reads it (the private git directory's `alternates`,
    /// `info/exclude`, `info/attributes`). A crash may leave it empty or old, never half-written
    /// in a way that is read.
    Derived,
}

/// Files written [`Durability::Deferred`] and not yet synced. Held while syncing, so a caller
/// of [`sync_deferred`] returns only once everything registered before it is durable.
static DEFERRED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn defer(path: &Path) {
    let mut pending = DEFERRED.lock().unwrap_or_else(|e| e.into_inner());
    if !pending.iter().any(|p| p == path) {
        pending.push(path.to_owned());
    }
}

/// Makes every deferred write below `root` durable: each file fsynced once, then each directory
/// between them and `root` once, `root` itself only when `root_too` (a caller about to replace
/// a file of `root` atomically, whose directory fsync follows, leaves it: that one fsync makes
/// both the entries written before and the new file durable). A file that is gone since
/// (replaced or removed) is skipped: its replacement registered itself.
pub fn sync_deferred(root: &Path, root_too: bool) -> Result<(), StoreError> {
    let mut pending = DEFERRED.lock().unwrap_or_else(|e| e.into_inner());
    let (mine, others): (Vec<PathBuf>, Vec<PathBuf>) =
        pending.drain(..).partition(|p| p.starts_with(root));
    *pending = others;
    let mut dirs: Vec<PathBuf> = Vec::new();
    for path in &mine {
        match File::open(path) {
            Ok(file) => file.sync_data().map_err(write_err(path))?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(write_err(path)(e)),
        }
        let mut dir = path.parent();
        while let Some(d) = dir {
            if !d.starts_with(root) || (!root_too && d == root) {
                break;
            }
            if !dirs.iter().any(|known| known == d) {
                dirs.push(d.to_owned());
            }
            dir = d.parent();
        }
    }
    for dir in &dirs {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(write_err(dir))?;
    }
    Ok(())
}

/// Removes `dir` and everything in it (absent: nothing to remove), making directories that
/// cannot be listed or written accessible first: a tree an agent `chmod`ed, an overlay's work
/// directory (mode 000: an ordinary owner cannot remove it as it is).
pub fn remove_tree(dir: &Path) -> io::Result<()> {
    fn make_accessible(dir: &Path) {
        use std::os::unix::fs::PermissionsExt;
        if !fs::symlink_metadata(dir).is_ok_and(|meta| meta.is_dir()) {
            return;
        }
        let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o700));
        for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
            make_accessible(&entry.path());
        }
    }
    let absent_is_done = |result: io::Result<()>| match result {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    };
    if absent_is_done(fs::remove_dir_all(dir)).is_ok() {
        return Ok(());
    }
    make_accessible(dir);
    absent_is_done(fs::remove_dir_all(dir))
}

/// autocode's per-user state directory: `$XDG_STATE_HOME/autocode` when XDG_STATE_HOME is
/// absolute, else `$HOME/.local/state/autocode`; `None` without an absolute home. It holds the
/// run-state key (`crate::run::integrity`) and caches of per-user answers; every room makes it
/// unreadable.
pub fn user_state_dir_from(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    if let Some(state) = var("XDG_STATE_HOME").map(PathBuf::from)
        && state.is_absolute()
    {
        return Some(state.join("autocode"));
    }
    var("HOME")
        .map(PathBuf::from)
        .filter(|home| home.is_absolute())
        .map(|home| home.join(".local/state/autocode"))
}

/// Writes `bytes` to `path` atomically and durably.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    write_atomic_as(path, bytes, Durability::Now)
}

/// Writes `bytes` to `path` atomically and durably, readable by its owner only (mode 0600 from
/// the temporary file on: the bytes never exist with wider permissions). For secrets and
/// per-user state (direct endpoints' keys, the readiness cache).
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    write_replacing(path, bytes, Durability::Now, Some(0o600))
}

/// Writes `bytes` to `path` atomically, durable now or at the next [`sync_deferred`].
pub fn write_atomic_as(
    path: &Path,
    bytes: &[u8],
    durability: Durability,
) -> Result<(), StoreError> {
    write_replacing(path, bytes, durability, None)
}

/// Temporary files of one process are told apart by this counter (threads may write the same
/// path at once; each rename is whole, the last one wins).
static TEMP_SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn write_replacing(
    path: &Path,
    bytes: &[u8],
    durability: Durability,
    mode: Option<u32>,
) -> Result<(), StoreError> {
    // Below `.autocode/` nothing is followed: a planted link is refused, never written through
    // or replaced.
    check_owned_path(path)?;
    // Something that exists and is not a regular file (`/dev/null`, `/dev/stdout`, a FIFO) is
    // written into, never replaced: a rename would put a regular file in its place, and as
    // root that destroys a device for the whole machine.
    if let Ok(meta) = fs::metadata(path)
        && !meta.is_file()
    {
        return fs::OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|mut file| file.write_all(bytes))
            .map_err(write_err(path));
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    create_owned_dir(dir)?;
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    let seq = TEMP_SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let temp = dir.join(format!(".{file_name}.{}.{seq}.partial", std::process::id()));
    let now = durability == Durability::Now;
    // A leftover of a dead process with this pid: `create_new` below must not meet it.
    let _ = fs::remove_file(&temp);
    let result = (|| {
        use std::os::unix::fs::OpenOptionsExt;
        let mut options = OpenOptions::new();
        options
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
        if let Some(mode) = mode {
            options.mode(mode);
        }
        let mut file = options.open(&temp)?;
        file.write_all(bytes)?;
        if now {
            file.sync_all()?;
        }
        drop(file);
        fs::rename(&temp, path)?;
        if now {
            File::open(dir)?.sync_all()?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result.map_err(write_err(path))?;
    if durability == Durability::Deferred {
        defer(path);
    }
    Ok(())
}

/// Serializes `value` as pretty JSON and writes it atomically.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), StoreError> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|e| StoreError::Write {
        path: path.to_owned(),
        source: io::Error::other(e),
    })?;
    bytes.push(b'\n');
    write_atomic(path, &bytes)
}

/// A record's bytes: `run.json`, stage records and other JSON autocode keeps are read as
/// regular files only, without blocking, up to [`RECORD_CAP`](crate::bounded_read::RECORD_CAP).
fn read_record_bytes(path: &Path) -> io::Result<Vec<u8>> {
    if let Err(StoreError::Link { path }) = check_owned_path(path) {
        return Err(io::Error::other(format!(
            "{} is a symbolic link; autocode does not follow links under .autocode/",
            path.display()
        )));
    }
    crate::bounded_read::read(path, crate::bounded_read::RECORD_CAP)
}

/// Reads a JSON document.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T, StoreError> {
    let bytes = read_record_bytes(path).map_err(|source| StoreError::Read {
        path: path.to_owned(),
        source,
    })?;
    serde_json::from_slice(&bytes).map_err(|source| StoreError::Parse {
        path: path.to_owned(),
        source,
    })
}

/// Reads a JSON document whose `format_version` must equal `expected`.
pub fn read_versioned_json<T: DeserializeOwned>(
    path: &Path,
    expected: u64,
) -> Result<T, StoreError> {
    let bytes = read_record_bytes(path).map_err(|source| StoreError::Read {
        path: path.to_owned(),
        source,
    })?;
    check_version_bytes(path, &bytes, expected)?;
    parse(path, &bytes)
}

/// Serializes `value` (a JSON object) as compact JSON and writes it with its tag, in one atomic
/// write, durable now.
pub fn write_tagged_json<T: Serialize>(
    path: &Path,
    value: &T,
    key: &TagKey,
    context: &str,
) -> Result<(), StoreError> {
    write_tagged_json_as(path, value, key, context, Durability::Now)
}

/// [`write_tagged_json`], durable now or at the next [`sync_deferred`].
pub fn write_tagged_json_as<T: Serialize>(
    path: &Path,
    value: &T,
    key: &TagKey,
    context: &str,
    durability: Durability,
) -> Result<(), StoreError> {
    let bytes = serde_json::to_vec(value).map_err(|e| StoreError::Write {
        path: path.to_owned(),
        source: io::Error::other(e),
    })?;
    let sealed = seal(key, context, &bytes).ok_or_else(|| StoreError::Write {
        path: path.to_owned(),
        source: io::Error::other("only a non-empty JSON object can carry a tag"),
    })?;
    write_atomic_as(path, &sealed, durability)
}

/// Reads a tagged JSON document, refusing it unless its tag verifies under `key` and `context`.
/// The tag is checked over the raw bytes, which then deserialize straight into `T` (no
/// intermediate `serde_json::Value`).
pub fn read_tagged_json<T: DeserializeOwned>(
    path: &Path,
    key: &TagKey,
    context: &str,
) -> Result<T, StoreError> {
    let document = read_tagged_bytes(path, key, context)?;
    parse(path, &document)
}

/// [`read_tagged_json`] of a document whose `format_version` must equal `expected` (checked
/// before the document is read as a `T`, so an older format gets [`StoreError::Version`]).
pub fn read_tagged_versioned_json<T: DeserializeOwned>(
    path: &Path,
    expected: u64,
    key: &TagKey,
    context: &str,
) -> Result<T, StoreError> {
    let document = read_tagged_bytes(path, key, context)?;
    check_version_bytes(path, &document, expected)?;
    parse(path, &document)
}

fn parse<T: DeserializeOwned>(path: &Path, bytes: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|source| StoreError::Parse {
        path: path.to_owned(),
        source,
    })
}

/// The document of a tagged file, its tag verified over the bytes as read.
fn read_tagged_bytes(path: &Path, key: &TagKey, context: &str) -> Result<Vec<u8>, StoreError> {
    let bytes = read_record_bytes(path).map_err(|source| StoreError::Read {
        path: path.to_owned(),
        source,
    })?;
    unseal(key, context, &bytes).map_err(|problem| match problem {
        TagProblem::Untagged => StoreError::Untagged {
            path: path.to_owned(),
        },
        TagProblem::Mismatch => StoreError::TagMismatch {
            path: path.to_owned(),
        },
    })
}

/// Checks `format_version` of a JSON object without building it (other members are skipped).
fn check_version_bytes(path: &Path, document: &[u8], expected: u64) -> Result<(), StoreError> {
    #[derive(serde::Deserialize)]
    struct Versioned {
        #[serde(default)]
        format_version: serde_json::Value,
    }
    let found = parse::<Versioned>(path, document)?
        .format_version
        .as_u64()
        .unwrap_or(0);
    if found != expected {
        return Err(StoreError::Version {
            path: path.to_owned(),
            found,
            expected,
        });
    }
    Ok(())
}

/// Appends one JSON line to `path` and syncs it (for append-only activity logs).
pub fn append_json_line<T: Serialize>(path: &Path, value: &T) -> Result<(), StoreError> {
    append_json_line_as(path, value, Durability::Now)
}

/// [`append_json_line`], synced now or at the next [`sync_deferred`].
pub fn append_json_line_as<T: Serialize>(
    path: &Path,
    value: &T,
    durability: Durability,
) -> Result<(), StoreError> {
    let mut line = serde_json::to_vec(value).map_err(|e| StoreError::Write {
        path: path.to_owned(),
        source: io::Error::other(e),
    })?;
    line.push(b'\n');
    let mut file = open_owned(path, OpenOptions::new().create(true).append(true), true)?;
    file.write_all(&line).map_err(write_err(path))?;
    match durability {
        Durability::Now => file.sync_data().map_err(write_err(path)),
        Durability::Deferred => {
            defer(path);
            Ok(())
        }
        Durability::Derived => Ok(()),
    }
}

/// An exclusive lock on a run, released when dropped (or when the process dies).
#[derive(Debug)]
pub struct RunLock {
    _lock: nix::fcntl::Flock<File>,
    path: PathBuf,
}

impl RunLock {
    /// Takes the lock without waiting; `StoreError::Busy` when another process holds it.
    pub fn acquire(path: &Path) -> Result<RunLock, StoreError> {
        let file = open_owned(
            path,
            OpenOptions::new().create(true).truncate(false).write(true),
            true,
        )?;
        match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
            Ok(lock) => Ok(RunLock {
                _lock: lock,
                path: path.to_owned(),
            }),
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => Err(StoreError::Busy {
                path: path.to_owned(),
            }),
            Err((_, errno)) => Err(StoreError::Write {
                path: path.to_owned(),
                source: io::Error::from(errno),
            }),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
