"""``python -m flight_server.cli``."""

import sys

from flight_server.cli.main import main

sys.exit(main())
