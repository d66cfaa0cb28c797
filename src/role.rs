//! The roles of a run and the sandbox each one gets.
//!
//! Role strings are API: they appear in run directories, reports and `--json` output and are
//! never renamed. Provider TOML files name roles by their historical code names (`glm`, `terra`,
//! `sol`, `astra`, ...); [`RoleKey`] is that vocabulary and [`RoleKey::roles`] maps it onto roles.

use serde::{Deserialize, Serialize};
use std::fmt;

/// One agent role in the pipeline. Each stage runs exactly one role in its own session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Turns the objective into a brief with acceptance criteria (read-only).
    Requirements,
    /// Writes the milestone plan (read-only).
    Planner,
    /// Reviews the plan on a different model family (read-only).
    PlanReviewer,
    /// Changes the workspace.
    Builder,
    /// Judges a milestone by running its checks (the validator).
    Tester,
    /// Decides CONTINUE, REWORK, BLOCKED or COMPLETE.
    CompletionReviewer,
    /// Looks at stuck stages and rework (read-only).
    Resolver,
}

impl Role {
    pub const ALL: [Role; 7] = [
        Role::Requirements,
        Role::Planner,
        Role::PlanReviewer,
        Role::Builder,
        Role::Tester,
        Role::CompletionReviewer,
        Role::Resolver,
    ];

    /// The stable string form (API).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Requirements => "requirements",
            Role::Planner => "planner",
            Role::PlanReviewer => "plan_reviewer",
            Role::Builder => "builder",
            Role::Tester => "tester",
            Role::CompletionReviewer => "completion_reviewer",
            Role::Resolver => "resolver",
        }
    }

    /// The sandbox a stage of this role runs with: planning roles are read-only; the builder
    /// writes; judges get `workspace-write` because they must write runner-owned files under
    /// `.autocode/` (their source contract is enforced by the after-stage snapshot instead).
    pub fn sandbox(self) -> SandboxMode {
        match self {
            Role::Requirements | Role::Planner | Role::PlanReviewer | Role::Resolver => {
                SandboxMode::ReadOnly
            }
            Role::Builder | Role::Tester | Role::CompletionReviewer => SandboxMode::WorkspaceWrite,
        }
    }

    /// Pairs (verifier, what it checks) that must run on different model families.
    pub const VERIFIER_PAIRS: [(Role, Role); 3] = [
        (Role::PlanReviewer, Role::Planner),
        (Role::Tester, Role::Builder),
        (Role::CompletionReviewer, Role::Builder),
    ];
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The sandbox value handed to a CLI (`{sandbox}` in provider templates).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    ReadOnly,
    WorkspaceWrite,
}

impl SandboxMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
        }
    }
}

impl fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A key of a provider's `[roles]` table (the reference's code names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RoleKey {
    /// Resolver.
    Astra,
    /// Builder.
    Terra,
    /// Tester (validator).
    Sol,
    /// Completion reviewer.
    Completion,
    /// Requirements and planner (requirements unless `requirements` is given).
    Glm,
    /// Plan reviewer.
    PlanReviewer,
    /// Requirements, when it differs from the planner.
    Requirements,
}

impl RoleKey {
    pub const ALL: [RoleKey; 7] = [
        RoleKey::Astra,
        RoleKey::Terra,
        RoleKey::Sol,
        RoleKey::Completion,
        RoleKey::Glm,
        RoleKey::PlanReviewer,
        RoleKey::Requirements,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RoleKey::Astra => "astra",
            RoleKey::Terra => "terra",
            RoleKey::Sol => "sol",
            RoleKey::Completion => "completion",
            RoleKey::Glm => "glm",
            RoleKey::PlanReviewer => "plan_reviewer",
            RoleKey::Requirements => "requirements",
        }
    }

    pub fn parse(key: &str) -> Option<RoleKey> {
        RoleKey::ALL.into_iter().find(|k| k.as_str() == key)
    }

    /// The key whose entry gives `role` its route, before falling back (`requirements` falls
    /// back to `glm`).
    pub fn for_role(role: Role) -> RoleKey {
        match role {
            Role::Requirements => RoleKey::Requirements,
            Role::Planner => RoleKey::Glm,
            Role::PlanReviewer => RoleKey::PlanReviewer,
            Role::Builder => RoleKey::Terra,
            Role::Tester => RoleKey::Sol,
            Role::CompletionReviewer => RoleKey::Completion,
            Role::Resolver => RoleKey::Astra,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_strings_are_stable() {
        let strings: Vec<_> = Role::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(
            strings,
            [
                "requirements",
                "planner",
                "plan_reviewer",
                "builder",
                "tester",
                "completion_reviewer",
                "resolver"
            ]
        );
        for role in Role::ALL {
            assert_eq!(
                serde_json::to_value(role).unwrap(),
                serde_json::Value::String(role.as_str().into())
            );
        }
    }

    #[test]
    fn planning_roles_are_read_only() {
        assert_eq!(Role::Planner.sandbox(), SandboxMode::ReadOnly);
        assert_eq!(Role::Builder.sandbox(), SandboxMode::WorkspaceWrite);
        assert_eq!(Role::Tester.sandbox(), SandboxMode::WorkspaceWrite);
        assert_eq!(SandboxMode::ReadOnly.to_string(), "read-only");
    }

    #[test]
    fn role_keys_round_trip() {
        for key in RoleKey::ALL {
            assert_eq!(RoleKey::parse(key.as_str()), Some(key));
        }
        assert_eq!(RoleKey::parse("luna"), None);
    }
}
