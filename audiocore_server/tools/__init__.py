"""Tools as the server sees them: where a tool runs and whether it needs
approval (``spec``), delegated calls as one model for every surface
(``calls``), and the live view of a session's delegated calls (``delegation``)."""
