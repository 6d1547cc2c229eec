import sys

from theory.summary import main

sys.exit(main())
