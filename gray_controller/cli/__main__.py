import sys

from graymq.gray_controller.cli import main

sys.exit(main())
