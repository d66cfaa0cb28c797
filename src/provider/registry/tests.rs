use super::*;
use crate::provider::config::OutputMode;

fn env(pairs: &[(&str, &str)]) -> Env {
    pairs
        .iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect()
}

struct Home {
    _dir: tempfile::TempDir,
    root: PathBuf,
    registry: Registry,
}

fn home() -> Home {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_owned();
    let paths = ConfigPaths::from_env(&env(&[(
        "XDG_CONFIG_HOME",
        root.join("xdg").to_str().unwrap(),
    )]))
    .unwrap();
    std::fs::create_dir_all(&paths.user_dir).unwrap();
    Home {
        _dir: dir,
        root,
        registry: Registry::new(paths),
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn pn(name: &str) -> ProviderName {
    ProviderName::new(name).unwrap()
}

fn kilocode_renamed(name: &str) -> String {
    bundled_text("kilocode")
        .unwrap()
        .replace("name = \"kilocode\"", &format!("name = \"{name}\""))
}

#[test]
fn config_paths_from_env() {
    let p = ConfigPaths::from_env(&env(&[("HOME", "/home/u")])).unwrap();
    assert_eq!(
        p.user_dir,
        PathBuf::from("/home/u/.config/autocode/providers")
    );
    assert_eq!(
        p.user_config_file,
        PathBuf::from("/home/u/.config/autocode/config.toml")
    );
    let p = ConfigPaths::from_env(&env(&[("HOME", "/home/u"), ("XDG_CONFIG_HOME", "/x")])).unwrap();
    assert_eq!(p.user_dir, PathBuf::from("/x/autocode/providers"));
    // relative or empty XDG_CONFIG_HOME is ignored
    let p = ConfigPaths::from_env(&env(&[("HOME", "/h"), ("XDG_CONFIG_HOME", "rel")])).unwrap();
    assert_eq!(p.user_dir, PathBuf::from("/h/.config/autocode/providers"));
    assert!(matches!(
        ConfigPaths::from_env(&env(&[("XDG_CONFIG_HOME", "")])),
        Err(RegistryError::NoConfigHome)
    ));
}

#[test]
fn lookup_order() {
    let h = home();
    // bundled when no user file
    let kilo = h.registry.resolve(&pn("kilocode")).unwrap();
    assert_eq!(kilo.kind, ProviderKind::Bundled);
    assert_eq!(kilo.source.to_string(), "bundled:providers/kilocode.toml");
    assert_eq!(
        kilo.fingerprint,
        fingerprint(bundled_text("kilocode").unwrap().as_bytes())
    );
    // a user file wins over the bundled one
    let text = kilocode_renamed("kilocode").replace("\"--auto\", ", "");
    let path = h.registry.paths().user_dir.join("kilocode.toml");
    write(&path, &text);
    let kilo = h.registry.resolve(&pn("kilocode")).unwrap();
    assert_eq!(kilo.kind, ProviderKind::User);
    assert_eq!(kilo.source, ConfigSource::User(path));
    assert_eq!(kilo.fingerprint, fingerprint(text.as_bytes()));
    assert!(!kilo.config.command.contains(&"--auto".to_owned()));
    // built-ins
    let oc = h.registry.resolve(&pn("opencode")).unwrap();
    assert_eq!(
        (oc.kind, oc.source.to_string()),
        (ProviderKind::Builtin, "builtin".into())
    );
    assert_eq!(oc.config.output, OutputMode::OpencodeEvents);
    assert_eq!(oc.fingerprint.len(), 64);
    // unknown
    let e = h.registry.resolve(&pn("nope")).unwrap_err();
    let message = e.to_string();
    assert!(
        message.contains("unknown provider `nope`") && message.contains("kilocode"),
        "{message}"
    );
}

#[test]
fn reserved_user_files_are_never_read() {
    let h = home();
    let dir = h.registry.paths().user_dir.clone();
    // Broken on purpose: reading them would fail loudly.
    for name in ["opencode", "claude", "codex"] {
        write(&dir.join(format!("{name}.toml")), "this is = = not toml");
    }
    for name in ["opencode", "claude", "codex"] {
        let p = h.registry.resolve(&pn(name)).unwrap();
        assert_eq!(p.kind, ProviderKind::Builtin, "{name}");
    }
    let listed: Vec<_> = h
        .registry
        .list()
        .into_iter()
        .map(|l| (l.name, l.kind))
        .collect();
    assert_eq!(
        listed.iter().filter(|(n, _)| n == "claude").count(),
        1,
        "{listed:?}"
    );
    let ignored = h.registry.ignored_configs(None);
    let names: Vec<_> = ignored
        .iter()
        .map(|i| i.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["opencode.toml", "codex.toml", "claude.toml"]);
    assert!(
        ignored
            .iter()
            .all(|i| matches!(i.reason, IgnoredReason::ReservedName { .. }))
    );
    assert!(ignored[2].message.contains("built-in"));
}

#[test]
fn listing_reports_status_and_shadowing() {
    let h = home();
    let dir = h.registry.paths().user_dir.clone();
    write(
        &dir.join("mine.toml"),
        &kilocode_renamed("mine").replace("[roles]", "surprise = 1\n[roles]"),
    );
    write(&dir.join("broken.toml"), "name = \"broken\"\ncommand = [\n");
    write(&dir.join("gocode.toml"), bundled_text("gocode").unwrap());
    write(&dir.join("notes.txt"), "not a provider");
    let list = h.registry.list();
    let rows: Vec<_> = list.iter().map(|l| (l.name.as_str(), l.kind)).collect();
    assert_eq!(
        rows,
        [
            ("opencode", ProviderKind::Builtin),
            ("codex", ProviderKind::Builtin),
            ("claude", ProviderKind::Builtin),
            ("autocode", ProviderKind::Builtin),
            ("broken", ProviderKind::User),
            ("codex_receipts", ProviderKind::Bundled),
            ("gocode", ProviderKind::User),
            ("kilocode", ProviderKind::Bundled),
            ("mine", ProviderKind::User),
        ]
    );
    let by_name = |n: &str| list.iter().find(|l| l.name == n).unwrap();
    assert!(by_name("gocode").shadows_bundled);
    assert!(!by_name("mine").shadows_bundled);
    match &by_name("broken").status {
        LoadStatus::Error { message, error } => {
            assert!(
                message.contains("broken.toml:2:12: key `command`"),
                "{message}"
            );
            assert!(matches!(error.problem, ConfigProblem::Syntax { .. }));
        }
        other => panic!("{other:?}"),
    }
    match &by_name("mine").status {
        LoadStatus::Ok { warnings, .. } => {
            assert_eq!(warnings.len(), 1);
            assert_eq!(warnings[0].key, "surprise");
        }
        other => panic!("{other:?}"),
    }
    match &by_name("claude").status {
        LoadStatus::Ok {
            same_family_pairs, ..
        } => assert_eq!(same_family_pairs.len(), 3),
        other => panic!("{other:?}"),
    }
    let json = serde_json::to_value(&list).unwrap();
    assert_eq!(json[0]["source"], "builtin");
    assert_eq!(json[0]["status"], "ok");
    assert_eq!(json[3]["name"], "autocode");
    assert_eq!(json[4]["status"], "error");
    assert_eq!(json[5]["source"], "bundled:providers/codex_receipts.toml");
}

#[test]
fn hostile_workspace_changes_nothing() {
    let h = home();
    let before: Vec<_> = h.registry.list();
    let workspace = h.root.join("ws");
    let evil = kilocode_renamed("x");
    write(&workspace.join(".autocode/providers/x.toml"), &evil);
    write(&workspace.join(".autocode/providers/kilocode.toml"), &evil);
    write(
        &workspace.join("opencode.toml"),
        &kilocode_renamed("opencode"),
    );
    write(&workspace.join("claude.toml"), &kilocode_renamed("claude"));
    write(
        &workspace.join("providers/gocode.toml"),
        &kilocode_renamed("gocode"),
    );
    // The registry never looks at the workspace, wherever the process runs.
    assert_eq!(h.registry.list(), before);
    assert!(matches!(
        h.registry.resolve(&pn("x")),
        Err(RegistryError::UnknownProvider { .. })
    ));
    assert_eq!(
        h.registry.resolve(&pn("opencode")).unwrap().kind,
        ProviderKind::Builtin
    );
    assert_eq!(
        h.registry.resolve(&pn("gocode")).unwrap().kind,
        ProviderKind::Bundled
    );
    assert_eq!(
        h.registry.resolve(&pn("kilocode")).unwrap().fingerprint,
        fingerprint(bundled_text("kilocode").unwrap().as_bytes())
    );
    // doctor names them all
    let ignored = h.registry.ignored_configs(Some(&workspace));
    let rel: Vec<_> = ignored
        .iter()
        .map(|i| {
            i.path
                .strip_prefix(&workspace)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(
        rel,
        [
            ".autocode/providers/kilocode.toml",
            ".autocode/providers/x.toml",
            "claude.toml",
            "opencode.toml",
            "providers/gocode.toml",
        ]
    );
    assert!(
        ignored
            .iter()
            .all(|i| i.reason == IgnoredReason::InsideWorkspace)
    );
}

#[test]
fn default_provider_order() {
    let h = home();
    let r = &h.registry;
    let fallback = r.default_provider(&env(&[])).unwrap();
    assert_eq!(
        (fallback.name.as_str(), &fallback.source),
        ("opencode", &DefaultSource::Fallback)
    );
    write(
        &r.paths().user_config_file,
        "other_setting = true\ndefault_provider = \"kilocode\"\n",
    );
    let from_file = r.default_provider(&env(&[])).unwrap();
    assert_eq!(from_file.name.as_str(), "kilocode");
    assert!(matches!(from_file.source, DefaultSource::ConfigFile { .. }));
    let from_env = r
        .default_provider(&env(&[("AUTOCODE_PROVIDER", "claude")]))
        .unwrap();
    assert_eq!(
        (from_env.name.as_str(), from_env.source),
        ("claude", DefaultSource::Env)
    );
    assert!(matches!(
        r.default_provider(&env(&[("AUTOCODE_PROVIDER", "../x")])),
        Err(RegistryError::InvalidEnvDefault(_))
    ));
    write(
        &r.paths().user_config_file,
        "\ndefault_provider = \"a b\"\n",
    );
    let e = r.default_provider(&env(&[])).unwrap_err().to_string();
    assert!(e.contains("config.toml:2:1: key `default_provider`"), "{e}");
    write(&r.paths().user_config_file, "default_provider = 3\n");
    let e = r.default_provider(&env(&[])).unwrap_err().to_string();
    assert!(
        e.contains("config.toml:1:20: key `default_provider`"),
        "{e}"
    );
}
