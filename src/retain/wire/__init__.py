"""wire: how logd and docd talk -- the request language's documents, their framing and bounds, the servers."""
