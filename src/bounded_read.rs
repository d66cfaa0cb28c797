//! Reading files that someone else may have written (provider TOML, config, scripts, run
//! state, stage records, agent-written report files): opened without blocking and without
//! following a FIFO's writer, accepted only when they are regular files, and read up to a cap.
//! A symlink to `/dev/zero`, a FIFO or a 1 GB report then costs an error, not memory or a hang.
//!
//! Each kind of file has its cap (the constants below; `docs/operator.md` lists them). [`read`]
//! and [`read_to_string`] are drop-in replacements for `std::fs::read*` that keep the
//! `io::ErrorKind` (a missing file is still `NotFound`).

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Provider TOML files, `config.toml`, a workspace's CLI settings and `.git` link files.
pub const CONFIG_CAP: u64 = 1 << 20;
/// Scripted-model scripts.
pub const SCRIPT_CAP: u64 = 16 << 20;
/// `run.json` and the stage records autocode writes (tagged JSON, the exec ledger).
pub const RECORD_CAP: u64 = 64 << 20;
/// Files an agent writes for autocode to read: the report file of a report-file tool or of
/// Codex `-o`, and `autocode capture` receipts (the same cap as one stream line).
pub const REPORT_CAP: u64 = 16 << 20;
/// Files the work tree's diff compares (the tree diff reads both versions of a file).
pub const TREE_FILE_CAP: u64 = 64 << 20;

/// Why a bounded read failed.
#[derive(Debug, thiserror::Error)]
pub enum BoundedReadError {
    #[error("cannot open {path}: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path} is not a regular file ({kind}); autocode only reads regular files here")]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("{path} is larger than the {cap}-byte limit for this file")]
    TooLarge { path: PathBuf, cap: u64 },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl BoundedReadError {
    /// The file did not exist (callers often treat that as "absent", not as an error).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::Open { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

fn kind_of(file_type: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_dir() {
        "a directory"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    }
}

/// Reads all of `path` if it is a regular file of at most `cap` bytes. Symlinks are followed
/// (a provider TOML may be a link into a dotfiles repository) but what they reach must be a
/// regular file. The open never blocks: `O_NONBLOCK` keeps a FIFO from waiting for a writer.
pub fn read_capped(path: &Path, cap: u64) -> Result<Vec<u8>, BoundedReadError> {
    let file = open_nonblocking(path).map_err(|source| BoundedReadError::Open {
        path: path.to_owned(),
        source,
    })?;
    read_open_file(file, path, cap)
}

impl From<BoundedReadError> for io::Error {
    fn from(error: BoundedReadError) -> Self {
        match error {
            BoundedReadError::Open { source, .. } | BoundedReadError::Read { source, .. } => source,
            e @ BoundedReadError::NotRegular { .. } => {
                io::Error::new(io::ErrorKind::InvalidInput, e.to_string())
            }
            e @ BoundedReadError::TooLarge { .. } => {
                io::Error::new(io::ErrorKind::FileTooLarge, e.to_string())
            }
        }
    }
}

/// `std::fs::read` for a file others can write: regular files only, never blocking, at most
/// `cap` bytes (an error past it).
pub fn read(path: &Path, cap: u64) -> io::Result<Vec<u8>> {
    Ok(read_capped(path, cap)?)
}

/// `std::fs::read_to_string` with the checks of [`read`].
pub fn read_to_string(path: &Path, cap: u64) -> io::Result<String> {
    Ok(read_capped_to_string(path, cap)?)
}

/// The last `max` bytes of a regular file (a log's tail), opened like [`read`].
pub fn read_tail(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    use std::io::{Seek, SeekFrom};
    let mut file = open_nonblocking(path).map_err(|source| BoundedReadError::Open {
        path: path.to_owned(),
        source,
    })?;
    let metadata = file.metadata()?;
    if !metadata.file_type().is_file() {
        return Err(BoundedReadError::NotRegular {
            path: path.to_owned(),
            kind: kind_of(metadata.file_type()),
        }
        .into());
    }
    file.seek(SeekFrom::Start(metadata.len().saturating_sub(max)))?;
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Opens `path` for reading without blocking, and only if it is a regular file (checked on
/// the open file), for callers that stream it themselves.
pub fn open_regular(path: &Path) -> io::Result<File> {
    let file = open_nonblocking(path)?;
    let file_type = file.metadata()?.file_type();
    if file_type.is_file() {
        Ok(file)
    } else {
        Err(BoundedReadError::NotRegular {
            path: path.to_owned(),
            kind: kind_of(file_type),
        }
        .into())
    }
}

fn open_nonblocking(path: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
}

/// [`read_capped`] as UTF-8 text.
pub fn read_capped_to_string(path: &Path, cap: u64) -> Result<String, BoundedReadError> {
    let bytes = read_capped(path, cap)?;
    String::from_utf8(bytes).map_err(|_| BoundedReadError::Read {
        path: path.to_owned(),
        source: io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text"),
    })
}

fn read_open_file(file: File, path: &Path, cap: u64) -> Result<Vec<u8>, BoundedReadError> {
    let metadata = file.metadata().map_err(|source| BoundedReadError::Read {
        path: path.to_owned(),
        source,
    })?;
    if !metadata.file_type().is_file() {
        return Err(BoundedReadError::NotRegular {
            path: path.to_owned(),
            kind: kind_of(metadata.file_type()),
        });
    }
    if metadata.len() > cap {
        return Err(BoundedReadError::TooLarge {
            path: path.to_owned(),
            cap,
        });
    }
    let mut bytes = Vec::with_capacity(metadata.len() as usize);
    // The file may grow after the stat: the cap holds whatever its size now.
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| BoundedReadError::Read {
            path: path.to_owned(),
            source,
        })?;
    if bytes.len() as u64 > cap {
        return Err(BoundedReadError::TooLarge {
            path: path.to_owned(),
            cap,
        });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_files_within_the_cap_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.toml");
        std::fs::write(&path, b"key = 1\n").unwrap();
        assert_eq!(read_capped(&path, 64).unwrap(), b"key = 1\n");
        let link = dir.path().join("link.toml");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert_eq!(read_capped_to_string(&link, 64).unwrap(), "key = 1\n");
    }

    #[test]
    fn a_file_past_the_cap_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        std::fs::write(&path, vec![b'x'; 100]).unwrap();
        let error = read_capped(&path, 99).unwrap_err();
        assert!(
            matches!(error, BoundedReadError::TooLarge { cap: 99, .. }),
            "{error}"
        );
    }

    #[test]
    fn devices_fifos_and_directories_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let zero = dir.path().join("zero.toml");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let error = read_capped(&zero, 1 << 20).unwrap_err();
        assert!(
            matches!(
                error,
                BoundedReadError::NotRegular {
                    kind: "a character device",
                    ..
                }
            ),
            "{error}"
        );
        let fifo = dir.path().join("fifo.toml");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        // No writer exists: a blocking open would hang here forever.
        let error = read_capped(&fifo, 1 << 20).unwrap_err();
        assert!(
            matches!(error, BoundedReadError::NotRegular { kind: "a FIFO", .. }),
            "{error}"
        );
        let error = read_capped(dir.path(), 1 << 20).unwrap_err();
        assert!(
            matches!(
                error,
                BoundedReadError::NotRegular {
                    kind: "a directory",
                    ..
                }
            ),
            "{error}"
        );
        let missing = read_capped(&dir.path().join("nope"), 1).unwrap_err();
        assert!(missing.is_not_found());
        let missing = read(&dir.path().join("nope"), 1).unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
        assert!(read_tail(&fifo, 10).is_err());
        assert!(read_tail(&zero, 10).is_err());
    }

    #[test]
    fn a_tail_is_the_last_bytes_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stderr.log");
        std::fs::write(&path, b"0123456789").unwrap();
        assert_eq!(read_tail(&path, 4).unwrap(), b"6789");
        assert_eq!(read_tail(&path, 40).unwrap(), b"0123456789");
        let error = read(&path, 4).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::FileTooLarge);
        assert!(error.to_string().contains("4-byte limit"), "{error}");
    }
}
