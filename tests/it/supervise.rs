// (placeholder: filled by the supervise work)
