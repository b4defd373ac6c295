"""`python -m kerasbert.cli`: the `kerasbert` command."""

import sys

from kerasbert.cli import main

sys.exit(main())
