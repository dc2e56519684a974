"""The agent the handlers run: its definition and live run configuration, its
runners and tools by name, the demo agent's tools, and the live runs in
progress."""
