"""Background work: enqueueing and tracking tasks (`tasks`), and the Jobs page's reads (`listing`)."""
