"""Hypothesis profiles for the reliability suites: ``ci`` (small, inside the CI budget) and
``deep`` (long local runs, used by tests marked ``@pytest.mark.deep``).

Tests pick a profile explicitly (``@settings(CI)``/``@settings(DEEP)``) instead of loading one
globally, so importing this module changes no other suite's settings.
``HYPOTHESIS_PROFILE=deep`` makes ``CI`` as large as ``DEEP`` for a one-off long run.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "deep",
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

DEEP = settings.get_profile("deep")
CI = DEEP if os.environ.get("HYPOTHESIS_PROFILE") == "deep" else settings.get_profile("ci")
