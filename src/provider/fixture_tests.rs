//! Malformed provider files from `tests/fixtures/providers/`: each failure must name the file,
//! line, column and key in its rendered form, on one screen.

use std::path::{Path, PathBuf};

use super::config::{ConfigProblem, load_config};

fn fixture(name: &str) -> (PathBuf, String) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/providers")
        .join(format!("{name}.toml"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (path, text)
}

fn is_kind(problem: &ConfigProblem, kind: &str) -> bool {
    serde_json::to_value(problem)
        .ok()
        .and_then(|v| v["kind"].as_str().map(str::to_owned))
        == Some(kind.to_owned())
}

#[test]
fn malformed_fixtures_name_file_line_column_and_key() {
    // (fixture, line, column, key, problem kind, words in the message)
    let cases = [
        (
            "syntax_error",
            3,
            40,
            "command",
            "syntax",
            "invalid basic string",
        ),
        (
            "unknown_placeholder",
            2,
            51,
            "command[4]",
            "template",
            "unknown placeholder {worksapce}",
        ),
        (
            "bad_regex",
            17,
            1,
            "auth.routes[0].pattern",
            "bad_pattern",
            "unclosed group",
        ),
        (
            "builder_retry_same_model",
            13,
            1,
            "builder_retry.strong_model",
            "builder_retry",
            "already the Builder's",
        ),
        (
            "builder_retry_checker_family",
            14,
            1,
            "builder_retry.checker_model",
            "builder_retry",
            "glm family",
        ),
        (
            "builder_retry_unlisted",
            15,
            1,
            "builder_retry.checker_model",
            "builder_retry",
            "not in the static models list",
        ),
        (
            "prompt_file_missing",
            3,
            1,
            "prompt",
            "prompt_file_missing",
            "{prompt_file}",
        ),
        (
            "sandbox_args_without_adapter",
            2,
            29,
            "command[2]",
            "sandbox_args_without_adapter",
            "codex_artifacts",
        ),
        (
            "adapter_legacy_sandbox",
            3,
            60,
            "command[4]",
            "adapter_refused",
            "legacy {sandbox}",
        ),
        (
            "adapter_reserved_config",
            7,
            9,
            "command[8]",
            "adapter_refused",
            "sandbox_permissions",
        ),
        (
            "wrong_type",
            2,
            11,
            "command",
            "schema",
            "expected a sequence",
        ),
    ];
    for (name, line, column, key, kind, words) in cases {
        let (path, text) = fixture(name);
        let error = match load_config(&path, &text) {
            Ok(loaded) => panic!("{name} loaded: {loaded:?}"),
            Err(error) => error,
        };
        let rendered = error.to_string();
        let head = format!("{}:{line}:{column}: key `{key}`: ", path.display());
        assert!(
            rendered.starts_with(&head),
            "{name}: want {head}\ngot {rendered}"
        );
        assert!(rendered.contains(words), "{name}: {rendered}");
        assert!(is_kind(&error.problem, kind), "{name}: {:?}", error.problem);
        // One screen: the message, the source line and the caret.
        assert_eq!(rendered.lines().count(), 3, "{name}: {rendered}");
        let caret_line = rendered.lines().last().unwrap_or_default();
        let source_line = rendered.lines().nth(1).unwrap_or_default();
        assert_eq!(
            caret_line
                .find('^')
                .map(|c| c - (caret_line.find('|').unwrap_or(0) + 2)),
            Some(column - 1),
            "{name}: {rendered}"
        );
        assert!(
            source_line.contains(text.lines().nth(line - 1).unwrap_or("?")),
            "{name}"
        );
    }
}

#[test]
fn unknown_key_fixture_warns_with_its_line() {
    let (path, text) = fixture("unknown_key");
    let loaded = load_config(&path, &text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(loaded.warnings.len(), 1);
    let warning = &loaded.warnings[0];
    assert_eq!(warning.key, "comand");
    assert_eq!(
        warning.to_string(),
        format!(
            "{}:3:1: warning: key `comand`: unknown key (ignored)",
            path.display()
        )
    );
}

mod properties {
    use super::super::builtin::bundled_text;
    use super::super::config::load_config;
    use super::super::family::family_of;
    use super::super::location::position_of;
    use super::super::template::{TemplateValues, expand, parse_arg};
    use proptest::prelude::*;
    use std::path::Path;

    proptest! {
        #[test]
        fn template_parsing_never_panics(arg in ".{0,40}") {
            let _ = parse_arg(&arg);
            let _ = expand(std::slice::from_ref(&arg), &TemplateValues::default());
        }

        #[test]
        fn brace_free_literals_expand_to_themselves(args in proptest::collection::vec("[^{}]{1,12}", 0..6)) {
            prop_assert_eq!(expand(&args, &TemplateValues::default()), Ok(args.clone()));
        }

        #[test]
        fn escaped_braces_round_trip(text in "[a-z{}]{0,20}") {
            let escaped = text.replace('{', "{{").replace('}', "}}");
            prop_assert_eq!(expand(&[escaped], &TemplateValues::default()), Ok(vec![text]));
        }

        #[test]
        fn family_of_never_panics(id in ".{0,40}") {
            prop_assert!(!family_of(&id).as_str().is_empty());
        }

        #[test]
        fn loading_arbitrary_text_never_panics(text in ".{0,200}") {
            let _ = load_config(Path::new("p.toml"), &text);
        }

        #[test]
        fn truncated_bundled_files_fail_inside_the_text(cut in 0usize..2000) {
            let text = bundled_text("kilocode").unwrap_or_default();
            let mut cut = cut.min(text.len());
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            let truncated = &text[..cut];
            if let Err(error) = load_config(Path::new("kilocode.toml"), truncated)
                && let Some(position) = error.position
            {
                let end = position_of(truncated, truncated.len());
                prop_assert!(position.line <= end.line, "{}", error);
            }
        }
    }
}
#[test]
fn missing_fields_name_the_field_under_its_table() {
    let base = super::builtin::bundled_text("kilocode").unwrap_or_default();
    let cases = [
        (
            "command = [\"kilo\", \"run\", \"--auto\", \"--dir\", \"{workspace}\", \"--model\", \"{model}\", \"--variant\", \"{effort}\", \"--format\", \"json\"]\n",
            "",
            "kilocode.toml:1:1: key `command`: missing field `command`",
        ),
        (
            "command = [\"kilo\", \"auth\", \"list\"]\n",
            "",
            "kilocode.toml:17:1: key `auth.command`: missing field `command`",
        ),
        (
            "expect = \"oauth\"\n\n[[auth.routes]]\nmodels = \"alibaba",
            "\n[[auth.routes]]\nmodels = \"alibaba",
            "kilocode.toml:21:1: key `auth.routes[0].expect`: missing field `expect`",
        ),
        (
            "terra = { model = \"openai/gpt-5.6-terra\", effort",
            "terra = { effort",
            "kilocode.toml:11:9: key `roles.terra.model`: missing field `model`",
        ),
    ];
    for (from, to, want) in cases {
        let text = base.replacen(from, to, 1);
        assert_ne!(text, base, "{from}");
        match load_config(Path::new("kilocode.toml"), &text) {
            Ok(_) => panic!("{from}: loaded"),
            Err(error) => {
                let rendered = error.to_string();
                assert!(rendered.starts_with(want), "{rendered}");
            }
        }
    }
}
