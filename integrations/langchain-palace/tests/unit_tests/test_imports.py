from langchain_palace import __all__

EXPECTED_ALL = [
    "LangChainEmbedder",
    "PalaceChatMessageHistory",
    "PalaceEmbeddings",
    "PalaceMemoryTool",
    "PalaceRememberTool",
    "PalaceRetriever",
    "PalaceVectorStore",
]


def test_all_imports() -> None:
    assert sorted(EXPECTED_ALL) == sorted(__all__)
