"""Built-in extractors: the ``regex`` closet extractor, and the ``rules`` and ``llm``
memory extractors."""
