"""Chaos suite: faults injected into a real cluster under load, checked for loss, duplicates, order and gray
isolation."""
