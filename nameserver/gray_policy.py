"""Which lane (and so which grayFlag) a client should have: the group's switch, the client's explicit flag, the
group's rules, the all-groups rules, what the client declared."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Protocol


class Rule(Protocol):
    @property
    def selector(self) -> Mapping[str, str]: ...

    @property
    def gray(self) -> bool: ...


def rule_matches(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    """Whether every label of the selector is present in ``labels`` with a value its glob matches.

    A selector value is a case-sensitive glob (``fnmatchcase``: ``*`` any run, ``?`` one character, ``[...]`` a
    set), so ``host=orders-v2-*`` matches every pod of a Deployment named ``orders-v2``; a value without those
    characters matches only itself, as before.

    >>> rule_matches({"host": "orders-v2-*"}, {"host": "orders-v2-7f9c-x2k"})
    True
    >>> rule_matches({"host": "orders-v2-*"}, {"host": "orders-v1-5d4b"}), rule_matches({"host": "a"}, {})
    (False, False)
    """
    for key, pattern in selector.items():
        value = labels.get(key)
        if value is None or not (value == pattern or fnmatchcase(value, pattern)):
            return False
    return True


GRAY_LANE = "gray"  # today's gray side: a true flag that names no lane


def lane_of(gray: bool | None, lane: str | None) -> str | None:
    """The lane a stored flag and its lane name mean: ``None`` (base) unless the flag is true, then ``lane``,
    else ``gray`` (rows from before lanes name none).

    >>> lane_of(True, None), lane_of(True, "v3"), lane_of(False, "v3"), lane_of(None, None)
    ('gray', 'v3', None, None)
    """
    return (lane or GRAY_LANE) if gray else None


def desired_lane(
    gray_switch: bool,
    explicit_gray: bool | None,
    explicit_lane: str | None,
    rules: Sequence[Rule],
    labels: Mapping[str, str],
    declared_gray: bool | None = None,
    declared_lane: str | None = None,
) -> str | None:
    """The lane the client should be in (``None``: base), by docs/lanes.md's precedence.

    Switch off → base for everyone. Otherwise the explicit per-client flag when set, else the first rule (in
    order: the caller lists the group's rules before the all-groups rules) whose selector the labels satisfy,
    else what the client declared at start, else base. A true flag or rule without a lane means ``gray``.

    >>> class R:
    ...     def __init__(self, selector, gray, lane=None): self.selector, self.gray, self.lane = selector, gray, lane
    >>> group_rule, all_groups = R({"v": "3"}, True, "v3"), R({"v": "*"}, True, "v9")
    >>> desired_lane(True, None, None, [group_rule, all_groups], {"v": "3"})
    'v3'
    >>> desired_lane(True, None, None, [group_rule, all_groups], {"v": "2"}, declared_gray=True)
    'v9'
    >>> desired_lane(True, True, "v4", [group_rule], {"v": "3"}), desired_lane(True, False, None, [group_rule], {})
    ('v4', None)
    >>> desired_lane(True, None, None, [], {}, True, "v5"), desired_lane(True, None, None, [], {}, True)
    ('v5', 'gray')
    >>> desired_lane(False, True, "v4", [], {}) is None
    True
    """
    if not gray_switch:
        return None
    if explicit_gray is not None:
        return lane_of(explicit_gray, explicit_lane)
    for rule in rules:
        if rule_matches(rule.selector, labels):
            return lane_of(rule.gray, getattr(rule, "lane", None))
    return lane_of(declared_gray, declared_lane)


def desired_gray(
    gray_switch: bool,
    explicit_gray: bool | None,
    rules: Sequence[Rule],
    labels: Mapping[str, str],
    declared_gray: bool | None = None,
) -> bool:
    """The grayFlag the client should run with: whether it should be in a lane (``desired_lane``).

    Switch off → ``False`` for everyone. Otherwise the explicit per-client value when set, else
    the ``gray`` of the first rule (in order) whose selector the client's labels satisfy, else
    the flag the client declared at start (``graymq consume --gray``), else ``False``.

    >>> class R:
    ...     def __init__(self, selector, gray): self.selector, self.gray = selector, gray
    >>> desired_gray(True, None, [R({"version": "v2"}, True)], {"version": "v2", "zone": "a"})
    True
    >>> desired_gray(True, False, [R({"version": "v2"}, True)], {"version": "v2"})
    False
    >>> desired_gray(False, True, [], {})
    False
    >>> desired_gray(True, None, [], {}, declared_gray=True)
    True
    """
    return desired_lane(gray_switch, explicit_gray, None, rules, labels, declared_gray) is not None
