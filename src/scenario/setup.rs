//! The throwaway world a case runs in: its seed repository, a HOME of its own with the CLI's
//! configuration pointing at the scripted model, the environment a user's shell would give the
//! agents, and the fingerprints that show what a run changed there.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::catalog::Profile;
use super::oracle;
use super::runner::{SCRIPTED_MODEL, scripted_model_name};
use crate::provider::ConfigPaths;
use crate::run::workspace;
use crate::scripted_model::RunningServer;
use crate::transport::BuiltinTransport;

/// Copies a directory tree (files, folders and symlinks).
pub fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path())?, &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// (relative path, length, modification time) of every file under `root` except `.git`: two
/// equal fingerprints mean nothing wrote into the tree in between.
pub fn fingerprint(root: &Path) -> BTreeMap<PathBuf, (u64, Option<SystemTime>)> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, (u64, Option<SystemTime>)>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_name() == ".git" {
                continue;
            }
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                walk(root, &path, out);
            } else if let Ok(rel) = path.strip_prefix(root) {
                out.insert(rel.to_owned(), (meta.len(), meta.modified().ok()));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// HOME's fingerprint without autocode's own places (its run-state key, verification roots and
/// configuration), which autocode itself writes outside every room.
pub(super) fn home_fingerprint(home: &Path) -> BTreeMap<PathBuf, (u64, Option<SystemTime>)> {
    const OWN: [&str; 3] = [
        ".local/state/autocode",
        ".cache/autocode",
        ".config/autocode",
    ];
    fingerprint(home)
        .into_iter()
        .filter(|(path, _)| !OWN.iter().any(|own| path.starts_with(own)))
        .collect()
}

/// The paths whose fingerprint differs between `before` and `after`.
pub(super) fn changed_paths(
    before: &BTreeMap<PathBuf, (u64, Option<SystemTime>)>,
    after: &BTreeMap<PathBuf, (u64, Option<SystemTime>)>,
) -> Vec<String> {
    before
        .keys()
        .chain(after.keys())
        .filter(|k| before.get(*k) != after.get(*k))
        .map(|k| k.display().to_string())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// A fresh git repository holding `seed` as its one commit.
pub async fn seed_repository(
    seed: &Path,
    dest: &Path,
    env: &BTreeMap<String, String>,
) -> Result<(), String> {
    copy_tree(seed, dest).map_err(|e| format!("cannot copy the seed: {e}"))?;
    let steps: [&[&str]; 3] = [
        &["init", "-q", "-b", "main"],
        &["add", "-A"],
        &[
            "-c",
            "user.name=autocode scenario",
            "-c",
            "user.email=scenario@autocode.invalid",
            "-c",
            "commit.gpgsign=false",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "seed",
        ],
    ];
    for args in steps {
        workspace::git(dest, args, env)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The isolated configuration of a scripted CLI against `server`, written under `home`, and
/// the variables the CLI needs (`crate::demo::isolated_cli_env`, with the scripts' one model and
/// no CLI retries, so a script's fault counts are exact). A `scripted-acp-*` profile's agent reads
/// its native CLI's configuration, and its tool is registered in the run's own provider registry
/// (the one `HOME`/`XDG_CONFIG_HOME` of the returned variables name), with the pinned CLIs of
/// `cli_bin_dir` (`PinnedAcpAgent::register`).
pub fn write_cli_config(
    profile: &Profile,
    home: &Path,
    server: &RunningServer,
    cli_bin_dir: &Path,
) -> Result<BTreeMap<String, String>, String> {
    let transport = match profile {
        Profile::ScriptedCodex => BuiltinTransport::Codex,
        Profile::ScriptedClaude => BuiltinTransport::Claude,
        Profile::ScriptedOpencode => BuiltinTransport::Opencode,
        Profile::ScriptedAcp(agent) => agent.cli(),
        Profile::ScriptedFake | Profile::ScriptedDirect(_) | Profile::Live(_) => {
            return Err(format!(
                "profile {profile} has no scripted CLI configuration"
            ));
        }
    };
    let setup = crate::demo::ScriptedCli {
        models: &[SCRIPTED_MODEL],
        max_retries: 0,
    };
    let mut env = crate::demo::isolated_cli_env(transport, server, home, setup)
        .map_err(|e| format!("{}: {e}", home.display()))?;
    if let Profile::ScriptedAcp(agent) = profile {
        let paths = ConfigPaths::from_env(&to_os(&env)).map_err(|e| e.to_string())?;
        let model = scripted_model_name(profile);
        let extra = agent
            .register(&paths.user_dir, Some(cli_bin_dir), |_| model.clone())
            .map_err(|e| format!("{}: {e}", paths.user_dir.display()))?;
        env.extend(extra);
    }
    Ok(env)
}

/// The environment of a scripted run: a throwaway HOME and XDG dirs, the CLIs and the host's
/// tools on PATH, the host's Rust toolchain homes (so `cargo` works under the throwaway HOME).
pub(super) fn scripted_env(
    host: &BTreeMap<String, String>,
    home: &Path,
    cli_bin_dir: &Path,
) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    let host_path = host.get("PATH").cloned().unwrap_or_default();
    env.insert(
        "PATH".into(),
        format!("{}:{host_path}", cli_bin_dir.display()),
    );
    env.extend(oracle::toolchain_env(host));
    env.insert("HOME".into(), home.display().to_string());
    env.insert(
        "XDG_CONFIG_HOME".into(),
        home.join(".config").display().to_string(),
    );
    env.insert(
        "XDG_DATA_HOME".into(),
        home.join(".local/share").display().to_string(),
    );
    env.insert(
        "XDG_CACHE_HOME".into(),
        home.join(".cache").display().to_string(),
    );
    env.insert(
        "XDG_STATE_HOME".into(),
        home.join(".local/state").display().to_string(),
    );
    env.insert("LANG".into(), "C.UTF-8".into());
    env.insert("GIT_CONFIG_NOSYSTEM".into(), "1".into());
    env.insert("GIT_AUTHOR_NAME".into(), "autocode scenario".into());
    env.insert(
        "GIT_AUTHOR_EMAIL".into(),
        "scenario@autocode.invalid".into(),
    );
    env.insert("GIT_COMMITTER_NAME".into(), "autocode scenario".into());
    env.insert(
        "GIT_COMMITTER_EMAIL".into(),
        "scenario@autocode.invalid".into(),
    );
    env
}

/// Codex runs commands in a login shell (`bash -lc`), and a login shell's `/etc/profile` resets
/// PATH (for root on Debian): the throwaway HOME gets the `~/.profile` a real one would have
/// (rustup's installer adds the same), restoring the run's PATH.
pub(super) fn write_login_profile(
    home: &Path,
    env: &BTreeMap<String, String>,
) -> std::io::Result<()> {
    let path = env.get("PATH").cloned().unwrap_or_default();
    let quoted = format!("'{}'", path.replace('\'', "'\\''"));
    std::fs::write(home.join(".profile"), format!("export PATH={quoted}\n"))
}

pub(super) fn to_os(env: &BTreeMap<String, String>) -> BTreeMap<OsString, OsString> {
    env.iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scripted_model::ScriptSyntax;
    use crate::scripted_model::{Script, ScriptedServer, ServerConfig};

    #[test]
    fn copy_tree_keeps_folders_files_and_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let from = dir.path().join("from");
        std::fs::create_dir_all(from.join("a/b")).unwrap();
        std::fs::write(from.join("a/b/c.txt"), "c").unwrap();
        std::os::unix::fs::symlink("a/b/c.txt", from.join("link")).unwrap();
        let to = dir.path().join("to");
        copy_tree(&from, &to).unwrap();
        assert_eq!(std::fs::read_to_string(to.join("a/b/c.txt")).unwrap(), "c");
        assert_eq!(
            std::fs::read_link(to.join("link")).unwrap(),
            PathBuf::from("a/b/c.txt")
        );
    }

    #[test]
    fn fingerprints_see_writes_and_ignore_git() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join("f.txt"), "1").unwrap();
        let before = fingerprint(dir.path());
        std::fs::write(dir.path().join(".git/index"), "x").unwrap();
        assert_eq!(fingerprint(dir.path()), before, ".git is not the work tree");
        std::fs::write(dir.path().join("f.txt"), "12").unwrap();
        assert_ne!(fingerprint(dir.path()), before);
        assert!(before.contains_key(Path::new("f.txt")));
    }

    #[test]
    fn login_profile_restores_path_with_quotes_escaped() {
        let dir = tempfile::tempdir().unwrap();
        let env: BTreeMap<String, String> = [("PATH".to_owned(), "/a b:/it's".to_owned())]
            .into_iter()
            .collect();
        write_login_profile(dir.path(), &env).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join(".profile")).unwrap(),
            "export PATH='/a b:/it'\\''s'\n"
        );
    }

    #[test]
    fn scripted_env_isolates_home_and_puts_the_clis_first() {
        let host: BTreeMap<String, String> = [
            ("PATH".to_owned(), "/usr/bin".to_owned()),
            ("HOME".to_owned(), "/nonexistent-home".to_owned()),
            ("OPENAI_API_KEY".to_owned(), "secret".to_owned()),
        ]
        .into_iter()
        .collect();
        let env = scripted_env(&host, Path::new("/tmp/h"), Path::new("/clis"));
        assert_eq!(env.get("PATH").unwrap(), "/clis:/usr/bin");
        assert_eq!(env.get("HOME").unwrap(), "/tmp/h");
        assert_eq!(env.get("XDG_CONFIG_HOME").unwrap(), "/tmp/h/.config");
        assert!(!env.contains_key("OPENAI_API_KEY"), "nothing else leaks in");
        assert_eq!(
            scripted_model_name(&Profile::ScriptedOpencode),
            "mock/mock-model"
        );
        assert_eq!(scripted_model_name(&Profile::ScriptedCodex), "mock-model");
    }

    #[tokio::test]
    async fn cli_configs_point_at_the_server() {
        let script = Script::parse(
            r#"{"conversation": [{"name": "c", "step": [{"kind": "text", "text": "hi"}]}]}"#,
            ScriptSyntax::Json,
            Path::new("s.json"),
        )
        .unwrap();
        let server = ScriptedServer::start(ServerConfig::new(script))
            .await
            .unwrap();
        let home = tempfile::tempdir().unwrap();
        let codex =
            write_cli_config(&Profile::ScriptedCodex, home.path(), &server, home.path()).unwrap();
        let config = std::fs::read_to_string(home.path().join(".codex/config.toml")).unwrap();
        assert!(config.contains(&server.openai_base_url()));
        assert!(config.contains("stream_max_retries = 0"));
        assert_eq!(codex.get("AUTOCODE_PASS_ENV").unwrap(), "MOCK_API_KEY");
        write_cli_config(
            &Profile::ScriptedOpencode,
            home.path(),
            &server,
            home.path(),
        )
        .unwrap();
        let opencode =
            std::fs::read_to_string(home.path().join(".config/opencode/opencode.json")).unwrap();
        assert!(opencode.contains(&server.openai_base_url()));
        let claude =
            write_cli_config(&Profile::ScriptedClaude, home.path(), &server, home.path()).unwrap();
        assert_eq!(
            claude.get("ANTHROPIC_BASE_URL").unwrap(),
            &server.base_url()
        );
        assert!(
            write_cli_config(&Profile::ScriptedFake, home.path(), &server, home.path()).is_err()
        );
        // An ACP profile: its agent's CLI configuration, and its tool in the run's registry.
        let acp = Profile::ScriptedAcp(crate::acp::PinnedAcpAgent::Claude);
        let env = write_cli_config(&acp, home.path(), &server, home.path()).unwrap();
        assert_eq!(env.get("ANTHROPIC_BASE_URL").unwrap(), &server.base_url());
        assert_eq!(env.get("IS_SANDBOX").map(String::as_str), Some("1"));
        let registry = crate::provider::Registry::new(ConfigPaths::from_env(&to_os(&env)).unwrap());
        let tool = registry.resolve_name(acp.provider()).unwrap();
        assert_eq!(tool.config.name.as_str(), "claude-acp");
        server.shutdown().await;
    }
}
