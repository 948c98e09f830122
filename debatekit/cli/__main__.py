import sys

from debatekit.cli.app import main

sys.exit(main())
