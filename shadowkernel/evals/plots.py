"""Plots of an experiment's results (matplotlib). Simulated results say so in the title and
across the axes, so a figure cannot be mistaken for a model's."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .stats import bootstrap_mean, conditions_table

SIMULATED = "SIMULATED agent"


def plot(df: pd.DataFrame, n_boot: int = 2000, seed: int = 0, title: str | None = None):
    """Success rate per condition (95% bootstrap CI) and tokens to success."""
    import matplotlib.pyplot as plt

    table = conditions_table(df)
    names = list(table.index)
    errors = []
    for name in names:
        solved = df[df["condition"] == name]["solved"].astype(float).to_numpy()
        low, high = bootstrap_mean(solved, n_boot, seed)
        rate = solved.mean()
        errors.append((rate - low, high - rate))
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    x = np.arange(len(names))
    left.bar(x, table["success_rate"], yerr=np.array(errors).T, capsize=4, color="#4c78a8")
    left.set(xticks=x, ylim=(0, 1.05), ylabel="success rate", title="tasks solved (95% CI)")
    left.set_xticklabels(names, rotation=15)
    right.bar(x, table["tokens_to_success"].fillna(0), color="#f58518")
    right.set(xticks=x, ylabel="tokens (prompt + completion)", title="tokens to success")
    right.set_xticklabels(names, rotation=15)
    simulated = bool(df["simulated"].any()) if "simulated" in df else False
    heading = title or "Lint feedback experiment"
    if simulated:
        heading += f" - {SIMULATED} (not a model's results)"
        for ax in (left, right):
            ax.text(0.5, 0.5, "SIMULATED", transform=ax.transAxes, ha="center", va="center",
                    fontsize=28, color="grey", alpha=0.25, rotation=20)  # fmt: skip
    fig.suptitle(heading)
    fig.tight_layout()
    return fig
