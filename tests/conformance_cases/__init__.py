"""Conformance cases, one module per reward family.

Each module defines `CASES: dict[str, tuple[spec, list[Sample]]]`, keyed by the registered name (as listed
by `rewardlab.available()`, e.g. `"rm:PATH"` for a family). `tests/test_conformance.py` runs
`rewardlab.testing.check_reward` on every case and fails when a registered reward has no case.
A case whose spec needs something built at test time may give a zero-argument callable returning the spec.
A third element, a dict, passes keyword options to `check_reward` (e.g. `{"atol": 1e-4}` for float32 models,
whose batched matrix products round differently from one batch composition to another).
"""
