use super::*;

use crate::run::workspace::{GitOutput, git_as_is};

/// `git args…` in `dir` with only `env`, through the boundary (as autocode runs every process).
fn git(dir: &Path, env: &BTreeMap<String, String>, args: &[&str]) -> GitOutput {
    git_as_is(dir, args, env)
}

fn plain_env(home: &Path) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("PATH".to_owned(), std::env::var("PATH").unwrap_or_default()),
        ("HOME".to_owned(), home.display().to_string()),
    ])
}

/// What `git config --file F -z --list` reads from one file: `(key, value)` in order.
fn gits_entries(file: &Path, env: &BTreeMap<String, String>) -> Vec<(String, Option<String>)> {
    let out = git(
        file.parent().unwrap(),
        env,
        &["config", "--file", file.to_str().unwrap(), "-z", "--list"],
    );
    assert!(out.success, "{}", &out.stderr);
    let text = out.stdout;
    text.split_terminator('\0')
        .map(|item| match item.split_once('\n') {
            Some((key, value)) => (key.to_owned(), Some(value.to_owned())),
            None => (item.to_owned(), None),
        })
        .collect()
}

fn ours(file: &Path) -> Option<Vec<(String, Option<String>)>> {
    read(&[file.to_owned()]).map(|entries| {
        entries
            .into_iter()
            .map(|entry| (entry.key, entry.value))
            .collect()
    })
}

#[test]
fn a_plain_file_reads_as_git_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let env = plain_env(dir.path());
    let cases: &[(&str, &str)] = &[
        (
            "sections",
            "[user]\n\tname = Ada Lovelace\n\temail = ada@example.org\n[core]\n\texcludesFile = ~/.ignore\n",
        ),
        (
            "case",
            "[User]\n\tNAME = Ada\n[Remote \"Origin\"]\n\tURL = git@host:x/y.git\n",
        ),
        (
            "comments",
            "# top\n; also\n[user] # after a header\n\tname = Ada # trailing\n\temail = a@x ; semicolon\n\n   \n",
        ),
        (
            "spacing",
            "[user]\nname=Ada\n  email   =   a@x   \n\tsigningKey =\n[core]\n\tbare\n\tpager = less  -R  -F\n",
        ),
        (
            "subsections",
            "[url \"https://example.org/a b.c/\"]\n\tinsteadOf = ex:\n[branch  \"Main.x\"]\n\tremote = origin\n",
        ),
        ("crlf", "[user]\r\n\tname = Ada\r\n\temail = a@x\r\n"),
        ("bom", "\u{feff}[user]\n\tname = Ada\n"),
        (
            "dashes",
            "[my-section]\n\tsome-key2 = 1\n[user]\n\tname = Ada\n\tname = Grace\n",
        ),
        ("empty", ""),
    ];
    for (name, text) in cases {
        let file = dir.path().join(format!("{name}.config"));
        std::fs::write(&file, text).unwrap();
        assert_eq!(
            ours(&file).as_ref(),
            Some(&gits_entries(&file, &env)),
            "case {name}: {text:?}"
        );
    }
}

#[test]
fn what_git_reads_by_its_own_rules_is_left_to_git() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str)] = &[
        ("include", "[include]\n\tpath = other\n"),
        (
            "include-if",
            "[includeIf \"gitdir:~/w/\"]\n\tpath = other\n",
        ),
        ("quoted", "[user]\n\tname = \"Ada  # not a comment\"\n"),
        ("escape", "[user]\n\tname = Ada\\tLovelace\n"),
        ("continued", "[user]\n\tname = Ada \\\n Lovelace\n"),
        ("old-style", "[user.work]\n\tname = Ada\n"),
        ("key-on-header-line", "[user] name = Ada\n"),
        ("tab-inside", "[user]\n\tname = Ada\tLovelace\n"),
        ("no-section", "name = Ada\n"),
        ("bad-key", "[user]\n\t2name = Ada\n"),
        ("bare-key-comment", "[core]\n\tbare # yes\n"),
        ("escaped-subsection", "[url \"a\\\"b\"]\n\tinsteadOf = x\n"),
        ("not-utf8", "[user]\n\tname = \u{0}\n"),
    ];
    for (name, text) in cases {
        let file = dir.path().join(format!("{name}.config"));
        std::fs::write(&file, text).unwrap();
        assert_eq!(ours(&file), None, "case {name}: {text:?}");
    }
    let latin1 = dir.path().join("latin1.config");
    std::fs::write(&latin1, b"[user]\n\tname = Ad\xe1\n").unwrap();
    assert_eq!(ours(&latin1), None);
    // A file that is not there has no entries; one that cannot be read is git's.
    assert_eq!(ours(&dir.path().join("absent")), Some(Vec::new()));
    assert_eq!(ours(dir.path()), None);
}

#[test]
fn the_files_and_their_order_are_gits() {
    let home = tempfile::tempdir().unwrap();
    let repo = tempfile::tempdir().unwrap();
    let env = plain_env(home.path());
    assert!(git(repo.path(), &env, &["init", "-q"]).success);
    std::fs::create_dir_all(home.path().join(".config/git")).unwrap();
    std::fs::write(
        home.path().join(".config/git/config"),
        "[user]\n\tname = From XDG\n\temail = xdg@x\n[core]\n\texcludesFile = ~/xdg-ignore\n",
    )
    .unwrap();
    std::fs::write(
        home.path().join(".gitconfig"),
        "[user]\n\tname = From Home\n",
    )
    .unwrap();
    let Some(files) = files(&env, Some(&repo.path().join(".git/config"))) else {
        // The git on this PATH keeps its system file elsewhere than its build's default.
        let path = env["PATH"].clone();
        assert_eq!(system_file(OsStr::new(&path)), None);
        return;
    };
    let entries = read(&files).expect("plain files");
    for key in ["user.name", "user.email", "core.excludesfile"] {
        let out = git(repo.path(), &env, &["config", "--get", key]);
        let gits = out.stdout;
        assert_eq!(
            last(&entries, key).and_then(|e| e.value.clone()),
            Some(gits.trim_end_matches('\n').to_owned()),
            "{key}"
        );
    }
    // The repository's own file wins over the user's.
    assert!(git(repo.path(), &env, &["config", "user.name", "From Repo"]).success);
    let entries = read(&files).unwrap();
    assert_eq!(
        last(&entries, "user.name").and_then(|e| e.value.as_deref()),
        Some("From Repo")
    );
    assert_eq!(last(&entries, "user.name").map(|e| e.file), Some(3));
    // Every file git says it read is one of ours.
    let out = git(
        repo.path(),
        &env,
        &["config", "--show-origin", "-z", "--list"],
    );
    let text = out.stdout;
    for origin in text.split('\0').step_by(2).filter(|o| !o.is_empty()) {
        let origin = origin.strip_prefix("file:").expect("a file");
        let origin = repo.path().join(origin);
        assert!(
            files
                .iter()
                .any(|f| std::fs::canonicalize(f).ok() == std::fs::canonicalize(&origin).ok()),
            "{origin:?} not in {files:?}"
        );
    }
    // An environment that adds or moves config is git's to read.
    let mut moved = env.clone();
    moved.insert("GIT_CONFIG_GLOBAL".into(), "/dev/null".into());
    assert_eq!(super::files(&moved, None), None);
}

#[test]
fn the_system_file_is_the_one_git_reads() {
    let path = std::env::var("PATH").unwrap_or_default();
    let Some(system) = system_file(OsStr::new(&path)) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = git(
        dir.path(),
        &plain_env(dir.path()),
        &["config", "--system", "--show-origin", "--list"],
    );
    let shown = system.display().to_string();
    if out.success {
        let text = out.stdout;
        for line in text.lines() {
            assert!(line.starts_with(&format!("file:{shown}\t")), "{line}");
        }
    } else {
        // git names the file it could not read.
        assert!(&out.stderr.contains(&shown));
    }
}
