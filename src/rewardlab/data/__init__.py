"""Data: JSONL reading and atomic writing, preference schema, loaders, chat templates, validation."""
