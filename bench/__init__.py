"""tdview against tensordict, measured side by side in one run (``python -m bench``)."""
