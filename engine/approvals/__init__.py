"""Approvals: the `approval` node's body, decisions (people and API keys), API keys, the pending list."""
