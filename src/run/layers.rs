//! The run's private copy-on-write layers of HOME and of the toolchain homes the agents'
//! environment names outside it (the room's `PrivateViews::layers`): where each role's writes to
//! them land, and the throwaway layers of replays.
//!
//! A toolchain home is a directory a variable such as `CARGO_HOME`, `GOMODCACHE` or
//! `UV_CACHE_DIR` names ([`TOOLCHAIN_DIR_VARIABLES`]): a build writes there as it fetches its
//! dependencies. Beneath HOME (the default of every toolchain) HOME's layer covers it; elsewhere
//! (a container image's `/usr/local/cargo` or `/go`, a shared cache) it gets a layer of its own
//! ([`toolchain_dirs`]), kept and thrown away exactly like HOME's.
//!
//! One layer per role per run (the builder's stages share one: a dependency fetched once stays
//! fetched, a CLI's sessions persist for that role's repairs and resumes); a judging role never
//! sees another role's layer; every replay gets a fresh layer of its own, removed when it ends.
//! A layer cannot live beneath the HOME it covers (overlayfs refuses overlapping layers), so the
//! layers are kept in `/var/tmp/autocode-<uid>/layers/` (or `$AUTOCODE_LAYERS_DIR`), one
//! directory per run named by a digest of its run directory and holding a `run-dir` file that
//! names it: `autocode clean` removes the run's layers, and every run sweeps the layers of runs
//! whose directory is gone and the throwaway layers no living autocode holds (each holds a lock
//! on its `held` file while it lives: one left by an autocode killed mid-replay is removed by
//! the next run, not a day later).
//!
//! The few files a CLI must persist for the user (a refreshed sign-in token: the provider's
//! `[confine] write_through`) are written through: before a stage the layer's copy is dropped
//! (the stage reads the user's current file) and after it a regular file the stage wrote there is
//! copied to the user's file. Nothing else in a layer ever reaches the user's HOME.

use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::role::Role;
use crate::supervise::Overlay;

/// Overrides where the layers live (tests; hosts whose `/var/tmp` is unusable).
pub const LAYERS_DIR_ENV: &str = "AUTOCODE_LAYERS_DIR";
const OWNER: &str = "run-dir";
/// A write-through file larger than this is not a sign-in token: it stays in the layer.
const WRITE_THROUGH_CAP: u64 = 256 * 1024;

/// The HOME a room's view covers: `HOME` of the agents' environment, canonical, a directory
/// other than `/`. `None`: no HOME view (the room then keeps HOME read-only, as without layers).
pub fn home_of(env: &std::collections::BTreeMap<String, String>) -> Option<PathBuf> {
    let home = env.get("HOME").filter(|h| h.starts_with('/'))?;
    let home = std::fs::canonicalize(home).ok()?;
    (home.is_dir() && home != Path::new("/")).then_some(home)
}

/// Where every run's layers live for this user, made private to the user when missing.
pub fn base() -> io::Result<PathBuf> {
    if let Some(dir) = std::env::var_os(LAYERS_DIR_ENV).filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir)?;
        return Ok(dir);
    }
    let uid = nix::unistd::geteuid().as_raw();
    let dir = PathBuf::from(format!("/var/tmp/autocode-{uid}"));
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    // Another user may have made it first (a shared /var/tmp): only our own private directory.
    let meta = std::fs::symlink_metadata(&dir)?;
    if !meta.is_dir() || meta.uid() != uid || meta.permissions().mode() & 0o077 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} is not a private directory of this user (a symlink, another owner or open \
                 permissions): remove it, or set {LAYERS_DIR_ENV}",
                dir.display()
            ),
        ));
    }
    std::fs::create_dir_all(dir.join("layers"))?;
    Ok(dir.join("layers"))
}

/// The directory of one run's layers.
pub fn run_layers(run_dir: &Path) -> io::Result<PathBuf> {
    Ok(base()?.join(path_name(run_dir)))
}

/// A directory name for `path`: the first 8 bytes of its sha256, in hex.
fn path_name(path: &Path) -> String {
    let digest = Sha256::digest(path.as_os_str().as_bytes());
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// `role`'s layer of `home` in the run whose directory is `run_dir` (made when missing).
pub fn role_layer(run_dir: &Path, role: Role, home: &Path) -> io::Result<Overlay> {
    let root = run_layers(run_dir)?;
    claim(&root, run_dir)?;
    layer_in(&root.join(role.as_str()), home)
}

/// `role`'s layer of the toolchain home `dir` (one of [`toolchain_dirs`]) in the run whose
/// directory is `run_dir`, made when missing: beside the role's HOME layer, named by a digest of
/// the directory it covers.
pub fn role_toolchain_layer(run_dir: &Path, role: Role, dir: &Path) -> io::Result<Overlay> {
    let root = run_layers(run_dir)?;
    claim(&root, run_dir)?;
    let name = path_name(dir);
    layer_in(&root.join(role.as_str()).join("toolchains").join(name), dir)
}

/// The variables that name a toolchain's home, package store or cache: where an honest build
/// writes as it fetches dependencies, installs a pinned toolchain or caches its work. Each may
/// hold one directory (`GOPATH` a list).
pub const TOOLCHAIN_DIR_VARIABLES: [&str; 35] = [
    "CARGO_HOME",
    "RUSTUP_HOME",
    "GOPATH",
    "GOMODCACHE",
    "GOCACHE",
    "npm_config_cache",
    "NPM_CONFIG_CACHE",
    "YARN_CACHE_FOLDER",
    "PNPM_HOME",
    "PNPM_STORE_DIR",
    "BUN_INSTALL",
    "DENO_DIR",
    "UV_CACHE_DIR",
    "UV_PYTHON_INSTALL_DIR",
    "UV_TOOL_DIR",
    "PIP_CACHE_DIR",
    "POETRY_CACHE_DIR",
    "PIPX_HOME",
    "PYTHONUSERBASE",
    "XDG_CACHE_HOME",
    "GRADLE_USER_HOME",
    "COURSIER_CACHE",
    "GEM_HOME",
    "BUNDLE_USER_HOME",
    "COMPOSER_HOME",
    "COMPOSER_CACHE_DIR",
    "NUGET_PACKAGES",
    "DOTNET_CLI_HOME",
    "CCACHE_DIR",
    "SCCACHE_DIR",
    "STACK_ROOT",
    "CABAL_DIR",
    "ZIG_GLOBAL_CACHE_DIR",
    "MIX_HOME",
    "HEX_HOME",
];

/// The top directories of the system, never layered as a whole.
const SYSTEM_DIRS: [&str; 14] = [
    "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib64", "/opt", "/proc", "/run", "/sbin",
    "/sys", "/usr", "/var",
];

/// The toolchain homes `env` names ([`TOOLCHAIN_DIR_VARIABLES`]) that need a layer of their
/// own: existing directories (canonical) outside HOME and `/tmp` (their layers cover what lies
/// beneath), that neither lie in nor contain one of `keep_clear` (the workspace, the work tree,
/// the run directory: shown as they are), HOME, `/tmp` or the layers' own directory, and are not
/// `/` or a top directory of the system. Outermost only: `GOMODCACHE=/go/pkg/mod` lies in
/// `GOPATH=/go`'s layer. Sorted, so a stage's layers are the same at every launch.
pub fn toolchain_dirs(
    env: &std::collections::BTreeMap<String, String>,
    keep_clear: &[&Path],
) -> Vec<PathBuf> {
    let home = home_of(env);
    let mut clear: Vec<PathBuf> = keep_clear
        .iter()
        .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf()))
        .collect();
    clear.extend(home.clone());
    clear.push(std::fs::canonicalize("/tmp").unwrap_or_else(|_| PathBuf::from("/tmp")));
    clear.extend(base().ok().and_then(|b| std::fs::canonicalize(b).ok()));
    let mut dirs: Vec<PathBuf> = Vec::new();
    for name in TOOLCHAIN_DIR_VARIABLES {
        let Some(value) = env.get(name) else { continue };
        for entry in value.split(':').filter(|v| v.starts_with('/')) {
            let Ok(dir) = std::fs::canonicalize(entry) else {
                continue;
            };
            let system =
                dir == Path::new("/") || SYSTEM_DIRS.iter().any(|top| dir == Path::new(top));
            let overlaps = clear
                .iter()
                .any(|other| dir.starts_with(other) || other.starts_with(&dir));
            if dir.is_dir() && !system && !overlaps {
                dirs.push(dir);
            }
        }
    }
    dirs.sort();
    dirs.dedup();
    dirs.iter()
        .filter(|dir| {
            !dirs
                .iter()
                .any(|other| other != *dir && dir.starts_with(other))
        })
        .cloned()
        .collect()
}

fn layer_in(dir: &Path, home: &Path) -> io::Result<Overlay> {
    let upper = dir.join("upper");
    let work = dir.join("work");
    std::fs::create_dir_all(&upper)?;
    std::fs::create_dir_all(&work)?;
    Ok(Overlay {
        dir: home.to_owned(),
        lower: home.to_owned(),
        upper,
        work,
    })
}

fn claim(root: &Path, run_dir: &Path) -> io::Result<()> {
    let owner = root.join(OWNER);
    let named = run_dir.as_os_str().as_bytes();
    if std::fs::read(&owner).is_ok_and(|held| held == named) {
        return Ok(());
    }
    std::fs::create_dir_all(root)?;
    std::fs::write(owner, named)
}

/// A replay's layer: fresh, removed when dropped. Held by an exclusive `flock` on its `held`
/// file while it lives, so a sweep knows a layer whose autocode died (`kill -9`) at once.
#[derive(Debug)]
pub struct ThrowawayLayer {
    dir: PathBuf,
    overlay: Overlay,
    _held: crate::store::RunLock,
}

/// The file a throwaway layer holds locked while it lives.
const HELD: &str = "held";

impl ThrowawayLayer {
    pub fn new(covered: &Path) -> io::Result<Self> {
        Self::new_in(&base()?, covered)
    }

    fn new_in(base: &Path, covered: &Path) -> io::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("layer-")
            .tempdir_in(base)?
            .keep();
        let made = (|| {
            let held = crate::store::RunLock::acquire(&dir.join(HELD)).map_err(io::Error::other)?;
            let overlay = layer_in(&dir, covered)?;
            Ok((held, overlay))
        })();
        match made {
            Ok((held, overlay)) => Ok(Self {
                dir,
                overlay,
                _held: held,
            }),
            Err(e) => {
                let _ = crate::store::remove_tree(&dir);
                Err(e)
            }
        }
    }

    pub fn overlay(&self) -> &Overlay {
        &self.overlay
    }
}

impl Drop for ThrowawayLayer {
    fn drop(&mut self) {
        if let Err(e) = crate::store::remove_tree(&self.dir) {
            tracing::debug!("replay layer {}: {e}", self.dir.display());
        }
    }
}

/// Removes the run's layers (`autocode clean`).
pub fn remove_run_layers(run_dir: &Path) -> io::Result<()> {
    let root = run_layers(run_dir)?;
    match crate::store::remove_tree(&root) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Removes the layers of runs whose run directory is gone, and replay layers a killed autocode
/// left: unheld (their `held` file's lock is free) once a minute old, or without a `held` file a
/// day old. Returns how many were removed.
pub fn sweep_orphans() -> usize {
    match base() {
        Ok(base) => sweep_in(&base),
        Err(_) => 0,
    }
}

/// The name a layer directory takes while it is removed: renamed first, so a removal cut short
/// (the process ended mid-way) is finished by the next sweep, whatever it had removed (its
/// `owner` file included), and two sweeps never remove the same directory.
const GONE_PREFIX: &str = ".gone-";

fn sweep_in(base: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(base) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name.as_bytes().starts_with(GONE_PREFIX.as_bytes()) {
            let _ = crate::store::remove_tree(&path);
            continue;
        }
        let orphan = match std::fs::read(path.join(OWNER)) {
            Ok(run_dir) => !Path::new(std::ffi::OsStr::from_bytes(&run_dir)).exists(),
            // A replay layer: in use only while its replay runs.
            Err(_) => {
                let age = entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .map_or(0, |age| age.as_secs());
                let held = path.join(HELD);
                if std::fs::symlink_metadata(&held).is_ok_and(|m| m.is_file()) {
                    // A minute's grace: a layer being made has its file before its lock.
                    age > 60 && crate::store::RunLock::acquire(&held).is_ok()
                } else {
                    age > 24 * 3600
                }
            }
        };
        if !orphan {
            continue;
        }
        let mut gone_name = std::ffi::OsString::from(GONE_PREFIX);
        gone_name.push(&name);
        let gone = base.join(gone_name);
        if std::fs::rename(&path, &gone).is_ok() && crate::store::remove_tree(&gone).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Where `path` (a file beneath HOME) lies in `layer`'s upper layer.
fn in_upper(layer: &Overlay, path: &Path) -> Option<PathBuf> {
    path.strip_prefix(&layer.dir)
        .ok()
        .map(|relative| layer.upper.join(relative))
}

/// Before a stage: drops the layer's copies of the write-through files, so the stage reads the
/// user's current ones (a token another role refreshed).
pub fn before_stage(layer: &Overlay, write_through: &[PathBuf]) {
    for path in write_through {
        if let Some(copy) = in_upper(layer, path)
            && std::fs::symlink_metadata(&copy).is_ok()
        {
            let _ = std::fs::remove_file(&copy);
        }
    }
}

/// After a stage: copies each write-through file the stage wrote in its layer to the user's
/// file (atomically, keeping the user's file mode), when it is a regular, non-executable file
/// under the size cap; then drops the layer's copy. Returns the files written through.
pub fn after_stage(layer: &Overlay, write_through: &[PathBuf]) -> Vec<PathBuf> {
    let mut written = Vec::new();
    for path in write_through {
        let Some(copy) = in_upper(layer, path) else {
            continue;
        };
        let Ok(meta) = std::fs::symlink_metadata(&copy) else {
            continue;
        };
        let eligible = meta.is_file()
            && meta.len() <= WRITE_THROUGH_CAP
            && meta.permissions().mode() & 0o111 == 0;
        if eligible && let Ok(bytes) = std::fs::read(&copy) {
            let mode = std::fs::metadata(path)
                .map(|m| m.permissions().mode() & 0o777)
                .unwrap_or(0o600);
            let written_through = (|| -> io::Result<()> {
                let parent = path.parent().ok_or(io::ErrorKind::InvalidInput)?;
                if std::fs::symlink_metadata(parent).is_ok_and(|m| !m.is_dir()) {
                    return Err(io::ErrorKind::InvalidInput.into());
                }
                std::fs::create_dir_all(parent)?;
                let mut temp = tempfile::NamedTempFile::new_in(parent)?;
                std::io::Write::write_all(&mut temp, &bytes)?;
                temp.as_file()
                    .set_permissions(std::fs::Permissions::from_mode(mode))?;
                temp.persist(path).map_err(|e| e.error)?;
                Ok(())
            })();
            match written_through {
                Ok(()) => written.push(path.clone()),
                Err(e) => tracing::warn!("could not write {} through: {e}", path.display()),
            }
        }
        let _ = std::fs::remove_file(&copy);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_role_has_its_own_layer_outside_home() {
        let scratch = tempfile::tempdir().unwrap();
        let home = scratch.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let run_dir = scratch.path().join("run");
        // SAFETY of the test: the variable is read by `base` in this process only.
        let base_dir = scratch.path().join("layers");
        let root = {
            let digest = Sha256::digest(run_dir.as_os_str().as_bytes());
            let name: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
            base_dir.join(name)
        };
        let builder = layer_in(&root.join("builder"), &home).unwrap();
        let tester = layer_in(&root.join("tester"), &home).unwrap();
        assert_ne!(builder.upper, tester.upper);
        assert!(!builder.upper.starts_with(&home));
        assert_eq!(builder.lower, home);
    }

    #[test]
    fn toolchain_homes_outside_home_and_tmp_get_layers_outermost_first() {
        // Outside /tmp, which the /tmp layer covers.
        let scratch = tempfile::tempdir_in("/var/tmp").unwrap();
        let root = std::fs::canonicalize(scratch.path()).unwrap();
        let dir = |name: &str| {
            let path = root.join(name);
            std::fs::create_dir_all(&path).unwrap();
            path
        };
        let home = dir("home");
        let in_home = dir("home/.cargo");
        let cargo = dir("usr-local-cargo");
        let go = dir("go");
        let mod_cache = dir("go/pkg/mod");
        let workspace = dir("ws");
        let in_workspace = dir("ws/.cache");
        let temporary = tempfile::tempdir_in("/tmp").unwrap();
        let text = |p: &Path| p.to_str().unwrap().to_owned();
        let env: std::collections::BTreeMap<String, String> = [
            ("HOME", text(&home)),
            ("CARGO_HOME", text(&cargo)),
            ("RUSTUP_HOME", text(&in_home)),
            (
                "GOPATH",
                format!("{}:relative/path:{}", text(&go), text(&root.join("absent"))),
            ),
            ("GOMODCACHE", text(&mod_cache)),
            ("UV_CACHE_DIR", text(temporary.path())),
            ("PIP_CACHE_DIR", text(&in_workspace)),
            ("XDG_CACHE_HOME", "/usr".to_owned()),
            ("GEM_HOME", "/".to_owned()),
            ("NOT_A_TOOLCHAIN", text(&dir("other"))),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        assert_eq!(toolchain_dirs(&env, &[&workspace]), vec![go, cargo.clone()]);
        // A toolchain home holding the work tree is shown as it is.
        assert_eq!(
            toolchain_dirs(&env, &[&cargo.join("project")]),
            vec![root.join("go"), root.join("ws/.cache")]
        );
    }

    #[test]
    fn a_sweep_removes_the_throwaway_layers_no_live_autocode_holds() {
        let scratch = tempfile::tempdir().unwrap();
        let base = scratch.path();
        let covered = scratch.path().join("covered");
        std::fs::create_dir_all(&covered).unwrap();
        let age = |dir: &Path| {
            let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
            std::fs::File::open(dir).unwrap().set_modified(old).unwrap();
        };
        // A live layer, an hour old: held, kept.
        let live = ThrowawayLayer::new_in(base, &covered).unwrap();
        age(&live.dir);
        // The layer of an autocode killed an hour ago: its file is there, its lock is not.
        let dead = base.join("layer-dead");
        std::fs::create_dir_all(dead.join("upper")).unwrap();
        std::fs::write(dead.join(HELD), "").unwrap();
        age(&dead);
        // One just made (its lock not taken yet), and an hour-old one of an older autocode
        // that had no lock file: both within their grace.
        let fresh = base.join("layer-fresh");
        std::fs::create_dir_all(&fresh).unwrap();
        std::fs::write(fresh.join(HELD), "").unwrap();
        let older = base.join("layer-older");
        std::fs::create_dir_all(older.join("upper")).unwrap();
        age(&older);
        // A removal an earlier sweep did not finish (its process ended): finished now.
        let cut_short = base.join(format!("{GONE_PREFIX}layer-cut"));
        std::fs::create_dir_all(cut_short.join("upper/deep")).unwrap();
        assert_eq!(sweep_in(base), 1);
        assert!(!dead.exists());
        assert!(!cut_short.exists());
        assert!(
            std::fs::read_dir(base)
                .unwrap()
                .flatten()
                .all(|e| !e.file_name().to_string_lossy().starts_with(GONE_PREFIX)),
            "nothing left half removed"
        );
        assert!(live.dir.exists() && fresh.exists() && older.exists());
        let dir = live.dir.clone();
        drop(live);
        assert!(!dir.exists(), "a layer is removed when dropped");
    }

    #[test]
    fn only_a_plain_small_file_is_written_through() {
        let scratch = tempfile::tempdir().unwrap();
        let home = scratch.path().join("home");
        std::fs::create_dir_all(home.join(".tool")).unwrap();
        let token = home.join(".tool/auth.json");
        std::fs::write(&token, "old").unwrap();
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
        let layer = layer_in(&scratch.path().join("layer"), &home).unwrap();
        let script = home.join(".tool/hook.sh");
        std::fs::create_dir_all(layer.upper.join(".tool")).unwrap();
        std::fs::write(layer.upper.join(".tool/auth.json"), "new").unwrap();
        std::fs::write(layer.upper.join(".tool/hook.sh"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(
            layer.upper.join(".tool/hook.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let written = after_stage(&layer, &[token.clone(), script.clone()]);
        assert_eq!(written, vec![token.clone()]);
        assert_eq!(std::fs::read_to_string(&token).unwrap(), "new");
        assert_eq!(
            std::fs::metadata(&token).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert!(!script.exists(), "an executable is never written through");
        assert!(!layer.upper.join(".tool/auth.json").exists());
        // Before the next stage the layer's stale copy is gone, so the real file shows.
        std::fs::write(layer.upper.join(".tool/auth.json"), "stale").unwrap();
        before_stage(&layer, std::slice::from_ref(&token));
        assert!(!layer.upper.join(".tool/auth.json").exists());
    }
}
