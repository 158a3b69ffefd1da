"""Safeguard compaction summaries and the offline summariser (split into modules next)."""
