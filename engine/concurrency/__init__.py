"""Provider-aware concurrency: telemetry in, an AIMD-controlled cap out, and call slots under it."""
