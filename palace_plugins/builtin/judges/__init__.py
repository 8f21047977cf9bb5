"""Built-in memory judges: ``learned`` (the default: offline weights, no LLM) and ``llm``
(any LangChain chat model)."""
