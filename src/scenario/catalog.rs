//! The scenario catalog: `scenarios/<name>/` folders, their `scenario.toml`, validation and
//! sharding.
//!
//! Invariants: a loaded [`Scenario`] has a non-empty `brief.md`, a `seed/` directory, at least
//! one oracle check (or an oracle script), a consistent expectation (a case that expects a stop
//! names the pause codes that count as honest), every `scripts/<profile>.toml` parses as a
//! scripted-model script for a known scripted profile (`scripts.rs`), and every profile it marks
//! `[not_applicable]` is a scripted one with a reason. Cases are listed in name order, so
//! sharding is stable across machines.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use super::profile::{DirectWire, Profile};
pub use super::scripts::CaseScript;
use crate::pause::PauseCode;

/// The catalog file of one case.
pub const SCENARIO_FILE: &str = "scenario.toml";
pub const BRIEF_FILE: &str = "brief.md";
pub const SEED_DIR: &str = "seed";
pub const ORACLE_DIR: &str = "oracle";
pub const SCRIPTS_DIR: &str = "scripts";

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Toml { path: PathBuf, message: String },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("{path}: script {profile}: {message}")]
    Script {
        path: PathBuf,
        profile: String,
        message: String,
    },
    #[error("no scenario named {name:?} in {dir}")]
    UnknownCase { name: String, dir: PathBuf },
    #[error("bad case name {name:?}: use lowercase letters, digits and '-'")]
    BadName { name: String },
}

/// What a case counts as a correct ending.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExpectedOutcome {
    /// The run should complete and the oracle agree; `honest_stops` may still list pauses that
    /// count as correct (a misbehaving agent that is stopped rather than repaired).
    Complete,
    /// The run must stop: any completion is a false one.
    Stop,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    pub outcome: ExpectedOutcome,
    /// Pause codes that count as an honest stop.
    #[serde(default)]
    pub honest_stops: Vec<PauseCode>,
}

impl Expect {
    pub fn accepts_stop(&self, code: PauseCode) -> bool {
        self.honest_stops.contains(&code)
    }
}

/// How the harness drives the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSettings {
    /// Wall-clock limit of the whole run (all stages and resumes).
    #[serde(default = "default_run_timeout")]
    pub timeout_seconds: u64,
    /// Pause codes after which the harness runs `resume --wait` once more (e.g. a 429 storm).
    #[serde(default)]
    pub resume_wait_on: Vec<PauseCode>,
    /// How many such resumes at most.
    #[serde(default = "default_max_resumes")]
    pub max_resumes: u32,
    /// After the run, the harness fingerprints the work tree again once the oracle is done; any
    /// change (a process that outlived its stage) fails the oracle.
    #[serde(default)]
    pub check_quiescent: bool,
    /// A process the harness starts before the run and stops after the oracle (argv, no
    /// shell), e.g. a tmux server an agent might reach: it runs outside every agent's family,
    /// under its own boundary. `{service_dir}` in an argument is the job's service folder
    /// (`<scratch>/service`, created empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub background_service: Vec<String>,
    /// The run works in the workspace itself (`--in-place`) instead of a worktree.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_place: bool,
}

fn default_run_timeout() -> u64 {
    900
}

fn default_max_resumes() -> u32 {
    2
}

impl Default for RunSettings {
    fn default() -> Self {
        RunSettings {
            timeout_seconds: default_run_timeout(),
            resume_wait_on: Vec::new(),
            max_resumes: default_max_resumes(),
            check_quiescent: false,
            background_service: Vec::new(),
            in_place: false,
        }
    }
}

/// One oracle check: a shell command run from the root of a copy of the result tree, with
/// `$ORACLE_DIR` pointing at a copy of the case's `oracle/` folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OracleCheck {
    pub name: String,
    pub command: String,
    #[serde(default)]
    pub exit_code: i32,
    /// Every string must appear in stdout.
    #[serde(default)]
    pub stdout_contains: Vec<String>,
    /// No string may appear in stdout or stderr.
    #[serde(default)]
    pub output_excludes: Vec<String>,
    /// The check must fail on the untouched seed (hidden tests of a bug fix); the catalog
    /// self-test verifies it so a case cannot pass by doing nothing.
    #[serde(default)]
    pub fails_on_seed: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Oracle {
    #[serde(default = "default_oracle_timeout")]
    pub timeout_seconds: u64,
    #[serde(default, rename = "check")]
    pub checks: Vec<OracleCheck>,
}

fn default_oracle_timeout() -> u64 {
    300
}

/// `scenario.toml` as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    pub title: String,
    /// What the case probes, for people reading the scorecard.
    #[serde(default)]
    pub probes: String,
    #[serde(default)]
    pub tags: Vec<String>,
    pub expect: Expect,
    #[serde(default)]
    pub run: RunSettings,
    pub oracle: Oracle,
    /// Scripted profiles the case cannot apply to, each with the reason (`scenario list` shows
    /// it); the key is the profile that owns the script (`scripted-direct` for every protocol).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub not_applicable: BTreeMap<Profile, String>,
}

/// A validated case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scenario {
    pub name: String,
    pub dir: PathBuf,
    pub spec: ScenarioFile,
    pub brief: String,
    /// The scripted profiles this case has a script for (by [`Profile::script_key`]), and the
    /// script (`scripts/<profile>.toml` or `.json`, or the one it is derived from).
    pub scripts: BTreeMap<Profile, CaseScript>,
}

impl Scenario {
    pub fn seed_dir(&self) -> PathBuf {
        self.dir.join(SEED_DIR)
    }

    pub fn oracle_dir(&self) -> PathBuf {
        self.dir.join(ORACLE_DIR)
    }

    /// The script `profile` plays (every `scripted-direct*` profile plays `scripted-direct`'s).
    pub fn script_path(&self, profile: &Profile) -> Option<&Path> {
        self.scripts
            .get(&profile.script_key())
            .map(|s| s.path.as_path())
    }

    /// Why the case does not apply to `profile`, when its `scenario.toml` says so.
    pub fn not_applicable(&self, profile: &Profile) -> Option<&str> {
        self.spec
            .not_applicable
            .get(&profile.script_key())
            .map(String::as_str)
    }

    /// Whether the case can run on `profile` (scripted profiles need a script).
    pub fn supports(&self, profile: &Profile) -> bool {
        self.skip_reason(profile).is_none()
    }

    /// Why a job of this case on `profile` is not planned; `None` when it runs.
    pub fn skip_reason(&self, profile: &Profile) -> Option<SkipReason> {
        if let Some(reason) = self.not_applicable(profile) {
            return Some(SkipReason::NotApplicable(reason.to_owned()));
        }
        (profile.is_scripted() && self.script_path(profile).is_none())
            .then_some(SkipReason::NoScript)
    }
}

/// Why a (case, profile) pair is not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    /// A scripted profile and no script for it.
    NoScript,
    /// The case's `[not_applicable]` names the profile, with this reason.
    NotApplicable(String),
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SkipReason::NoScript => f.write_str("no script"),
            SkipReason::NotApplicable(reason) => write!(f, "not applicable: {reason}"),
        }
    }
}

/// Case names are folder names and path components of result folders.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> CatalogError + '_ {
    move |source| CatalogError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Parses and checks a `scenario.toml` text (pure: no file access).
pub fn parse_scenario_file(text: &str, path: &Path) -> Result<ScenarioFile, CatalogError> {
    let spec: ScenarioFile = toml::from_str(text).map_err(|e| CatalogError::Toml {
        path: path.to_owned(),
        message: e.to_string(),
    })?;
    let invalid = |message: String| CatalogError::Invalid {
        path: path.to_owned(),
        message,
    };
    if spec.title.trim().is_empty() {
        return Err(invalid("title is empty".into()));
    }
    if spec.expect.outcome == ExpectedOutcome::Stop && spec.expect.honest_stops.is_empty() {
        return Err(invalid(
            "expect.outcome = \"stop\" needs at least one code in expect.honest_stops".into(),
        ));
    }
    if spec.oracle.checks.is_empty() {
        return Err(invalid("the oracle has no [[oracle.check]]".into()));
    }
    let mut names = BTreeSet::new();
    for check in &spec.oracle.checks {
        if check.name.trim().is_empty() || check.command.trim().is_empty() {
            return Err(invalid(
                "an oracle check has an empty name or command".into(),
            ));
        }
        if !names.insert(check.name.as_str()) {
            return Err(invalid(format!(
                "oracle check {:?} appears twice",
                check.name
            )));
        }
    }
    if spec.run.background_service.iter().any(String::is_empty) {
        return Err(invalid(
            "run.background_service: an argument is empty (it is an argv, not a shell line)".into(),
        ));
    }
    for (profile, reason) in &spec.not_applicable {
        if !profile.is_scripted() || *profile != profile.script_key() {
            return Err(invalid(format!(
                "not_applicable: {profile} is not a scripted profile that owns a script (e.g. scripted-direct)"
            )));
        }
        if reason.trim().is_empty() {
            return Err(invalid(format!(
                "not_applicable: say why the case does not apply to {profile}"
            )));
        }
    }
    if spec.run.timeout_seconds == 0 || spec.oracle.timeout_seconds == 0 {
        return Err(invalid("timeouts must be positive".into()));
    }
    Ok(spec)
}

/// Loads and validates one case folder.
pub fn load_case(dir: &Path) -> Result<Scenario, CatalogError> {
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_owned();
    if !valid_name(&name) {
        return Err(CatalogError::BadName { name });
    }
    let spec_path = dir.join(SCENARIO_FILE);
    let text = std::fs::read_to_string(&spec_path).map_err(io_err(&spec_path))?;
    let spec = parse_scenario_file(&text, &spec_path)?;
    let brief_path = dir.join(BRIEF_FILE);
    let brief = std::fs::read_to_string(&brief_path).map_err(io_err(&brief_path))?;
    if brief.trim().is_empty() {
        return Err(CatalogError::Invalid {
            path: brief_path,
            message: "the brief is empty".into(),
        });
    }
    let seed = dir.join(SEED_DIR);
    if !seed.is_dir() {
        return Err(CatalogError::Invalid {
            path: seed,
            message: "the seed folder is missing".into(),
        });
    }
    let scripts_found = super::scripts::find_scripts(dir, &spec.not_applicable)?;
    Ok(Scenario {
        name,
        dir: dir.to_owned(),
        spec,
        brief,
        scripts: scripts_found,
    })
}

/// Loads every case under `catalog_dir` (each sub-folder with a `scenario.toml`), in name order.
pub fn load_catalog(catalog_dir: &Path) -> Result<Vec<Scenario>, CatalogError> {
    let mut dirs = Vec::new();
    for entry in std::fs::read_dir(catalog_dir).map_err(io_err(catalog_dir))? {
        let entry = entry.map_err(io_err(catalog_dir))?;
        if entry.path().join(SCENARIO_FILE).is_file() {
            dirs.push(entry.path());
        }
    }
    dirs.sort();
    dirs.iter().map(|d| load_case(d)).collect()
}

/// Picks cases by name (`None` = all), keeping catalog order.
pub fn select<'a>(
    catalog: &'a [Scenario],
    names: &[String],
    catalog_dir: &Path,
) -> Result<Vec<&'a Scenario>, CatalogError> {
    if names.is_empty() {
        return Ok(catalog.iter().collect());
    }
    for name in names {
        if !catalog.iter().any(|s| &s.name == name) {
            return Err(CatalogError::UnknownCase {
                name: name.clone(),
                dir: catalog_dir.to_owned(),
            });
        }
    }
    Ok(catalog.iter().filter(|s| names.contains(&s.name)).collect())
}

/// `selected` without the cases that carry any of `tags`, and the names of those left out.
pub fn without_tags<'a>(
    selected: Vec<&'a Scenario>,
    tags: &[String],
) -> (Vec<&'a Scenario>, Vec<String>) {
    let (tagged, untagged) = split_by_tags(selected, tags);
    (untagged, names(&tagged))
}

/// `selected` with only the cases that carry any of `tags`, and the names of those left out.
pub fn with_tags<'a>(
    selected: Vec<&'a Scenario>,
    tags: &[String],
) -> (Vec<&'a Scenario>, Vec<String>) {
    let (tagged, untagged) = split_by_tags(selected, tags);
    (tagged, names(&untagged))
}

/// The cases that carry any of `tags`, then those that carry none, each in `selected`'s order.
fn split_by_tags<'a>(
    selected: Vec<&'a Scenario>,
    tags: &[String],
) -> (Vec<&'a Scenario>, Vec<&'a Scenario>) {
    selected
        .into_iter()
        .partition(|s| s.spec.tags.iter().any(|t| tags.contains(t)))
}

fn names(cases: &[&Scenario]) -> Vec<String> {
    cases.iter().map(|s| s.name.clone()).collect()
}

/// `--shard I/N`: the I-th of N shards, I counted from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("bad shard {s:?}: expected I/N with 1 <= I <= N, e.g. 2/4");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let index: u32 = i.trim().parse().map_err(|_| bad())?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl Shard {
    /// Whether the `position`-th job (0-based, in a stable order) belongs to this shard.
    pub fn owns(&self, position: usize) -> bool {
        position % self.count as usize == (self.index - 1) as usize
    }
}

/// One unit of harness work: a case on a profile, repetition `repeat` (0-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job<'a> {
    pub scenario: &'a Scenario,
    pub profile: Profile,
    pub repeat: u32,
}

/// Every (case, profile, repetition) the case supports, in stable order, then this shard's
/// share. Cases without a script for a scripted profile, or marked not applicable to it, are
/// skipped (and returned apart, with the reason).
pub fn plan_jobs<'a>(
    cases: &[&'a Scenario],
    profiles: &[Profile],
    repeat: u32,
    shard: Option<Shard>,
) -> (Vec<Job<'a>>, Vec<(String, Profile, SkipReason)>) {
    let mut jobs = Vec::new();
    let mut unsupported = Vec::new();
    for scenario in cases {
        for profile in profiles {
            if let Some(reason) = scenario.skip_reason(profile) {
                unsupported.push((scenario.name.clone(), profile.clone(), reason));
                continue;
            }
            for r in 0..repeat {
                jobs.push(Job {
                    scenario,
                    profile: profile.clone(),
                    repeat: r,
                });
            }
        }
    }
    let jobs = match shard {
        Some(shard) => jobs
            .into_iter()
            .enumerate()
            .filter(|(i, _)| shard.owns(*i))
            .map(|(_, j)| j)
            .collect(),
        None => jobs,
    };
    (jobs, unsupported)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
title = "t"
[expect]
outcome = "complete"
[[oracle.check]]
name = "a"
command = "true"
"#;

    #[test]
    fn minimal_file_parses_with_defaults() {
        let spec = parse_scenario_file(MINIMAL, Path::new("x.toml")).unwrap();
        assert_eq!(spec.run.timeout_seconds, 900);
        assert_eq!(spec.oracle.checks[0].exit_code, 0);
        assert!(spec.expect.honest_stops.is_empty());
    }

    #[test]
    fn stop_without_codes_unknown_keys_and_bad_codes_are_refused() {
        let stop = MINIMAL.replace("\"complete\"", "\"stop\"");
        let err = parse_scenario_file(&stop, Path::new("x.toml")).unwrap_err();
        assert!(err.to_string().contains("honest_stops"), "{err}");
        let extra = format!("{MINIMAL}\nsurprise = 1\n");
        assert!(parse_scenario_file(&extra, Path::new("x.toml")).is_err());
        let bad_code = MINIMAL.replace(
            "outcome = \"complete\"",
            "outcome = \"complete\"\nhonest_stops = [\"PAUSED_NOPE\"]",
        );
        assert!(parse_scenario_file(&bad_code, Path::new("x.toml")).is_err());
        let dup = format!("{MINIMAL}[[oracle.check]]\nname = \"a\"\ncommand = \"true\"\n");
        let err = parse_scenario_file(&dup, Path::new("x.toml")).unwrap_err();
        assert!(err.to_string().contains("twice"), "{err}");
    }

    #[test]
    fn shards_parse_and_partition_every_job_exactly_once() {
        assert!("0/2".parse::<Shard>().is_err());
        assert!("3/2".parse::<Shard>().is_err());
        assert!("1/0".parse::<Shard>().is_err());
        assert!("x".parse::<Shard>().is_err());
        let shards: Vec<Shard> = (1..=3).map(|i| format!("{i}/3").parse().unwrap()).collect();
        for position in 0..20 {
            let owners = shards.iter().filter(|s| s.owns(position)).count();
            assert_eq!(owners, 1, "job {position}");
        }
    }

    fn case(name: &str, profiles: &[Profile]) -> Scenario {
        Scenario {
            name: name.into(),
            dir: PathBuf::from(name),
            spec: parse_scenario_file(MINIMAL, Path::new("x")).unwrap(),
            brief: "b".into(),
            scripts: profiles
                .iter()
                .map(|p| (p.clone(), CaseScript::own(PathBuf::from("s.json"))))
                .collect(),
        }
    }

    #[test]
    fn jobs_skip_unsupported_profiles_and_shard_stably() {
        let a = case("a", &[Profile::ScriptedCodex]);
        let b = case("b", &[Profile::ScriptedCodex, Profile::ScriptedClaude]);
        let cases = vec![&a, &b];
        let profiles = [Profile::ScriptedCodex, Profile::ScriptedClaude];
        let (jobs, unsupported) = plan_jobs(&cases, &profiles, 2, None);
        assert_eq!(jobs.len(), 6);
        assert_eq!(
            unsupported,
            vec![(
                "a".to_owned(),
                Profile::ScriptedClaude,
                SkipReason::NoScript
            )]
        );
        let first: Vec<_> = plan_jobs(&cases, &profiles, 2, Some("1/2".parse().unwrap())).0;
        let second: Vec<_> = plan_jobs(&cases, &profiles, 2, Some("2/2".parse().unwrap())).0;
        assert_eq!(first.len() + second.len(), 6);
        assert!(first.iter().all(|j| !second.contains(j)));
        let live = [Profile::Live("live-x".into())];
        assert_eq!(plan_jobs(&cases, &live, 1, None).0.len(), 2);
    }

    #[test]
    fn not_applicable_marks_parse_skip_every_direct_protocol_and_are_checked() {
        let marked = format!(
            "{MINIMAL}\n[not_applicable]\nscripted-direct = \"writes into a CLI's own stream\"\n"
        );
        let spec = parse_scenario_file(&marked, Path::new("x.toml")).unwrap();
        let direct = Profile::ScriptedDirect(DirectWire::Rotate);
        let mut a = case("a", &[Profile::ScriptedCodex, direct.clone()]);
        a.scripts.remove(&direct);
        a.spec = spec;
        let pinned = Profile::ScriptedDirect(DirectWire::Responses);
        assert_eq!(
            a.not_applicable(&pinned),
            Some("writes into a CLI's own stream")
        );
        let (jobs, skipped) = plan_jobs(&[&a], &[Profile::ScriptedCodex, pinned.clone()], 1, None);
        assert_eq!(jobs.len(), 1);
        assert_eq!(
            skipped,
            vec![(
                "a".to_owned(),
                pinned,
                SkipReason::NotApplicable("writes into a CLI's own stream".into())
            )]
        );
        assert!(skipped[0].2.to_string().starts_with("not applicable: "));
        // The key must own a script, be scripted, and come with a reason.
        for bad in [
            "scripted-direct-responses = \"r\"",
            "live-codex = \"r\"",
            "scripted-direct = \" \"",
            "scripted-nope = \"r\"",
        ] {
            let text = format!("{MINIMAL}\n[not_applicable]\n{bad}\n");
            assert!(
                parse_scenario_file(&text, Path::new("x.toml")).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_direct_profile_plays_the_scripted_direct_script() {
        let direct = Profile::ScriptedDirect(DirectWire::Rotate);
        let c = case("c", std::slice::from_ref(&direct));
        for wire in DirectWire::ALL {
            let p = Profile::ScriptedDirect(wire);
            assert!(c.supports(&p));
            assert_eq!(c.script_path(&p), Some(Path::new("s.json")));
        }
        assert_eq!(
            c.skip_reason(&Profile::ScriptedCodex),
            Some(SkipReason::NoScript)
        );
    }

    #[test]
    fn names_are_checked() {
        assert!(valid_name("bugfix-hidden-tests"));
        assert!(!valid_name("Bad"));
        assert!(!valid_name("../x"));
        assert!(!valid_name("-x"));
        assert!(!valid_name(""));
    }
}
