"""Agents and the agent loop: propose -> stage -> check -> feedback -> revise.

The loop talks to a branch through the public API only, so agents/ may import workspace/ and
what lies below it; evals/ and the faces sit above it. An agent is any callable from an
`Observation` to edits (see `edits.normalize` for the forms it may return, or a `Proposal`
carrying token counts). Adapters: `ScriptedAgent` replays
edits, `SimulatedAgent` is a seeded stand-in with stated probabilities (always labelled
simulated), `OpenAIChatAgent` talks to any OpenAI-compatible server.

Tool-calling agents (`tool_loop`) act on their branch through the MCP server's tool table
instead: `OpenAIToolAgent` (chat completions), `AnthropicToolAgent` (Messages API), and
`CommandAgent` runs any agent CLI against `shadowkernel mcp`; `feedback` decides what lints
they see. `transcript` records and replays every model request of an experiment's cells.
"""

from .command import CommandAgent
from .edits import AgentOutputError, Delete, FullText, Patch, Proposal, Replace, parse_reply
from .loop import CheckResult, Episode, Step, run_episode
from .observation import CONDITIONS, Condition, LintShown, Observation, RunShown
from .openai_chat import OpenAIChatAgent
from .scripted import ScriptedAgent, ScriptedFailure
from .simulated import Behaviour, SimulatedAgent
from .tool_agents import AnthropicToolAgent, OpenAIToolAgent
from .transcript import ReplayError

__all__ = [
    "CONDITIONS",
    "AgentOutputError",
    "AnthropicToolAgent",
    "Behaviour",
    "CheckResult",
    "CommandAgent",
    "Condition",
    "Delete",
    "Episode",
    "FullText",
    "LintShown",
    "Observation",
    "OpenAIChatAgent",
    "OpenAIToolAgent",
    "Patch",
    "Proposal",
    "Replace",
    "ReplayError",
    "RunShown",
    "ScriptedAgent",
    "ScriptedFailure",
    "SimulatedAgent",
    "Step",
    "parse_reply",
    "run_episode",
]
