//! The run engine: roles, stages, checked reports, evidence, checkpoints, pause codes and resume.

pub mod budget;
pub mod driver;
pub mod flow;
pub mod prompt;
pub mod replay;
pub mod state;
pub mod workspace;
