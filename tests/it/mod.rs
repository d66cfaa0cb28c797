mod cli_foundation;
mod events_fixtures;
mod run_e2e;
mod scripted_model;
mod supervise;
mod transport_launch;
