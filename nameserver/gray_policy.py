"""Which grayFlag a client should have: the group's switch, the client's explicit flag, the group's rules."""

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


def desired_gray(
    gray_switch: bool,
    explicit_gray: bool | None,
    rules: Sequence[Rule],
    labels: Mapping[str, str],
    declared_gray: bool | None = None,
) -> bool:
    """The grayFlag the client should run with.

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
    if not gray_switch:
        return False
    if explicit_gray is not None:
        return explicit_gray
    for rule in rules:
        if rule_matches(rule.selector, labels):
            return rule.gray
    return bool(declared_gray)
