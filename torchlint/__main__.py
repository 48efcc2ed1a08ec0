import sys

from torchlint.cli import main

sys.exit(main())
