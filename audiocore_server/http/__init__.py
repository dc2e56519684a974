"""The HTTP surfaces: ADK's session REST (its routes, operations and worker
process), the HTTP chat, and the memory REST. Never imports ``live``."""
