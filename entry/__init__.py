"""Entry points: the top room, the only one that sees every other.

The `empeval` command (entry.cli), the demo (entry.demo), and the wiring that builds the app with its
configuration (entry.wiring: database URL, the task UI bundle's folder). Nothing below imports this
package; it hands configuration down.
"""
