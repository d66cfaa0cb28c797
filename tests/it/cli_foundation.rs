// (placeholder: filled by the cli_foundation work)
