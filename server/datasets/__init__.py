"""Getting dialogues into the store: parsers for EmpatheticDialogues CSVs and JSONL, and the importer."""
