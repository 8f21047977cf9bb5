"""The palace's plugin system: hook specifications, the plugin manager, the built-ins.

A plugin is a module (or object) with functions marked ``@hookimpl`` and registered over
the ``palace`` entry-point group::

    [project.entry-points.palace]
    my-backend = "my_package.palace_plugin"
"""

from palace_plugins.hookspecs import hookimpl, hookspec
from palace_plugins.manager import PluginFailure, PluginInfo, PluginManager, Registry

__all__ = ["PluginFailure", "PluginInfo", "PluginManager", "Registry", "hookimpl", "hookspec"]
