"""Chapter 8's and 12's PyTorch machinery: the backward on several processes.
It imports torch; no engine imports it."""
