"""The session's files on disk, read by whichever process needs them (TUI, worker, CLI, server).

``folders.py`` (session folders: create, find, resume, list), ``index.py`` (the listing's
summaries), ``tree.py`` (the branch tree of a session's conversations), ``export.py`` (a session as
one HTML page) and ``private.py`` (the owner-only permissions of everything a session writes).
"""
