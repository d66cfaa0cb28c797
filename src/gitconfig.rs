//! Git's configuration read in place instead of by starting `git config` (issue 29: a git
//! process per question was most of the orchestrator's processes): which files a git command
//! reads ([`files`]: system, XDG, global, the repository's, in git's order) and their entries
//! ([`read`]), so the last value of a key is the one git would use.
//!
//! Only the plain case is read, as [`crate::gitindex`] and [`crate::gitrefs`] read theirs:
//! - the `git` on `PATH` is `<prefix>/bin/git` and its system file is where git's build puts it
//!   by default (`/etc/gitconfig` for the `/usr` prefix, else `<prefix>/etc/gitconfig`), which
//!   is checked against the path compiled into the binary (absolute, or `etc/gitconfig` for a
//!   build that finds its prefix from where it runs);
//! - no variable in the environment that adds or moves config (`GIT_CONFIG*`, `GIT_DIR`, …);
//! - no `include` or `includeIf` section, no old-style `[section.sub]` header, no key on a
//!   header's line, no quote or backslash in a value (git's escapes and continuation lines),
//!   no whitespace but spaces inside a value; every file UTF-8 and at most
//!   [`crate::bounded_read::CONFIG_CAP`] bytes.
//!
//! Anything else, or a line that does not parse exactly, answers `None` and the caller asks
//! git. The syntax: git's `Documentation/config.txt`, "Syntax".

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// One `key = value` line: the key as git names it (`section.name` or
/// `section.subsection.name`, section and name lowercased), its value (`None`: a bare key,
/// which git reads as boolean true) and the index in the list of files read of the file it
/// came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub file: usize,
    pub key: String,
    pub value: Option<String>,
}

/// The last entry of `key` (canonical: lowercased section and name), the one git uses.
pub fn last<'a>(entries: &'a [Entry], key: &str) -> Option<&'a Entry> {
    entries.iter().rev().find(|entry| entry.key == key)
}

/// The files a `git` started with `env` reads, in git's order (each later one wins): the
/// system file, the XDG file, `~/.gitconfig`, then `repository` (the git directory's
/// `config`) when there is one. Files that do not exist are listed too (git skips them).
/// `None`: not the plain case.
pub fn files(env: &BTreeMap<String, String>, repository: Option<&Path>) -> Option<Vec<PathBuf>> {
    if !env_is_plain(env) {
        return None;
    }
    let path_var = env.get("PATH").map(String::as_str).unwrap_or_default();
    let mut files = vec![system_file(OsStr::new(path_var))?];
    files.extend(user_files(env));
    files.extend(repository.map(Path::to_owned));
    Some(files)
}

/// The user's own files in git's order: `$XDG_CONFIG_HOME/git/config` (else
/// `~/.config/git/config`), then `~/.gitconfig`. Without `HOME`, only the first when
/// `XDG_CONFIG_HOME` names it (as git).
pub fn user_files(env: &BTreeMap<String, String>) -> Vec<PathBuf> {
    let home = env.get("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
    let xdg = env
        .get("XDG_CONFIG_HOME")
        .filter(|x| !x.is_empty())
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".config")));
    let mut files = Vec::new();
    files.extend(xdg.map(|xdg| xdg.join("git/config")));
    files.extend(home.map(|home| home.join(".gitconfig")));
    files
}

/// Whether git started with `env` reads exactly the files [`files`] lists: no variable that
/// adds config (`GIT_CONFIG_PARAMETERS`, `GIT_CONFIG_COUNT`, …), replaces a file
/// (`GIT_CONFIG_GLOBAL`, `GIT_CONFIG_SYSTEM`, `GIT_CONFIG_NOSYSTEM`) or moves the repository.
fn env_is_plain(env: &BTreeMap<String, String>) -> bool {
    !env.keys().any(|key| {
        key.starts_with("GIT_CONFIG")
            || matches!(
                key.as_str(),
                "GIT_DIR" | "GIT_COMMON_DIR" | "GIT_WORK_TREE" | "GIT_NAMESPACE"
            )
            || key.starts_with("GIT_TEST_")
    })
}

/// The system file of the `git` that `path_var` finds: `/etc/gitconfig` for `/usr/bin/git`,
/// `<prefix>/etc/gitconfig` for `<prefix>/bin/git`, when the binary holds that path (or, built
/// to find its prefix from where it runs, `etc/gitconfig`) as a string of its own: its build
/// did not move the file. `None`: ask git.
pub fn system_file(path_var: &OsStr) -> Option<PathBuf> {
    let git = std::fs::canonicalize(crate::provider::resolve_on_path("git", path_var)?).ok()?;
    let meta = std::fs::metadata(&git).ok()?;
    let stamp = (
        git.clone(),
        meta.dev(),
        meta.ino(),
        meta.size(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec(),
    );
    static KNOWN: OnceLock<Mutex<HashMap<Stamp, Option<PathBuf>>>> = OnceLock::new();
    let known = KNOWN.get_or_init(Mutex::default);
    if let Some(answer) = known.lock().ok()?.get(&stamp) {
        return answer.clone();
    }
    let answer = system_file_of(&git, meta.size());
    known.lock().ok()?.insert(stamp, answer.clone());
    answer
}

type Stamp = (PathBuf, u64, u64, u64, i64, i64, i64, i64);

/// Binaries larger than this are not read for their system file (git's is a few MB).
const BINARY_CAP: u64 = 64 << 20;

fn system_file_of(git: &Path, size: u64) -> Option<PathBuf> {
    if git.file_name()? != "git" || size > BINARY_CAP {
        return None;
    }
    let bin = git.parent()?;
    if bin.file_name()? != "bin" {
        return None;
    }
    let prefix = bin.parent()?;
    let system = if prefix == Path::new("/usr") {
        PathBuf::from("/etc/gitconfig")
    } else {
        prefix.join("etc/gitconfig")
    };
    // A build with its paths fixed holds the absolute path; one that finds them from where the
    // binary is (`RUNTIME_PREFIX`) holds `etc/gitconfig` and puts it under the same prefix.
    let binary = std::fs::read(git).ok()?;
    let holds = |path: &[u8]| {
        let mut needle = path.to_vec();
        needle.push(0);
        memchr::memmem::find_iter(&binary, &needle).any(|at| at == 0 || binary[at - 1] == 0)
    };
    // (Under `/usr` the relative form would name `/usr/etc/gitconfig`: not this case.)
    let relative = prefix != Path::new("/usr") && holds(b"etc/gitconfig");
    (relative || holds(system.as_os_str().as_encoded_bytes())).then_some(system)
}

/// The entries of `files` in order (a file that does not exist has none). `None`: a file
/// that cannot be read, or says something this reader does not take (see the module's
/// comment): ask git.
pub fn read(files: &[PathBuf]) -> Option<Vec<Entry>> {
    let mut entries = Vec::new();
    for (index, file) in files.iter().enumerate() {
        let bytes = match crate::bounded_read::read(file, crate::bounded_read::CONFIG_CAP) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(_) => return None,
        };
        if bytes.len() as u64 >= crate::bounded_read::CONFIG_CAP {
            return None;
        }
        parse(&bytes, index, &mut entries)?;
    }
    Some(entries)
}

/// Parses one file's bytes into `entries`. `None`: not the plain case.
fn parse(bytes: &[u8], file: usize, entries: &mut Vec<Entry>) -> Option<()> {
    let text = std::str::from_utf8(bytes).ok()?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.contains('\0') {
        return None;
    }
    let mut section: Option<String> = None;
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let line = line.trim_start_matches(is_space);
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        if let Some(header) = line.strip_prefix('[') {
            section = Some(parse_header(header)?);
            continue;
        }
        let prefix = section.as_deref()?;
        let name_len = line
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .unwrap_or(line.len());
        let name = &line[..name_len];
        if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
            return None;
        }
        let rest = line[name_len..].trim_start_matches([' ', '\t']);
        let value = if rest.is_empty() {
            None
        } else {
            Some(parse_value(rest.strip_prefix('=')?)?)
        };
        entries.push(Entry {
            file,
            key: format!("{prefix}.{}", name.to_ascii_lowercase()),
            value,
        });
    }
    Some(())
}

/// `section]` or `section "subsection"]` (after the `[`), with nothing but a comment after
/// it: the key prefix (`section` lowercased, the subsection as written).
fn parse_header(header: &str) -> Option<String> {
    let close = header.find(']')?;
    let after = header[close + 1..].trim_start_matches(is_space);
    if !(after.is_empty() || after.starts_with(['#', ';'])) {
        return None;
    }
    let inner = &header[..close];
    let (name, subsection) = match inner.find(is_space) {
        Some(at) => {
            let quoted = inner[at..].trim_start_matches(is_space);
            let sub = quoted.strip_prefix('"')?.strip_suffix('"')?;
            if sub.contains(['"', '\\', '\n']) {
                return None;
            }
            (&inner[..at], Some(sub))
        }
        None => (inner, None),
    };
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return None;
    }
    let name = name.to_ascii_lowercase();
    if name == "include" || name == "includeif" {
        return None;
    }
    Some(match subsection {
        Some(sub) => format!("{name}.{sub}"),
        None => name,
    })
}

/// The text after `=`: up to a comment, without the whitespace around it. `None` for what
/// git reads with its own rules (quotes, escapes, continuation lines, whitespace other than
/// spaces inside the value).
fn parse_value(raw: &str) -> Option<String> {
    if raw.contains(['"', '\\']) {
        return None;
    }
    let value = raw.split(['#', ';']).next().unwrap_or_default();
    let value = value.trim_matches(is_space);
    if value.contains(|c: char| is_space(c) && c != ' ') {
        return None;
    }
    Some(value.to_owned())
}

/// C's `isspace` in the C locale, as git's parser uses it.
fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\u{0b}' | '\u{0c}' | '\r')
}

#[cfg(test)]
mod tests;
