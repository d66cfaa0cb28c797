use super::*;

fn write(dir: &Path, text: &str) -> PathBuf {
    let file = dir.join("models.toml");
    std::fs::write(&file, text).unwrap();
    file
}

#[test]
fn the_compiled_in_catalogue_parses_and_sizes_its_local_models() {
    let models = parse(Path::new(BUILTIN_SOURCE), BUILTIN_TOML).unwrap();
    assert_eq!(Catalogue::builtin().models.len(), models.len());
    let small = Catalogue::builtin();
    let qwen = small.get("qwen2.5-coder-1.5b").unwrap();
    let local = qwen.local.as_ref().unwrap();
    // 28 layers × 2 KV heads × 128 dims × (K and V) × 2 bytes.
    assert_eq!(local.kv_bytes_per_token(), 28_672);
    let q4 = &local.quants[0];
    assert_eq!(
        (q4.name.as_str(), q4.download_bytes),
        ("Q4_K_M", 1_117_320_768)
    );
    assert!(q4.measured);
    assert!(small.local().count() >= 6);
    assert!(small.models.iter().all(|m| m.source == BUILTIN_SOURCE));
}

#[test]
fn a_user_entry_replaces_its_id_and_adds_new_ones() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        r#"
[[model]]
id = "gpt-5"
family = "openai"
context_window = 1000
output_cap = 100
tool_calls = false

[[model]]
id = "acme-coder"
family = "acme"
context_window = 65536
output_cap = 4096
tool_calls = true
price = [{ date = "2026-01-01", input = 0.5, output = 1.5 }]
"#,
    );
    let catalogue = Catalogue::load(Some(&file)).unwrap();
    let gpt = catalogue.get("gpt-5").unwrap();
    assert_eq!(gpt.context_window, 1000);
    assert!(gpt.price.is_empty(), "replaced whole: {gpt:?}");
    assert_eq!(catalogue.price_for("acme/acme-coder").unwrap().output, 1.5);
    assert!(catalogue.get("claude-haiku-4-5").is_some());
    assert_eq!(catalogue.sources.len(), 2);
    // A missing user file is the built-in catalogue.
    let none = Catalogue::load(Some(&dir.path().join("absent.toml"))).unwrap();
    assert_eq!(none, Catalogue::builtin());
}

#[test]
fn a_malformed_user_file_names_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        // A wrong type.
        (
            "[[model]]\nid = \"x\"\nfamily = \"f\"\ncontext_window = \"big\"\noutput_cap = 1\ntool_calls = true\n",
            4,
            "model[0].context_window",
        ),
        // A missing field.
        (
            "[[model]]\nid = \"x\"\nfamily = \"f\"\noutput_cap = 1\ntool_calls = true\n",
            1,
            "context_window",
        ),
        // Broken syntax.
        ("[[model]]\nid = \"x\nfamily = \"f\"\n", 2, "id"),
        // A value serde accepts but the catalogue does not.
        (
            "[[model]]\nid = \"x\"\nfamily = \"f\"\ncontext_window = 8\noutput_cap = 1\ntool_calls = true\n[model.local]\nruntimes = [\"ollama\"]\nparams_total_b = 1.0\nparams_active_b = 2.0\nlayers = 1\nkv_heads = 1\nhead_dim = 1\nquant = [{ name = \"Q4\", download_bytes = 1 }]\n",
            10,
            "model[0].local.params_active_b",
        ),
        // An unknown key.
        (
            "[[model]]\nid = \"x\"\nfamily = \"f\"\ncontext_window = 8\noutput_cap = 1\ntool_calls = true\ncontext = 5\n",
            7,
            "context",
        ),
    ];
    for (text, line, key) in cases {
        let file = write(dir.path(), text);
        let error = Catalogue::load(Some(&file)).unwrap_err();
        let CatalogueError::Invalid {
            file: named,
            line: at,
            key: k,
            ..
        } = &error
        else {
            panic!("{error}");
        };
        assert_eq!(named, &file, "{error}");
        assert_eq!(*at, line, "{error}");
        assert!(k.contains(key), "{key} in {error}");
        assert!(error.to_string().contains("models.toml:"), "{error}");
    }
}

#[test]
fn the_user_file_is_under_the_config_home() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        }
    };
    assert_eq!(
        user_file(env(&[("XDG_CONFIG_HOME", "/x"), ("HOME", "/h")])),
        Some(PathBuf::from("/x/autocode/models.toml"))
    );
    assert_eq!(
        user_file(env(&[("XDG_CONFIG_HOME", "rel"), ("HOME", "/h")])),
        Some(PathBuf::from("/h/.config/autocode/models.toml"))
    );
    assert_eq!(user_file(env(&[])), None);
}
