"""Long-term memory per owner: the store's interface and rules, its SQLite and
PostgreSQL stores, the ``user_memory`` tool with the memory shown to the model
at connect, and the plugins that keep finished turns."""
