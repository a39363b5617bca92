from nnrag_tui.cli import main

raise SystemExit(main())
