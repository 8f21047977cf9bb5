"""The built-in plugins, registered over the ``palace`` entry point like any other."""
