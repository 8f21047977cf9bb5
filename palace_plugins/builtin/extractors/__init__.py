"""Built-in extractors: the ``regex`` (default) and ``llm`` closet extractors, and the
``rules`` and ``llm`` memory extractors."""
