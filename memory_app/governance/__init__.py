"""Memory a team can trust: per-line provenance and trust, consolidation proposals, forgetting (docs/design.md, Provenance, consolidation and forgetting)."""
