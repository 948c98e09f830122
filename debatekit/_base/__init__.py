"""Small pieces every layer uses: the answer kinds' vocabulary, one-line validation errors,
clean stops on SIGTERM, a lock file shared between processes, the message for a missing optional extra, lazy package exports, and
the aliases that keep pre-0.2 import paths working."""
