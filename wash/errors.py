"""The one exception type a user ever sees from the engine.

The CLI turns it into a one-line message and exit code 2; the app turns it into
a ``gr.Error``. Anything else escaping the engine is a bug, not bad input.
"""


class WashInputError(ValueError):
    """Bad input from a user: names the problem and the accepted values."""
