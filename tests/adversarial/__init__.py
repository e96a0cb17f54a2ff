"""Adversarial suites: harnesses that keep classes of defects closed (issue 11 §6)."""
