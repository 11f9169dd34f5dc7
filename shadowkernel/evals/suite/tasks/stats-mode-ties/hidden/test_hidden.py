from stats.basic import mode


def test_tie_smallest():
    assert mode([9, 4, 9, 4, 7]) == 4


def test_clear_winner():
    assert mode([2, 5, 5]) == 5
