"""The API's JSON parser: DRF's, plus a depth cap and text PostgreSQL can store.

A body nested deeper than `openclaw_site.guards.json_input.MAX_JSON_DEPTH`, or holding a NUL or a lone
surrogate anywhere (a message, a batch item, ``details``, a key), is refused with 400 before a view
sees it (docs/design.md, Limits and refusals).
"""

from __future__ import annotations

from typing import Any

from rest_framework.parsers import JSONParser

from openclaw_site.errors import ApiError
from openclaw_site.guards.json_input import MAX_JSON_DEPTH, JsonInputError, check_json_value


class CheckedJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
            check_json_value(data)
        except RecursionError:
            raise _refusal(
                JsonInputError("json_too_deep", f"JSON nests deeper than {MAX_JSON_DEPTH} levels.")
            ) from None
        except JsonInputError as error:
            raise _refusal(error) from None
        return data


def _refusal(error: JsonInputError) -> ApiError:
    return ApiError(error.code, error.message, details={"field": error.path or "body"})
