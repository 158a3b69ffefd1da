"""Settings for the evaluation commands: the product settings plus the `evaluation` app.

The product never installs this app, so its development-only dependencies (`rank-bm25`, in
requirements-dev.txt) are not needed to run the server. `make eval` passes
`--settings=evaluation.settings`.
"""

from __future__ import annotations

from config.settings import *
from config.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "evaluation"]
