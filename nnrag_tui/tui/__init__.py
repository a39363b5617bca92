"""The terminal app. A thin front end: every piece of work goes through ``nnrag_tui.engine``.

The TUI process never imports torch (torch belongs to the validation sandbox)."""
