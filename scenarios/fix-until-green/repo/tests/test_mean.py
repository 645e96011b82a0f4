from stats.mean import mean


def test_mean_of_one_value() -> None:
    assert mean([4.0]) == 4.0


def test_mean_of_several_values() -> None:
    assert mean([1.0, 2.0, 3.0, 6.0]) == 3.0
