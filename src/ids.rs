//! Newtypes for identifiers, validated on construction.
//!
//! A provider name becomes a file name (`providers/NAME.toml`) and a run id becomes a directory
//! name, so both are restricted to a safe alphabet; session ids come from the CLIs and are kept
//! verbatim but must be non-empty and free of control characters.

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid {kind} {value:?}: {reason}")]
pub struct InvalidId {
    pub kind: &'static str,
    pub value: String,
    pub reason: &'static str,
}

fn check_slug(kind: &'static str, value: &str, max: usize) -> Result<(), InvalidId> {
    let bad = |reason| {
        Err(InvalidId {
            kind,
            value: value.to_owned(),
            reason,
        })
    };
    if value.is_empty() {
        return bad("it is empty");
    }
    if value.len() > max {
        return bad("it is too long");
    }
    if !value.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return bad("it must start with a letter or digit");
    }
    if !value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return bad("only letters, digits, '-', '_' and '.' are allowed");
    }
    Ok(())
}

macro_rules! slug_id {
    ($(#[$doc:meta])* $name:ident, $kind:literal, $max:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            pub fn new(value: impl Into<String>) -> Result<Self, InvalidId> {
                let value = value.into();
                check_slug($kind, &value, $max)?;
                Ok(Self(value))
            }
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }
        impl TryFrom<String> for $name {
            type Error = InvalidId;
            fn try_from(value: String) -> Result<Self, InvalidId> {
                Self::new(value)
            }
        }
        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl std::str::FromStr for $name {
            type Err = InvalidId;
            fn from_str(s: &str) -> Result<Self, InvalidId> {
                Self::new(s)
            }
        }
    };
}

slug_id!(
    /// The name of a provider (`opencode`, `codex`, `claude`, or a registered TOML tool).
    ProviderName, "provider name", 64
);
slug_id!(
    /// The id of a run: its directory name under `.autocode/runs/`.
    RunId, "run id", 96
);

/// A CLI's own session (or thread) id, kept verbatim.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SessionId(String);

impl SessionId {
    pub fn new(value: impl Into<String>) -> Result<Self, InvalidId> {
        let value = value.into();
        let reason = if value.is_empty() {
            Some("it is empty")
        } else if value.len() > 256 {
            Some("it is too long")
        } else if value.chars().any(|c| c.is_control() || c.is_whitespace()) {
            Some("it holds whitespace or control characters")
        } else {
            None
        };
        match reason {
            Some(reason) => Err(InvalidId {
                kind: "session id",
                value,
                reason,
            }),
            None => Ok(Self(value)),
        }
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}
impl TryFrom<String> for SessionId {
    type Error = InvalidId;
    fn try_from(value: String) -> Result<Self, InvalidId> {
        Self::new(value)
    }
}
impl From<SessionId> for String {
    fn from(id: SessionId) -> String {
        id.0
    }
}
impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_names_are_slugs() {
        assert!(ProviderName::new("kilocode").is_ok());
        assert!(ProviderName::new("codex_receipts").is_ok());
        assert!(ProviderName::new("").is_err());
        assert!(ProviderName::new("../etc").is_err());
        assert!(ProviderName::new("a/b").is_err());
        assert!(ProviderName::new(".hidden").is_err());
        let err = ProviderName::new("x y").unwrap_err();
        assert!(err.to_string().contains("provider name"));
    }

    #[test]
    fn session_ids_are_verbatim() {
        let id = SessionId::new("ses_dd74eeb95ffeC0i3ERkxJLLdNL").unwrap();
        assert_eq!(id.as_str(), "ses_dd74eeb95ffeC0i3ERkxJLLdNL");
        assert!(SessionId::new("a b").is_err());
        assert!(SessionId::new("").is_err());
        let json: SessionId = serde_json::from_str("\"01a228c8-dcd7\"").unwrap();
        assert_eq!(json.to_string(), "01a228c8-dcd7");
    }
}

/// The number of a replay batch's record, `<run>/replays/NNN-<tree>.json` (`run::prepare`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ReplayNo(pub u32);

impl ReplayNo {
    /// The number a record file's name begins with (`003-final.json`).
    pub fn of_record(path: &std::path::Path) -> Option<ReplayNo> {
        let name = path.file_name()?.to_str()?;
        name.split('-').next()?.parse().ok().map(ReplayNo)
    }
}

impl std::fmt::Display for ReplayNo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "replay {:03}", self.0)
    }
}
