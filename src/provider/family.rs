//! Model families: which vendor's model a route id names, for the cross-model guard.
//!
//! The decision is data-driven: [`VENDOR_WORDS`] maps words of a model id to a family. A
//! `provider/` route prefix is read through: the words of the model itself (the last `/`
//! segment) win, and only when none of them is known are the route's words consulted
//! (`alibaba-token-plan/deepseek-v4` is DeepSeek, `zhipuai-coding-plan/glm-5.3` is GLM). An id
//! nobody knows gets a family named after its own first word (`mock-model` is `mock`), so two
//! unknown models of one vendor still compare equal. Family names are API (stable strings).

use serde::{Serialize, Serializer};
use std::fmt;

/// A model family. [`Family::as_str`] is the stable serialized name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// OpenAI: gpt-*, o1/o3/o4, codex-*.
    OpenAi,
    /// Anthropic: claude-*, sonnet, opus, haiku.
    Anthropic,
    /// Zhipu AI / Z.AI: glm-*.
    Glm,
    /// Xiaomi: mimo-*.
    Mimo,
    /// Alibaba: qwen*, qwq.
    Qwen,
    DeepSeek,
    /// Moonshot: kimi-*.
    Kimi,
    MiniMax,
    /// Google: gemini-*.
    Gemini,
    /// Anything else, named by the id's own first word (lowercase, trailing digits removed).
    Other(String),
}

impl Family {
    pub fn as_str(&self) -> &str {
        match self {
            Family::OpenAi => "openai",
            Family::Anthropic => "anthropic",
            Family::Glm => "glm",
            Family::Mimo => "mimo",
            Family::Qwen => "qwen",
            Family::DeepSeek => "deepseek",
            Family::Kimi => "kimi",
            Family::MiniMax => "minimax",
            Family::Gemini => "gemini",
            Family::Other(word) => word,
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Family {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// How a vendor word matches one word of a model id.
#[derive(Debug, Clone, Copy)]
enum WordMatch {
    /// The word equals it.
    Exact,
    /// The word starts with it (`qwen3` starts with `qwen`).
    Prefix,
}

/// The vendor vocabulary, in priority order.
const VENDOR_WORDS: &[(&str, WordMatch, Family)] = &[
    ("gpt", WordMatch::Prefix, Family::OpenAi),
    ("chatgpt", WordMatch::Prefix, Family::OpenAi),
    ("o1", WordMatch::Exact, Family::OpenAi),
    ("o3", WordMatch::Exact, Family::OpenAi),
    ("o4", WordMatch::Exact, Family::OpenAi),
    ("codex", WordMatch::Prefix, Family::OpenAi),
    ("openai", WordMatch::Exact, Family::OpenAi),
    ("claude", WordMatch::Prefix, Family::Anthropic),
    ("sonnet", WordMatch::Exact, Family::Anthropic),
    ("opus", WordMatch::Exact, Family::Anthropic),
    ("haiku", WordMatch::Exact, Family::Anthropic),
    ("anthropic", WordMatch::Exact, Family::Anthropic),
    ("glm", WordMatch::Prefix, Family::Glm),
    ("chatglm", WordMatch::Prefix, Family::Glm),
    ("zhipu", WordMatch::Prefix, Family::Glm),
    ("zai", WordMatch::Exact, Family::Glm),
    ("mimo", WordMatch::Prefix, Family::Mimo),
    ("xiaomi", WordMatch::Prefix, Family::Mimo),
    ("qwen", WordMatch::Prefix, Family::Qwen),
    ("qwq", WordMatch::Prefix, Family::Qwen),
    ("alibaba", WordMatch::Exact, Family::Qwen),
    ("dashscope", WordMatch::Exact, Family::Qwen),
    ("deepseek", WordMatch::Prefix, Family::DeepSeek),
    ("kimi", WordMatch::Prefix, Family::Kimi),
    ("moonshot", WordMatch::Prefix, Family::Kimi),
    ("minimax", WordMatch::Prefix, Family::MiniMax),
    ("abab", WordMatch::Prefix, Family::MiniMax),
    ("gemini", WordMatch::Prefix, Family::Gemini),
    ("google", WordMatch::Exact, Family::Gemini),
];

fn words(segment: &str) -> impl Iterator<Item = &str> {
    segment
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
}

fn family_of_word(word: &str) -> Option<Family> {
    VENDOR_WORDS.iter().find_map(|(vendor, how, family)| {
        let hit = match how {
            WordMatch::Exact => word == *vendor,
            WordMatch::Prefix => word.starts_with(vendor),
        };
        hit.then(|| family.clone())
    })
}

/// The family of a model id such as `openai/gpt-6-sol`, `claude-opus-5-5` or `mock-model`.
pub fn family_of(model_id: &str) -> Family {
    let id = model_id.trim().to_ascii_lowercase();
    let mut segments = id.rsplit('/').filter(|s| !s.is_empty());
    let model = segments.next().unwrap_or("");
    if let Some(family) = words(model).find_map(family_of_word) {
        return family;
    }
    if let Some(family) = segments.find_map(|route| words(route).find_map(family_of_word)) {
        return family;
    }
    let first = words(model).next().unwrap_or("");
    let name = first.trim_end_matches(|c: char| c.is_ascii_digit());
    let name = if name.is_empty() { first } else { name };
    if name.is_empty() {
        Family::Other("unknown".into())
    } else {
        Family::Other(name.to_owned())
    }
}

/// A family as an endpoint declares it (`connections setup --model ID=FAMILY`): a known
/// family's name or vendor word (`openai`, `qwen`, `claude`) is that family; anything else is
/// its own family, named exactly (lowercase), so `acme-1` and `acme-2` differ.
pub fn declared_family(name: &str) -> Family {
    let name = name.trim().to_ascii_lowercase();
    let single = {
        let mut all = words(&name);
        match (all.next(), all.next()) {
            (Some(word), None) if word == name => family_of_word(word),
            _ => None,
        }
    };
    if let Some(family) = single {
        return family;
    }
    if name.is_empty() {
        Family::Other("unknown".into())
    } else {
        Family::Other(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn family_table() {
        let cases = [
            ("gpt-6-sol", "openai"),
            ("gpt-5.6-luna", "openai"),
            ("openai/gpt-5.6-sol", "openai"),
            ("openai/gpt-6-astra", "openai"),
            ("o3", "openai"),
            ("o4-mini", "openai"),
            ("o1-preview", "openai"),
            ("codex-mini-latest", "openai"),
            ("gpt4o", "openai"),
            ("openai/some-new-thing", "openai"),
            ("claude-sonnet-5-5", "anthropic"),
            ("claude-opus-5-5", "anthropic"),
            ("claude-haiku-4-5-20251001", "anthropic"),
            ("sonnet", "anthropic"),
            ("opus", "anthropic"),
            ("anthropic/claude-3.7-sonnet", "anthropic"),
            ("zhipuai-coding-plan/glm-5.3", "glm"),
            ("zai-coding-plan/glm-4.6", "glm"),
            ("glm-5.3", "glm"),
            ("GLM-4.5-Air", "glm"),
            ("xiaomi/mimo-v2", "mimo"),
            ("mimo-7b", "mimo"),
            ("alibaba-token-plan/qwen3.8-max", "qwen"),
            ("qwen3.7-plus", "qwen"),
            ("qwq-32b", "qwen"),
            ("alibaba-token-plan/deepseek-v4", "deepseek"),
            ("deepseek-reasoner", "deepseek"),
            ("alibaba-token-plan/kimi-k3", "kimi"),
            ("moonshotai/kimi-k2", "kimi"),
            ("alibaba-token-plan/minimax-m3", "minimax"),
            ("MiniMax-M2", "minimax"),
            ("google/gemini-3-pro", "gemini"),
            ("gemini-2.5-flash", "gemini"),
            ("mock-model", "mock"),
            ("mock/mock-model", "mock"),
            ("llama3.1-70b", "llama"),
            ("kilo/mistral-large", "mistral"),
            ("alibaba-token-plan/unknown-x", "qwen"),
            ("", "unknown"),
            ("  openai/gpt-6-sol  ", "openai"),
            ("42", "42"),
        ];
        assert!(cases.len() >= 30);
        for (id, want) in cases {
            assert_eq!(family_of(id).as_str(), want, "{id}");
        }
    }

    #[test]
    fn declared_families_are_exact_unless_a_known_name() {
        let cases = [
            ("openai", Family::OpenAi),
            ("Qwen", Family::Qwen),
            ("claude", Family::Anthropic),
            ("mock", Family::Other("mock".into())),
            ("alpha", Family::Other("alpha".into())),
            ("acme-1", Family::Other("acme-1".into())),
            ("gpt-oss", Family::Other("gpt-oss".into())),
            ("", Family::Other("unknown".into())),
        ];
        for (name, want) in cases {
            assert_eq!(declared_family(name), want, "{name}");
        }
        // A declared `mock` meets a CLI's inferred `mock-model`.
        assert_eq!(declared_family("mock"), family_of("mock-model"));
    }

    #[test]
    fn model_word_wins_over_route_word() {
        assert_eq!(family_of("openai/claude-x"), Family::Anthropic);
        assert_eq!(family_of("alibaba-token-plan/glm-5"), Family::Glm);
    }

    #[test]
    fn families_serialize_as_their_names() {
        assert_eq!(
            serde_json::to_value(Family::OpenAi).unwrap(),
            serde_json::json!("openai")
        );
        assert_eq!(
            serde_json::to_value(family_of("mock-model")).unwrap(),
            serde_json::json!("mock")
        );
    }
}
