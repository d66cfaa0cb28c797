//! The first minutes on a fresh clone: the README's first command builds the `release` profile,
//! which must be fast to build (no fat LTO, the default codegen units); published binaries use
//! `dist` (today's whole-program settings), which the `status` memory bench measures. The README
//! names the Node version the pinned CLIs need, read from their own `engines` fields, and its
//! demo command finds the pinned CLIs explicitly.

use std::path::Path;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(ROOT).join(path)).unwrap()
}

#[test]
fn release_builds_fast_and_dist_keeps_the_whole_program_link() {
    let manifest: toml::Table = toml::from_str(&read("Cargo.toml")).unwrap();
    let profiles = manifest["profile"].as_table().expect("[profile]");
    let release = profiles["release"].as_table().expect("[profile.release]");
    let lto = release
        .get("lto")
        .and_then(|v| v.as_str().map(str::to_owned));
    assert!(
        matches!(lto.as_deref(), None | Some("thin" | "off"))
            && release.get("lto") != Some(&toml::Value::Boolean(true)),
        "release lto: {lto:?}"
    );
    assert!(release.get("codegen-units").is_none(), "{release:?}");
    let dist = profiles["dist"].as_table().expect("[profile.dist]");
    assert_eq!(dist["inherits"].as_str(), Some("release"));
    assert_eq!(dist["lto"].as_str(), Some("fat"));
    assert_eq!(dist["codegen-units"].as_integer(), Some(1));
    // The memory target is measured on the profile it was set for.
    assert!(read("benches/status.sh").contains("--profile dist"));
}

#[test]
fn the_readme_names_the_node_the_pinned_clis_need_and_finds_them() {
    let readme = read("README.md");
    let mut needs = 0u64;
    for package in [
        "tests/clis/node_modules/@anthropic-ai/claude-code/package.json",
        "tests/clis/node_modules/@openai/codex/package.json",
        "tests/clis/node_modules/opencode-ai/package.json",
    ] {
        let Ok(text) = std::fs::read_to_string(Path::new(ROOT).join(package)) else {
            panic!("{package} is missing: npm ci --prefix tests/clis");
        };
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        if let Some(range) = json["engines"]["node"].as_str() {
            let major: u64 = range
                .trim_start_matches(['>', '=', '^', '~', ' '])
                .split(['.', ' '])
                .next()
                .and_then(|m| m.parse().ok())
                .unwrap_or(0);
            needs = needs.max(major);
        }
    }
    assert!(needs >= 22, "{needs}");
    assert!(
        readme.contains(&format!("Node.js {needs} or newer")),
        "the README must name Node.js {needs}"
    );
    let first = readme
        .lines()
        .find(|l| l.contains("cargo run -- demo"))
        .expect("the demo command");
    assert!(
        first.contains("--clis-dir tests/clis/node_modules/.bin"),
        "{first}"
    );
}
