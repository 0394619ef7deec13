"""The rules over a session's data: entry kinds, configuration keys, section seeds, the records' JSON shapes and context derivation.

Pure data and pure functions; nothing here touches storage or the line. The durable records
themselves (:class:`Conversation`, :class:`Entry`, :class:`Input`, ...) are defined in
:mod:`pico3.storage.records`, the layer below, and re-exported here.

Named ``session_data``, not "data model", so that "model" means one thing in pico3, the language
model of :mod:`pico3.models` (issue 37).
"""

from pico3.session_data.config import ABSENT, CORE_CONFIG, ConfigKey, ConfigRejected, resolve_config
from pico3.session_data.context import DerivedContext, derive_context, repair_tool_results
from pico3.session_data.entries import (
    CORE_KINDS,
    NOTICE_KIND,
    EntryKind,
    EntryRejected,
    NewEntry,
    check_new_entry,
    define_entry,
    is_reserved_kind,
)
from pico3.session_data.json_shapes import Message, conversation_json, entry_json, input_json
from pico3.session_data.section_seed import SectionSeed, SectionSeedRejected, check_section_seed
from pico3.storage.records import Conversation, Entry, Input, Parent

__all__ = [
    "ABSENT",
    "CORE_CONFIG",
    "CORE_KINDS",
    "NOTICE_KIND",
    "ConfigKey",
    "ConfigRejected",
    "Conversation",
    "DerivedContext",
    "Entry",
    "EntryKind",
    "EntryRejected",
    "Input",
    "Message",
    "NewEntry",
    "Parent",
    "SectionSeed",
    "SectionSeedRejected",
    "check_new_entry",
    "check_section_seed",
    "conversation_json",
    "define_entry",
    "derive_context",
    "entry_json",
    "input_json",
    "is_reserved_kind",
    "repair_tool_results",
    "resolve_config",
]
