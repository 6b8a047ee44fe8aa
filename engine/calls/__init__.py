"""`flow.call`: a step that runs a published flow as a child run and waits for it without holding a worker."""
