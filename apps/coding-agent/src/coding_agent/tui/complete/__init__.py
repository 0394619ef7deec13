"""Completion for the prompt editor: fuzzy ranking, the project's file list, path completion.

Pure logic with no widgets: :mod:`.fuzzy` ranks commands and paths, :mod:`.files` scans and
caches the files an ``@`` mention can name, :mod:`.paths` completes a path on Tab. The editor
(:mod:`coding_agent.tui.widgets.editor`) decides *when* each applies and shows the results in
the dropdown (:mod:`coding_agent.tui.widgets.palette`).
"""

from coding_agent.tui.complete.files import MAX_FILES, SKIPPED_DIRS, FileIndex, scan_files
from coding_agent.tui.complete.fuzzy import match_span, rank_commands, rank_paths
from coding_agent.tui.complete.paths import common_prefix, complete_path, looks_like_path

__all__ = [
    "MAX_FILES",
    "SKIPPED_DIRS",
    "FileIndex",
    "common_prefix",
    "complete_path",
    "looks_like_path",
    "match_span",
    "rank_commands",
    "rank_paths",
    "scan_files",
]
