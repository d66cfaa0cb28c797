//! The verdicts of the run's replays, kept so that a replay identical to one already run is not
//! run again (issue 29, point 5): `<run>/replay-results.json`, tagged like every run record
//! (`run::integrity`), so a `resume` reuses them too and a file changed by anything but autocode
//! is refused (the replay pauses, naming it).
//!
//! A batch (the `prepare` steps, then the checks in order, in one tree) is reused only under the
//! same [`BatchKey`], and a check's verdict only where the checks before it in the new batch
//! begin a stored batch the same way: a check sees what the steps and the checks before it wrote
//! in the tree, so its verdict stands for the same predecessors only. The checks no stored
//! batch answers run as one batch of their own (the steps, then those checks). What is in the
//! key, and why each part is needed, is documented on its fields. Stored are only batches whose steps all exited 0 and whose checks all ended without a
//! timeout (a failed `npm ci` or a check cut by the clock may be the network or the machine's
//! load, and runs again); a refused tree (not closed) is never stored.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::integrity;
use super::prepare::{CheckRan, PrepareStep};
use super::stage_runner::ReplayResult;
use crate::gittree::TreeId;
pub use crate::ids::ReplayNo;
use crate::report::evidence::sha256_hex;
use crate::store::StoreError;
use crate::verify::testcount::TestTally;
use crate::verify::testids::TestIds;

/// The file in the run directory.
pub const RESULTS_FILE: &str = "replay-results.json";

/// The file's format; another is not read (its batches run again).
const FORMAT: u32 = 1;

/// Where the checks may reach, as the key holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum KeyConfinement {
    /// The ownership boundary only (`--unconfined`).
    Unconfined,
    /// The replay's room, with the user's `allow_connect` entries (as written, in order).
    Room { allow_connect: Vec<String> },
}

/// Everything that can change what a batch's checks do, besides the checks before each one
/// (the stored batch's order) and the machine outside the room (the toolchains in `/usr`, the
/// network), which a run does not control and assumes steady.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchKey {
    /// The files the commands see: the composed tree (the base tree, the work tree's snapshot,
    /// or that snapshot with some paths as in the base), exactly what the verification tree
    /// shows; every tracked and untracked-not-ignored file, and nothing else.
    pub tree: TreeId,
    /// The work tree's `HEAD`: the tree's git metadata shows it as a checkout of this commit
    /// (or of a commit over it), which `git describe`, `git log`, setuptools-scm and hatch-vcs
    /// read. `None`: no commit yet.
    pub head: Option<String>,
    /// sha256 of the repository's tags (`git describe` reads them) and its `shallow` file.
    pub refs_sha256: String,
    /// The `prepare` steps, in order: what was installed before the checks.
    pub prepare: Vec<PrepareStep>,
    /// sha256 of the check environment, every variable and value the commands get (`PATH`,
    /// `HOME`, locale, a proxy…); the values stay out of the file.
    pub env_sha256: String,
    /// What the room lets the commands write and reach.
    pub confinement: KeyConfinement,
    /// The replay's timeout: a check that passed within it may not under a shorter one.
    pub timeout_ms: u64,
    /// The autocode that ran it: how a check is run and judged (the room, the test counts)
    /// belongs to the version.
    pub autocode: String,
}

impl BatchKey {
    /// sha256 of `env`, one `NAME=VALUE\0` after the other in name order.
    pub fn env_digest(env: &BTreeMap<String, String>) -> String {
        let mut bytes = Vec::new();
        for (k, v) in env {
            bytes.extend_from_slice(k.as_bytes());
            bytes.push(b'=');
            bytes.extend_from_slice(v.as_bytes());
            bytes.push(0);
        }
        sha256_hex(&bytes)
    }

    /// sha256 of the refs the tree's git metadata shows besides `HEAD`.
    pub fn refs_digest(tags: &[u8], shallow: Option<&[u8]>) -> String {
        let mut bytes = tags.to_vec();
        if let Some(shallow) = shallow {
            bytes.extend_from_slice(b"\0shallow\0");
            bytes.extend_from_slice(shallow);
        }
        sha256_hex(&bytes)
    }

    /// This autocode's version, as the key holds it.
    pub fn this_autocode() -> String {
        format!("autocode {}", env!("CARGO_PKG_VERSION"))
    }
}

/// One check's verdict as it ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredCheck {
    pub command: String,
    pub passed: bool,
    pub detail: String,
    pub tests: TestTally,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_ids: Option<TestIds>,
}

/// One batch that ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredBatch {
    pub key: BatchKey,
    /// Its record in `<run>/replays/`.
    pub record: ReplayNo,
    /// Its checks in the order they ran, each with its verdict.
    pub checks: Vec<StoredCheck>,
}

/// `<run>/replay-results.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayResults {
    pub format: u32,
    pub batches: Vec<StoredBatch>,
}

impl Default for ReplayResults {
    fn default() -> Self {
        ReplayResults {
            format: FORMAT,
            batches: Vec::new(),
        }
    }
}

/// What of a batch is reused, and what runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reuse {
    /// The reused verdicts (`CheckRan::Reused`), in the batch's order.
    pub reused: Vec<ReplayResult>,
    /// The commands that run, in the batch's order.
    pub to_run: Vec<String>,
}

impl Reuse {
    /// The verdicts of `commands` in their order: the reused ones and those of `ran`.
    pub fn merge(&self, commands: &[String], ran: Vec<ReplayResult>) -> Vec<ReplayResult> {
        let mut all: Vec<ReplayResult> = self.reused.iter().cloned().chain(ran).collect();
        let mut out = Vec::with_capacity(commands.len());
        for command in commands {
            if let Some(at) = all.iter().position(|r| &r.command == command) {
                out.push(all.swap_remove(at));
            }
        }
        out
    }

    /// The record every reused verdict came from, when nothing runs and they share one.
    pub fn whole_from(&self) -> Option<ReplayNo> {
        let first = self.reused.first()?.ran.reused_from()?;
        (self.to_run.is_empty()
            && self
                .reused
                .iter()
                .all(|r| r.ran.reused_from() == Some(first)))
        .then_some(first)
    }
}

/// Why the stored results cannot be used.
#[derive(Debug, thiserror::Error)]
#[error(
    "the run's replay results {} cannot be trusted ({source}); autocode does not reuse what it did not write: remove the file (every check then runs again) and `autocode resume`",
    path.display()
)]
pub struct ResultsRefused {
    pub path: PathBuf,
    #[source]
    pub source: StoreError,
}

impl ReplayResults {
    pub fn path(run_dir: &Path) -> PathBuf {
        run_dir.join(RESULTS_FILE)
    }

    /// The run's stored results: none when the file is absent or of another format; `Err` when
    /// it does not verify (changed by something else, untagged, or unreadable).
    pub fn load(run_dir: &Path) -> Result<ReplayResults, ResultsRefused> {
        let path = Self::path(run_dir);
        if let Err(e) = std::fs::symlink_metadata(&path)
            && e.kind() == std::io::ErrorKind::NotFound
        {
            return Ok(ReplayResults::default());
        }
        match integrity::read_record::<ReplayResults>(&path) {
            Ok(results) if results.format == FORMAT => Ok(results),
            Ok(_) => Ok(ReplayResults::default()),
            Err(source) => Err(ResultsRefused { path, source }),
        }
    }

    /// Writes the file, tagged (made durable by the run's next checkpoint: lost with a crash
    /// before it, the batches run again).
    pub fn save(&self, run_dir: &Path) -> Result<(), StoreError> {
        integrity::write_stage_record(&Self::path(run_dir), self)
    }

    /// Which of `commands` (deduplicated, in the order they would run) need not run under
    /// `key`: scanning them in order, a run of consecutive commands that begins a stored batch
    /// of the key, check for check, takes that batch's verdicts (each marked as reused from the
    /// batch's record; the longest such run wins). The rest, in order, make the batch that
    /// runs (`Reuse::to_run`), whose checks then see the steps and each other as a stored
    /// batch's did.
    pub fn reuse(&self, key: &BatchKey, commands: &[String]) -> Reuse {
        let batches: Vec<&StoredBatch> = self.batches.iter().filter(|b| &b.key == key).collect();
        let mut reuse = Reuse::default();
        let mut i = 0;
        while i < commands.len() {
            // Of equally long runs, the latest batch's (`max_by_key` keeps the last).
            let best = batches
                .iter()
                .map(|b| {
                    let len = b
                        .checks
                        .iter()
                        .zip(&commands[i..])
                        .take_while(|(c, k)| &c.command == *k)
                        .count();
                    (len, *b)
                })
                .max_by_key(|(len, _)| *len);
            match best {
                Some((len, batch)) if len > 0 => {
                    for c in &batch.checks[..len] {
                        reuse.reused.push(ReplayResult {
                            command: c.command.clone(),
                            passed: c.passed,
                            detail: c.detail.clone(),
                            ran: CheckRan::Reused { of: batch.record },
                            tests: c.tests,
                            test_ids: c.test_ids.clone(),
                        });
                    }
                    i += len;
                }
                _ => {
                    reuse.to_run.push(commands[i].clone());
                    i += 1;
                }
            }
        }
        reuse
    }

    /// Keeps the verdicts of a batch that ran under `key` (recorded as `record`); a batch
    /// under the same key whose checks this one begins with is replaced.
    pub fn keep(&mut self, key: BatchKey, record: ReplayNo, results: &[ReplayResult]) {
        let checks: Vec<StoredCheck> = results
            .iter()
            .map(|r| StoredCheck {
                command: r.command.clone(),
                passed: r.passed,
                detail: r.detail.clone(),
                tests: r.tests,
                test_ids: r.test_ids.clone(),
            })
            .collect();
        self.batches.retain(|b| {
            !(b.key == key
                && b.checks.len() <= checks.len()
                && b.checks
                    .iter()
                    .zip(&checks)
                    .all(|(a, c)| a.command == c.command))
        });
        self.batches.push(StoredBatch {
            key,
            record,
            checks,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(tree: &str) -> BatchKey {
        BatchKey {
            tree: TreeId::parse(tree).unwrap(),
            head: None,
            refs_sha256: BatchKey::refs_digest(b"", None),
            prepare: vec![PrepareStep::new("npm ci")],
            env_sha256: BatchKey::env_digest(&BTreeMap::from([("PATH".into(), "/bin".into())])),
            confinement: KeyConfinement::Room {
                allow_connect: Vec::new(),
            },
            timeout_ms: 600_000,
            autocode: BatchKey::this_autocode(),
        }
    }

    fn ran(command: &str, passed: bool) -> ReplayResult {
        ReplayResult {
            command: command.into(),
            passed,
            detail: if passed { "exit 0" } else { "exit 1: no" }.into(),
            ran: CheckRan::Ran,
            tests: TestTally::Counted(3),
            test_ids: None,
        }
    }

    const TREE_A: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
    const TREE_B: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

    /// Verdicts are reused under the same key for checks that begin a stored batch (the same
    /// predecessors), each marked with the record it came from; anything else in the key, or a
    /// check that ran after others, runs again.
    #[test]
    fn a_batch_is_reused_only_under_the_same_key_for_the_same_predecessors() {
        let mut results = ReplayResults::default();
        let cmds = |c: &[&str]| c.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let names = |r: &[ReplayResult]| r.iter().map(|r| r.command.clone()).collect::<Vec<_>>();
        results.keep(
            key(TREE_A),
            ReplayNo(2),
            &[ran("npm test", true), ran("npm run lint", false)],
        );
        let whole = results.reuse(&key(TREE_A), &cmds(&["npm test", "npm run lint"]));
        assert!(whole.to_run.is_empty());
        assert_eq!(whole.whole_from(), Some(ReplayNo(2)));
        let reused = &whole.reused;
        assert_eq!(reused[0].ran, CheckRan::Reused { of: ReplayNo(2) });
        assert!(reused[0].passed && !reused[1].passed);
        assert_eq!(reused[1].detail, "exit 1: no");
        assert_eq!(reused[0].tests, TestTally::Counted(3));
        let first = results.reuse(&key(TREE_A), &cmds(&["npm test"]));
        assert_eq!(names(&first.reused), ["npm test"], "the same predecessors");
        let lint = results.reuse(&key(TREE_A), &cmds(&["npm run lint"]));
        assert_eq!(lint.to_run, ["npm run lint"], "it ran after the tests");
        // A check the stored batch did not run runs, in a batch of its own.
        let more = results.reuse(&key(TREE_A), &cmds(&["x", "npm test", "npm run lint"]));
        assert_eq!(more.to_run, ["x"]);
        assert_eq!(names(&more.reused), ["npm test", "npm run lint"]);
        assert_eq!(more.whole_from(), None);
        let merged = more.merge(
            &cmds(&["x", "npm test", "npm run lint"]),
            vec![ran("x", true)],
        );
        assert_eq!(names(&merged), ["x", "npm test", "npm run lint"]);
        assert_eq!(merged[0].ran, CheckRan::Ran);
        for other in [
            key(TREE_B),
            BatchKey {
                head: Some("c".into()),
                ..key(TREE_A)
            },
            BatchKey {
                refs_sha256: BatchKey::refs_digest(b"t refs/tags/v1\n", None),
                ..key(TREE_A)
            },
            BatchKey {
                prepare: Vec::new(),
                ..key(TREE_A)
            },
            BatchKey {
                env_sha256: BatchKey::env_digest(&BTreeMap::from([(
                    "PATH".into(),
                    "/usr/bin".into(),
                )])),
                ..key(TREE_A)
            },
            BatchKey {
                confinement: KeyConfinement::Unconfined,
                ..key(TREE_A)
            },
            BatchKey {
                timeout_ms: 1,
                ..key(TREE_A)
            },
            BatchKey {
                autocode: "autocode 0.0.0".into(),
                ..key(TREE_A)
            },
        ] {
            let reuse = results.reuse(&other, &cmds(&["npm test"]));
            assert_eq!(reuse.to_run, ["npm test"], "{other:?}");
        }
        // A longer batch of the same key replaces the one it begins with.
        results.keep(
            key(TREE_A),
            ReplayNo(5),
            &[
                ran("npm test", true),
                ran("npm run lint", true),
                ran("x", true),
            ],
        );
        assert_eq!(results.batches.len(), 1);
        let reused = results.reuse(&key(TREE_A), &cmds(&["npm test"])).reused;
        assert_eq!(reused[0].ran, CheckRan::Reused { of: ReplayNo(5) });
    }

    /// The file is written tagged and read back; one changed by anything else is refused.
    #[test]
    fn a_results_file_changed_by_another_hand_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let run_dir = dir.path().join(".autocode/runs/r1");
        std::fs::create_dir_all(&run_dir).unwrap();
        assert_eq!(
            ReplayResults::load(&run_dir).unwrap(),
            ReplayResults::default()
        );
        let mut results = ReplayResults::default();
        results.keep(key(TREE_A), ReplayNo(1), &[ran("make test", false)]);
        results.save(&run_dir).unwrap();
        assert_eq!(ReplayResults::load(&run_dir).unwrap(), results);
        let path = ReplayResults::path(&run_dir);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("\"passed\":false", "\"passed\":true")).unwrap();
        let refused = ReplayResults::load(&run_dir).unwrap_err();
        assert!(
            refused.to_string().contains("cannot be trusted"),
            "{refused}"
        );
        assert!(matches!(refused.source, StoreError::TagMismatch { .. }));
        std::fs::write(&path, "{\"format\":1,\"batches\":[]}").unwrap();
        assert!(ReplayResults::load(&run_dir).is_err(), "untagged");
    }

    #[test]
    fn a_record_names_its_number() {
        assert_eq!(
            ReplayNo::of_record(Path::new("/r/replays/003-final.json")),
            Some(ReplayNo(3))
        );
        assert_eq!(ReplayNo(3).to_string(), "replay 003");
    }
}
