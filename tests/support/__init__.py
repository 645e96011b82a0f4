"""Test tools shared by the reliability suites: the nothing-lost oracle, the power-loss simulation,
child-process helpers and the Hypothesis profiles."""
