"""The one exception type a user ever sees from the engine.

The CLI turns it into a one-line message and exit code 2; the app turns it into
a ``gr.Error``. Anything else escaping the engine is a bug, not bad input.
"""


class WashInputError(ValueError):
    """Bad input from a user: names the problem and the accepted values."""


class MemberError(RuntimeError):
    """A member (a base model served elsewhere, ``wash.engine.ray_members``) died or stopped answering.

    Not bad input: the run cannot go on without that model. The message names the
    model; the CLI prints it on one line (exit code 1), and the next run starts a
    fresh member.
    """
