//! The interactive form of `autocode connections setup`: on a terminal, without `--name` and
//! `--kind`, it asks for one endpoint's kind, base URL, protocol, key and models, shows what it
//! will save and saves it on confirmation. It launches no model and makes no request.
//!
//! The questions go to a writer (stderr) and the answers come from a reader (stdin), so the whole
//! interview runs in tests from a byte string. The key is read with the terminal's echo off when
//! the reader is a terminal ([`Prompter::terminal`]); it is never written back, not even in the
//! summary. Flags given with the interactive form are answers already: they are not asked.

use std::io::{self, BufRead, IsTerminal, Write};

use nix::sys::termios::{self, LocalFlags, SetArg};

use crate::direct::connections::{self, Connections, Endpoint, EndpointKind, EndpointModel};
use crate::direct::http::{self, Secret};
use crate::direct::protocol::{Protocol, TokenField};

/// What the flags already said (parsed); `None` is asked (or defaulted).
#[derive(Debug, Clone, Default)]
pub struct Preset {
    pub name: Option<String>,
    pub kind: Option<EndpointKind>,
    pub base_url: Option<String>,
    pub protocol: Option<Protocol>,
    pub token_field: Option<TokenField>,
    /// Empty: asked (or the saved models kept).
    pub models: Vec<EndpointModel>,
    pub no_stream: bool,
    /// `--max-output-tokens`; absent, a saved endpoint's cap is kept.
    pub max_output_tokens: Option<u32>,
}

/// The endpoint to save and the key given for it (`None`: keep the key bound to its URL, if any).
#[derive(Debug)]
pub struct Draft {
    pub endpoint: Endpoint,
    pub key: Option<Secret>,
}

#[derive(Debug, thiserror::Error)]
pub enum InterviewError {
    #[error("setup cancelled: nothing was saved")]
    Cancelled,
    #[error("the terminal: {0}")]
    Io(#[from] io::Error),
}

/// Questions on a writer, answers from a reader; the key without echo when the reader is a
/// terminal.
pub struct Prompter<R, W> {
    input: R,
    out: W,
    /// The terminal whose echo is turned off while the key is typed (`None`: not a terminal).
    echo_off: Option<io::Stdin>,
}

impl<R: BufRead, W: Write> Prompter<R, W> {
    /// A prompter on any reader and writer (the key is read like any line: tests).
    #[cfg(test)]
    pub fn new(input: R, out: W) -> Prompter<R, W> {
        Prompter {
            input,
            out,
            echo_off: None,
        }
    }

    fn say(&mut self, text: &str) -> Result<(), InterviewError> {
        writeln!(self.out, "{text}")?;
        Ok(())
    }

    /// One answer line, trimmed; end of input cancels.
    fn line(&mut self, prompt: &str) -> Result<String, InterviewError> {
        write!(self.out, "{prompt}: ")?;
        self.out.flush()?;
        let mut text = String::new();
        if self.input.read_line(&mut text)? == 0 {
            writeln!(self.out)?;
            return Err(InterviewError::Cancelled);
        }
        Ok(text.trim().to_owned())
    }

    /// An answer with a default shown in brackets (Enter takes it).
    fn with_default(
        &mut self,
        prompt: &str,
        default: Option<&str>,
    ) -> Result<String, InterviewError> {
        match default {
            Some(d) => {
                let answer = self.line(&format!("{prompt} [{d}]"))?;
                Ok(if answer.is_empty() {
                    d.to_owned()
                } else {
                    answer
                })
            }
            None => self.line(prompt),
        }
    }

    fn yes(&mut self, prompt: &str, default: bool) -> Result<bool, InterviewError> {
        loop {
            let answer = self.line(&format!(
                "{prompt} [{}]",
                if default { "Y/n" } else { "y/N" }
            ))?;
            match answer.to_ascii_lowercase().as_str() {
                "" => return Ok(default),
                "y" | "yes" => return Ok(true),
                "n" | "no" => return Ok(false),
                _ => self.say("answer y or n")?,
            }
        }
    }

    /// One of `choices` by number or by name.
    fn choose<T: Copy + PartialEq>(
        &mut self,
        prompt: &str,
        choices: &[T],
        name: impl Fn(T) -> &'static str,
        default: Option<T>,
    ) -> Result<T, InterviewError> {
        let listing: Vec<String> = choices
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{}) {}", i + 1, name(*c)))
            .collect();
        self.say(&format!("{prompt} choices: {}", listing.join("  ")))?;
        loop {
            let answer = self.with_default(prompt, default.map(&name))?;
            let by_number = answer
                .parse::<usize>()
                .ok()
                .and_then(|n| n.checked_sub(1))
                .and_then(|i| choices.get(i).copied());
            if let Some(choice) =
                by_number.or_else(|| choices.iter().copied().find(|c| name(*c) == answer))
            {
                return Ok(choice);
            }
            self.say(&format!(
                "`{answer}` is not one of the listed; type its number or name"
            ))?;
        }
    }

    /// A line typed without echo on a terminal; never written back. At most
    /// [`http::SECRET_CAP`] + 2 bytes of it are kept (the rest of an over-long line is read and
    /// dropped), so it is refused by [`Secret::parse`] without growing.
    fn secret(&mut self, prompt: &str) -> Result<String, InterviewError> {
        write!(self.out, "{prompt}: ")?;
        self.out.flush()?;
        let restore = match &self.echo_off {
            Some(tty) => {
                let saved = termios::tcgetattr(tty).map_err(io::Error::from)?;
                let mut quiet = saved.clone();
                quiet.local_flags.remove(LocalFlags::ECHO);
                quiet.local_flags.insert(LocalFlags::ECHONL);
                termios::tcsetattr(tty, SetArg::TCSAFLUSH, &quiet).map_err(io::Error::from)?;
                Some(saved)
            }
            None => None,
        };
        let read = read_line_capped(&mut self.input, http::SECRET_CAP + 2);
        if let (Some(saved), Some(tty)) = (restore, &self.echo_off) {
            termios::tcsetattr(tty, SetArg::TCSAFLUSH, &saved).map_err(io::Error::from)?;
        }
        let Some(bytes) = read? else {
            writeln!(self.out)?;
            return Err(InterviewError::Cancelled);
        };
        if self.echo_off.is_none() {
            writeln!(self.out)?;
        }
        // Not UTF-8: kept as replacement characters, which `Secret::parse` refuses.
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// One line of `input` (its line end dropped), at most `cap` bytes of it kept and the rest of the
/// line consumed; `None` at the end of input before any byte.
fn read_line_capped(input: &mut impl BufRead, cap: usize) -> io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    let mut any = false;
    loop {
        let buf = input.fill_buf()?;
        if buf.is_empty() {
            return Ok(any.then_some(line));
        }
        any = true;
        let (chunk, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(end) => (&buf[..end], end + 1),
            None => (buf, buf.len()),
        };
        let room = cap.saturating_sub(line.len());
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let found_end = done > chunk.len();
        input.consume(done);
        if found_end {
            return Ok(Some(line));
        }
    }
}

impl Prompter<io::StdinLock<'static>, io::Stderr> {
    /// The process's terminal: questions on stderr, answers on stdin, the key without echo.
    /// `None` when stdin or stderr is not a terminal.
    pub fn terminal() -> Option<Self> {
        let stdin = io::stdin();
        if !stdin.is_terminal() || !io::stderr().is_terminal() {
            return None;
        }
        Some(Prompter {
            input: io::stdin().lock(),
            out: io::stderr(),
            echo_off: Some(stdin),
        })
    }
}

/// Asks for one endpoint: what `preset` leaves open, with the saved endpoint of the same name
/// (if any) as the defaults. Nothing is written; the caller saves the draft.
pub fn interview<R: BufRead, W: Write>(
    p: &mut Prompter<R, W>,
    existing: &Connections,
    preset: &Preset,
) -> Result<Draft, InterviewError> {
    p.say(&format!(
        "Direct endpoint setup for --provider autocode (saved in {}; no model is launched). Ctrl-D cancels.",
        existing.dir().display()
    ))?;
    if !existing.file.endpoints.is_empty() {
        let names: Vec<String> = existing
            .file
            .endpoints
            .iter()
            .map(|e| format!("{} ({})", e.name, e.kind.as_str()))
            .collect();
        p.say(&format!("Configured endpoints: {}", names.join(", ")))?;
    }
    let name = match &preset.name {
        Some(name) => name.clone(),
        None => loop {
            let name =
                p.line("Endpoint name (letters, digits, - _ .; a route model is NAME/MODEL)")?;
            match connections::check_name(&name) {
                Ok(()) => break name,
                Err(e) => p.say(&e.to_string())?,
            }
        },
    };
    let previous = existing.endpoint(&name).cloned();
    if previous.is_some() {
        p.say(&format!(
            "Endpoint {name} exists: Enter keeps each saved answer."
        ))?;
    }
    let kind = match preset.kind {
        Some(kind) => kind,
        None => p.choose(
            "Kind",
            &EndpointKind::ALL,
            EndpointKind::as_str,
            previous.as_ref().map(|e| e.kind),
        )?,
    };
    // The saved answers are defaults only for the same kind.
    let same_kind = previous.as_ref().filter(|e| e.kind == kind);
    let base_url = match &preset.base_url {
        Some(url) => url.clone(),
        None => {
            let default = same_kind
                .map(|e| e.base_url.clone())
                .or_else(|| kind.default_base_url().map(str::to_owned));
            loop {
                let url = p.with_default(
                    "Base URL with its version path (https; http only on 127.0.0.1, ::1, localhost)",
                    default.as_deref(),
                )?;
                match http::check_base_url(&url) {
                    Ok(_) => break url,
                    Err(e) => p.say(&e.to_string())?,
                }
            }
        }
    };
    let protocol = match preset.protocol {
        Some(protocol) => protocol,
        None => p.choose(
            "Protocol",
            &Protocol::ALL,
            Protocol::as_str,
            Some(same_kind.map_or(kind.default_protocol(), |e| e.protocol)),
        )?,
    };
    let token_field = preset
        .token_field
        .or(same_kind.map(|e| e.token_field))
        .unwrap_or(kind.default_token_field());
    let stream = !preset.no_stream && same_kind.is_none_or(|e| e.stream);

    let mut endpoint = Endpoint {
        name: name.clone(),
        kind,
        base_url,
        protocol,
        token_field,
        stream,
        max_output_tokens: preset
            .max_output_tokens
            .or(previous.as_ref().and_then(|e| e.max_output_tokens)),
        models: Vec::new(),
    };
    let key = ask_key(p, existing, &endpoint, previous.as_ref())?;

    endpoint.models = if !preset.models.is_empty() {
        preset.models.clone()
    } else {
        let saved = previous.map(|e| e.models).unwrap_or_default();
        if !saved.is_empty()
            && p.yes(
                &format!("Keep the saved models ({})?", listing(&saved)),
                true,
            )?
        {
            saved
        } else {
            ask_models(p)?
        }
    };

    let key_line = match (&key, existing.has_key(&endpoint)) {
        (Some(_), _) => "a new key (stored 0600, bound to this URL)",
        (None, true) => "the stored key (kept)",
        (None, false) if kind.needs_key() => {
            "none: the endpoint cannot be used until a key is given"
        }
        (None, false) => "none",
    };
    p.say(&format!(
        "Endpoint {}: {} at {}, {} ({}{}), models: {}; key: {key_line}",
        endpoint.name,
        kind.as_str(),
        endpoint.base_url,
        protocol.as_str(),
        token_field.as_str(),
        if stream {
            ", streamed"
        } else {
            ", not streamed"
        },
        listing(&endpoint.models),
    ))?;
    if !p.yes("Save it?", true)? {
        return Err(InterviewError::Cancelled);
    }
    Ok(Draft { endpoint, key })
}

/// The key question: Enter keeps a key bound to this URL, or stores none.
fn ask_key<R: BufRead, W: Write>(
    p: &mut Prompter<R, W>,
    existing: &Connections,
    endpoint: &Endpoint,
    previous: Option<&Endpoint>,
) -> Result<Option<Secret>, InterviewError> {
    let bound = existing.has_key(endpoint);
    let was_stored = previous.is_some_and(|prev| existing.has_key(prev));
    if was_stored && !bound {
        p.say("The stored key was given for another URL: a changed URL needs the key again.")?;
    }
    let prompt = match (bound, endpoint.kind.needs_key()) {
        (true, _) => "API key (input hidden; Enter keeps the stored key)",
        (false, true) => "API key (input hidden; required to use this endpoint)",
        (false, false) => "API key, if the server needs one (input hidden; Enter for none)",
    };
    loop {
        match Secret::parse(&p.secret(prompt)?) {
            Ok(key) => return Ok(Some(key)),
            Err(http::SecretError::Empty) => {}
            Err(e) => {
                p.say(&format!("{e}; type it again"))?;
                continue;
            }
        }
        if bound || !endpoint.kind.needs_key() {
            return Ok(None);
        }
        if !p.yes("No key: save the endpoint without one?", false)? {
            continue;
        }
        return Ok(None);
    }
}

/// Model ids and their families until an empty id (at least one).
fn ask_models<R: BufRead, W: Write>(
    p: &mut Prompter<R, W>,
) -> Result<Vec<EndpointModel>, InterviewError> {
    let mut models: Vec<EndpointModel> = Vec::new();
    loop {
        let prompt = if models.is_empty() {
            "Model id, as the server names it"
        } else {
            "Another model id (Enter when done)"
        };
        let id = p.line(prompt)?;
        if id.is_empty() {
            if models.is_empty() {
                p.say("an endpoint needs at least one model")?;
                continue;
            }
            return Ok(models);
        }
        if id.chars().any(char::is_whitespace) {
            p.say("a model id has no spaces")?;
            continue;
        }
        if models.iter().any(|m| m.id == id) {
            p.say(&format!("{id} is listed already"))?;
            continue;
        }
        let guess = crate::provider::family_of(&id);
        let family = loop {
            let family = p.with_default(
                &format!("Family of {id} (the vendor, for the cross-model rule)"),
                Some(guess.as_str()),
            )?;
            if !family.is_empty() && !family.chars().any(char::is_whitespace) {
                break family;
            }
            p.say("a family is one word, e.g. qwen, llama, anthropic")?;
        };
        models.push(EndpointModel { id, family });
    }
}

fn listing(models: &[EndpointModel]) -> String {
    if models.is_empty() {
        return "none".into();
    }
    models
        .iter()
        .map(|m| format!("{} ({})", m.id, m.family))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(
        existing: &Connections,
        preset: &Preset,
        answers: &str,
    ) -> (Result<Draft, InterviewError>, String) {
        let mut out = Vec::new();
        let result = {
            let mut p = Prompter::new(answers.as_bytes(), &mut out);
            interview(&mut p, existing, preset)
        };
        (result, String::from_utf8(out).unwrap())
    }

    fn empty() -> (tempfile::TempDir, Connections) {
        let home = tempfile::tempdir().unwrap();
        let c = Connections::load(&connections::dir_under(home.path())).unwrap();
        (home, c)
    }

    #[test]
    fn a_local_endpoint_by_numbers_and_defaults() {
        let (_home, c) = empty();
        // name, kind 5 (llama.cpp), URL, protocol default, no key, one model, family guessed,
        // no second model, save.
        let (draft, out) = run(
            &c,
            &Preset::default(),
            "local\n5\nhttp://127.0.0.1:18090/v1\n\n\nqwen2.5-coder-1.5b\n\n\n\n",
        );
        let draft = draft.unwrap();
        assert_eq!(draft.endpoint.name, "local");
        assert_eq!(draft.endpoint.kind, EndpointKind::LlamaCpp);
        assert_eq!(draft.endpoint.base_url, "http://127.0.0.1:18090/v1");
        assert_eq!(draft.endpoint.protocol, Protocol::ChatCompletions);
        assert_eq!(draft.endpoint.token_field, TokenField::MaxTokens);
        assert!(draft.endpoint.stream);
        assert_eq!(
            draft.endpoint.models,
            vec![EndpointModel {
                id: "qwen2.5-coder-1.5b".into(),
                family: "qwen".into()
            }]
        );
        assert!(draft.key.is_none());
        assert!(out.contains("Family of qwen2.5-coder-1.5b"), "{out}");
        assert!(out.contains("key: none"), "{out}");
    }

    #[test]
    fn a_typed_key_that_is_too_long_or_holds_controls_is_asked_again_unechoed() {
        let (_home, c) = empty();
        let long = "k".repeat(5 << 20);
        let input = format!(
            "cloud\nopenai-compatible\nhttps://api.example.com/v1\n\n{long}\nsk-\x1b]0;pwned\x07\nsk-fine\nmodel-x\nacme\n\ny\n"
        );
        let (draft, out) = run(&c, &Preset::default(), &input);
        let draft = draft.unwrap();
        assert_eq!(draft.key.as_ref().map(Secret::expose), Some("sk-fine"));
        assert!(
            out.contains("longer than 4096 bytes: that is not an API key; type it again"),
            "{out}"
        );
        assert!(out.contains("an escape character"), "{out}");
        assert!(!out.contains("pwned") && !out.contains("kkkk"), "{out}");
    }

    #[test]
    fn plain_http_off_loopback_is_asked_again_and_the_key_is_never_written_back() {
        let (_home, c) = empty();
        let (draft, out) = run(
            &c,
            &Preset::default(),
            "bad name!\ncloud\nopenai-compatible\nhttp://api.example.com/v1\nhttps://api.example.com/v1\nresponses\nsk-very-secret\nmodel-x\nacme\n\ny\n",
        );
        let draft = draft.unwrap();
        assert!(out.contains("endpoint name `bad name!`"), "{out}");
        assert!(out.contains("http://api.example.com/v1"), "{out}");
        assert_eq!(draft.endpoint.base_url, "https://api.example.com/v1");
        assert_eq!(draft.endpoint.protocol, Protocol::Responses);
        assert_eq!(draft.endpoint.token_field, TokenField::MaxCompletionTokens);
        assert_eq!(
            draft.key.as_ref().map(Secret::expose),
            Some("sk-very-secret")
        );
        assert_eq!(draft.endpoint.models[0].family, "acme");
        assert!(!out.contains("sk-very"), "{out}");
        assert!(out.contains("a new key"), "{out}");
    }

    #[test]
    fn a_changed_url_needs_the_key_again_and_saved_answers_are_defaults() {
        let (_home, mut c) = empty();
        c.save_endpoint(
            Endpoint {
                name: "claude".into(),
                kind: EndpointKind::Anthropic,
                base_url: "https://api.anthropic.com/v1".into(),
                protocol: Protocol::AnthropicMessages,
                token_field: TokenField::MaxTokens,
                stream: false,
                max_output_tokens: None,
                models: vec![EndpointModel {
                    id: "claude-x".into(),
                    family: "anthropic".into(),
                }],
            },
            Some(Secret::new("sk-old")),
        )
        .unwrap();
        // Same URL: Enter keeps the key and every saved answer.
        let preset = Preset {
            name: Some("claude".into()),
            ..Preset::default()
        };
        let (draft, out) = run(&c, &preset, "\n\n\n\n\n\n");
        let draft = draft.unwrap();
        assert!(draft.key.is_none());
        assert!(!draft.endpoint.stream);
        assert_eq!(draft.endpoint.models[0].id, "claude-x");
        assert!(out.contains("Enter keeps the stored key"), "{out}");
        assert!(out.contains("the stored key (kept)"), "{out}");
        // A new URL: the old key does not follow it.
        let (draft, out) = run(&c, &preset, "\nhttps://proxy.example.com/v1\n\n\ny\n\n\n");
        let draft = draft.unwrap();
        assert_eq!(draft.endpoint.base_url, "https://proxy.example.com/v1");
        assert!(draft.key.is_none());
        assert!(out.contains("a changed URL needs the key again"), "{out}");
        assert!(
            out.contains("the endpoint cannot be used until a key is given"),
            "{out}"
        );
        assert!(!out.contains("sk-old"), "{out}");
    }

    #[test]
    fn flags_are_answers_and_end_of_input_or_no_cancels() {
        let (_home, c) = empty();
        let preset = Preset {
            name: Some("local".into()),
            kind: Some(EndpointKind::Ollama),
            base_url: Some("http://127.0.0.1:11434/v1".into()),
            protocol: Some(Protocol::ChatCompletions),
            models: vec![EndpointModel {
                id: "qwen3".into(),
                family: "qwen".into(),
            }],
            ..Preset::default()
        };
        // Only the key (none) and the confirmation are asked.
        let (draft, out) = run(&c, &preset, "\n\n");
        assert_eq!(draft.unwrap().endpoint.models[0].id, "qwen3");
        assert!(!out.contains("Kind"), "{out}");
        assert!(matches!(
            run(&c, &preset, "\nn\n").0,
            Err(InterviewError::Cancelled)
        ));
        assert!(matches!(
            run(&c, &Preset::default(), "local\n").0,
            Err(InterviewError::Cancelled)
        ));
        // An unknown kind is asked again; a model list needs one model.
        let (draft, out) = run(
            &c,
            &Preset::default(),
            "x\n9\nfoo\nvllm\n\n\n\n\nm1\nllama\nm1\n\n\n",
        );
        let draft = draft.unwrap();
        assert!(out.contains("`9` is not one of the listed"), "{out}");
        assert!(
            out.contains("an endpoint needs at least one model"),
            "{out}"
        );
        assert!(out.contains("m1 is listed already"), "{out}");
        assert_eq!(draft.endpoint.kind, EndpointKind::Vllm);
        assert_eq!(draft.endpoint.base_url, "http://127.0.0.1:8000/v1");
        assert_eq!(draft.endpoint.models.len(), 1);
    }
}
