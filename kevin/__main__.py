import sys

from kevin.cli import main

sys.exit(main())
