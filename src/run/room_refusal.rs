//! Failures that name the room: a command of a stage that failed on a path the stage's room does
//! not let the family write (or read), found from the command's own output, so the stage's record
//! and what the person reads say which path and how to grant it. Landlock refuses silently
//! (`EACCES`, `EROFS` or `EPERM` to the caller, nothing logged), so the command's words are what
//! there is: a line with a permission error and an absolute path the room refuses.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;

use serde::Serialize;

use super::confine::RoomRecord;
use crate::events::{CommandStatus, NormalizedEvent};

/// What a failed command's output says when the kernel refused it a path.
const REFUSAL_WORDS: [&str; 6] = [
    "permission denied",
    "read-only file system",
    "operation not permitted",
    "eacces",
    "erofs",
    "eperm",
];

/// At most this many refusals are kept for a stage (the first ones).
const KEPT: usize = 8;

/// One path a stage's command was refused, as its output names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RoomRefusal {
    pub command: String,
    pub path: PathBuf,
    /// The output line that names it.
    pub line: String,
}

/// The refusals in `events` that the room in `room` explains: a failed command whose output
/// names, on a line with a permission error, an absolute path the room does not let the family
/// write. Nothing when the stage ran unconfined.
pub fn find(events: &[NormalizedEvent], room: &RoomRecord) -> Vec<RoomRefusal> {
    if !room.confined {
        return Vec::new();
    }
    let mut found: Vec<RoomRefusal> = Vec::new();
    for event in events {
        let NormalizedEvent::CommandFinished {
            command,
            status,
            output_excerpt,
            ..
        } = event
        else {
            continue;
        };
        if *status == CommandStatus::Succeeded {
            continue;
        }
        for line in output_excerpt.lines() {
            let lower = line.to_ascii_lowercase();
            if !REFUSAL_WORDS.iter().any(|word| lower.contains(word)) {
                continue;
            }
            let reporter = reporting_program(line);
            for path in absolute_paths(line) {
                if reporter.as_ref() == Some(&path) {
                    continue;
                }
                if refused_by(room, &path) && !found.iter().any(|f| f.path == path) {
                    found.push(RoomRefusal {
                        command: command.clone(),
                        path,
                        line: line.trim().chars().take(300).collect(),
                    });
                }
            }
        }
        if found.len() >= KEPT {
            found.truncate(KEPT);
            break;
        }
    }
    found
}

/// The refusals for a person: each path and the command, then how a user can grant a path.
pub fn describe(refusals: &[RoomRefusal]) -> String {
    let paths: Vec<String> = refusals
        .iter()
        .map(|r| format!("{} (`{}`)", r.path.display(), one_line(&r.command)))
        .collect();
    format!(
        "permission errors name paths the stage's room keeps the agents from writing: {}; a tool that must write there can be granted it with `[confine] writable = [\"PATH\"]` in the provider's TOML (docs/run-lifecycle.md, \"The room\"), or pointed at a place of its own (a venv, a prefix under the work tree)",
        paths.join(", ")
    )
}

fn one_line(command: &str) -> String {
    let line: String = command.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() > 80 {
        format!("{}…", line.chars().take(79).collect::<String>())
    } else {
        line
    }
}

/// An absolute path as tools print it: at the start of a line, or after a space, a quote
/// (`'…'`, `"…"`, `` `…` ``, `‘…’`, `“…”`), a bracket, `=` or `:`, up to the closing one.
static ABSOLUTE_PATH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?:^|[\s'"`‘“(\[=:])(/[^\s'"`’”)\],;:]+)"#).expect("literal regex is valid")
});

/// Absolute paths in `line` (trailing `.` and `/` dropped; `/` alone is none).
fn absolute_paths(line: &str) -> Vec<PathBuf> {
    ABSOLUTE_PATH
        .captures_iter(line)
        .filter_map(|caps| {
            let text = caps[1].trim_end_matches(['.', '/']);
            (!text.is_empty()).then(|| PathBuf::from(text))
        })
        .collect()
}

/// The program a line's message comes from, when the line starts with its absolute path and a
/// colon (`/usr/bin/bash: line 1: notes.md: Read-only file system`, a shell started by its full
/// path): the one reporting the refusal, not a path it was refused. Only an executable file is
/// taken for one, so `/etc/x: Permission denied` still names `/etc/x`.
fn reporting_program(line: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let (head, _) = line.trim_start().split_once(": ")?;
    if !head.starts_with('/') || head.contains(char::is_whitespace) {
        return None;
    }
    let meta = std::fs::metadata(head).ok()?;
    (meta.is_file() && meta.permissions().mode() & 0o111 != 0).then(|| PathBuf::from(head))
}

/// Whether the room in `room` keeps the family from writing `path` (or reading it, when hidden).
fn refused_by(room: &RoomRecord, path: &Path) -> bool {
    let under = |root: &Path| path.starts_with(root);
    if room.unreadable.iter().any(|p| under(p)) || room.read_only.iter().any(|p| under(p)) {
        return true;
    }
    if let Some(views) = &room.views {
        if views.hidden.iter().any(|p| under(p)) {
            return true;
        }
        // A real path bound back into a layer is writable only when the room says so.
        if let Some(real) = views
            .real
            .iter()
            .filter(|r| under(&r.path))
            .max_by_key(|r| r.path.components().count())
        {
            return !real.writable && !room.writable.iter().any(|p| under(p));
        }
        if views.layers.iter().any(|layer| under(&layer.dir)) {
            return false;
        }
    }
    !room.writable.iter().any(|p| under(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::EvidenceId;

    fn failed(command: &str, output: &str) -> NormalizedEvent {
        NormalizedEvent::CommandFinished {
            evidence_id: EvidenceId::from_provider_id("1"),
            command: command.into(),
            exit_code: Some(1),
            status: CommandStatus::Failed,
            output_excerpt: output.into(),
            output_bytes: output.len() as u64,
        }
    }

    fn room() -> RoomRecord {
        let overlay = |dir: &str| crate::supervise::Overlay {
            dir: dir.into(),
            lower: dir.into(),
            upper: "/l/u".into(),
            work: "/l/w".into(),
        };
        RoomRecord {
            confined: true,
            worktree_access: super::super::confine::WorktreeAccess::Write,
            cwd: "/w/tree".into(),
            tmpdir: "/tmp/stage".into(),
            writable: vec!["/w/tree".into(), "/tmp/stage".into()],
            unreadable: vec!["/home/u/.local/state/autocode".into()],
            provider_writable: Vec::new(),
            read_only: Vec::new(),
            overlay: None,
            views: Some(crate::supervise::PrivateViews {
                layers: vec![overlay("/home/u"), overlay("/tmp")],
                real: vec![crate::supervise::RealPath {
                    path: "/home/u/src".into(),
                    writable: false,
                }],
                hidden: Vec::new(),
            }),
        }
    }

    /// The shapes of the common tools' permission errors name the path outside the room; paths
    /// the room lets the family write (the tree, HOME's layer, /tmp) are never blamed on it.
    #[test]
    fn refused_paths_are_found_in_the_tools_own_words() {
        let events = [
            failed(
                "pip install requests",
                "ERROR: Could not install packages due to an OSError: [Errno 30] Read-only file system: '/usr/local/lib/python3.11/site-packages/requests'",
            ),
            failed(
                "npm install -g left-pad",
                "npm error code EACCES\nnpm error syscall mkdir\nnpm error path /usr/lib/node_modules/left-pad\nnpm error Error: EACCES: permission denied, mkdir '/usr/lib/node_modules/left-pad'",
            ),
            failed(
                "mkdir /opt/x",
                "mkdir: cannot create directory ‘/opt/x’: Permission denied",
            ),
            failed(
                "cat ~/.local/state/autocode/key",
                "cat: /home/u/.local/state/autocode/key: Permission denied",
            ),
            failed(
                "touch ~/src/a",
                "touch: cannot touch '/home/u/src/a': Read-only file system",
            ),
            // Writable for the family: not the room's doing.
            failed(
                "cargo build",
                "error: failed to open `/home/u/.cargo/registry/x`: Permission denied (os error 13)",
            ),
            failed(
                "touch /w/tree/a",
                "touch: cannot touch '/w/tree/a': Permission denied",
            ),
            failed(
                "touch /tmp/a",
                "touch: cannot touch '/tmp/a': Permission denied",
            ),
        ];
        let found: Vec<String> = find(&events, &room())
            .iter()
            .map(|r| r.path.display().to_string())
            .collect();
        assert_eq!(
            found,
            [
                "/usr/local/lib/python3.11/site-packages/requests",
                "/usr/lib/node_modules/left-pad",
                "/opt/x",
                "/home/u/.local/state/autocode/key",
                "/home/u/src/a",
            ]
        );
        let text = describe(&find(&events[..1], &room()));
        assert!(
            text.contains(
                "/usr/local/lib/python3.11/site-packages/requests (`pip install requests`)"
            ),
            "{text}"
        );
        assert!(text.contains("[confine] writable"), "{text}");
    }

    /// A shell started by its full path prefixes its messages with that path: a read-only
    /// role's write to the work tree (`/usr/bin/bash: line 1: notes.md: Read-only file system`)
    /// names no path outside the room, and the shell is never named as one; a path after the
    /// prefix still is. A leading path that is not a program is the refused one.
    #[test]
    fn a_shell_named_by_its_path_is_the_reporter_not_the_refused_path() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let shell = dir.path().join("bash");
        std::fs::write(&shell, "").unwrap();
        std::fs::set_permissions(&shell, std::fs::Permissions::from_mode(0o755)).unwrap();
        let shell = shell.display().to_string();
        let events = [
            failed(
                "cat > notes.md <<'EOF'\nnotes\nEOF\n",
                &format!("{shell}: line 1: notes.md: Read-only file system"),
            ),
            failed(
                "echo x > /opt/y",
                &format!("{shell}: line 1: /opt/y: Permission denied"),
            ),
            failed("cat /etc/shadow", "/etc/shadow: Permission denied"),
        ];
        // A room that lets the family write the tree only, so the shell's own path (in a
        // temporary directory) is one it refuses.
        let mut room = room();
        room.views = None;
        room.writable = vec!["/w/tree".into()];
        let found: Vec<String> = find(&events, &room)
            .iter()
            .map(|r| r.path.display().to_string())
            .collect();
        assert_eq!(found, ["/opt/y", "/etc/shadow"]);
    }

    #[test]
    fn successes_and_unconfined_stages_name_nothing() {
        let mut ok = failed(
            "ls /root",
            "ls: cannot open directory '/root': Permission denied",
        );
        if let NormalizedEvent::CommandFinished { status, .. } = &mut ok {
            *status = CommandStatus::Succeeded;
        }
        assert!(find(&[ok], &room()).is_empty());
        let mut unconfined = room();
        unconfined.confined = false;
        let refused = failed(
            "mkdir /opt/x",
            "mkdir: cannot create directory '/opt/x': Permission denied",
        );
        assert!(find(&[refused], &unconfined).is_empty());
    }
}
