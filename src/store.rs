//! Durable files: atomic JSON checkpoints, append-only logs and the exclusive run lock.
//!
//! Every checkpoint write is temp file → fsync → rename → fsync of the directory, so a crash (or
//! `kill -9`) leaves either the old file or the new one, never a torn one. Versioned documents
//! carry `format_version`, checked on read. A run is held by an exclusive `flock` on its
//! `lock` file for as long as one autocode process works on it; a second one is refused.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

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
}

fn write_err(path: &Path) -> impl FnOnce(io::Error) -> StoreError + '_ {
    move |source| StoreError::Write {
        path: path.to_owned(),
        source,
    }
}

/// Writes `bytes` to `path` atomically and durably.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(write_err(path))?;
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    let temp = dir.join(format!(".{file_name}.{}.partial", std::process::id()));
    let result = (|| {
        let mut file = File::create(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&temp, path)?;
        File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result.map_err(write_err(path))
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

/// Reads a JSON document.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T, StoreError> {
    let bytes = fs::read(path).map_err(|source| StoreError::Read {
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
    let value: serde_json::Value = read_json(path)?;
    let found = value
        .get("format_version")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0);
    if found != expected {
        return Err(StoreError::Version {
            path: path.to_owned(),
            found,
            expected,
        });
    }
    serde_json::from_value(value).map_err(|source| StoreError::Parse {
        path: path.to_owned(),
        source,
    })
}

/// Appends one JSON line to `path` and syncs it (for append-only activity logs).
pub fn append_json_line<T: Serialize>(path: &Path, value: &T) -> Result<(), StoreError> {
    let mut line = serde_json::to_vec(value).map_err(|e| StoreError::Write {
        path: path.to_owned(),
        source: io::Error::other(e),
    })?;
    line.push(b'\n');
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(write_err(path))?;
    }
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(write_err(path))?;
    file.write_all(&line).map_err(write_err(path))?;
    file.sync_data().map_err(write_err(path))
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
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(write_err(path))?;
        }
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(write_err(path))?;
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
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Serialize, Deserialize, PartialEq)]
    struct Doc {
        format_version: u64,
        name: String,
    }

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/run.json");
        write_json(
            &path,
            &Doc {
                format_version: 1,
                name: "a".into(),
            },
        )
        .unwrap();
        write_json(
            &path,
            &Doc {
                format_version: 1,
                name: "b".into(),
            },
        )
        .unwrap();
        let doc: Doc = read_versioned_json(&path, 1).unwrap();
        assert_eq!(doc.name, "b");
        let names: Vec<_> = fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("run.json")]);
    }

    #[test]
    fn version_is_checked_on_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.json");
        write_json(
            &path,
            &Doc {
                format_version: 7,
                name: "x".into(),
            },
        )
        .unwrap();
        let err = read_versioned_json::<Doc>(&path, 1).unwrap_err();
        assert!(matches!(
            err,
            StoreError::Version {
                found: 7,
                expected: 1,
                ..
            }
        ));
        fs::write(&path, b"{ torn").unwrap();
        assert!(matches!(
            read_json::<Doc>(&path),
            Err(StoreError::Parse { .. })
        ));
    }

    #[test]
    fn appends_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("activity.jsonl");
        append_json_line(&path, &serde_json::json!({"n": 1})).unwrap();
        append_json_line(&path, &serde_json::json!({"n": 2})).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "{\"n\":1}\n{\"n\":2}\n");
    }

    #[test]
    fn a_second_lock_is_refused_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let first = RunLock::acquire(&path).unwrap();
        assert!(matches!(
            RunLock::acquire(&path),
            Err(StoreError::Busy { .. })
        ));
        drop(first);
        RunLock::acquire(&path).unwrap();
    }
}
