"""Bounds on what Gradio keeps per browser session, so a server that runs for days stops growing.

Gradio keeps, per session, a copy of the page's components (``SessionState``) and
replaces a component in that copy whenever a handler sends it an update
(``gr.update(...)``, or ``gr.skip()``, which is what an output left out of a
handler's dict becomes). When a later update of the same output is a plain value,
Gradio 6 files the replacement a second time under the replacement's own new id
(``Blocks.postprocess_data``: ``state[block._id] = block`` after swapping in the
session's copy), with its config and value. Nothing removes those entries, so a
streaming handler that leaves outputs out of some updates (the Generate tab's does,
to redraw the plots only now and then) leaves about a dozen components and their
values (the z chart, the distributions) in the session per run, for as long as the
session lives. ``drop_stray_components`` removes them.

The sessions themselves stay until ``SESSION_CAPACITY`` is reached (Gradio evicts the
least recently used one), instead of Gradio's default of 10,000: each session's copy
of this app's page config costs about 0.25 MB.
"""

from __future__ import annotations

from typing import Any, Container

#: Most sessions whose state the server keeps (``launch(state_session_capacity=...)``).
#: A visitor whose session is evicted keeps the page; only the last run's state (token
#: clicks, Send to Detect) is gone, as after a server restart.
SESSION_CAPACITY = 200


def drop_stray_components(session: Any, page_ids: Container[int]) -> int:
    """Remove from one session's state the replacement components Gradio also filed under their own ids.

    ``session`` is Gradio's ``SessionState``; ``page_ids`` are the ids of the page's own
    components (``demo.blocks``). An entry is stray when its id is not the page's and its
    component was never rendered: Gradio builds replacements with ``render=False``,
    whereas components that ``gr.render`` adds to a session are rendered. The page's
    own ids keep pointing at the session's current replacements. Returns how many
    entries were removed.
    """
    blocks = session.blocks_config.blocks
    stray = [k for k, block in list(blocks.items())
             if k not in page_ids and not getattr(block, "is_rendered", True)]
    for key in stray:
        blocks.pop(key, None)
        session.config_values.pop(key, None)
    return len(stray)


def tidy_session(demo: Any, session_hash: str | None) -> int:
    """``drop_stray_components`` for the session ``session_hash`` of the running ``demo`` (0 if none)."""
    app = getattr(demo, "server_app", None)
    holder = getattr(app, "state_holder", None)
    session = holder.session_data.get(session_hash) if holder is not None and session_hash else None
    if session is None:
        return 0
    return drop_stray_components(session, demo.blocks)
