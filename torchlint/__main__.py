import sys

from torchlint.syspath import protect

protect()  # `python -m` put the current directory first: the repository's `json.py` is not the standard library's

from torchlint.cli import main  # noqa: E402

sys.exit(main())
