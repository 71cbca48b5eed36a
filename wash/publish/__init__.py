"""What the project publishes besides the app: the Hugging Face Space folder (``space``:
``python -m wash space``) and the facts blocks of the docs (``facts``: ``python -m wash.publish.facts
--write``), each measured from the code and the committed records rather than typed by hand.

Both stand with the ways in: the Space build reads every layer's files, and a facts block may
build the Space to measure it.
"""
