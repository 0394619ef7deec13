"""Import a conversation from pi or Claude Code: ``coding-agent import PATH | --list | --latest``.

One module per agent reads its session files (:mod:`~coding_agent.importing.pi_sessions`,
:mod:`~coding_agent.importing.claude_code_sessions`, each describing the format as read;
the chain of parent links both follow, joined across lines that cannot be read, is
:mod:`~coding_agent.importing.chain`),
:mod:`~coding_agent.importing.common` holds what they share (tool calls of ours and of tools we
do not have, thinking that is never sent back), and :mod:`~coding_agent.importing.store` makes
the new session and lists what can be imported. The command itself is
:mod:`coding_agent.cli.importing`; the TUI's ``/import`` is in
:mod:`coding_agent.tui.commands.sessions`.
"""
