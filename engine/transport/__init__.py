"""Redis transport: key names, connections, the embedded server."""
