"""`python -m enginetui` runs the `enginetui` command."""

import sys

from enginetui.cli import main

sys.exit(main())
