"""The subcommands of ``dnscost``, one module each (``doctor``, ``target``, ``load``, ``run``,
which also serves ``reproduce``, ``report``, ``observe``, ``client``, ``plan``, ``cluster``,
``keep``, ``compare``): ``add_parser(sub)`` adds its subparser(s) and ``main(args) -> int`` runs
it. :mod:`dnscost.cli` builds the parser from them, makes every path absolute, dispatches and maps
errors to exit codes. ``external`` holds the ``--external-*`` options that ``load`` and ``run``
share.
"""
