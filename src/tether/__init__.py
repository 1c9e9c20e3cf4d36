"""tether: an agent harness whose subagents act only within the scope fixed at delegation."""

__version__ = "0.1.0"
