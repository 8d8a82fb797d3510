"""Root conftest: puts the project root on sys.path so `planning` imports without installation."""
