"""The static views of a checkpoint: the text tree (``tdview tree``, a saved output's
``text/plain``), a folder of checkpoints as text, and their HTML (a saved output's
``text/html``), from the index alone: :mod:`._tree`, :mod:`._collection`, :mod:`._html`.
"""
