"""The approval feature (docs/design/harness.md#before-tool, docs/design/chord.md#feature-layout): a tool call waits for a human's decision.

* :mod:`.contract` — the JSON shapes, the ``pi.approval-dialog`` and ``approval.mode`` service
  ids and the permission modes (ask, accept-edits, sandbox, plan, auto); no host code;
* :mod:`.session` — ``install_approval`` (the ``before_tool`` hook deciding by permission rules
  and mode, the session's durable mode and rules, the decision memo) and the session facet that
  spawns one dialog per question and provides the mode and the rules;
* :mod:`.rules` — the permission-rule grammar (``Bash(npm run test:*)``, ``Read(./.env)``, …),
  matching, deny > ask > allow; :mod:`.suggest` — the narrow rule a dialog offers; :mod:`.shell`
  — what a bash command runs, read with tree-sitter-bash; :mod:`.permissions` — where rules
  come from and go; :mod:`.restrictions` — Claude Code's restrictive switches
  (``disableBypassPermissionsMode``, ``denyInsteadOfPrompting``,
  ``blockWritesOutsideWorkingDirectories``); :mod:`.workdirs` — the working directories (the
  project and the added folders) outside which a read asks; :mod:`.memory` — a subagent's
  memory folder, its own files (read and edited there without asking); :mod:`.gitconfig` — a
  git that runs unasked asks when its repository configured a program, and
  :mod:`.git_approvals` — such a configuration approved "while it stays as it is";
  :mod:`.widening` — what an allow rule for a whole tool allows;
* :mod:`.tui` — the TUI facets: a modal per open dialog (allow once / allow a narrow rule at a
  scope / deny), and the mode label with Shift+Tab and ``/mode``; :mod:`.permissions_tui` —
  ``/permissions``;
* :mod:`.plugin` — the ``chord.facets`` entry point.

Nothing is imported here on purpose: the host imports the plugin module named by the entry point.
"""
