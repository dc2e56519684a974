"""A model turn in the outgoing vocabulary: ADK events into UI message chunks
(``events``), the seed's ``/live`` variant (``seed``), and what a turn's
``finish`` says (``metadata``)."""
