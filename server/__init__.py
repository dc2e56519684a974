"""The checkout's short name for the server: ``python -m server`` runs
``audiocore_server`` (the importable package, installed as
``audiocore-server``)."""
