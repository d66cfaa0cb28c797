//! autocode's own replay of the checks a tester reported passing, in a clean copy of the tree.
//!
//! The copy holds exactly the files a snapshot covers (tracked and untracked-not-ignored, never
//! `.autocode/` or `.git/`), so build outputs and caches the agents left behind cannot make a
//! check pass. Each check runs as `bash -c CHECK` (`verify::check_shell`: the agents' shell, `sh`
//! where no bash is installed) through the boundary, with the credential-free
//! environment, a timeout and no stdin, in a room whose only writable places are the copy and a
//! private temporary directory (`TMPDIR`) unless the run is unconfined. A check passes only if it exits 0 there, whatever the
//! tester said.
//!
//! The copy is closed: it holds no symlink that resolves outside it (absolute, or escaping with
//! `..`) and no FIFO, socket or device node. Finding one refuses the whole replay
//! ([`ReplayError::NotClosed`], naming the paths): every check then fails, so a deliverable that
//! lives outside the tree is never judged. A replay may also restore some files from another
//! tree first ([`Restore`]: the final tree with the base tree's tests).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

mod watch;
pub use watch::TreeFiles;

use super::confine;
use super::prepare::{PrepareStep, Prepared, StepRun};
use crate::snapshot;
use crate::supervise::{self, Exit, LaunchSpec, Receipt, StdinSource, StdioMode};

/// The result of replaying one check.
#[derive(Debug, Clone, Serialize)]
pub struct Replayed {
    pub command: String,
    pub exit: Exit,
    /// The last part of stdout and stderr, for the finding shown to the builder.
    pub output_tail: String,
    /// How many tests the whole output says ran (`testcount`).
    pub tests: crate::verify::testcount::TestTally,
    /// Which tests the output names as run (`testids`).
    pub test_ids: Option<crate::verify::testids::TestIds>,
    pub duration_ms: u64,
    pub receipt: Receipt,
}

impl Replayed {
    pub fn passed(&self) -> bool {
        self.exit == Exit::Code(0)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("cannot prepare the clean copy: {0}")]
    Copy(#[source] io::Error),
    #[error(transparent)]
    Snapshot(#[from] snapshot::SnapshotError),
    #[error("the clean copy is not closed: {}", .paths.join("; "))]
    NotClosed { paths: Vec<String> },
    /// No tree with the result's tests made to fail (`ReplayTree::FinalWithFailingTests`): its
    /// checks do not run, and judge nothing.
    #[error("{0}")]
    NoFailingTests(String),
    #[error("cannot launch check {command:?}: {source}")]
    Launch {
        command: String,
        #[source]
        source: supervise::LaunchError,
    },
}

/// What a clean copy holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopyReport {
    pub files: usize,
    /// Entries left out because they would open the copy: each names the path and why.
    pub unclosed: Vec<String>,
}

/// Where a symlink at `rel` (relative to the copy's root) pointing at `target` leads, if it stays
/// inside the root (lexically: `..` may not climb above the root).
pub(crate) fn stays_inside(rel: &str, target: &Path) -> bool {
    if target.is_absolute() {
        return false;
    }
    let mut depth: i64 = rel.split('/').count() as i64 - 1;
    for part in target.components() {
        match part {
            std::path::Component::ParentDir => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            std::path::Component::Normal(_) => depth += 1,
            std::path::Component::CurDir => {}
            std::path::Component::RootDir | std::path::Component::Prefix(_) => return false,
        }
    }
    true
}

/// Copies the snapshot-covered files of `work_tree` into `dest`, leaving out (and reporting)
/// symlinks that resolve outside the copy and FIFOs, sockets and device nodes.
pub async fn clean_copy(
    work_tree: &Path,
    dest: &Path,
    env: &BTreeMap<String, String>,
) -> Result<CopyReport, ReplayError> {
    let files = snapshot::list_files(work_tree, env).await?;
    let mut report = CopyReport {
        files: files.len(),
        unclosed: Vec::new(),
    };
    for rel in &files {
        let from = work_tree.join(rel);
        let to = dest.join(rel);
        let meta = match fs::symlink_metadata(&from) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(ReplayError::Copy(e)),
        };
        if let Some(parent) = to.parent() {
            fs::create_dir_all(parent).map_err(ReplayError::Copy)?;
        }
        let kind = meta.file_type();
        if kind.is_symlink() {
            let target = fs::read_link(&from).map_err(ReplayError::Copy)?;
            if !stays_inside(rel, &target) {
                report.unclosed.push(format!(
                    "`{rel}` is a symlink to {} (outside the tree)",
                    target.display()
                ));
                continue;
            }
            std::os::unix::fs::symlink(target, &to).map_err(ReplayError::Copy)?;
        } else if kind.is_file() {
            fs::copy(&from, &to).map_err(ReplayError::Copy)?;
        } else if !kind.is_dir() {
            report.unclosed.push(format!(
                "`{rel}` is a {} (not a regular file)",
                special_kind(&kind)
            ));
        }
    }
    report.unclosed.extend(escaping_links(dest));
    Ok(report)
}

fn special_kind(kind: &fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_fifo() {
        "FIFO"
    } else if kind.is_socket() {
        "socket"
    } else if kind.is_block_device() || kind.is_char_device() {
        "device node"
    } else {
        "special file"
    }
}

/// Symlinks in the finished copy that really resolve outside it (through other links).
fn escaping_links(root: &Path) -> Vec<String> {
    let Ok(canonical_root) = fs::canonicalize(root) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_symlink()
                && let Ok(resolved) = fs::canonicalize(&path)
                && !resolved.starts_with(&canonical_root)
            {
                let rel = path.strip_prefix(root).unwrap_or(&path);
                out.push(format!(
                    "`{}` resolves to {} (outside the tree)",
                    rel.display(),
                    resolved.display()
                ));
                let _ = fs::remove_file(&path);
            }
        }
    }
    out
}

/// Files to restore in the copy before the checks run: `files` (relative) from `from`; a file
/// absent there is removed from the copy.
#[derive(Debug, Clone, Default)]
pub struct Restore<'a> {
    pub from: Option<&'a Path>,
    pub files: &'a [String],
    /// The witness's copy: each name a restored file's result version defines at its top level
    /// and its base version lacks stands in (`verify::standins`).
    pub stand_ins: bool,
}

fn restore(copy: &Path, restore: &Restore<'_>) -> Result<(), ReplayError> {
    let Some(from) = restore.from else {
        return Ok(());
    };
    for rel in restore.files {
        let source = from.join(rel);
        let to = copy.join(rel);
        let result = (restore.stand_ins && crate::verify::standins::may_stand_in(rel))
            .then(|| fs::read_to_string(&to).ok())
            .flatten();
        if fs::symlink_metadata(&to).is_ok() {
            fs::remove_file(&to).map_err(ReplayError::Copy)?;
        }
        if source.is_file() {
            if let Some(parent) = to.parent() {
                fs::create_dir_all(parent).map_err(ReplayError::Copy)?;
            }
            fs::copy(&source, &to).map_err(ReplayError::Copy)?;
        }
        if let Some(result) = result {
            let base = fs::read_to_string(&source).ok();
            if source.exists() && base.is_none() {
                continue;
            }
            if let Some(text) = crate::verify::standins::with_stand_ins(
                rel,
                base.as_deref(),
                base.as_deref(),
                &result,
            ) {
                if let Some(parent) = to.parent() {
                    fs::create_dir_all(parent).map_err(ReplayError::Copy)?;
                }
                fs::write(&to, text).map_err(ReplayError::Copy)?;
            }
        }
    }
    Ok(())
}

/// Saves the snapshot-covered files of `work_tree` into `dest` (the run's base tree).
pub async fn save_tree(
    work_tree: &Path,
    dest: &Path,
    env: &BTreeMap<String, String>,
) -> Result<CopyReport, ReplayError> {
    fs::create_dir_all(dest).map_err(ReplayError::Copy)?;
    clean_copy(work_tree, dest, env).await
}

/// Whether replayed checks run in a room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayConfinement<'a> {
    /// Writable: the copy and a private temporary directory; HOME and the rest read-only;
    /// local addresses reachable as in a stage's room, plus the user's `allow_connect` (a
    /// test database the checks need).
    Room {
        allow_connect: &'a [crate::supervise::net::NetAllow],
    },
    /// The run was started `--unconfined`: the ownership boundary only.
    Unconfined,
}

/// What one replay runs in one tree: the `prepare` steps, then the checks.
#[derive(Debug, Clone, Copy)]
pub struct Batch<'a> {
    pub prepare: &'a [PrepareStep],
    pub commands: &'a [String],
}

/// One batch replayed in one tree: its prepare steps as they ran (stopped at the first that
/// failed, `super::prepare`), then its checks (none when a step failed).
#[derive(Debug, Clone)]
pub struct Replays {
    pub steps: Vec<Replayed>,
    pub checks: Vec<Replayed>,
}

impl Replays {
    /// What preparing the tree did.
    pub fn prepared(&self) -> Prepared {
        Prepared::of(
            self.steps
                .iter()
                .map(|r| StepRun {
                    command: r.command.clone(),
                    exit: r.exit,
                    output_tail: r.output_tail.clone(),
                    duration_ms: r.duration_ms,
                })
                .collect(),
        )
    }
}

/// Replays `commands` one by one in a fresh clean copy of `work_tree`.
pub async fn replay_checks(
    work_tree: &Path,
    commands: &[String],
    env: &BTreeMap<String, String>,
    timeout: Duration,
    confinement: ReplayConfinement<'_>,
) -> Result<Vec<Replayed>, ReplayError> {
    replay_checks_restoring(
        work_tree,
        Restore::default(),
        &[],
        &[],
        commands,
        env,
        timeout,
        confinement,
    )
    .await
    .map(|replays| replays.checks)
}

/// Replays `commands` in a fresh clean copy of `work_tree` with `restored` files put back first,
/// after the `prepare` steps. A copy that had to leave something out refuses the replay, unless
/// that entry is in `tolerated` (the same entry, with the same target, was already in the base
/// tree: it is left out of the copy, but it is not the work's doing).
#[allow(clippy::too_many_arguments)]
pub async fn replay_checks_restoring(
    work_tree: &Path,
    restored: Restore<'_>,
    tolerated: &[String],
    prepare: &[PrepareStep],
    commands: &[String],
    env: &BTreeMap<String, String>,
    timeout: Duration,
    confinement: ReplayConfinement<'_>,
) -> Result<Replays, ReplayError> {
    let copy = tempfile::Builder::new()
        .prefix("autocode-replay-")
        .tempdir()
        .map_err(ReplayError::Copy)?;
    let report = clean_copy(work_tree, copy.path(), env).await?;
    refuse_unclosed(report.unclosed, tolerated)?;
    run_batch_in(
        copy.path(),
        restored,
        prepare,
        commands,
        env,
        timeout,
        confinement,
        None,
        TreeFiles::OnDisk,
    )
    .await
}

/// Refuses a tree that had to leave something out, unless that entry is in `tolerated`.
pub fn refuse_unclosed(unclosed: Vec<String>, tolerated: &[String]) -> Result<(), ReplayError> {
    let unclosed: Vec<String> = unclosed
        .into_iter()
        .filter(|u| !tolerated.contains(u))
        .collect();
    if unclosed.is_empty() {
        Ok(())
    } else {
        Err(ReplayError::NotClosed { paths: unclosed })
    }
}

/// Runs `commands` one by one in `tree` (a clean copy or a verification tree, already closed),
/// with `restored` files put back first. With `overlay` (a confined replay only), `tree` is
/// the overlay's directory and every command sees the overlay (`super::vtree::Layer`); what
/// one command writes there the next sees, in the overlay's upper layer.
pub async fn run_checks_in(
    tree: &Path,
    restored: Restore<'_>,
    commands: &[String],
    env: &BTreeMap<String, String>,
    timeout: Duration,
    confinement: ReplayConfinement<'_>,
    overlay: Option<crate::supervise::Overlay>,
) -> Result<Vec<Replayed>, ReplayError> {
    run_batch_in(
        tree,
        restored,
        &[],
        commands,
        env,
        timeout,
        confinement,
        overlay,
        TreeFiles::OnDisk,
    )
    .await
    .map(|replays| replays.checks)
}

/// [`run_checks_in`] after the `prepare` steps, each run once, in order, exactly as a check
/// is (same room, environment, timeout and working directory: what a step writes in the tree
/// the checks see). The first step that does not exit 0 stops the batch: no check runs. `files`:
/// the tree's files, whose tests each check must leave as it found them (`watch`).
#[allow(clippy::too_many_arguments)]
pub async fn run_batch_in(
    tree: &Path,
    restored: Restore<'_>,
    prepare: &[PrepareStep],
    commands: &[String],
    env: &BTreeMap<String, String>,
    timeout: Duration,
    confinement: ReplayConfinement<'_>,
    overlay: Option<crate::supervise::Overlay>,
    files: TreeFiles,
) -> Result<Replays, ReplayError> {
    let room = BatchRoom::open(tree, restored, env, timeout, confinement, overlay, files)?;
    let steps = room.prepare(prepare).await?;
    if steps.iter().any(|step| !step.passed()) {
        return Ok(Replays {
            steps,
            checks: Vec::new(),
        });
    }
    let checks = room.checks(commands).await?;
    Ok(Replays { steps, checks })
}

/// Where one batch runs, open from its `prepare` steps to its last check: the tree, its room
/// (with the fresh `HOME` and `/tmp` layers every command of the batch shares) and the
/// environment. Dropped, its layers and temporary directory go.
pub struct BatchRoom {
    tree: PathBuf,
    env: BTreeMap<String, String>,
    /// The shell every step and check runs in (`verify::check_shell`: bash, as the agents').
    shell: PathBuf,
    timeout: Duration,
    room: Option<crate::supervise::Room>,
    /// The tree's test files, which each check must leave as it found them.
    watch: watch::TestFileWatch,
    _views: Option<confine::ThrowawayViews>,
    _tmpdir: tempfile::TempDir,
}

impl BatchRoom {
    /// The room of a batch in `tree` (closed already), with `restored` files put back first;
    /// `overlay` as in [`run_checks_in`], `files` as in [`run_batch_in`].
    pub fn open(
        tree: &Path,
        restored: Restore<'_>,
        env: &BTreeMap<String, String>,
        timeout: Duration,
        confinement: ReplayConfinement<'_>,
        overlay: Option<crate::supervise::Overlay>,
        files: TreeFiles,
    ) -> Result<BatchRoom, ReplayError> {
        restore(tree, &restored)?;
        let local_bins = local_bins(tree, &files);
        let watch = watch::TestFileWatch::new(tree, overlay.as_ref(), files);
        let tmpdir = tempfile::Builder::new()
            .prefix("autocode-replay-tmp-")
            .tempdir()
            .map_err(ReplayError::Copy)?;
        // A replay writes HOME and /tmp in fresh layers of its own: it fetches what the builder
        // fetched, and can never run what a stage left outside the tree.
        let views = match confinement {
            ReplayConfinement::Room { .. } => {
                Some(confine::ThrowawayViews::new(env, &[tree]).map_err(ReplayError::Copy)?)
            }
            _ => None,
        };
        let allow_connect = match confinement {
            ReplayConfinement::Room { allow_connect } => allow_connect.to_vec(),
            ReplayConfinement::Unconfined => Vec::new(),
        };
        let room = views.as_ref().map(|views| crate::supervise::Room {
            overlay,
            allow_connect,
            ..confine::replay_room(tree, tmpdir.path(), env, views.overlays())
        });
        let mut env = env.clone();
        env.insert(
            "TMPDIR".into(),
            tmpdir.path().to_string_lossy().into_owned(),
        );
        if !local_bins.is_empty() {
            let path = env.get("PATH").cloned().unwrap_or_default();
            let mut dirs: Vec<String> = std::env::split_paths(&path)
                .map(|d| d.to_string_lossy().into_owned())
                .collect();
            dirs.extend(local_bins);
            env.insert("PATH".into(), dirs.join(":"));
        }
        let shell = crate::verify::check_shell(env.get("PATH").map(String::as_str));
        Ok(BatchRoom {
            tree: tree.to_owned(),
            env,
            shell,
            timeout,
            room,
            watch,
            _views: views,
            _tmpdir: tmpdir,
        })
    }

    async fn launch(&self, label: &'static str, command: &str) -> Result<Replayed, ReplayError> {
        let spec = LaunchSpec {
            label: format!("{label}: {command}"),
            program: self.shell.clone().into_os_string(),
            args: vec![OsString::from("-c"), OsString::from(command)],
            env: self
                .env
                .iter()
                .map(|(k, v)| (OsString::from(k), OsString::from(v)))
                .collect(),
            cwd: self.tree.clone(),
            stdin: StdinSource::Null,
            stdio: StdioMode::Captured {
                limit: CAPTURE_LIMIT,
            },
            timeout: Some(self.timeout),
            room: self.room.clone(),
        };
        launch_one(spec, command.to_owned()).await
    }

    /// The `prepare` steps, once each, in order, up to the first that does not exit 0.
    pub async fn prepare(&self, prepare: &[PrepareStep]) -> Result<Vec<Replayed>, ReplayError> {
        let mut steps = Vec::with_capacity(prepare.len());
        for step in prepare {
            let ran = self.launch("prepare", step.as_str()).await?;
            let failed = !ran.passed();
            steps.push(ran);
            if failed {
                break;
            }
        }
        Ok(steps)
    }

    /// The checks, one by one, in order. A check after which a test file of the tree is not as
    /// the batch's `prepare` steps left it shows nothing (`TestTally::TestsRewritten`, the files
    /// named in its output's tail): it, or a check before it, ran tests that are not the tree's.
    pub async fn checks(&self, commands: &[String]) -> Result<Vec<Replayed>, ReplayError> {
        let mut checks = Vec::with_capacity(commands.len());
        let before = self.watch.before(commands);
        for command in commands {
            let mut ran = self.launch("check replay", command).await?;
            let changed = self.watch.changed(&before);
            if !changed.is_empty() {
                ran.tests = crate::verify::testcount::TestTally::TestsRewritten;
                ran.output_tail = format!(
                    "{}\n[autocode] the check changed test files of the tree while it ran: {}",
                    ran.output_tail,
                    changed.join(", ")
                );
            }
            checks.push(ran);
        }
        Ok(checks)
    }
}

/// The tree's own environments, where a check finds what `prepare` installed when it names a
/// program as a person would with the environment activated (`pytest` for `.venv/bin/pytest`,
/// `jest` for `node_modules/.bin/jest`): each of these directories that the tree under test does
/// not hold (so only a `prepare` step can have made it), appended to `PATH` after every other
/// directory (a program found elsewhere is found there first). None when the tree's path could
/// not be a `PATH` entry.
fn local_bins(tree: &Path, files: &TreeFiles) -> Vec<String> {
    const ENVIRONMENTS: [(&str, &str); 3] = [
        (".venv", ".venv/bin"),
        ("venv", "venv/bin"),
        ("node_modules", "node_modules/.bin"),
    ];
    let Some(root) = tree.to_str().filter(|t| !t.contains(':')) else {
        return Vec::new();
    };
    ENVIRONMENTS
        .iter()
        .filter(|(top, _)| match files {
            TreeFiles::OnDisk => tree.join(top).symlink_metadata().is_err(),
            TreeFiles::Listed(paths) => !paths.iter().any(|p| {
                p.strip_prefix(top)
                    .is_some_and(|rest| rest.starts_with('/'))
            }),
        })
        .map(|(_, bin)| format!("{root}/{bin}"))
        .collect()
}

/// How much of each of a replayed command's streams is kept.
const CAPTURE_LIMIT: usize = 1 << 20;

/// Runs one command of a batch and keeps what the replay reports of it.
async fn launch_one(spec: LaunchSpec, command: String) -> Result<Replayed, ReplayError> {
    let started = Instant::now();
    let root = spec.cwd.clone();
    // A runner an npm script starts is the check's runner too (`npm test` → `mocha`): the
    // scripts as the tree holds them before the check runs (what it runs may rewrite them).
    let package_json = std::fs::read_to_string(root.join("package.json")).ok();
    let runs = crate::verify::manifest::with_scripts_run(&command, package_json.as_deref());
    let finished = supervise::run(spec)
        .await
        .map_err(|source| ReplayError::Launch {
            command: command.clone(),
            source,
        })?;
    let whole = finished.stdout.len() < CAPTURE_LIMIT && finished.stderr.len() < CAPTURE_LIMIT;
    let mut output = String::from_utf8_lossy(&finished.stdout).into_owned();
    output.push_str(&String::from_utf8_lossy(&finished.stderr));
    Ok(Replayed {
        tests: crate::verify::testcount::tally_check(&runs, &output, whole),
        command,
        exit: finished.exit,
        output_tail: tail(&output, 2000),
        test_ids: crate::verify::testids::collect(&output, &root),
        duration_ms: started.elapsed().as_millis() as u64,
        receipt: finished.receipt,
    })
}

fn tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &text[start..])
}

#[cfg(test)]
mod tests;
