"""Fixtures of the adversarial suites (the shared ones live in tests/conftest.py)."""
