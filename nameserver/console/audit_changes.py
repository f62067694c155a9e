"""What an audit entry changed, field by field (``before → after``), as the audit table shows it instead of raw
JSON.

Records carry ``before`` and ``after`` as JSON values: mostly objects of the fields an action touched (nested ones,
e.g. a cutover's ``result``, are walked into with dotted names); a create has no ``before``, a removal no ``after``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

SHOWN_CHARS = 120  # a longer value is cut (the raw JSON stays behind the row's details toggle)


@dataclass(frozen=True, slots=True)
class FieldChange:
    """One field: its dotted name (empty when the record's value is not an object) and both values as text."""

    field: str
    before: str
    after: str
    kind: Literal["added", "removed", "changed"]


def field_changes(before: Any, after: Any) -> list[FieldChange]:
    """The fields that differ between ``before`` and ``after``, in the order they appear.

    >>> [(c.field, c.before, c.after, c.kind) for c in field_changes({"gray": False, "state": "NORMAL"},
    ...                                                              {"gray": True, "state": "NORMAL"})]
    [('gray', 'false', 'true', 'changed')]
    >>> [(c.field, c.after, c.kind) for c in field_changes(None, {"selector": {"version": "v2"}, "gray": True})]
    [('selector.version', 'v2', 'added'), ('gray', 'true', 'added')]
    >>> [(c.field, c.before, c.after) for c in field_changes({"step": "drain", "result": {"gray_backlog": 6}},
    ...                                                      {"step": "verify", "result": {"gray_backlog": 0}})]
    [('step', 'drain', 'verify'), ('result.gray_backlog', '6', '0')]
    >>> [(c.field, c.before, c.kind) for c in field_changes({"explicit_gray": None}, None)]
    [('explicit_gray', 'none', 'removed')]
    >>> [(c.field, c.after, c.kind) for c in field_changes({"result": None}, {"result": {"phase": "steps"}})]
    [('result.phase', 'steps', 'added')]
    """
    old, new = _flatten(before), _flatten(after)
    for one, other in ((old, new), (new, old)):  # a none that became an object (or back) is told by its fields
        for name in [n for n, v in one.items() if v is None and any(k.startswith(f"{n}.") for k in other)]:
            del one[name]
    changes = []
    for name in dict.fromkeys([*old, *new]):
        if name in old and name in new:
            if old[name] != new[name]:
                changes.append(FieldChange(name, _text(old[name]), _text(new[name]), "changed"))
        elif name in new:
            changes.append(FieldChange(name, "", _text(new[name]), "added"))
        else:
            changes.append(FieldChange(name, _text(old[name]), "", "removed"))
    return changes


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if value is None and not prefix:
        return {}
    if not isinstance(value, dict) or not value:
        return {prefix: value}
    out: dict[str, Any] = {}
    for key, item in value.items():
        out.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
    return out


def _text(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = value if isinstance(value, str) else json.dumps(value, separators=(", ", ": "), default=str)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 1] + "…"
