"""Reusable adversarial harnesses: kill writers mid-operation, race writers with GC and
readers, and check every acknowledged commit against what the store holds.

- :mod:`.kill`: :func:`~.kill.sweep_kills`, :func:`~.kill.random_kills`.
- :mod:`.race`: :func:`~.race.run_race`.

Both take a factory of :class:`~.targets.StoreTarget` (a fresh local root or S3 bucket per
run) and the name of a workload; ``tests/adversarial/test_kills.py`` and ``test_races.py``
run them small, ``scripts/adversarial.py`` runs them large.
"""
