"""Screens of the app: the block library now; dependency tree, validation log, triage and the
registry later, each in its own module."""
