"""What every layer of the package stands on: the one error type a user sees, the environment
settings, the ``NAME:param=value`` parser of plug-in options, the declared-exports loader, and the
version and provenance a recorded result carries.

Its modules import nothing else of ``wash``, so any module may import them directly
(``from wash.core.errors import WashInputError``); the package declares no exports of its own.
"""
