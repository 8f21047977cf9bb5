"""The built-in embedder: ``sentence-transformers`` (all-MiniLM-L6-v2 by default), which
runs its model through ONNX Runtime when it can (:mod:`.onnx_embedding`)."""
