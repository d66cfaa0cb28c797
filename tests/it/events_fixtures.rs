// (placeholder: filled by the events_fixtures work)
