"""Built-in sources: ``files``, ``text``, ``claude-code``, ``chatgpt``, ``slack`` and ``auto``
(which picks one), with what they share: conversation chunking (:mod:`.conversations`),
reading exports (:mod:`.reading`) and walking folders (:mod:`.tree`)."""
