"""The question feature for the coding agent: a contract module, a session facet and a TUI facet,
wired to each other only by service ids. The feature itself arrives with the seed §6 issue."""
