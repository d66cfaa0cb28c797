mod cli_foundation;
mod events_fixtures;
mod scripted_model;
mod supervise;
mod transport_launch;
