"""Runbooks: long gray-release operations (cutover, rollout) and the group state they read.

Depends only on `graymq.client` and `graymq.protocol`, so both the `graymq` CLI and the
name server's console can run a runbook without importing each other.
"""
