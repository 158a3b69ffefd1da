"""Hybrid search: candidates from pgvector and full text, calibration, fusion, decay, MMR, snippets, and the search the adapters and the agent tool run (docs/search.md)."""
