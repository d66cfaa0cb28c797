//! Harness profiles: which runtime plays a case and against what model, their names (path
//! components of result folders, `scripts/<profile>.json` stems, API of the scorecard) and, for
//! the direct runtime, which wire protocol a job speaks.
//!
//! Invariants: `as_str` and `FromStr` round-trip; every `scripted-direct*` profile plays the one
//! `scripted-direct` script of a case ([`Profile::script_key`]), and each `scripted-acp-*` profile
//! the script of the native CLI profile whose agent it drives over ACP; the protocol of a
//! `scripted-direct` job is a pure function of the case name and the repetition, so a job run
//! alone speaks the same protocol as in the whole catalog.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::acp::PinnedAcpAgent;
use crate::direct::protocol::Protocol;

/// The wire protocol of a `scripted-direct*` profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DirectWire {
    /// `scripted-direct`: each job picks one of the three protocols from its case name and
    /// repetition ([`DirectWire::protocol_for`]); `--repeat 3` plays every case on all three.
    Rotate,
    ChatCompletions,
    Responses,
    AnthropicMessages,
}

impl DirectWire {
    pub const ALL: [DirectWire; 4] = [
        DirectWire::Rotate,
        DirectWire::ChatCompletions,
        DirectWire::Responses,
        DirectWire::AnthropicMessages,
    ];

    /// The protocol job `(case, repeat)` speaks.
    pub fn protocol_for(self, case: &str, repeat: u32) -> Protocol {
        match self {
            DirectWire::ChatCompletions => Protocol::ChatCompletions,
            DirectWire::Responses => Protocol::Responses,
            DirectWire::AnthropicMessages => Protocol::AnthropicMessages,
            DirectWire::Rotate => {
                let slot = (fnv1a(case.as_bytes()) % 3 + u64::from(repeat % 3)) % 3;
                Protocol::ALL[slot as usize]
            }
        }
    }
}

/// FNV-1a, 64 bits: a hash that stays the same across builds and platforms (unlike std's).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A harness profile: which agent CLI (or autocode's own runtime) runs the case and against
/// what model.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Profile {
    ScriptedOpencode,
    ScriptedCodex,
    ScriptedClaude,
    ScriptedFake,
    /// autocode's own runtime (`--provider autocode`) against the scripted model.
    ScriptedDirect(DirectWire),
    /// A pinned ACP agent registered as a TOML tool (`output = "acp"`) against the scripted
    /// model; plays its native CLI profile's script.
    ScriptedAcp(PinnedAcpAgent),
    /// A user-defined live profile: a provider name from the registry; needs
    /// `--i-authorize-live-model-spend`.
    Live(String),
}

const DIRECT_PREFIX: &str = "scripted-direct";

impl Profile {
    pub const SCRIPTED: [Profile; 10] = [
        Profile::ScriptedOpencode,
        Profile::ScriptedCodex,
        Profile::ScriptedClaude,
        Profile::ScriptedFake,
        Profile::ScriptedDirect(DirectWire::Rotate),
        Profile::ScriptedDirect(DirectWire::ChatCompletions),
        Profile::ScriptedDirect(DirectWire::Responses),
        Profile::ScriptedDirect(DirectWire::AnthropicMessages),
        Profile::ScriptedAcp(PinnedAcpAgent::Opencode),
        Profile::ScriptedAcp(PinnedAcpAgent::Claude),
    ];

    /// The scripted profiles that drive an agent CLI (their scripts are what `scripted-direct`
    /// is derived from when they agree).
    pub const CLIS: [Profile; 3] = [
        Profile::ScriptedOpencode,
        Profile::ScriptedCodex,
        Profile::ScriptedClaude,
    ];

    pub fn as_str(&self) -> &str {
        match self {
            Profile::ScriptedOpencode => "scripted-opencode",
            Profile::ScriptedCodex => "scripted-codex",
            Profile::ScriptedClaude => "scripted-claude",
            Profile::ScriptedFake => "scripted-fake",
            Profile::ScriptedDirect(DirectWire::Rotate) => DIRECT_PREFIX,
            Profile::ScriptedDirect(DirectWire::ChatCompletions) => {
                "scripted-direct-chat-completions"
            }
            Profile::ScriptedDirect(DirectWire::Responses) => "scripted-direct-responses",
            Profile::ScriptedDirect(DirectWire::AnthropicMessages) => {
                "scripted-direct-anthropic-messages"
            }
            Profile::ScriptedAcp(PinnedAcpAgent::Opencode) => "scripted-acp-opencode",
            Profile::ScriptedAcp(PinnedAcpAgent::Claude) => "scripted-acp-claude",
            Profile::Live(name) => name,
        }
    }

    pub fn is_scripted(&self) -> bool {
        !matches!(self, Profile::Live(_))
    }

    /// The profile whose script this one plays (and under which a case marks it not
    /// applicable): every `scripted-direct*` profile plays `scripted-direct`'s, a `scripted-acp-*`
    /// profile its native CLI profile's (the script's steps are abstract; the scripted model maps
    /// them onto the tools the agent offers).
    pub fn script_key(&self) -> Profile {
        match self {
            Profile::ScriptedDirect(_) => Profile::ScriptedDirect(DirectWire::Rotate),
            Profile::ScriptedAcp(PinnedAcpAgent::Opencode) => Profile::ScriptedOpencode,
            Profile::ScriptedAcp(PinnedAcpAgent::Claude) => Profile::ScriptedClaude,
            other => other.clone(),
        }
    }

    /// The provider a scripted profile drives (built in, or the ACP tool it registers).
    pub fn provider(&self) -> &str {
        match self {
            Profile::ScriptedOpencode => "opencode",
            Profile::ScriptedCodex => "codex",
            Profile::ScriptedClaude => "claude",
            Profile::ScriptedFake => "fake",
            Profile::ScriptedDirect(_) => crate::direct::PROVIDER_NAME,
            Profile::ScriptedAcp(agent) => agent.tool_name(),
            Profile::Live(name) => name.strip_prefix("live-").unwrap_or(name),
        }
    }

    /// The protocol job `(case, repeat)` speaks on a direct profile; `None` on the others.
    pub fn direct_protocol(&self, case: &str, repeat: u32) -> Option<Protocol> {
        match self {
            Profile::ScriptedDirect(wire) => Some(wire.protocol_for(case, repeat)),
            _ => None,
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Profile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some(p) = Profile::SCRIPTED.iter().find(|p| p.as_str() == s) {
            return Ok(p.clone());
        }
        if s.starts_with("scripted-") {
            let known: Vec<&str> = Profile::SCRIPTED.iter().map(Profile::as_str).collect();
            return Err(format!(
                "unknown scripted profile {s:?} ({})",
                known.join(", ")
            ));
        }
        if super::catalog::valid_name(s) {
            Ok(Profile::Live(s.to_owned()))
        } else {
            Err(format!(
                "bad profile name {s:?}: use lowercase letters, digits and '-'"
            ))
        }
    }
}

impl Serialize for Profile {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Profile {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_parse_and_round_trip() {
        for p in Profile::SCRIPTED {
            assert_eq!(p.as_str().parse::<Profile>().unwrap(), p);
        }
        assert_eq!(
            "live-claude".parse::<Profile>().unwrap(),
            Profile::Live("live-claude".into())
        );
        assert_eq!(Profile::Live("live-claude".into()).provider(), "claude");
        let err = "scripted-nope".parse::<Profile>().unwrap_err();
        assert!(err.contains("scripted-direct-responses"), "{err}");
        assert!("scripted-direct-grpc".parse::<Profile>().is_err());
        assert!("Bad Name".parse::<Profile>().is_err());
    }

    #[test]
    fn direct_profiles_share_one_script_and_run_autocode() {
        for wire in DirectWire::ALL {
            let p = Profile::ScriptedDirect(wire);
            assert_eq!(p.script_key().as_str(), "scripted-direct");
            assert_eq!(p.provider(), "autocode");
            assert!(p.is_scripted());
        }
        assert_eq!(Profile::ScriptedCodex.script_key(), Profile::ScriptedCodex);
        assert_eq!(Profile::ScriptedCodex.direct_protocol("x", 0), None);
        let pinned = Profile::ScriptedDirect(DirectWire::Responses);
        assert_eq!(pinned.direct_protocol("x", 2), Some(Protocol::Responses));
    }

    #[test]
    fn acp_profiles_play_their_native_clis_scripts_through_the_registered_tool() {
        let opencode: Profile = "scripted-acp-opencode".parse().unwrap();
        assert_eq!(opencode.script_key(), Profile::ScriptedOpencode);
        assert_eq!(opencode.provider(), "opencode-acp");
        let claude: Profile = "scripted-acp-claude".parse().unwrap();
        assert_eq!(claude.script_key(), Profile::ScriptedClaude);
        assert_eq!(claude.provider(), "claude-acp");
        assert!(claude.is_scripted());
        assert_eq!(claude.direct_protocol("x", 0), None);
    }

    #[test]
    fn rotation_is_stable_and_three_repeats_cover_every_protocol() {
        // Pinned values: the hash must not change between builds (a rerun of one case speaks
        // the protocol it spoke in the whole catalog).
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        for case in ["tester-phantom-event", "greenfield-python-cli", "x"] {
            let mut seen: Vec<Protocol> = (0..3)
                .map(|r| DirectWire::Rotate.protocol_for(case, r))
                .collect();
            assert_eq!(
                DirectWire::Rotate.protocol_for(case, 3),
                seen[0],
                "period 3"
            );
            seen.sort_by_key(|p| p.as_str());
            seen.dedup();
            assert_eq!(seen.len(), 3, "{case}");
        }
    }

    #[test]
    fn profiles_serialize_as_their_names() {
        let p = Profile::ScriptedDirect(DirectWire::AnthropicMessages);
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(json, "\"scripted-direct-anthropic-messages\"");
        assert_eq!(serde_json::from_str::<Profile>(&json).unwrap(), p);
        assert!(serde_json::from_str::<Profile>("\"scripted-nope\"").is_err());
    }
}
