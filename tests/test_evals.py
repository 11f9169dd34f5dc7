"""The suite format and the statistics, checked against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from shadowkernel.agents import edits as E
from shadowkernel.evals import (
    bootstrap_diff,
    builtin_suite,
    load_suite,
    load_task,
    mcnemar,
    summary,
)
from shadowkernel.evals.check import interpret, normalize, parse
from shadowkernel.evals.stats import bootstrap_indices, paired


def test_builtin_suite_has_twenty_real_tasks():
    suite = builtin_suite()
    assert len(suite) >= 20 and all(t.ok for t in suite)
    assert {t.kind for t in suite} == {"bug", "feature"}
    assert len({t.project for t in suite}) == 5
    for task in suite:
        assert task.statement and task.files and task.solution and task.digest
        assert all(f.startswith(task.project + "/") for f in task.files)
        assert all(isinstance(e, E.Replace) for e in task.solution)


def test_malformed_tasks_load_with_their_problem(tmp_path):
    root = tmp_path / "s"
    (root / "projects" / "p").mkdir(parents=True)
    for name, toml in {"no-statement": 'project = "p"\nfiles = []\n',
                       "bad-toml": "project = \n",
                       "no-project": 'project = "q"\nstatement = "x"\nfiles = []\n',
                       "no-tests": 'project = "p"\nstatement = "x"\nfiles = []\n'}.items():  # fmt: skip
        (root / "tasks" / name).mkdir(parents=True)
        (root / "tasks" / name / "task.toml").write_text(toml)
    suite = load_suite(root)
    problems = {t.id: t.problem for t in suite}
    assert "'statement'" in problems["no-statement"]
    assert "Invalid value" in problems["bad-toml"]
    assert "project 'q'" in problems["no-project"]
    assert "hidden/" in problems["no-tests"]
    assert not load_task(tmp_path / "missing").ok
    with pytest.raises(FileNotFoundError, match="projects/ and tasks/"):
        load_suite(tmp_path)


def test_driver_output_is_parsed_and_normalized():
    out = ("@@shadowkernel-visible@@\nF.\nFAILED tests/test_a.py::t - at 0x7f3a2b4c5d6e\n"
           "1 failed, 1 passed in 0.12s\n@@shadowkernel-hidden@@\n..\n2 passed in 0.05s\n"
           '@@shadowkernel-result@@ {"visible": 1, "hidden": 0}\n')  # fmt: skip
    visible, hidden, codes = parse(out)
    assert codes == {"visible": 1, "hidden": 0} and hidden == "..\n2 passed in 0.05s\n"
    assert normalize(visible).endswith("- at 0x?\n1 failed, 1 passed\n")

    class Result:
        stdout, stderr, exit_code, timed_out, duration = out, "", 0, False, 0.5

    argv = ["python", "driver.py", "ini", "/x/hidden", "tests", "/x/task/repro"]
    check = interpret(Result, argv)
    assert check.passed and check.visible.exit_code == 1
    assert check.visible.command == "pytest -q tests repro/"
    Result.stdout, Result.exit_code = "", 1
    broken = interpret(Result, argv)
    assert not broken.passed and "did not finish" in broken.error


# -- statistics against hand-computed values ---------------------------------------------------

# 10 (task, seed) pairs; solved under "none" and under "lints":
#   lints-only solved: t1 t2 t3 t4 t5 t6 (b = 6)   none-only solved: t7 (c = 1)
#   both solved: t8   neither: t9 t10
NONE = [0, 0, 0, 0, 0, 0, 1, 1, 0, 0]
LINTS = [1, 1, 1, 1, 1, 1, 0, 1, 0, 0]


def table() -> pd.DataFrame:
    rows = []
    for cond, solved in (("none", NONE), ("lints", LINTS)):
        for i, s in enumerate(solved):
            rows.append({"task": f"t{i + 1}", "seed": 0, "condition": cond, "solved": bool(s),
                         "turns": 1 + i % 3, "tokens": 100 * (1 + i % 3), "lints_shown": 0,
                         "failed_steps": 0, "simulated": False})  # fmt: skip
    return pd.DataFrame(rows)


def test_mcnemar_exact_and_chi_square_by_hand():
    # exact: p = 2 * P(X <= 1), X ~ Bin(7, 1/2) = 2 * (1 + 7) / 128
    assert mcnemar(6, 1).p_value == pytest.approx(2 * 8 / 128) and mcnemar(6, 1).method == "exact"
    assert mcnemar(3, 3).p_value == 1.0 and mcnemar(0, 0).method == "none"
    # chi2 with continuity correction: (|30 - 10| - 1)^2 / 40 = 9.025; P(chi2_1 > 9.025)
    big = mcnemar(30, 10)
    assert big.method == "chi2-cc" and big.statistic == pytest.approx(9.025)
    assert big.p_value == pytest.approx(math.erfc(math.sqrt(9.025 / 2)))


def test_bootstrap_matches_an_independent_computation():
    x, y = np.array(LINTS, float), np.array(NONE, float)
    diff, low, high = bootstrap_diff(x, y, n_boot=500, seed=11)
    assert diff == pytest.approx(0.5)  # 7/10 - 2/10
    idx = np.random.default_rng(11).integers(0, 10, size=(500, 10))
    by_hand = sorted(sum(LINTS[i] - NONE[i] for i in row) / 10 for row in idx)

    # numpy's default quantile interpolates linearly between order statistics
    def quantile(q):
        k = (len(by_hand) - 1) * q
        f = math.floor(k)
        return by_hand[f] + (by_hand[min(f + 1, len(by_hand) - 1)] - by_hand[f]) * (k - f)

    assert (low, high) == pytest.approx((quantile(0.025), quantile(0.975)))
    assert low < diff < high
    assert bootstrap_diff(x, x, 200, 0) == (0.0, 0.0, 0.0)
    assert (bootstrap_indices(10, 500, 11) == idx).all()


def test_summary_pairs_by_task_and_seed():
    df = table()
    s = summary(df, n_boot=500, seed=11)
    assert s.baseline == "none"
    assert s.conditions.loc["lints", "success_rate"] == pytest.approx(0.7)
    # solved under lints: t1..t6 and t8 -> turns 1,2,3,1,2,3,2 ; tokens x100
    assert s.conditions.loc["lints", "turns_to_success"] == pytest.approx(14 / 7)
    assert s.conditions.loc["lints", "tokens_to_success"] == pytest.approx(200)
    row = s.comparisons.loc["lints"]
    assert (row.b, row.c, row.pairs, row.test) == (6, 1, 10, "exact")
    assert row.p_value == pytest.approx(0.125) and row["diff"] == pytest.approx(0.5)
    order = sorted(range(10), key=lambda i: f"t{i + 1}")  # pairs are ordered by task, seed
    expected = bootstrap_diff(np.array(LINTS)[order], np.array(NONE)[order], 500, 11)
    assert (row.ci_low, row.ci_high) == expected[1:]
    # an unpaired cell (a seed only one condition has) is left out of the comparison
    extra = pd.concat([df, df.iloc[[0]].assign(seed=1)], ignore_index=True)
    assert len(paired(extra, "lints", "none")) == 10
    assert "SIMULATED" not in repr(s)
    assert "SIMULATED" in repr(summary(df.assign(simulated=True), n_boot=10))
    with pytest.raises(ValueError, match="baseline"):
        summary(df, baseline="nope")
