"""The ``pypto`` command: a thin layer over the library, one module per subcommand."""
