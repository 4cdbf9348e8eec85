"""The daemon's Prometheus metrics: what happened, counted where it happens, and the pool's state read
at each scrape; the exposition text `holctl metrics` prints and the `/metrics` endpoint serves."""
