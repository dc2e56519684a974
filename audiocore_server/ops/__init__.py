"""What an operator sees and what keeps a process healthy: the measurements of a
connection (``metrics``), ``/metrics`` (``telemetry``), and the reaper of what
finished connections leave."""
