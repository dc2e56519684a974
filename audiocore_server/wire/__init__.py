"""The wire vocabulary every surface shares: client frames decoded (``protocol``,
``fields``, ``chat_messages``), server chunks (``chunks``), strict JSON in and
out, request bodies within bounds, and ADK events as ADK's own server writes
them. Imports nothing of the server but ``settings``."""
