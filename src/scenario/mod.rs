//! Scenarios: "when autocode says done, is it done?" answered with numbers.
//!
//! A case (`scenarios/<name>/`) is a small project (`seed/`), an objective (`brief.md`), a hidden
//! oracle (`oracle/` plus the `[[oracle.check]]`s of `scenario.toml`) and an expectation
//! (complete, or an honest stop with the pause codes that count). The harness runs a case on a
//! profile, runs the oracle on a copy of the result, and computes a verdict; `stats` merges
//! result folders into a scorecard. See `docs/reliability.md`.
//!
//! - [`catalog`]: loading, validation, sharding.
//! - [`profile`]: the harness profiles (CLIs, autocode's direct runtime and its protocols, live).
//! - [`scripts`]: a case's scripts, the derived `scripted-direct` one, not-applicable marks.
//! - [`direct_setup`]: a `scripted-direct*` job's endpoint in its throwaway home.
//! - [`verdict`]: the pure verdict table.
//! - [`oracle`]: the hidden checks, run through the boundary on a copy of the result tree.
//! - [`result`]: the `result.json` of one run.
//! - [`stats`]: merging result folders; text, Markdown and JUnit renderers.
//! - [`runner`]: one case on one profile, end to end.
//! - [`setup`]: the throwaway world a case runs in (seed, HOME, CLI config, fingerprints).
//! - [`selfcheck`]: the catalog self-check (the oracle fails on the seed, passes the scripted result).

pub mod catalog;
pub mod direct_setup;
pub mod oracle;
pub mod profile;
pub mod result;
pub mod runner;
pub mod scripts;
pub mod selfcheck;
pub mod setup;
pub mod stats;
pub mod verdict;
