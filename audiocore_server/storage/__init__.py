"""Where sessions live: ADK's session service, the bound on an open session's
events, the cross-process leases and claims, the sessions every surface opens,
who owns a session and the shapes of its ids, and the state keys that are the
server's own."""
