//! Command templates: parsing and expanding `{placeholder}` arguments.
//!
//! A template is an argv array. Single braces are reserved for placeholders; `{{` and `}}` are
//! literal braces. `{sandbox_args}` must be a whole argument and splices a list of arguments.
//! Invariants of [`expand`]: it is a pure function; it never produces an empty argument from a
//! placeholder (a missing or empty value is an error, except `{effort}`, whose argument is dropped
//! together with the flag right before it); substituted values are inserted verbatim (a value
//! holding braces is never parsed again), except inside the script of a shell's `-c` (`sh -c
//! "tool {workspace}"`), where each value is quoted for the shell at the point it lands
//! (unquoted, inside '…' or inside "…"), so a workspace named `p;touch X;#` stays one word.

use serde::Serialize;
use std::fmt;

/// One placeholder name. The serialized strings are the names users write between braces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Placeholder {
    Model,
    Effort,
    Workspace,
    Report,
    Schema,
    PromptFile,
    RunDir,
    Role,
    Sandbox,
    Session,
    /// Codex artifact adapter only: a whole argument replaced by a list of arguments.
    SandboxArgs,
}

impl Placeholder {
    pub const ALL: [Placeholder; 11] = [
        Placeholder::Model,
        Placeholder::Effort,
        Placeholder::Workspace,
        Placeholder::Report,
        Placeholder::Schema,
        Placeholder::PromptFile,
        Placeholder::RunDir,
        Placeholder::Role,
        Placeholder::Sandbox,
        Placeholder::Session,
        Placeholder::SandboxArgs,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Placeholder::Model => "model",
            Placeholder::Effort => "effort",
            Placeholder::Workspace => "workspace",
            Placeholder::Report => "report",
            Placeholder::Schema => "schema",
            Placeholder::PromptFile => "prompt_file",
            Placeholder::RunDir => "run_dir",
            Placeholder::Role => "role",
            Placeholder::Sandbox => "sandbox",
            Placeholder::Session => "session",
            Placeholder::SandboxArgs => "sandbox_args",
        }
    }

    pub fn parse(name: &str) -> Option<Placeholder> {
        Placeholder::ALL.into_iter().find(|p| p.as_str() == name)
    }
}

impl fmt::Display for Placeholder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{{{}}}", self.as_str())
    }
}

/// A piece of one template argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    Literal(String),
    Placeholder(Placeholder),
}

/// A template argument that does not parse. `offset` is the byte offset inside the argument.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TemplateSyntaxError {
    #[error("unknown placeholder {{{name}}} (known: {known}; write {{{{ and }}}} for literal braces)", known = known_list())]
    UnknownPlaceholder { name: String, offset: usize },
    #[error("unclosed `{{` (write `{{{{` for a literal brace)")]
    UnclosedBrace { offset: usize },
    #[error("stray `}}` (write `}}}}` for a literal brace)")]
    StrayCloseBrace { offset: usize },
    #[error("{{sandbox_args}} must be a whole argument on its own")]
    SandboxArgsNotWhole { offset: usize },
}

fn known_list() -> String {
    Placeholder::ALL
        .iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Splits one argument into literal and placeholder segments.
pub fn parse_arg(arg: &str) -> Result<Vec<Segment>, TemplateSyntaxError> {
    let mut segments = Vec::new();
    let mut literal = String::new();
    let mut rest = arg.char_indices().peekable();
    while let Some((offset, c)) = rest.next() {
        match c {
            '{' if rest.peek().map(|&(_, n)| n) == Some('{') => {
                rest.next();
                literal.push('{');
            }
            '}' if rest.peek().map(|&(_, n)| n) == Some('}') => {
                rest.next();
                literal.push('}');
            }
            '}' => return Err(TemplateSyntaxError::StrayCloseBrace { offset }),
            '{' => {
                let mut name = String::new();
                let mut closed = false;
                for (_, n) in rest.by_ref() {
                    if n == '}' {
                        closed = true;
                        break;
                    }
                    name.push(n);
                }
                if !closed {
                    return Err(TemplateSyntaxError::UnclosedBrace { offset });
                }
                let placeholder = Placeholder::parse(&name)
                    .ok_or(TemplateSyntaxError::UnknownPlaceholder { name, offset })?;
                if placeholder == Placeholder::SandboxArgs && arg != "{sandbox_args}" {
                    return Err(TemplateSyntaxError::SandboxArgsNotWhole { offset });
                }
                if !literal.is_empty() {
                    segments.push(Segment::Literal(std::mem::take(&mut literal)));
                }
                segments.push(Segment::Placeholder(placeholder));
            }
            other => literal.push(other),
        }
    }
    if !literal.is_empty() {
        segments.push(Segment::Literal(literal));
    }
    Ok(segments)
}

/// The placeholders an argument uses (empty for a literal), or its syntax error.
pub fn placeholders_in(arg: &str) -> Result<Vec<Placeholder>, TemplateSyntaxError> {
    Ok(parse_arg(arg)?
        .into_iter()
        .filter_map(|s| match s {
            Segment::Placeholder(p) => Some(p),
            Segment::Literal(_) => None,
        })
        .collect())
}

/// The argument with `{{`/`}}` unescaped, when it holds no placeholder.
pub fn literal_text(arg: &str) -> Option<String> {
    let segments = parse_arg(arg).ok()?;
    let mut out = String::new();
    for segment in segments {
        match segment {
            Segment::Literal(text) => out.push_str(&text),
            Segment::Placeholder(_) => return None,
        }
    }
    Some(out)
}

/// The values one expansion fills in. `None` means "not available for this launch".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TemplateValues {
    pub model: Option<String>,
    /// No effort (or an empty one) drops the `{effort}` argument and the flag before it.
    pub effort: Option<String>,
    pub workspace: Option<String>,
    pub report: Option<String>,
    pub schema: Option<String>,
    pub prompt_file: Option<String>,
    pub run_dir: Option<String>,
    pub role: Option<String>,
    pub sandbox: Option<String>,
    pub session: Option<String>,
    pub sandbox_args: Option<Vec<String>>,
}

impl TemplateValues {
    fn scalar(&self, placeholder: Placeholder) -> Option<&str> {
        match placeholder {
            Placeholder::Model => self.model.as_deref(),
            Placeholder::Effort => self.effort.as_deref(),
            Placeholder::Workspace => self.workspace.as_deref(),
            Placeholder::Report => self.report.as_deref(),
            Placeholder::Schema => self.schema.as_deref(),
            Placeholder::PromptFile => self.prompt_file.as_deref(),
            Placeholder::RunDir => self.run_dir.as_deref(),
            Placeholder::Role => self.role.as_deref(),
            Placeholder::Sandbox => self.sandbox.as_deref(),
            Placeholder::Session => self.session.as_deref(),
            Placeholder::SandboxArgs => None,
        }
    }

    fn has_effort(&self) -> bool {
        self.effort.as_deref().is_some_and(|e| !e.is_empty())
    }
}

/// Why a template could not be expanded. `index` is the argument's position in the template.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ExpandError {
    #[error("argument {index} ({arg:?}): {source}")]
    Syntax {
        index: usize,
        arg: String,
        #[source]
        source: TemplateSyntaxError,
    },
    #[error("argument {index} ({arg:?}) needs {placeholder} but no value was given")]
    MissingValue {
        index: usize,
        arg: String,
        placeholder: Placeholder,
    },
    #[error("argument {index} ({arg:?}) would pass an empty {placeholder}")]
    EmptyValue {
        index: usize,
        arg: String,
        placeholder: Placeholder,
    },
}

/// Expands `template` with `values`.
///
/// An argument that uses `{effort}` when no effort is given is dropped, and so is the argument
/// right before it when that one is a flag (starts with `-`) taken literally from the template
/// and the dropped argument is not itself a flag (`--variant={effort}` goes alone):
/// `--variant {effort}` disappears entirely and the tool uses its own default level.
pub fn expand(template: &[String], values: &TemplateValues) -> Result<Vec<String>, ExpandError> {
    let mut out: Vec<String> = Vec::with_capacity(template.len());
    // Whether the last pushed argument is the literal flag template[i - 1] (so it may be dropped).
    let mut last_was_literal_flag = false;
    for (index, arg) in template.iter().enumerate() {
        let segments = parse_arg(arg).map_err(|source| ExpandError::Syntax {
            index,
            arg: arg.clone(),
            source,
        })?;
        let uses = |p: Placeholder| segments.contains(&Segment::Placeholder(p));
        if uses(Placeholder::Effort) && !values.has_effort() {
            // `--variant={effort}` carries its own flag; only a bare value takes the one before.
            if last_was_literal_flag && !arg.starts_with('-') {
                out.pop();
            }
            last_was_literal_flag = false;
            continue;
        }
        if uses(Placeholder::SandboxArgs) {
            let spliced =
                values
                    .sandbox_args
                    .as_ref()
                    .ok_or_else(|| ExpandError::MissingValue {
                        index,
                        arg: arg.clone(),
                        placeholder: Placeholder::SandboxArgs,
                    })?;
            if spliced.iter().any(String::is_empty) {
                return Err(ExpandError::EmptyValue {
                    index,
                    arg: arg.clone(),
                    placeholder: Placeholder::SandboxArgs,
                });
            }
            out.extend(spliced.iter().cloned());
            last_was_literal_flag = false;
            continue;
        }
        let mut expanded = String::new();
        let mut literal_only = true;
        let mut shell = is_shell_script(template, index).then(ShellQuoting::default);
        for segment in &segments {
            match segment {
                Segment::Literal(text) => {
                    expanded.push_str(text);
                    if let Some(shell) = shell.as_mut() {
                        shell.advance(text);
                    }
                }
                Segment::Placeholder(placeholder) => {
                    literal_only = false;
                    let value =
                        values
                            .scalar(*placeholder)
                            .ok_or_else(|| ExpandError::MissingValue {
                                index,
                                arg: arg.clone(),
                                placeholder: *placeholder,
                            })?;
                    if value.is_empty() {
                        return Err(ExpandError::EmptyValue {
                            index,
                            arg: arg.clone(),
                            placeholder: *placeholder,
                        });
                    }
                    match &shell {
                        Some(shell) => expanded.push_str(&shell.quote(value)),
                        None => expanded.push_str(value),
                    }
                }
            }
        }
        last_was_literal_flag = literal_only && expanded.starts_with('-');
        out.push(expanded);
    }
    Ok(out)
}

/// Whether `template[index]` is the script a shell runs: the program is a POSIX-like shell
/// (`sh`, `bash`, `dash`, `zsh`, `ksh`, `ash`, directly or through `env`) and the argument
/// before it is a short-option cluster ending in `c` (`-c`, `-lc`, `-ec`).
pub fn is_shell_script(template: &[String], index: usize) -> bool {
    const SHELLS: [&str; 6] = ["sh", "bash", "dash", "zsh", "ksh", "ash"];
    let basename = |arg: &str| arg.rsplit('/').next().unwrap_or(arg).to_owned();
    let shell_at = template.iter().position(|arg| {
        let name = basename(arg);
        SHELLS.contains(&name.as_str())
    });
    let Some(shell_at) = shell_at else {
        return false;
    };
    // Only `shell …` or `env [VAR=…] shell …` count, not a later argument that happens to be "sh".
    let before_shell_ok = template[..shell_at].iter().enumerate().all(|(i, arg)| {
        (i == 0 && basename(arg) == "env") || (i > 0 && arg.contains('=') && !arg.starts_with('-'))
    });
    if !before_shell_ok || index <= shell_at + 1 {
        return false;
    }
    let flag = &template[index - 1];
    flag.starts_with('-')
        && !flag.starts_with("--")
        && flag.ends_with('c')
        && flag[1..].chars().all(|c| c.is_ascii_alphabetic())
}

/// The placeholders `template` substitutes into the script of a shell's `-c`, in order, without
/// repeats. `providers show` warns about them: each value is quoted for the shell, but a value
/// inside a script is still read by a shell, and separate arguments need no quoting at all.
pub fn shell_script_placeholders(template: &[String]) -> Vec<Placeholder> {
    let mut found = Vec::new();
    for (index, arg) in template.iter().enumerate() {
        if !is_shell_script(template, index) {
            continue;
        }
        for placeholder in placeholders_in(arg).unwrap_or_default() {
            if !found.contains(&placeholder) {
                found.push(placeholder);
            }
        }
    }
    found
}

/// Where a shell script's text stands at the end of the literal text seen so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum ShellQuoting {
    #[default]
    Unquoted,
    Single,
    Double,
}

impl ShellQuoting {
    fn advance(&mut self, text: &str) {
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            *self = match (*self, c) {
                (ShellQuoting::Unquoted, '\\') | (ShellQuoting::Double, '\\') => {
                    chars.next();
                    *self
                }
                (ShellQuoting::Unquoted, '\'') => ShellQuoting::Single,
                (ShellQuoting::Unquoted, '"') => ShellQuoting::Double,
                (ShellQuoting::Single, '\'') | (ShellQuoting::Double, '"') => {
                    ShellQuoting::Unquoted
                }
                (state, _) => state,
            };
        }
    }

    /// `value` as text that the shell reads back as exactly `value` at this point.
    fn quote(self, value: &str) -> String {
        match self {
            ShellQuoting::Unquoted => format!("'{}'", value.replace('\'', "'\\''")),
            ShellQuoting::Single => value.replace('\'', "'\\''"),
            ShellQuoting::Double => {
                let mut out = String::with_capacity(value.len());
                for c in value.chars() {
                    if matches!(c, '\\' | '"' | '$' | '`') {
                        out.push('\\');
                    }
                    out.push(c);
                }
                out
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    fn full() -> TemplateValues {
        TemplateValues {
            model: Some("openai/gpt-6-sol".into()),
            effort: Some("high".into()),
            workspace: Some("/ws".into()),
            report: Some("/run/report.json".into()),
            schema: Some("/run/schema.json".into()),
            prompt_file: Some("/run/prompt.md".into()),
            run_dir: Some("/run".into()),
            role: Some("builder".into()),
            sandbox: Some("workspace-write".into()),
            session: Some("ses_1".into()),
            sandbox_args: Some(t(&["--sandbox", "read-only"])),
        }
    }

    enum Want {
        Ok(&'static [&'static str]),
        Missing(usize, Placeholder),
        Empty(usize, Placeholder),
        Syntax(usize),
    }

    fn check(template: &[&str], values: &TemplateValues, want: Want) {
        let got = expand(&t(template), values);
        match (want, got) {
            (Want::Ok(expected), Ok(args)) => assert_eq!(args, t(expected), "{template:?}"),
            (
                Want::Missing(i, p),
                Err(ExpandError::MissingValue {
                    index, placeholder, ..
                }),
            ) => {
                assert_eq!((index, placeholder), (i, p), "{template:?}")
            }
            (
                Want::Empty(i, p),
                Err(ExpandError::EmptyValue {
                    index, placeholder, ..
                }),
            ) => {
                assert_eq!((index, placeholder), (i, p), "{template:?}")
            }
            (Want::Syntax(i), Err(ExpandError::Syntax { index, .. })) => {
                assert_eq!(index, i, "{template:?}")
            }
            (_, got) => panic!("{template:?}: unexpected {got:?}"),
        }
    }

    #[test]
    fn expansion_table() {
        let no_effort = TemplateValues {
            effort: None,
            ..full()
        };
        let empty_effort = TemplateValues {
            effort: Some(String::new()),
            ..full()
        };
        let nothing = TemplateValues::default();
        let empty_model = TemplateValues {
            model: Some(String::new()),
            ..full()
        };
        let no_splice = TemplateValues {
            sandbox_args: Some(vec![]),
            ..full()
        };
        let all = full();
        let model_is_flag = TemplateValues {
            model: Some("-m".into()),
            effort: None,
            ..full()
        };
        let braces_in_value = TemplateValues {
            model: Some("{effort}".into()),
            ..full()
        };
        let cases: Vec<(&[&str], &TemplateValues, Want)> = vec![
            // 1. plain literals pass through
            (&["kilo", "run"], &nothing, Want::Ok(&["kilo", "run"])),
            // 2. whole-argument placeholders
            (
                &["--model", "{model}", "--variant", "{effort}"],
                &all,
                Want::Ok(&["--model", "openai/gpt-6-sol", "--variant", "high"]),
            ),
            // 3. effort drop takes the flag before it
            (
                &["run", "--variant", "{effort}", "--format", "json"],
                &no_effort,
                Want::Ok(&["run", "--format", "json"]),
            ),
            // 4. an empty effort is no effort
            (
                &["run", "--variant", "{effort}"],
                &empty_effort,
                Want::Ok(&["run"]),
            ),
            // 5. embedded effort: `-c` and its value both go
            (
                &["exec", "-c", "model_reasoning_effort=\"{effort}\"", "-"],
                &no_effort,
                Want::Ok(&["exec", "-"]),
            ),
            // 6. a non-flag before the effort argument stays
            (
                &["run", "{effort}", "x"],
                &no_effort,
                Want::Ok(&["run", "x"]),
            ),
            // 7. `--variant={effort}` is its own flag: only it goes
            (
                &["-v", "--variant={effort}", "y"],
                &no_effort,
                Want::Ok(&["-v", "y"]),
            ),
            // 8. embedded placeholder with effort present
            (
                &["-c", "model_reasoning_effort=\"{effort}\""],
                &all,
                Want::Ok(&["-c", "model_reasoning_effort=\"high\""]),
            ),
            // 9. literal braces
            (
                &["${{VAR}}", "{{\"key\":1}}"],
                &nothing,
                Want::Ok(&["${VAR}", "{\"key\":1}"]),
            ),
            // 10. literal braces around a placeholder
            (&["{{{model}}}"], &all, Want::Ok(&["{openai/gpt-6-sol}"])),
            // 11. missing value is an error naming the argument
            (
                &["x", "--report", "{report}"],
                &nothing,
                Want::Missing(2, Placeholder::Report),
            ),
            // 12. empty value is an error
            (
                &["--model", "{model}"],
                &empty_model,
                Want::Empty(1, Placeholder::Model),
            ),
            // 13. splice
            (
                &["codex", "exec", "{sandbox_args}", "-C", "{workspace}"],
                &all,
                Want::Ok(&["codex", "exec", "--sandbox", "read-only", "-C", "/ws"]),
            ),
            // 14. empty splice
            (
                &["codex", "{sandbox_args}", "-"],
                &no_splice,
                Want::Ok(&["codex", "-"]),
            ),
            // 15. splice not given
            (
                &["codex", "{sandbox_args}"],
                &nothing,
                Want::Missing(1, Placeholder::SandboxArgs),
            ),
            // 16. splice must be whole
            (&["x", "a{sandbox_args}"], &all, Want::Syntax(1)),
            // 17. unknown placeholder
            (&["{modle}"], &all, Want::Syntax(0)),
            // 18. unclosed brace
            (&["ok", "{model"], &all, Want::Syntax(1)),
            // 19. stray close brace
            (&["a}b"], &all, Want::Syntax(0)),
            // 20. values are inserted verbatim, never re-parsed
            (&["{model}"], &braces_in_value, Want::Ok(&["{effort}"])),
            // 21. every scalar placeholder
            (
                &[
                    "{workspace}",
                    "{report}",
                    "{schema}",
                    "{prompt_file}",
                    "{run_dir}",
                    "{role}",
                    "{sandbox}",
                    "{session}",
                ],
                &all,
                Want::Ok(&[
                    "/ws",
                    "/run/report.json",
                    "/run/schema.json",
                    "/run/prompt.md",
                    "/run",
                    "builder",
                    "workspace-write",
                    "ses_1",
                ]),
            ),
            // 22. several placeholders in one argument
            (
                &["{run_dir}/{role}.log"],
                &all,
                Want::Ok(&["/run/builder.log"]),
            ),
            // 23. effort first: nothing to pop
            (&["{effort}", "a"], &no_effort, Want::Ok(&["a"])),
            // 24. a flag produced by a placeholder is not dropped with the effort
            (&["{model}", "{effort}"], &model_is_flag, Want::Ok(&["-m"])),
            // 25. effort drop does not need other values
            (&["--variant", "{effort}"], &nothing, Want::Ok(&[])),
        ];
        assert!(cases.len() >= 15);
        for (template, values, want) in cases {
            check(template, values, want);
        }
    }

    #[test]
    fn parse_reports_offsets_and_names() {
        assert_eq!(
            parse_arg("ab{nope}"),
            Err(TemplateSyntaxError::UnknownPlaceholder {
                name: "nope".into(),
                offset: 2
            })
        );
        assert_eq!(
            placeholders_in("--x={model}:{effort}"),
            Ok(vec![Placeholder::Model, Placeholder::Effort])
        );
        assert_eq!(literal_text("a{{b}}"), Some("a{b}".into()));
        assert_eq!(literal_text("{model}"), None);
        let message = parse_arg("{nope}").unwrap_err().to_string();
        assert!(
            message.contains("{nope}") && message.contains("{model}"),
            "{message}"
        );
    }

    #[test]
    fn placeholder_names_round_trip() {
        for p in Placeholder::ALL {
            assert_eq!(Placeholder::parse(p.as_str()), Some(p));
            assert_eq!(
                serde_json::to_value(p).unwrap(),
                serde_json::Value::String(p.as_str().into())
            );
        }
    }
}

#[cfg(test)]
mod shell_tests {
    use super::*;

    fn t(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn placeholders_in_a_shell_script_are_found() {
        assert_eq!(
            shell_script_placeholders(&t(&[
                "sh",
                "-c",
                "tool --cd {workspace} -m {model} {workspace}"
            ])),
            [Placeholder::Workspace, Placeholder::Model]
        );
        assert!(shell_script_placeholders(&t(&["tool", "--cd", "{workspace}"])).is_empty());
        assert!(shell_script_placeholders(&t(&["sh", "-c", "tool", "{workspace}"])).is_empty());
    }

    #[test]
    fn only_a_shells_c_script_is_a_script() {
        assert!(is_shell_script(&t(&["sh", "-c", "x"]), 2));
        assert!(is_shell_script(&t(&["/bin/bash", "-lc", "x"]), 2));
        assert!(is_shell_script(&t(&["env", "A=1", "zsh", "-ec", "x"]), 4));
        assert!(!is_shell_script(&t(&["sh", "-c", "x"]), 1));
        assert!(!is_shell_script(&t(&["tool", "-c", "x"]), 2));
        assert!(!is_shell_script(
            &t(&["codex", "exec", "-c", "model=\"{effort}\""]),
            3
        ));
        assert!(!is_shell_script(
            &t(&["tool", "--shell", "sh", "-c", "x"]),
            4
        ));
        assert!(!is_shell_script(&t(&["sh", "--config", "x"]), 2));
    }

    #[test]
    fn values_are_quoted_where_they_land() {
        let values = TemplateValues {
            workspace: Some("p;touch X;#".into()),
            ..TemplateValues::default()
        };
        let expanded = expand(&t(&["sh", "-c", "cd {workspace} && run"]), &values).unwrap();
        assert_eq!(expanded[2], "cd 'p;touch X;#' && run");
        let outside = expand(&t(&["tool", "--dir", "{workspace}"]), &values).unwrap();
        assert_eq!(outside[2], "p;touch X;#");
    }
}
