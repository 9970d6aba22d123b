"""``python -m streambayes``: the same as the ``streambayes`` command."""

from streambayes.cli import main

raise SystemExit(main())
