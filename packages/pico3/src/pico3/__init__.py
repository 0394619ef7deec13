"""pico3: a hardened, durable agent harness.

Conversations of immutable entries, tasks with checkpoints and slots, namespaces, a JSONL store
with fsync modes and crash recovery, and the core turn loop. The kernel and runtime arrive with
their issues; this module is the package's public surface.
"""
