"""What teams use: the usage and cost ledger, and fair shares of the expensive work."""
