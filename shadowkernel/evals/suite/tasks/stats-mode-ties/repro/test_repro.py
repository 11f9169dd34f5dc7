from stats.basic import mode


def test_tie():
    assert mode([3, 1, 3, 1]) == 1
