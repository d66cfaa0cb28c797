// (placeholder: filled by the scripted_model work)
