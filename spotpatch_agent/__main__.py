from spotpatch_agent.cli import main

raise SystemExit(main())
