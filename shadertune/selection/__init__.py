"""config="auto"'s selection: the chain over the store, the saved model and the
pre-tuned table (chain), the selections kept while nothing changed (memo), and a
config measured elsewhere verified once before it runs (reverify).  It reads;
it never tunes or trains."""
from .chain import Selection, select, select_config, verdict_text

__all__ = ["Selection", "select", "select_config", "verdict_text"]
