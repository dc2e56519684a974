"""Audio at the edges of a connection, on audiocore: the conversions, the one
voice check, and the output pacer."""
