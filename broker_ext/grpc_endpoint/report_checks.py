"""Stock consumers whose report changed heartbeat at once, not at their next interval.

What a stock consumer reports to the name server — its effective flag, its state, the queues it receives from —
changes with the name server's answers (a flip, the group's switch, weight, orphan policy or retirement), with its
drain's steps, and with its group's other consumers (a gray one joining or leaving moves the gray queues of the
normal ones). ``ReportChecks.check(group)`` marks a group where something changed; once the moment's changes are in
(one check per loop iteration, however many marks), every membership of a marked group whose report differs from
the one it last sent (``Membership.report_changed``) is poked: it beats at once, and the beats poked together go out
as one batched request (``nameserver_session``). Reports that did not change cost no request.

>>> import asyncio
>>> class Member:
...     def __init__(self, changed): self.changed, self.poked = changed, 0
...     def report_changed(self): return self.changed
...     def poke(self): self.poked += 1
>>> members = {"G": [Member(True), Member(False)], "H": [Member(True)]}
>>> async def marks():
...     checks = ReportChecks(lambda group: members[group])
...     checks.check("G"); checks.check("G")
...     await asyncio.sleep(0)
>>> asyncio.run(marks())
>>> [m.poked for m in members["G"]], members["H"][0].poked
([1, 0], 0)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Protocol


class Reporting(Protocol):
    """What a check reads of a membership (``Membership``)."""

    def report_changed(self) -> bool: ...

    def poke(self) -> None: ...


class ReportChecks:
    """Checks the reports of the groups marked by ``check`` on the next loop iteration; ``members(group)``: the
    memberships of a group's registrations."""

    def __init__(self, members: Callable[[str], Iterable[Reporting]]) -> None:
        self._members = members
        self._groups: set[str] = set()
        self._scheduled: asyncio.Handle | None = None

    def check(self, group: str) -> None:
        """Something that ``group``'s reports depend on changed."""
        self._groups.add(group)
        if self._scheduled is None:
            self._scheduled = asyncio.get_running_loop().call_soon(self._run)

    def _run(self) -> None:
        groups, self._groups, self._scheduled = self._groups, set(), None
        for group in groups:
            for membership in self._members(group):
                if membership.report_changed():
                    membership.poke()
