"""The one name for JSON whose keys nobody fixes (pure).

Where a document has fixed keys it gets a ``TypedDict`` of its own beside the code that writes it;
``JSONObject`` is only for what is truly open: a file or request body before it is checked,
user-written settings values, a tool call's arguments, a model's ``details``. Its values are
``object``, so the code reading one narrows each value with ``isinstance`` before use.
"""

from __future__ import annotations

JSONObject = dict[str, object]
