"""The headless engine: never imports textual, rich or torch."""
