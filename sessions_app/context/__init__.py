"""What the next model call is sent: the session's view since its latest compaction, pruning, the system prompt with memory, token figures and thresholds (docs/design.md §D2-D3)."""
