"""The live agents of one runtime (service :data:`AGENTS_SERVICE`).
Agent id equals session id.

An agent may be *owned* by another (a one-shot child by the parent that drives it); roots are
agents nobody owns. Ownership is process-local; lineage (``parent_session``) is durable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Final

from tether.agent._agent import Agent
from tether.kernel import ServiceKey


class AgentRegistry:
    def __init__(self) -> None:
        self._agents: dict[str, Agent] = {}
        self._owners: dict[str, Agent | None] = {}

    def register(self, agent: Agent, *, owner: Agent | None = None) -> Callable[[], None]:
        if agent.id in self._agents:
            raise ValueError(f"agent {agent.id!r} is already registered")
        self._agents[agent.id] = agent
        self._owners[agent.id] = owner
        # The agent answers ``owner`` itself, so the loop needs no lookup of this registry.
        agent._owner = owner

        def remove() -> None:
            if self._agents.get(agent.id) is agent:
                del self._agents[agent.id]
                del self._owners[agent.id]
                agent._owner = None

        return remove

    def get(self, agent_id: str) -> Agent | None:
        return self._agents.get(agent_id)

    def owner_of(self, agent: Agent) -> Agent | None:
        return self._owners.get(agent.id)

    def is_owned_by(self, child: Agent, parent: Agent) -> bool:
        return self._owners.get(child.id) is parent

    def roots(self) -> list[Agent]:
        return [a for a in self._agents.values() if self._owners.get(a.id) is None]

    def __iter__(self) -> Iterator[Agent]:
        return iter(list(self._agents.values()))

    def __len__(self) -> int:
        return len(self._agents)

    def __contains__(self, agent_id: object) -> bool:
        return agent_id in self._agents


AGENTS_SERVICE: Final[ServiceKey[AgentRegistry]] = ServiceKey("agents")
"""The live agents of the runtime."""
