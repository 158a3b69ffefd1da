"""The task functions an earlier version queued under this module's name (docs/architecture.md, Background work).

django-q2 stores a queued task's function by its dotted path and imports it when a worker takes
the task. Tasks queued before background work moved to `openclaw_site.jobs` name
``openclaw_site.tasks.run_tracked``; these names keep them running after an upgrade. Nothing
queues under them any more; migration ``openclaw_site/0011`` moves the schedules.
"""

from __future__ import annotations

from openclaw_site.jobs.retention import purge_task_records
from openclaw_site.jobs.runs import run_tracked

__all__ = ["purge_task_records", "run_tracked"]
