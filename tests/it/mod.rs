mod cli_foundation;
mod demo;
mod events_fixtures;
mod run_e2e;
mod scenario;
mod scripted_model;
mod supervise;
mod transport_launch;
