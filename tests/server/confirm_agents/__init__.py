"""ADK agents for the confirmation tests (``test_confirmation.py``)."""
