"""The live sockets (``/ws``, ``/live``, ``/run_live``): the connection shell and
the parts of one conversation (mic, uplink, line, playout, sender, outcomes),
the dialects and their framing, and why a connection ends. Never imports
``http``."""
