"""HTTP API and webhooks."""
