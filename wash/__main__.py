import sys

from wash.cli import main

sys.exit(main())
