mod cli_foundation;
mod conformance;
mod events_fixtures;
mod scripted_model;
mod supervise;
mod transport_launch;
