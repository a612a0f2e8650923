"""The ``kws`` command line: :mod:`workstation.cli.main` is the click group (and opens the
review app without a sub-command); one module per command group adds its commands.

May import every other package of kws (it is the top layer); nothing imports it.
"""
