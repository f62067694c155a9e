"""Runbooks: long gray-release operations (cutover, rollout) and the group state they read.

Depends on `graymq.client`, `graymq.nameserver_api`, `graymq.core` and `graymq.protocol`, so both the `graymq` CLI
and the name server's console run a runbook without importing each other; what they do around a run is given as
``hooks.RunbookHooks`` (listeners) and the runners' public ``abort``; how a run goes, with the defaults every caller
shares, is ``policy.CutoverPolicy`` (and a rollout's ``policy.RolloutPolicy``).
"""
