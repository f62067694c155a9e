import sys

from gray_controller.cli import main

sys.exit(main())
