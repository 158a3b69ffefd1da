"""Adapters for agents that run elsewhere: the MCP server (`/mcp/`) and the OpenAI-compatible
endpoint (`/v1/`).

The top layer (docs/architecture.md, Layers): it may import every app, and no app imports it. Each
adapter parses its protocol, calls one selector or domain function, and shapes the answer.
"""
