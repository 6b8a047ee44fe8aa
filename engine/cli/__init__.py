"""Command-line pieces; `app.main` dispatches to them."""
