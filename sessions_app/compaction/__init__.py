"""Compaction (docs/design.md §D1): the one entry point, the cut point, the pre-compaction memory flush and the summary pipeline."""
