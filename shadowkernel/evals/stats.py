"""Paired comparisons between feedback conditions (pure: pandas, numpy, scipy).

Cells are paired by (task, seed): the same task and seed under two conditions. For each
condition against the baseline: the difference in success rate with a seeded percentile
bootstrap over pairs, and McNemar's test on the discordant pairs (b: only the condition
solved it, c: only the baseline did) - exact binomial when b + c < 25, else the chi-square
statistic with continuity correction.

Power: `minimum_detectable_effect` is the smallest difference in success rate that McNemar's
test would detect with the given number of pairs (two-sided alpha 0.05, power 0.8 by
default), by Connor's (1987) sample-size formula for paired proportions,
n = (z_a sqrt(p_d) + z_b sqrt(p_d - d^2))^2 / d^2, solved for d. It needs the share of
discordant pairs p_d: the observed one, or 1 (the worst case) when no pair is discordant, so
a reader knows whether "no difference" could have been seen at all. Planning goes the other
way: `pairs_needed(effect, baseline_rate)` and `tasks_needed(..., seeds)` give the pairs (tasks
x seeds) an effect needs, by the same formula, with the share of discordant pairs expected
when the conditions succeed independently within a pair (`discordance`; a cautious value).

Cost: per condition, tokens and wall seconds per solved task (all cells' cost divided by the
solved ones; dollars too, given prices), and the shadow's lint and run requests per cell,
from the experiment's columns.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ArgumentError

EXACT_BELOW = 25


@dataclass(frozen=True)
class McNemar:
    b: int
    c: int
    statistic: float
    p_value: float
    method: str  # "exact" | "chi2-cc" | "none"


def mcnemar(b: int, c: int) -> McNemar:
    """McNemar's test of `b` pairs only the condition solved against `c` only the baseline did."""
    for name, count in (("b", b), ("c", c)):
        if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 0:
            raise ArgumentError(f"{name}={count!r}: give a count of discordant pairs (>= 0)")
    n = b + c
    if n == 0:
        return McNemar(b, c, 0.0, 1.0, "none")
    from scipy import stats as _stats  # here: 1.5 s of CPU that importing evals need not pay

    if n < EXACT_BELOW:
        p = min(1.0, 2.0 * float(_stats.binom.cdf(min(b, c), n, 0.5)))
        return McNemar(b, c, float(min(b, c)), p, "exact")
    statistic = (abs(b - c) - 1) ** 2 / n
    return McNemar(b, c, statistic, float(_stats.chi2.sf(statistic, 1)), "chi2-cc")


def bootstrap_indices(n: int, n_boot: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n, size=(n_boot, n))


def bootstrap_diff(x: np.ndarray, y: np.ndarray, n_boot: int = 2000, seed: int = 0,
                   level: float = 0.95) -> tuple[float, float, float]:  # fmt: skip
    """(mean(x) - mean(y), CI low, CI high) resampling the pairs (x[i], y[i])."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) != len(y) or len(x) == 0:
        raise ArgumentError(f"bootstrap_diff needs two equally long, non-empty arrays "
                         f"(got {len(x)} and {len(y)})")  # fmt: skip
    idx = bootstrap_indices(len(x), n_boot, seed)
    diffs = x[idx].mean(axis=1) - y[idx].mean(axis=1)
    low, high = np.quantile(diffs, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(x.mean() - y.mean()), float(low), float(high)


def minimum_detectable_effect(pairs: int, discordant: float = 1.0, alpha: float = 0.05,
                              power: float = 0.8) -> float:  # fmt: skip
    """The smallest difference in success rate McNemar's test detects with `pairs` pairs when
    a share `discordant` of them disagree (nan: none detectable, even all discordant)."""
    from scipy import optimize as _optimize  # as in mcnemar

    if pairs < 1 or not 0 < discordant <= 1:
        return float("nan")
    z_a, z_b = _normal_quantiles(alpha, power)

    def gap(d: float) -> float:
        return float(np.sqrt(pairs) * d - z_a * np.sqrt(discordant)
                     - z_b * np.sqrt(max(discordant - d * d, 0.0)))  # fmt: skip

    if gap(discordant) < 0:
        return float("nan")
    return float(_optimize.brentq(gap, 1e-9, discordant))


def _normal_quantiles(alpha: float, power: float) -> tuple[float, float]:
    from scipy import stats as _stats  # as in mcnemar

    return float(_stats.norm.ppf(1 - alpha / 2)), float(_stats.norm.ppf(power))


def discordance(baseline_rate: float, effect: float) -> float:
    """The share of discordant pairs when the two conditions succeed independently within a
    pair: p0 (1 - p1) + p1 (1 - p0). Real pairs share the task, so they agree more often
    (fewer discordant pairs, fewer needed): this is the cautious planning value."""
    p0, p1 = baseline_rate, baseline_rate + effect
    return p0 * (1 - p1) + p1 * (1 - p0)


def pairs_needed(effect: float, baseline_rate: float, discordant: float | None = None,
                 alpha: float = 0.05, power: float = 0.8) -> int:  # fmt: skip
    """How many (task, seed) pairs McNemar's test needs to detect a difference `effect` in
    success rate over `baseline_rate` (Connor's formula; `discordant`: the expected share of
    pairs where exactly one condition succeeds, default `discordance(...)`)."""
    _check_rates(effect, baseline_rate, alpha, power)
    p_d = discordance(baseline_rate, effect) if discordant is None else discordant
    if not abs(effect) <= p_d <= 1:
        raise ArgumentError(f"discordant={discordant!r}: give a share in [|effect|, 1] (at "
                            "least the effect: every pair that differs is discordant)")  # fmt: skip
    z_a, z_b = _normal_quantiles(alpha, power)
    d = abs(effect)
    n = (z_a * np.sqrt(p_d) + z_b * np.sqrt(max(p_d - d * d, 0.0))) ** 2 / (d * d)
    return int(np.ceil(n - 1e-9))


def tasks_needed(effect: float, baseline_rate: float, seeds: int = 1,
                 discordant: float | None = None, alpha: float = 0.05,
                 power: float = 0.8) -> int:  # fmt: skip
    """Tasks needed at `seeds` seeds per task: `pairs_needed` over the seeds. It counts every
    (task, seed) pair as independent; seeds of one task are not (a hard task stays hard), so
    prefer tasks to seeds, and read this as a lower bound when seeds > 1."""
    if not isinstance(seeds, int) or isinstance(seeds, bool) or seeds < 1:
        raise ArgumentError(f"seeds={seeds!r}: give an integer >= 1")
    return int(np.ceil(pairs_needed(effect, baseline_rate, discordant, alpha, power) / seeds))


def _check_rates(effect: float, baseline_rate: float, alpha: float, power: float) -> None:
    for name, value in (("effect", effect), ("baseline_rate", baseline_rate), ("alpha", alpha),
                        ("power", power)):  # fmt: skip
        if isinstance(value, bool) or not isinstance(value, int | float | np.floating):
            raise ArgumentError(f"{name}={value!r}: give a number")
    if not 0 <= baseline_rate <= 1 or not 0 <= baseline_rate + effect <= 1 or effect == 0:
        raise ArgumentError(f"effect={effect!r}, baseline_rate={baseline_rate!r}: give a "
                            "rate in [0, 1] and a non-zero effect keeping it there")  # fmt: skip
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise ArgumentError(f"alpha={alpha!r}, power={power!r}: give both in (0, 1)")


def bootstrap_mean(x: np.ndarray, n_boot: int = 2000, seed: int = 0,
                   level: float = 0.95) -> tuple[float, float]:  # fmt: skip
    x = np.asarray(x, dtype=float)
    means = x[bootstrap_indices(len(x), n_boot, seed)].mean(axis=1)
    low, high = np.quantile(means, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(low), float(high)


def paired(df: pd.DataFrame, condition: str, baseline: str) -> pd.DataFrame:
    """One row per (task, seed) present under both conditions: columns cond, base (0/1)."""
    key = ["task", "seed"]
    a = df[df["condition"] == condition].set_index(key)["solved"].astype(int)
    b = df[df["condition"] == baseline].set_index(key)["solved"].astype(int)
    both = pd.concat({"cond": a, "base": b}, axis=1, join="inner")
    return both.sort_index()


def conditions_table(df: pd.DataFrame, prices: Prices | None = None) -> pd.DataFrame:
    rows = []
    for name in dict.fromkeys(df["condition"]):
        cells = df[df["condition"] == name]
        won = cells[cells["solved"]]
        rows.append({
            "condition": name, "cells": len(cells), "solved": int(cells["solved"].sum()),
            "success_rate": float(cells["solved"].mean()),
            "turns_to_success": float(won["turns"].mean()) if len(won) else float("nan"),
            "tokens_to_success": float(won["tokens"].mean()) if len(won) else float("nan"),
            "mean_tokens": float(cells["tokens"].mean()),
            "lints_shown": float(cells["lints_shown"].mean()),
            "failed_steps": int(cells["failed_steps"].sum()),
            **cost(cells), **money(cells, prices),
        })  # fmt: skip
    return pd.DataFrame(rows).set_index("condition")


ACCOUNTING = ("lint_requests", "run_requests", "seconds_total", "seconds_switch",
              "seconds_wait")  # fmt: skip


def cost(cells: pd.DataFrame) -> dict[str, float]:
    """Per solved task: all the condition's tokens and seconds over its solved cells; per
    cell: the mean of each accounting column the frame has."""
    solved = int(cells["solved"].sum())
    per = lambda total: float(total) / solved if solved else float("nan")  # noqa: E731
    out = {"tokens_per_solved": per(cells["tokens"].sum())}
    if "seconds_total" in cells:
        out["seconds_per_solved"] = per(cells["seconds_total"].sum())
    out.update({name: float(cells[name].mean()) for name in ACCOUNTING if name in cells})
    return out


Prices = Mapping[str, float]  # {"input": $ per million prompt tokens, "output": $ per million}


def money(cells: pd.DataFrame, prices: Prices | None) -> dict[str, float]:
    """What the condition's model calls cost at `prices`: in all, and per solved task."""
    if prices is None:
        return {}
    spent = (cells["prompt_tokens"].sum() * prices.get("input", 0.0)
             + cells["completion_tokens"].sum() * prices.get("output", 0.0)) / 1e6  # fmt: skip
    solved = int(cells["solved"].sum())
    return {"cost": float(spent), "cost_per_solved": float(spent) / solved if solved
            else float("nan")}  # fmt: skip


def check_prices(prices: Any) -> Prices | None:
    if prices is None:
        return None
    if not isinstance(prices, Mapping) or not set(prices) <= {"input", "output"} or not all(
            isinstance(v, int | float) and v >= 0 for v in prices.values()):  # fmt: skip
        raise ArgumentError(f"prices={prices!r}: give {{'input': $, 'output': $}} per million "
                            "prompt and completion tokens")  # fmt: skip
    return prices


def comparisons_table(df: pd.DataFrame, baseline: str, n_boot: int, seed: int) -> pd.DataFrame:
    rows = []
    for name in dict.fromkeys(df["condition"]):
        if name == baseline:
            continue
        pairs = paired(df, name, baseline)
        if pairs.empty:
            continue
        diff, low, high = bootstrap_diff(pairs["cond"].to_numpy(), pairs["base"].to_numpy(),
                                         n_boot, seed)  # fmt: skip
        test = mcnemar(int(((pairs.cond == 1) & (pairs.base == 0)).sum()),
                       int(((pairs.cond == 0) & (pairs.base == 1)).sum()))  # fmt: skip
        rows.append({
            "condition": name, "baseline": baseline, "pairs": len(pairs),
            "rate": float(pairs["cond"].mean()), "baseline_rate": float(pairs["base"].mean()),
            "diff": diff, "ci_low": low, "ci_high": high, "b": test.b, "c": test.c,
            "p_value": test.p_value, "test": test.method,
            "mde": minimum_detectable_effect(len(pairs), (test.b + test.c) / len(pairs) or 1.0),
        })  # fmt: skip
    return pd.DataFrame(rows).set_index("condition") if rows else pd.DataFrame()


@dataclass(frozen=True)
class Summary:
    conditions: pd.DataFrame
    comparisons: pd.DataFrame
    simulated: bool
    baseline: str
    n_boot: int
    seed: int

    def _label(self) -> str:
        return ("SIMULATED agent: these numbers show the machinery, not a model's behaviour"
                if self.simulated else "")  # fmt: skip

    def __repr__(self) -> str:
        parts = [self._label()] if self.simulated else []
        parts += ["per condition:", self.conditions.round(3).to_string(), "",
                  f"against {self.baseline!r} (paired by task and seed; bootstrap {self.n_boot}"
                  f" resamples, seed {self.seed}; 95% CI):",
                  self.comparisons.round(4).to_string(), "", self.power()]  # fmt: skip
        return "\n".join(parts)

    def power(self) -> str:
        """What the number of pairs can show: the minimum detectable effect, in words."""
        if self.comparisons.empty:
            return "no paired comparison: nothing to say about power"
        lines = []
        for name, row in self.comparisons.iterrows():
            mde = "none (too few pairs)" if row.mde != row.mde else f"{row.mde:.2f}"
            lines.append(f"{name} vs {self.baseline}: {int(row.pairs)} pairs detect a difference "
                         f"in success rate of {mde} or more (alpha 0.05, power 0.8); a smaller "
                         "true difference would likely show as 'no difference'")  # fmt: skip
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        banner = (f'<p style="color:#b00;font-weight:bold">{html.escape(self._label())}</p>'
                  if self.simulated else "")  # fmt: skip
        return (f"{banner}<h4>Per condition</h4>{self.conditions.round(3).to_html()}"
                f"<h4>Against {html.escape(self.baseline)} (paired; 95% bootstrap CI, "
                f"McNemar)</h4>{self.comparisons.round(4).to_html()}"
                f"<p>{html.escape(self.power())}</p>")  # fmt: skip


def _check_one_row_per_cell(df: pd.DataFrame) -> None:
    """Pairs are (task, seed) under two conditions: a cell given twice (frames of two
    experiments concatenated, two agents under the same condition names) cannot be paired."""
    twice = df[df.duplicated(["condition", "task", "seed"], keep=False)]
    if twice.empty:
        return
    first = twice.iloc[0]
    agents = sorted(set(twice["agent"])) if "agent" in twice else []
    raise ArgumentError(f"df: {len(twice)} rows share their (condition, task, seed) with "
                        f"another, e.g. {first['condition']!r}, {first['task']!r}, seed "
                        f"{first['seed']!r}"
                        + (f" (agents {', '.join(map(repr, agents))})" if len(agents) > 1 else "")
                        + "; give one row per cell: to compare two agents or prompts, name their "
                        "conditions apart first, e.g. df.assign(condition=df.agent + '/' + "
                        "df.condition)")  # fmt: skip


def summary(df: pd.DataFrame, baseline: str | None = None, n_boot: int = 2000,
            seed: int = 0, prices: Prices | None = None) -> Summary:  # fmt: skip
    """Per-condition table and paired comparisons against `baseline` (default: 'none' when
    present, else the first condition). With `prices` ({"input": ..., "output": ...}, in
    dollars per million prompt and completion tokens) each condition also gets `cost` and
    `cost_per_solved` (all its cells' cost over its solved cells)."""
    if not isinstance(df, pd.DataFrame) or not {"condition", "solved", "task", "seed"} <= set(
            df.columns):  # fmt: skip
        raise ArgumentError(f"df: give the DataFrame sk.experiment returned (got "
                            f"{type(df).__name__})")  # fmt: skip
    names = list(dict.fromkeys(df["condition"]))
    if not names:
        raise ArgumentError("df: the results have no cells; run sk.experiment first")
    if baseline is None:
        baseline = "none" if "none" in names else names[0]
    if baseline not in names:
        raise ArgumentError(f"baseline={baseline!r} is not among the conditions {names}")
    if not isinstance(n_boot, int) or isinstance(n_boot, bool) or n_boot < 1:
        raise ArgumentError(f"n_boot={n_boot!r}: give a positive number of resamples")
    _check_one_row_per_cell(df)
    simulated = bool(df["simulated"].any()) if "simulated" in df else False
    return Summary(conditions_table(df, check_prices(prices)),
                   comparisons_table(df, baseline, n_boot, seed),
                   simulated, baseline, n_boot, seed)  # fmt: skip
