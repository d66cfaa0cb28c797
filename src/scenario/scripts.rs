//! The scripts of one case folder: the `scripts/<profile>.{toml,json}` files, the
//! `scripted-direct` script derived from the CLI scripts when they agree, and the profiles the
//! case marks not applicable (`[not_applicable]` in `scenario.toml`).
//!
//! Invariants: every script file parses as a scripted-model script and is named after a scripted
//! profile that owns its script ([`Profile::script_key`]); a profile has a script or a
//! not-applicable mark, never both; `scripted-direct` without its own file plays the CLI
//! scripts' steps only when every CLI script of the case is the same script (the steps are
//! abstract, the scripted model turns them into each runtime's tool calls); CLI scripts that
//! differ are CLI-specific, and the case must then say what the direct runtime gets.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::catalog::{CatalogError, SCRIPTS_DIR};
use super::profile::{DirectWire, Profile};
use crate::scripted_model::Script;

/// Where a profile's script comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseScript {
    /// The file the scripted model plays.
    pub path: PathBuf,
    /// For a derived script, the profile whose file it is (`scripted-direct` playing the CLI
    /// scripts' steps); `None` for the profile's own file.
    pub derived_from: Option<Profile>,
}

impl CaseScript {
    pub fn own(path: PathBuf) -> CaseScript {
        CaseScript {
            path,
            derived_from: None,
        }
    }
}

/// The order a derived `scripted-direct` script names its source in (any would do: they are
/// the same script).
const DERIVE_FROM: [Profile; 3] = [
    Profile::ScriptedCodex,
    Profile::ScriptedClaude,
    Profile::ScriptedOpencode,
];

fn script_err(path: &Path, profile: &str, message: impl Into<String>) -> CatalogError {
    CatalogError::Script {
        path: path.to_owned(),
        profile: profile.to_owned(),
        message: message.into(),
    }
}

/// The scripts of the case folder `dir`, by profile (script keys only), given the profiles its
/// `scenario.toml` marks not applicable.
pub fn find_scripts(
    dir: &Path,
    not_applicable: &BTreeMap<Profile, String>,
) -> Result<BTreeMap<Profile, CaseScript>, CatalogError> {
    let scripts_dir = dir.join(SCRIPTS_DIR);
    let io = |source| CatalogError::Io {
        path: scripts_dir.clone(),
        source,
    };
    let mut found: BTreeMap<Profile, (CaseScript, Script)> = BTreeMap::new();
    if scripts_dir.is_dir() {
        for entry in std::fs::read_dir(&scripts_dir).map_err(io)? {
            let path = entry.map_err(io)?.path();
            let Some(stem) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".toml").or_else(|| n.strip_suffix(".json")))
                .map(str::to_owned)
            else {
                return Err(CatalogError::Invalid {
                    path,
                    message: "scripts/ holds only <profile>.toml or <profile>.json files".into(),
                });
            };
            let profile: Profile = stem
                .parse()
                .map_err(|message: String| script_err(&path, &stem, message))?;
            if !profile.is_scripted() {
                return Err(script_err(
                    &path,
                    &stem,
                    "only scripted-* profiles take a script",
                ));
            }
            if profile != profile.script_key() {
                return Err(script_err(
                    &path,
                    &stem,
                    format!(
                        "{profile} plays scripts/{}.json (one script for every protocol)",
                        profile.script_key()
                    ),
                ));
            }
            if not_applicable.contains_key(&profile) {
                return Err(script_err(
                    &path,
                    &stem,
                    "the case marks this profile not applicable in scenario.toml: remove the mark or the script",
                ));
            }
            let script =
                Script::load(&path).map_err(|e| script_err(&path, &stem, e.to_string()))?;
            if found
                .insert(profile, (CaseScript::own(path.clone()), script))
                .is_some()
            {
                return Err(script_err(&path, &stem, "two scripts for one profile"));
            }
        }
    }
    let direct = Profile::ScriptedDirect(DirectWire::Rotate);
    if !found.contains_key(&direct) && !not_applicable.contains_key(&direct) {
        let clis: Vec<(&Profile, &(CaseScript, Script))> = DERIVE_FROM
            .iter()
            .filter_map(|p| found.get(p).map(|s| (p, s)))
            .collect();
        if let Some((first, (source, script))) = clis.first() {
            if let Some((other, _)) = clis.iter().find(|(_, (_, s))| s != script) {
                return Err(script_err(
                    &scripts_dir,
                    direct.as_str(),
                    format!(
                        "the {first} and {other} scripts differ (CLI-specific), so {direct} cannot play them: \
                         add scripts/{direct}.json, or mark {direct} in [not_applicable] of scenario.toml with the reason"
                    ),
                ));
            }
            let derived = CaseScript {
                path: source.path.clone(),
                derived_from: Some((*first).clone()),
            };
            found.insert(direct, (derived, script.clone()));
        }
    }
    Ok(found.into_iter().map(|(p, (s, _))| (p, s)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRIPT: &str =
        r#"{"conversation": [{"name": "c", "step": [{"kind": "text", "text": "hi"}]}]}"#;
    const OTHER: &str =
        r#"{"conversation": [{"name": "c", "step": [{"kind": "text", "text": "ho"}]}]}"#;

    fn case_dir(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(SCRIPTS_DIR)).unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(SCRIPTS_DIR).join(name), text).unwrap();
        }
        dir
    }

    fn direct() -> Profile {
        Profile::ScriptedDirect(DirectWire::Rotate)
    }

    #[test]
    fn agreeing_cli_scripts_give_a_derived_direct_script() {
        let dir = case_dir(&[
            ("scripted-claude.json", SCRIPT),
            ("scripted-codex.json", SCRIPT),
        ]);
        let found = find_scripts(dir.path(), &BTreeMap::new()).unwrap();
        let derived = &found[&direct()];
        assert_eq!(derived.derived_from, Some(Profile::ScriptedCodex));
        assert_eq!(derived.path, dir.path().join("scripts/scripted-codex.json"));
        assert_eq!(found[&Profile::ScriptedCodex].derived_from, None);
    }

    #[test]
    fn an_own_direct_script_wins_and_differing_cli_scripts_need_one() {
        let differ = [
            ("scripted-codex.json", SCRIPT),
            ("scripted-opencode.json", OTHER),
        ];
        let dir = case_dir(&differ);
        let err = find_scripts(dir.path(), &BTreeMap::new()).unwrap_err();
        assert!(err.to_string().contains("differ"), "{err}");
        std::fs::write(dir.path().join("scripts/scripted-direct.json"), OTHER).unwrap();
        let found = find_scripts(dir.path(), &BTreeMap::new()).unwrap();
        assert_eq!(
            found[&direct()],
            CaseScript::own(dir.path().join("scripts/scripted-direct.json"))
        );
    }

    #[test]
    fn not_applicable_marks_exclude_and_conflict_with_a_script() {
        let na: BTreeMap<Profile, String> = [(direct(), "writes into a CLI's stream".into())]
            .into_iter()
            .collect();
        let dir = case_dir(&[
            ("scripted-codex.json", SCRIPT),
            ("scripted-opencode.json", OTHER),
        ]);
        let found = find_scripts(dir.path(), &na).unwrap();
        assert!(!found.contains_key(&direct()));
        std::fs::write(dir.path().join("scripts/scripted-direct.json"), SCRIPT).unwrap();
        let err = find_scripts(dir.path(), &na).unwrap_err();
        assert!(err.to_string().contains("not applicable"), "{err}");
    }

    #[test]
    fn pinned_protocol_files_and_unknown_names_are_refused() {
        let dir = case_dir(&[("scripted-direct-responses.json", SCRIPT)]);
        let err = find_scripts(dir.path(), &BTreeMap::new()).unwrap_err();
        assert!(
            err.to_string().contains("scripts/scripted-direct.json"),
            "{err}"
        );
        let dir = case_dir(&[("live-codex.json", SCRIPT)]);
        assert!(find_scripts(dir.path(), &BTreeMap::new()).is_err());
        let dir = case_dir(&[("scripted-codex.json", "{not json")]);
        assert!(find_scripts(dir.path(), &BTreeMap::new()).is_err());
        let none = tempfile::tempdir().unwrap();
        assert!(
            find_scripts(none.path(), &BTreeMap::new())
                .unwrap()
                .is_empty()
        );
    }
}
