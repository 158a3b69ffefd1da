"""The search index: entries and their chunks, embedding through the cache, rows per generation, a transcript's growing tail, reindexing (docs/search.md)."""
