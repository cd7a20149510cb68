"""Command-line tools of marionette_control."""
