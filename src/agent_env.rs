//! (placeholder: owned by the agent-environment work)
