//! Runs one case on one profile.
