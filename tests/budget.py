"""How many examples the property families draw, so that ``make test`` (and CI, which runs
it) stays well within half an hour on a 2-core machine (CI took 24-32 minutes at 80 examples).

``DUCKSTREAM_EXAMPLES`` examples (50 by default) per core family; half as many per family
marked ``slow`` and per variant of a core family. More find more, e.g. 400 per core family
and 200 per slow one:

    DUCKSTREAM_EXAMPLES=400 uv run pytest tests/test_properties*.py -p no:cacheprovider
"""

from __future__ import annotations

import os

EXAMPLES = int(os.environ.get("DUCKSTREAM_EXAMPLES", "50"))
SLOW_EXAMPLES = max(1, EXAMPLES // 2)
