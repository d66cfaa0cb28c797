//! autocode's readiness canaries (`crate::direct::preflight`) against the scripted model: a
//! request whose prompt says it is "autocode's preflight canary" is answered by a built-in
//! responder, as a capable model with a large enough context would: one call of the offered
//! shell tool with `echo MARKER`, the marker read from the prompt where it is stated (the
//! command of the short canary; the first line of the long one). So the scripted endpoint (the
//! demo, the tests, the scenario catalog) passes the readiness preflight honestly, through the
//! same requests a real server gets, and the canaries consume no script step and count no fault:
//! a script's conversations are not shifted.
//!
//! A script that wants to play a model failing the canary matches it explicitly: a conversation
//! with a `prompt_contains` or `last_prompt_contains` rule that fits the canary's prompt takes
//! it instead (a `default` conversation does not).

use super::request::ModelRequest;
use super::script::{MatchRule, Script};

/// The phrase both canary prompts carry.
pub const CANARY_PHRASE: &str = "autocode's preflight canary";
/// How every canary marker starts.
pub const MARKER_PREFIX: &str = "ac-canary-";

/// The marker a canary request asks to echo, when it is one.
pub fn canary_marker(request: &ModelRequest) -> Option<String> {
    let prompt = request.prompts.iter().find(|p| p.contains(CANARY_PHRASE))?;
    let start = prompt.find(MARKER_PREFIX)?;
    let marker: String = prompt[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect();
    (marker.len() > MARKER_PREFIX.len()).then_some(marker)
}

/// Whether a conversation of `script` claims the request by an explicit prompt rule.
pub fn scripted_explicitly(script: &Script, request: &ModelRequest) -> bool {
    script
        .conversations
        .iter()
        .any(|conversation| match &conversation.match_rule {
            MatchRule::Default => false,
            MatchRule::PromptContains(needle) => {
                request.prompts.iter().any(|p| p.contains(needle.as_str()))
            }
            MatchRule::LastPromptContains(needle) => request
                .prompts
                .last()
                .is_some_and(|p| p.contains(needle.as_str())),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scripted_model::request::Api;
    use serde_json::json;

    fn chat(prompt: &str) -> ModelRequest {
        let body = json!({"model": "m", "messages": [{"role": "user", "content": prompt}],
                          "tools": [{"type": "function", "function": {"name": "shell", "parameters": {}}}]});
        ModelRequest::parse(Api::ChatCompletions, body.to_string().as_bytes()).unwrap()
    }

    #[test]
    fn the_marker_is_read_where_the_prompt_states_it() {
        let cases = [
            (
                "This is autocode's preflight canary. Call the `shell` tool exactly once with the command `echo ac-canary-3f9a`. Do not answer in text.",
                Some("ac-canary-3f9a"),
            ),
            (
                "This is autocode's preflight canary. The marker is ac-canary-77b0. Remember it.\n\nfiller\nCall `echo MARKER`.",
                Some("ac-canary-77b0"),
            ),
            ("This is autocode's preflight canary. No marker here.", None),
            ("Echo ac-canary-1234 please", None),
            ("autocode's preflight canary: ac-canary-", None),
        ];
        for (prompt, want) in cases {
            assert_eq!(canary_marker(&chat(prompt)).as_deref(), want, "{prompt}");
        }
    }
}
