"""The one name for JSON whose keys nobody fixes (pure).

Most JSON the product handles has a shape of its own (providers.message_types, the answers of each
app); `JSONObject` is only for what a client or a model may fill as it likes: a tool call's
arguments, a tool's JSON Schema, a usage object, a message's `details`. Its values are `object`,
so code that reads one checks what it finds.
"""

from __future__ import annotations

JSONObject = dict[str, object]
