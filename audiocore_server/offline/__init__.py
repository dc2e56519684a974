"""The offline model: a real ADK model with a live connection and no network, a
test double and a demo, never the product. It alone knows the words that cue
the tasks, memory and permission paths."""
