"""Exports: a result directory's rows sent where ML engineers already keep their runs (tracking
servers). The CSV/JSON schema (docs/results-format.md) stays the contract; an export only copies
its figures, settings and files, the same stored figures every other output reads."""
