"""Names vulture reports as unused that a protocol requires (run by .ci/run through
``uv run vulture``; configured in pyproject.toml's ``[tool.vulture]``, 60 % confidence).

Each line "uses" one name. Keep it short: a name goes here only when something outside the
scanned source calls or reads it -- Python or a library (context managers, Textual, anyio,
importlib, msgspec), a facet author, or the tests and benchmarks (vulture does not scan
``tests/`` and ``benchmarks/``) -- never to hide code that is really dead.
"""

# ruff: noqa: B018, F821
# pyright: reportUndefinedVariable=false, reportAttributeAccessIssue=false

# __exit__ / __aexit__ parameters (the context-manager protocol fixes the signature)
exc_type
traceback

# Textual: class variables the framework reads (App, Screen, Widget)
AUTO_FOCUS
BINDINGS
CSS_PATH
DEFAULT_CSS
TITLE
can_focus
_.border_title
_.border_subtitle
_.show_root  # Tree
_.suggestion  # TextArea's ghost text, read by Textual (the prompt editor's argument hint)

# Textual: callbacks it calls by name (compose, on_<event>, action_<binding>, check_action,
# _watch_<reactive>)
_.compose
_.check_action
_._watch_collapsed
_.on_key
_._on_paste  # the prompt editor takes over TextArea's paste handler (widgets/editor.py)
_.on_mount
_.on_unmount
_.on_resize
_.on_paste
_.on_click
_.on_tree_node_expanded
_.on_tree_node_selected
_.on_collapsible_collapsed  # a tool card retitles its output (widgets/tools.py)
_.on_collapsible_expanded
_.on_mode_label_changed  # facets_approval.tui: the label's Changed message
_.action_abort
_.action_answer
_.action_back
_.action_cancel
_.action_close
_.action_delete
_.action_dequeue
_.action_external_editor
_.action_interrupt
_.action_move
_.action_scroll
_.action_toggle_thinking
_.action_toggle_tools

# Textual: message handlers registered with the @on(...) decorator
_._cancel
_._cancel_requested
_._cursor_moved  # the prompt editor: a command's argument hint shows only at the text's end
_._filtered
_._load_pressed
_._pressed
_._protocol_reported
_._selected
_._submitted
_._typed

# anyio: the byte-stream and listener protocols (send_eof, extra_attributes of a
# TypedAttributeProvider, TLSListener.handle_handshake_error)
_.send_eof
_.extra_attributes
_.handle_handshake_error

# importlib: the loader protocol, and module/function attributes Python reads
_.create_module
_.get_code
_.__module__
_.__package__
_.__qualname__
_._proc  # asyncio's subprocess transport: cleared so it does not kill a worker we let go

# the MCP SDK's TokenStorage protocol (facets_mcp.auth.TokenFile: called by OAuthClientProvider)
_.get_tokens
_.set_tokens
_.get_client_info
_.set_client_info
_.token_expiry_time  # the SDK's OAuthContext field TokenFile.restore sets

# msgspec Struct fields: decoded from or encoded onto the wire (JSON shapes), read by peers
agent
allowText
batches_done
cache_creation_input_tokens
cache_read_input_tokens
callId
conversationId
files_indexed
files_total
first_line_exceeds_limit
input_tokens
output_tokens
question
requestId
loginUrl
onFailure
restarts
retryInSeconds
gaveUpAfter
startupTimeout
taskId
whenBusy
writtenName
# ... or decoded from a file only to check its shape (config.toml's [permissions] lists, read by
# coding_agent.settings.permissions and the approval feature)
permissions
allow
deny

# chord's facet environment: public API for facet authors
_.on_deactivate

# Public API the tests and benchmarks use to drive and observe components: waits on events
# instead of sleeps, test doubles' controls, counters and read-only views
_.settle  # JsonlStorage.settle: tests compare a session folder's files
_.wait_rendered
_.armed  # chord's DialogScreen: tests press a dialog's keys once it takes answers
_.wait_for_sleepers
_.wait_quiescent
_.sleepers
_.set_responses
_.append_responses
_.pending_count
_.deferred_handles
_.set_busy_probe
_.reset_config
_.steer
_.finish_task
_.withdraw
_.bind_runtime
_.registrations
_.has_value
_.subscription_ids
_.indexed_paths
_.allocated
_.detached
_.completions
_.file_index
_.markdowns
_.widget_for
_.rendered_ids
_.result_text
_.header_text
_.args_text
_.live_text
_.flush_needed
_.render_passes
_.parse_count
_.bytes_sent
_.bytes_received
_.misses
_.lost
_.published
_.attachments
_.switches
_.restarts
_.refused  # coding_agent.server.serve: connections refused (no reader yet; serve's area)
_.pause  # pico3.storage.pg_cluster.TempCluster: a database outage in the fault tests

# typing.Protocol call signatures (pico3.tools.SlotCommit): Python calls the instance
__call__

# socketserver: a class attribute the server reads (pico3.sandbox_proxy's server)
daemon_threads
# coding_agent.worker.providers.presets: the delta field a preset streams reasoning in (the
# table documents it; the adapter reads both fields; the preset tests check it)
_.thinking_field

# pico3's view records (pico3.session_data.view_records): wire fields a client of the view reads
_.synthesized
_.retry_at
_.continued_by

# coding_agent.acp.agent.CodingAgentAcp: the ACP SDK's router calls the Agent protocol's methods
# by the JSON-RPC method name (initialize, session/new, session/set_mode, ...)
_.on_connect
_.authenticate
_.new_session
_.set_session_mode
_.set_config_option

# pico3.LeaseRenewer.renewals: how many renewal statements it sent (tests wait on it)
_.renewals

# pico3.storage.pg_group.GroupCommitter.straight: commits sent straight through, alone (tests)
_.straight
# GroupCommitter.sent, .carried: group statements and the commits they carried (benchmarks, tests)
_.sent
_.carried

# coding_agent.server.web._Listener.is_serving: websockets' ServerConnection.handshake calls it
_.is_serving

# facets_mcp.contract.McpServer's stderrGist: a wire field of the MCP state, which the app's
# headless watch reads by key (coding_agent.worker.mcp_watch)
stderrGist

# coding_agent.settings.config._PermissionsFile's block_reads_outside_working_directories: a key
# config.toml may hold (checked as a bool here; coding_agent.settings.permissions reads it)
_.block_reads_outside_working_directories

# facets_approval.contract.ApprovalDecision's hookRules: a field of the decision memo, written
# and read by key (facets_approval.hook_answers)
hookRules
