//! Reading files that someone else may have written (provider TOML, config, scripts, run
//! state, stage records, agent-written report files): opened without blocking and without
//! following a FIFO's writer, accepted only when they are regular files, and read up to a cap.
//! A symlink to `/dev/zero`, a FIFO or a 1 GB report then costs an error, not memory or a hang.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

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
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .map_err(|source| BoundedReadError::Open {
            path: path.to_owned(),
            source,
        })?;
    read_open_file(file, path, cap)
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
    }
}
