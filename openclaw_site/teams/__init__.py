"""Teams, their people, assistants and API keys, and the assistants' settings."""
