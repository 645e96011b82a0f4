"""Test tools shared by the reliability suites: the §13 oracle, the power-loss simulation,
child-process helpers and the Hypothesis profiles."""
