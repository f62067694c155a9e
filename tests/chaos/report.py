"""The chaos report: one row per case, printed as a table at the end of a run (tests/chaos/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import pytest

from tests.chaos.checkers import (
    Consumed,
    Sent,
    Window,
    duplicated,
    gray_violations,
    lost,
    recovery_time,
    reordered,
    split_acks,
    stored_twice,
)

COLUMNS = ("case", "sent", "acked", "consumed", "lost", "expected lost", "moved aside", "duplicated", "stored twice",
           "reordered", "gray violations", "split acks", "recovery s", "writes down s", "reads down s")


@dataclass(frozen=True)
class CaseResult:
    """What the checkers found in one case. ``sent`` counts send attempts, ``acked`` the SEND_OK answers,
    ``consumed`` the distinct acked messages consumed; ``duplicated`` the extra deliveries, ``stored_twice`` those
    of them that were extra stored copies (the rest: one stored message delivered again). The table's ``lost`` is
    what was lost beyond what the fault may cost (``expected lost``: verify's holes, a cut tail, the async tail a
    deposed leader moved aside); ``moved aside`` counts the acked messages in the replicas' moved-aside files
    (consumed before or not)."""

    case: str
    sent: int
    acked: int
    consumed: int
    lost: list[str]
    duplicated: int
    stored_twice: int
    reordered: int
    gray_violations: int
    recovery_s: float | None
    expected_lost: list[str] = field(default_factory=list)  # what the fault destroyed (verify's holes, a cut tail)
    notes: list[str] = field(default_factory=list)
    split_acks: int = 0  # queue positions acknowledged for two messages (split brain)
    writes_down_s: float | None = None  # the longest time without an ack from the fault on (partition cases)
    reads_down_s: float | None = None  # ... without a first consumption
    moved_aside: int | None = None  # acked messages a deposed leader moved aside (partition cases)

    def row(self) -> list[str]:
        expected = len(set(self.lost) & set(self.expected_lost))
        return [self.case, str(self.sent), str(self.acked), str(self.consumed), str(len(self.lost) - expected),
                str(expected), "-" if self.moved_aside is None else str(self.moved_aside), str(self.duplicated),
                str(self.stored_twice), str(self.reordered), str(self.gray_violations),
                str(self.split_acks), *(_seconds(s) for s in (self.recovery_s, self.writes_down_s, self.reads_down_s))]


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def evaluate(case: str, attempts: int, sent: Sequence[Sent], consumed: Sequence[Consumed], fault_at: float | None,
             isolated: Sequence[Window], expected_lost: Iterable[str] = (), notes: Sequence[str] = ()) -> CaseResult:
    """Run every checker over one case's records."""
    acked_ids = {s.msg_id for s in sent}
    return CaseResult(
        case=case, sent=attempts, acked=len(sent),
        consumed=len(acked_ids & {c.msg_id for c in consumed}),
        lost=[s.msg_id for s in lost(sent, consumed)],
        duplicated=sum(n - 1 for n in duplicated(consumed).values()),
        stored_twice=sum(n - 1 for n in stored_twice(consumed).values()),
        reordered=len(reordered(consumed)),
        gray_violations=len(gray_violations(consumed, isolated)), split_acks=len(split_acks(sent)),
        recovery_s=None if fault_at is None else recovery_time(fault_at, sent, consumed),
        expected_lost=sorted(expected_lost), notes=list(notes),
    )


def format_table(results: Sequence[CaseResult]) -> str:
    """A plain-text table of ``results`` (one row each) with their notes underneath."""
    rows = [list(COLUMNS)] + [r.row() for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths,
                                                                                                    strict=True)))
             for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.extend(f"  {r.case}: {note}" for r in results for note in r.notes)
    return "\n".join(lines)


CHAOS_RESULT = "chaos_result"  # a case's user property: its CaseResult as a dict, which an xdist worker can send


def reported_results(reports: Iterable[pytest.TestReport]) -> list[CaseResult]:
    """The CaseResults the cases of a run recorded in their reports, in the order they ran."""
    return [CaseResult(**value) for report in reports if report.when == "call"
            for name, value in report.user_properties if name == CHAOS_RESULT]
