"""Running commands inside the shadow: isolation, timeouts, output caps, harvesting writes."""

from .result import RunResult
from .runner import run_in_shadow

__all__ = ["RunResult", "run_in_shadow"]
