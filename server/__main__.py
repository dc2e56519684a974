"""``python -m server`` in a checkout: the ``audiocore-server`` command."""

from audiocore_server.__main__ import main

if __name__ == "__main__":
    main()
