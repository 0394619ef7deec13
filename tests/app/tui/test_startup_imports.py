"""The TUI imports, before its first frame, only what that frame needs (issue 38, start-up).

``coding_agent.tui.main`` is what the command line imports before it runs the app. The Markdown
machinery (an empty session's first screen shows no Markdown), the slash commands' modules and
chord's facet host and facet packages (they load with the facets, after the first frame) and
what a prompt attaches (read as it is sent) must not come with it. Once the facets are loaded,
the TUI process still runs none of pico3's harness: the feature packages' session side is only
compiled for the TUI host, and the commands read the context modules without the turn
machinery. Checked in a fresh interpreter: this test process has imported them all.
"""

from __future__ import annotations

import subprocess
import sys

from coding_agent.tui.widgets.markdown import MarkdownText

DEFERRED = {
    # Textual's Markdown widget, Rich's Markdown renderer, their parser and Pygments
    "coding_agent.tui.widgets.markdown",
    "textual.widgets._markdown",
    "rich.markdown",
    "markdown_it",
    "pygments",
    # the slash commands' modules and what they import
    "coding_agent.tui.commands.core",
    "coding_agent.tui.commands.prompts",
    "coding_agent.tui.commands.sessions",
    "coding_agent.tui.commands.tree",
    "coding_agent.tui.commands.trust",
    "coding_agent.tui.commands.shell",
    "coding_agent.tui.widgets.session_picker",
    "coding_agent.context.prompt_templates",
    "coding_agent.context.skills",
    "coding_agent.context.system_prompt",
    # chord's facet host and its facet packages (discovery, generations, the reload
    # coordinator, pluggy): they start beside the app once its first frame is painted
    "chord.facets",
    "chord.facet_packages",
    "pluggy",
    # what a prompt attaches
    "coding_agent.context.mentions",
    "coding_agent.context.images",
    "coding_agent.tui.attachments",
    # pico3's harness, and its storage backends (the view's records need pico3.storage.records
    # alone; pico3.storage binds its names at first use)
    "pico3.harness",
    "pico3.kernel",
    "pico3.turn",
    "pico3.storage.jsonl",
    "pico3.storage.postgres",
    "pico3.storage.memory",
}


def _modules_after(code: str) -> set[str]:
    script = f"{code}\nimport sys\nprint('\\n'.join(sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    return set(done.stdout.split())


def test_the_tui_module_imports_nothing_the_first_frame_does_not_need() -> None:
    loaded = _modules_after("import coding_agent.tui.main")
    assert {"coding_agent.tui.main", "coding_agent.tui.app", "textual.app"} <= loaded
    assert loaded & DEFERRED == set()


HARNESS = {
    "pico3.harness",
    "pico3.kernel",
    "pico3.turn",
    "pico3.tasks",
    "pico3.tools",
    "pico3.sandbox",
    "sqlite3",
}
"""The session side: what the worker runs, never the TUI process."""


def test_the_tui_loads_its_facets_and_commands_without_the_harness() -> None:
    """Every installed feature package's TUI facets and every slash command's module, as the
    TUI loads them after its first frame, import none of pico3's harness (the packages'
    session-side modules are compiled, not run, for the TUI host)."""
    loaded = _modules_after(
        "from coding_agent.tui.main import load_tui_facets\n"
        "import coding_agent.tui.commands.core, coding_agent.tui.commands.prompts\n"
        "import coding_agent.tui.commands.sessions, coding_agent.tui.commands.shell\n"
        "import coding_agent.tui.commands.tree, coding_agent.tui.commands.trust\n"
        "generations, problems = load_tui_facets()\n"
        "assert not problems, problems\n"
        "names = sorted(generation.package.name for generation in generations)\n"
        "assert {'facets-approval', 'facets-question', 'facets-mcp'} <= set(names), names\n"
        "assert all(generation.facets for generation in generations), names\n"
    )
    assert any(name.endswith("facets_approval.tui") for name in loaded)
    assert loaded & HARNESS == set()


def test_the_markdown_widgets_load_where_an_answer_is_built() -> None:
    loaded = _modules_after(
        "from pico3.models import AssistantMessage, TextContent\n"
        "from coding_agent.tui.widgets.messages import AssistantView\n"
        "view = AssistantView(AssistantMessage(content=[TextContent(text='**hi**')], "
        "provider='faux', model='faux-1', stop_reason='stop', timestamp=0))\n"
        "assert type(view._widgets[0]).__name__ == 'MarkdownText', view._widgets"
    )
    assert {"coding_agent.tui.widgets.markdown", "rich.markdown", "markdown_it"} <= loaded
    assert MarkdownText("**hi**").source == "**hi**"
