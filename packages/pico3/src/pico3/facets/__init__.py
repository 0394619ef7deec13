"""pico3 as Chord facets: the built-in session plumbing of docs/design/chord.md#built-in-services (docs/design/decisions.md#d6).

* :mod:`pico3.facets.contract`: the service tokens :data:`HarnessService` (``pi.harness``, local) and
  :data:`ConversationService` (``pi.conversation``, keyed by conversation id, remotable) and the
  JSON shape of :class:`ConversationView` (the pico3 view plus ``commit.events``).
* :mod:`pico3.facets.session`: :func:`harness_session_facet`, which provides both and spawns one
  conversation instance per conversation.
* :mod:`pico3.facets.bridge`: :class:`ViewBridge`, the bounded ordered adapter that turns each
  harness envelope into exactly one replicated-state revision.
* :mod:`pico3.facets.endpoint`: :class:`ConversationEndpoint`, the instance's JSON methods.

Named ``facets`` for what it holds, pico3's own facets and their service contracts, not after
the runtime package it builds on (issue 37: a second "chord" inside pico3 read as chord itself).
Chord's facet machinery is :mod:`chord.facets`; the word means the same in both, a unit a host
composes.

This package is internal and re-exports nothing: feature packages and the app import the public
names from :mod:`pico3`, pico3's own modules from the module that defines them.
"""
