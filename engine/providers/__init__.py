"""LLM provider adapters and the provider simulator."""
