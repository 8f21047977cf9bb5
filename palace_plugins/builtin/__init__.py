"""The built-in plugins, registered over the ``palace`` entry point like any other.

The entry points of the ``palace-retrievers`` distribution name the objects of
:mod:`palace_plugins.builtin.entry_points`, which register each built-in by reference: a
command imports only the built-ins it uses.
"""
