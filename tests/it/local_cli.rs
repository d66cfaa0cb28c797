//! `autocode local recommend` and `autocode models --catalogue` through the built binary, in a
//! temporary home: the live probe of this machine answers, the user's catalogue is merged, and
//! a malformed one is refused naming its file, line and key.

use std::process::Command;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_autocode");

fn autocode(home: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .env_clear()
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("PATH", "/usr/bin:/bin")
        .output()
        .expect("autocode runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn recommend_probes_this_machine_and_accounts_for_every_model() {
    let home = tempfile::tempdir().unwrap();
    let (code, stdout, stderr) = autocode(home.path(), &["local", "recommend", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let r: Value = serde_json::from_str(&stdout).unwrap();
    assert!(r["machine"]["mem_total_bytes"].as_u64().unwrap() > 0, "{r}");
    assert!(r["machine"]["cores"].as_u64().unwrap() >= 1);
    assert!(!r["budgets"].as_array().unwrap().is_empty());
    let listed = r["fits"].as_array().unwrap().len() + r["not_offered"].as_array().unwrap().len();
    assert!(listed >= 6, "{r}");
    for reason in r["not_offered"].as_array().unwrap() {
        let why = reason["reason"].as_str().unwrap();
        assert!(
            why.contains("needs") && why.contains("% of the budget"),
            "{why}"
        );
    }
    let (code, text, _) = autocode(home.path(), &["local", "recommend"]);
    assert_eq!(code, 0);
    assert!(text.starts_with("machine: "), "{text}");
    assert!(text.contains("\npick: "), "{text}");
}

#[test]
fn the_catalogue_merges_the_users_file_and_names_a_malformed_one() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join(".config/autocode");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("models.toml"),
        "[[model]]\nid = \"acme-coder\"\nfamily = \"acme\"\ncontext_window = 65536\noutput_cap = 4096\ntool_calls = true\n",
    )
    .unwrap();
    let (code, stdout, stderr) = autocode(home.path(), &["models", "--catalogue", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let catalogue: Value = serde_json::from_str(&stdout).unwrap();
    let ids: Vec<&str> = catalogue["models"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    assert!(
        ids.contains(&"acme-coder") && ids.contains(&"gpt-5"),
        "{ids:?}"
    );

    std::fs::write(
        dir.join("models.toml"),
        "[[model]]\nid = \"acme-coder\"\nfamily = \"acme\"\ncontext_window = -1\noutput_cap = 4096\ntool_calls = true\n",
    )
    .unwrap();
    for args in [&["models", "--catalogue"][..], &["local", "recommend"][..]] {
        let (code, stdout, stderr) = autocode(home.path(), args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{stdout}");
        assert!(
            stderr.contains("models.toml:4:") && stderr.contains("model[0].context_window"),
            "{stderr}"
        );
    }
}
