"""The prompt registry: sections and runtime contexts, ordering, scope shadowing, rendering."""

from __future__ import annotations

from kernel_support import Agent

from tether.kernel import Context, PromptPart
from tether.kernel._prompt import PromptRegistry


def test_sections_render_in_order(ctx: Context) -> None:
    ctx.section("tools", 30, "Tools.")
    ctx.section("identity", 10, "You are tether.")
    ctx.section("style", 20, "Be brief.")
    assert ctx.runtime.prompt.render("section", None) == [
        ("identity", "You are tether."),
        ("style", "Be brief."),
        ("tools", "Tools."),
    ]


def test_equal_orders_keep_registration_order(ctx: Context) -> None:
    ctx.section("b", 5, "B")
    ctx.section("a", 5, "A")
    assert [name for name, _ in ctx.runtime.prompt.render("section", None)] == ["b", "a"]


def test_sections_and_contexts_are_separate(ctx: Context) -> None:
    ctx.section("identity", 10, "You are tether.")
    ctx.context("approval:policy", 115, "Approval policy: ask.")
    ctx.context("sandbox:policy", 110, "Sandbox: read-only.")
    prompt = ctx.runtime.prompt
    assert prompt.render("section", None) == [("identity", "You are tether.")]
    assert prompt.render("context", None) == [
        ("sandbox:policy", "Sandbox: read-only."),
        ("approval:policy", "Approval policy: ask."),
    ]
    assert [p.name for p in prompt.parts("context", None)] == ["sandbox:policy", "approval:policy"]
    assert all(p.kind == "context" for p in prompt.parts("context", None))


def test_text_functions_receive_the_agent(ctx: Context) -> None:
    agent = Agent("worker")
    seen: list[object] = []

    def text(a: object) -> str:
        seen.append(a)
        return f"agent={getattr(a, 'name', None)}"

    ctx.context("who", 1, text)
    assert ctx.runtime.prompt.render("context", agent) == [("who", "agent=worker")]
    assert ctx.runtime.prompt.render("context", None) == [("who", "agent=None")]
    assert seen == [agent, None]


def test_empty_text_is_no_contribution(ctx: Context) -> None:
    ctx.context("silent", 1, "")
    ctx.context("conditional", 2, lambda agent: "" if agent is None else "for an agent")
    ctx.context("present", 3, "here")
    prompt = ctx.runtime.prompt
    assert prompt.render("context", None) == [("present", "here")]
    assert prompt.render("context", Agent("a")) == [
        ("conditional", "for an agent"),
        ("present", "here"),
    ]
    # The parts still exist; they just contribute nothing.
    assert [p.name for p in prompt.parts("context", None)] == ["silent", "conditional", "present"]


def test_scoped_parts_apply_only_to_their_agent(ctx: Context) -> None:
    parent, child = Agent("parent"), Agent("child")
    ctx.context("subagent:delegation", 120, "You were delegated a task.", scope=child)
    prompt = ctx.runtime.prompt
    assert prompt.render("context", child) == [
        ("subagent:delegation", "You were delegated a task.")
    ]
    assert prompt.render("context", parent) == []
    assert prompt.render("context", None) == []


def test_nearest_scope_wins_a_name(ctx: Context) -> None:
    parent, child = Agent("parent"), Agent("child")
    ctx.section("rules", 10, "Global rules.")
    ctx.section("rules", 99, "Child rules.", scope=child)
    prompt = ctx.runtime.prompt
    assert prompt.render("section", child) == [("rules", "Child rules.")]
    assert prompt.render("section", parent) == [("rules", "Global rules.")]
    assert prompt.render("section", None) == [("rules", "Global rules.")]
    # The winner's order is used.
    ctx.section("tools", 50, "Tools.")
    assert [n for n, _ in prompt.render("section", child)] == ["tools", "rules"]


def test_shadowing_wins_regardless_of_registration_order(ctx: Context) -> None:
    child = Agent("child")
    ctx.section("rules", 10, "Child rules.", scope=child)
    ctx.section("rules", 10, "Global rules.")
    assert ctx.runtime.prompt.render("section", child) == [("rules", "Child rules.")]


def test_an_empty_shadow_silences_the_global_part(ctx: Context) -> None:
    child = Agent("child")
    ctx.section("rules", 10, "Global rules.")
    ctx.section("rules", 10, "", scope=child)
    assert ctx.runtime.prompt.render("section", child) == []


def test_disposing_a_shadow_restores_the_global_part(ctx: Context) -> None:
    child = Agent("child")
    ctx.section("rules", 10, "Global rules.")
    shadow = ctx.section("rules", 10, "Child rules.", scope=child)
    shadow.dispose()
    assert ctx.runtime.prompt.render("section", child) == [("rules", "Global rules.")]


def test_registry_directly() -> None:
    registry = PromptRegistry()
    part = PromptPart("section", "x", 1.5, "X")
    remove = registry.add(part)
    assert registry.parts("section", None) == (part,)
    assert part.render(None) == "X"
    remove()
    remove()
    assert registry.parts("section", None) == ()


def test_equal_orders_keep_registration_order_across_scopes(ctx: Context) -> None:
    # Ties are broken by the first part of each name that applies, scoped or not.
    child = Agent("child")
    ctx.context("b", 5, "child B", scope=child)
    ctx.context("a", 5, "A")
    ctx.context("c", 5, "C")
    ctx.context("c", 5, "child C", scope=child)
    assert ctx.runtime.prompt.render("context", child) == [
        ("b", "child B"),
        ("a", "A"),
        ("c", "child C"),
    ]


def test_a_thousand_children_each_see_their_own_parts_only(ctx: Context) -> None:
    children = [Agent(f"child {i}") for i in range(1000)]
    handles = [
        ctx.context("subagent:delegation", 120, f"delegated {i}", scope=child)
        for i, child in enumerate(children)
    ]
    ctx.context("sandbox:policy", 110, "read-only")
    prompt = ctx.runtime.prompt
    assert prompt.render("context", children[7]) == [
        ("sandbox:policy", "read-only"),
        ("subagent:delegation", "delegated 7"),
    ]
    assert prompt.render("context", None) == [("sandbox:policy", "read-only")]
    handles[7].dispose()
    assert prompt.render("context", children[7]) == [("sandbox:policy", "read-only")]
    assert prompt.render("context", children[8])[-1] == ("subagent:delegation", "delegated 8")


def test_the_parts_chosen_are_chosen_again_after_any_change(ctx: Context) -> None:
    # Which parts apply is kept per agent: adding or removing a part (unscoped or the
    # agent's own) is seen by the next render; a text function is called on every render.
    agent = Agent("a")
    prompt = ctx.runtime.prompt
    calls: list[str] = []

    def counted(who: object) -> str:
        calls.append("called")
        return f"call {len(calls)}"

    ctx.section("one", 10, counted)
    assert prompt.render("section", agent) == [("one", "call 1")]
    assert prompt.render("section", agent) == [("one", "call 2")]
    assert prompt.parts("section", agent) is prompt.parts("section", agent)
    two = ctx.section("two", 5, "Two.")
    assert prompt.render("section", agent) == [("two", "Two."), ("one", "call 3")]
    own = ctx.section("one", 20, "Own one.", scope=agent)
    assert prompt.render("section", agent) == [("two", "Two."), ("one", "Own one.")]
    assert prompt.render("section", None) == [("two", "Two."), ("one", "call 4")]
    own.dispose()
    two.dispose()
    assert prompt.render("section", agent) == [("one", "call 5")]
    # A new agent that takes the freed identity of a scope with parts of its own starts anew.
    again = Agent("b")
    ctx.section("three", 1, "Three.", scope=again)
    assert prompt.render("section", again) == [("three", "Three."), ("one", "call 6")]
